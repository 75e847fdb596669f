"""Text pipeline: byte tokenizer, `hrm build-data text` (determinism, split by document, caps, errors), the shard
reader and the batches the LM trainer draws.

The token streams are checked against the input files read here directly, not through the builder's helpers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from datasets_build.text import STDLIB, TextBuildOptions, build_text, stdlib_files
from hrm_reason.data.puzzle import dataset_kind
from hrm_reason.data.text import (
    ByteTokenizer,
    HFTokenizer,
    load_text_dataset,
    train_batch,
    validation_batches,
    validation_windows,
)
from hrm_reason.errors import UserError
from tests.helpers import write_original_layout

REPO = Path(__file__).resolve().parents[2]
WORDS = ["alpha", "beta", "gamma", "delta", "épsilon", "ζeta", "日本", "🙂", "omega", "\t", "\n"]


def write_corpus(root: Path, n_docs: int = 12, seed: int = 0) -> Path:
    """n_docs small UTF-8 files (multi-byte characters included) in a nested directory, plus a hidden file."""
    rng = np.random.default_rng(seed)
    for i in range(n_docs):
        d = root / ("sub" if i % 3 == 0 else "") / f"doc{i:02d}.txt"
        d.parent.mkdir(parents=True, exist_ok=True)
        d.write_text(f"document {i}: " + " ".join(rng.choice(WORDS, size=int(rng.integers(20, 80)))), encoding="utf-8")
    (root / ".hidden.txt").write_text("never read")
    return root


def build(corpus: Path, out: Path, **kw) -> Path:
    return build_text(TextBuildOptions(input=[str(corpus)], out=out, **kw), progress=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------------------------- tokenizer


@pytest.mark.parametrize(
    "text", ["", "plain ascii", "naïve café 日本語 🙂\x00\r\n\t", "".join(chr(c) for c in range(0x20, 0x3000, 7))]
)
def test_byte_tokenizer_round_trips(text: str) -> None:
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8")) and all(0 <= i < 256 for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(ids + [tok.EOS, tok.PAD, tok.BOS]) == text  # special ids decode to nothing
    assert len({tok.BOS, tok.EOS, tok.PAD}) == 3 and max(tok.BOS, tok.EOS, tok.PAD) == tok.vocab_size - 1


# ----------------------------------------------------------------------------------------------------------- build


def test_build_is_deterministic_and_the_seed_matters(corpus: Path, tmp_path: Path) -> None:
    a = build(corpus, tmp_path / "a", seed=3, val_fraction=0.25, shard_tokens=300)
    b = build(corpus, tmp_path / "b", seed=3, val_fraction=0.25, shard_tokens=300)
    c = build(corpus, tmp_path / "c", seed=4, val_fraction=0.25, shard_tokens=300)
    assert tree_bytes(a) == tree_bytes(b)
    assert len([k for k in tree_bytes(a) if k.startswith("train/")]) > 1  # several shards
    assert json.loads((a / "documents.json").read_text()) != json.loads((c / "documents.json").read_text())


def test_split_is_by_document_and_streams_are_the_documents(corpus: Path, tmp_path: Path) -> None:
    out = build(corpus, tmp_path / "d", seed=1, val_fraction=0.25, shard_tokens=257)
    docs = json.loads((out / "documents.json").read_text())
    expected_names = {p.as_posix() for p in corpus.rglob("*.txt") if not p.name.startswith(".")}
    assert set(docs["train"]).isdisjoint(docs["val"])
    assert set(docs["train"]) | set(docs["val"]) == expected_names
    assert len(docs["val"]) == 3  # 25% of 12 documents
    ds = load_text_dataset(out)
    eos = ByteTokenizer.EOS
    for split in ("train", "val"):
        want = b"".join(Path(name).read_bytes() + b"\xff" for name in docs[split])  # 0xff never occurs in UTF-8
        stream = ds.splits[split]
        got = stream.slice(0, len(stream))
        raw = np.frombuffer(want, np.uint8).astype(np.int64)
        assert np.array_equal(got, np.where(raw == 0xFF, eos, raw))
    meta = json.loads((out / "dataset.json").read_text())
    assert meta["dtype"] == "uint16" and meta["builder"]["seed"] == 1
    assert meta["builder"]["counts"]["train_documents"] == 9 and meta["builder"]["counts"]["documents_found"] == 12


def test_max_bytes_cuts_at_a_character_boundary(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(4):
        (corpus / f"{i}.txt").write_text("日本" * 50, encoding="utf-8")  # 3-byte characters, 300 bytes per file
    out = build(corpus, tmp_path / "o", max_bytes=700)
    meta = json.loads((out / "dataset.json").read_text())
    counts = meta["builder"]["counts"]
    assert counts["documents"] == 3 and counts["truncated"] == 1
    assert counts["bytes"] == 699  # 700 would split a character: the cut goes back to 699
    ds = load_text_dataset(out)
    text = ByteTokenizer().decode(
        np.concatenate([ds.splits[s].slice(0, len(ds.splits[s])) for s in ("train", "val")]).tolist()
    )
    assert "\ufffd" not in text and len(text) == 699 // 3


def test_hf_tokenizer_file(corpus: Path, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train(
        [str(p) for p in sorted(corpus.rglob("*.txt"))], trainers.WordLevelTrainer(special_tokens=["[UNK]", "</s>"])
    )
    path = tmp_path / "tok.json"
    tok.save(str(path))
    out = build(corpus, tmp_path / "hf", tokenizer=path)
    ds = load_text_dataset(out)
    assert ds.vocab_size == tok.get_vocab_size() and (out / "tokenizer.json").is_file()
    loaded = ds.tokenizer()
    assert isinstance(loaded, HFTokenizer) and loaded.eos_id == tok.token_to_id("</s>")
    docs = json.loads((out / "documents.json").read_text())
    want = np.concatenate([tok.encode(Path(n).read_text(encoding="utf-8")).ids + [loaded.eos_id] for n in docs["val"]])
    assert np.array_equal(ds.splits["val"].slice(0, len(ds.splits["val"])), want)


def test_stdlib_corpus_is_listed_in_order_without_installed_packages(tmp_path: Path) -> None:
    root, files = stdlib_files()
    rel = [p.relative_to(root).as_posix() for p in files]
    assert rel == sorted(rel) and "os.py" in rel and "json/__init__.py" in rel
    assert not any("site-packages" in r or r.startswith("_sysconfigdata") for r in rel)
    out = build_text(TextBuildOptions(input=[STDLIB], out=tmp_path / "s", max_bytes=30_000), progress=False)
    counts = json.loads((out / "dataset.json").read_text())["builder"]["counts"]
    assert counts["bytes"] <= 30_000 and counts["documents"] >= 2


# ---------------------------------------------------------------------------------------------------------- errors


def test_malformed_inputs_are_user_errors(corpus: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.txt").write_text("fine")
    (bad / "b.txt").write_bytes(b"latin-1 \xe9t\xe9")
    with pytest.raises(UserError, match=r"b\.txt: not UTF-8 text \(invalid byte at offset 8\)"):
        build(bad, tmp_path / "o1")
    with pytest.raises(UserError, match="no such file"):
        build(tmp_path / "missing", tmp_path / "o2")
    with pytest.raises(UserError, match="at least 2"):
        build(bad / "a.txt", tmp_path / "o3")
    (tmp_path / "tok.json").write_text("{not json")
    with pytest.raises(UserError, match="--tokenizer .*not a Hugging Face tokenizers JSON"):
        build(corpus, tmp_path / "o4", tokenizer=tmp_path / "tok.json")
    existing = build(corpus, tmp_path / "o5")
    with pytest.raises(UserError, match="already exists"):
        build(corpus, existing)
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o3").exists()  # nothing half-written


def test_cli_error_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_bytes(b"\xff\xfe")
    (tmp_path / "y.txt").write_text("ok")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import cli; cli.main()",
            "build-data",
            "text",
            "--input",
            str(tmp_path),
            "--out",
            str(tmp_path / "o"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "x.txt: not UTF-8" in lines[0], proc.stderr


def test_reader_rejects_inconsistent_datasets(corpus: Path, tmp_path: Path) -> None:
    out = build(corpus, tmp_path / "r")
    meta_path = out / "dataset.json"
    meta = json.loads(meta_path.read_text())
    meta["splits"]["train"]["tokens"] += 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(UserError, match="lists .* tokens but its shards hold"):
        load_text_dataset(out)
    meta["splits"]["train"]["tokens"] -= 1
    meta_path.write_text(json.dumps(meta))
    shard = out / meta["splits"]["val"]["shards"][0]
    np.save(shard, np.array([1, 2, 400], dtype=np.uint16))
    meta["splits"]["val"]["tokens"] = 3
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(UserError, match="token id 400 is outside the vocabulary of 259"):
        load_text_dataset(out)
    with pytest.raises(UserError, match="does not exist"):
        load_text_dataset(tmp_path / "none")


# --------------------------------------------------------------------------------------------------------- batches


def test_training_windows_are_seeded_substrings(corpus: Path, tmp_path: Path) -> None:
    ds = load_text_dataset(build(corpus, tmp_path / "w", shard_tokens=100))  # windows cross shard boundaries
    stream = ds.splits["train"]
    whole = stream.slice(0, len(stream))
    a = train_batch(stream, 6, 31, seed=5, step=7)
    assert a.shape == (6, 32) and a.dtype.is_floating_point is False
    assert np.array_equal(a.numpy(), train_batch(stream, 6, 31, seed=5, step=7).numpy())
    assert not np.array_equal(a.numpy(), train_batch(stream, 6, 31, seed=5, step=8).numpy())
    text = whole.tobytes()
    for row in a.numpy().astype(np.int64):
        assert row.tobytes() in text


@pytest.mark.parametrize("max_tokens", [None, 50])
def test_validation_windows_predict_every_token_once(corpus: Path, tmp_path: Path, max_tokens: int | None) -> None:
    stream = load_text_dataset(build(corpus, tmp_path / "v", val_fraction=0.4, shard_tokens=64)).splits["val"]
    seq_len = 16
    windows = validation_windows(stream, seq_len, max_tokens)
    predicted = [t for a, b in windows for t in range(a + 1, b)]
    n = len(stream) - 1 if max_tokens is None else min(max_tokens, len(stream) - 1)
    assert predicted == list(range(1, n + 1))
    batches = list(validation_batches(stream, seq_len, 3, max_tokens))
    rows = [row for b in batches for row in b.numpy()]
    assert sum(len(r) - 1 for r in rows) == n
    assert np.array_equal(np.concatenate([rows[0]] + [r[1:] for r in rows[1:]]), stream.slice(0, n + 1))


def test_dataset_kind_tells_text_from_puzzle_from_neither(corpus: Path, tmp_path: Path) -> None:
    text = build(corpus, tmp_path / "text")
    puzzle = write_original_layout(tmp_path / "puzzle")
    assert dataset_kind(text) == "text"
    assert dataset_kind(puzzle) == "puzzle"
    assert dataset_kind(puzzle / "train") is None  # one split is not a dataset
    assert dataset_kind(tmp_path / "missing") is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "dataset.json").write_text("{not json")
    assert dataset_kind(broken) is None
    (broken / "dataset.json").write_text("[1, 2]")  # JSON, but not an object
    assert dataset_kind(broken) is None
    (broken / "dataset.json").write_text(json.dumps({"kind": "images"}))
    assert dataset_kind(broken) is None
