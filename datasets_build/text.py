"""Text corpus builder for the language-model heads: `hrm build-data text --input FILE_OR_DIR|stdlib ... --out DIR`.

Every file is one document. Documents are listed in a fixed order (sorted relative paths), shuffled by a generator
seeded with --seed, optionally cut at --max-bytes, and split *by document* into train and val (a document never
contributes to both). Each document is tokenised and followed by the end-of-document id; the token streams are
written as .npy shards (uint16 when the vocabulary allows, uint32 otherwise) with a `dataset.json` that records the
tokenizer and a `builder` record (source, seed, options, counts), and `documents.json` with each split's documents.
The directory is written under a temporary name and renamed: all or nothing. Same inputs, options and seed give the
same bytes.

Tokenizers: bytes (the default; no file, no download) or a local Hugging Face `tokenizers` JSON file (--tokenizer).
`--input stdlib` is the offline default corpus of the quick presets: the .py files of the running Python's standard
library (`sysconfig.get_paths()["stdlib"]`), without site-packages and the build-specific sysconfig files; files
that are not UTF-8 are skipped there (and counted), while in user input they are an error.
"""

from __future__ import annotations

import json
import os
import platform
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np

from datasets_build.hrm_format import check_out, dumps_json
from datasets_build.options import STDLIB, TextBuildOptions
from hrm_reason.atomic import atomic_directory
from hrm_reason.data.text import DATASET_FILE, ByteTokenizer, HFTokenizer, Tokenizer, save_tokenizer
from hrm_reason.errors import UserError
from hrm_reason.outputs import checked_text
from hrm_reason.runtime.logs import progress_bar

BUILDER_VERSION = "1"
DOCUMENTS_FILE = "documents.json"
# Independent random streams derived from the one user seed.
_STREAM_ORDER = 1


# -------------------------------------------------------------------------------------------------------- documents


def stdlib_files() -> tuple[Path, list[Path]]:
    """The standard library's .py files in sorted order, without installed packages and build-specific files."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip_dirs = {"site-packages", "dist-packages", "__pycache__"}
    files = []
    for parent, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip_dirs and not d.startswith("config-")]  # not descended into
        files += [Path(parent) / n for n in names if n.endswith(".py") and not n.startswith("_sysconfigdata")]
    return root, sorted((p for p in files if p.is_file()), key=lambda p: p.relative_to(root).as_posix())


def list_documents(inputs: list[str], glob: str) -> tuple[list[tuple[str, Path]], dict[str, Any]]:
    """(name, path) of every document in a fixed order, and a description of the source for the builder record."""
    docs: list[tuple[str, Path]] = []
    source: dict[str, Any] = {"inputs": []}
    for item in inputs:
        if item == STDLIB:
            root, files = stdlib_files()
            docs += [(f"{STDLIB}/{p.relative_to(root).as_posix()}", p) for p in files]
            source["inputs"].append(
                {"input": STDLIB, "path": str(root), "python": platform.python_version(), "files": len(files)}
            )
            continue
        path = Path(item)
        if path.is_file():
            docs.append((path.as_posix(), path))
            source["inputs"].append({"input": item, "files": 1})
        elif path.is_dir():
            files = sorted(
                (
                    p
                    for p in path.rglob(glob)
                    if p.is_file()
                    and not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(path).parts)
                ),
                key=lambda p: p.relative_to(path).as_posix(),
            )
            if not files:
                raise UserError(f"--input {item}: no file matching --glob {glob!r} in this directory")
            docs += [(checked_text(p.as_posix(), "--input file"), p) for p in files]  # names go to documents.json
            source["inputs"].append({"input": item, "glob": glob, "files": len(files)})
        else:
            raise UserError(f"--input {item}: no such file or directory (or use --input stdlib)")
    seen: set[str] = set()
    unique = []
    for name, path in docs:
        key = str(path.resolve())
        if key not in seen:
            seen.add(key)
            unique.append((name, path))
    return unique, source


def read_documents(
    docs: list[tuple[str, Path]], order: np.ndarray, max_bytes: int | None, lenient: set[str]
) -> tuple[list[tuple[str, bytes]], dict[str, int]]:
    """Documents in `order` as UTF-8 bytes, up to `max_bytes` in all (the last one cut at a character boundary).

    A file that is not UTF-8 text is an error, except for names in `lenient` (the stdlib corpus), which are skipped."""
    out: list[tuple[str, bytes]] = []
    counts = {"skipped_not_utf8": 0, "skipped_empty": 0, "truncated": 0}
    total = 0
    for i in order:
        name, path = docs[int(i)]
        try:
            data = path.read_bytes()
        except OSError as e:
            raise UserError(f"{path}: cannot read ({e.strerror or type(e).__name__})") from None
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            if name in lenient:
                counts["skipped_not_utf8"] += 1
                continue
            raise UserError(
                f"{path}: not UTF-8 text (invalid byte at offset {e.start}); convert it or leave it out"
            ) from None
        if not data:
            counts["skipped_empty"] += 1
            continue
        if max_bytes is not None and total + len(data) > max_bytes:
            data = data[: max_bytes - total].decode("utf-8", errors="ignore").encode("utf-8")
            counts["truncated"] += 1
            if data:
                out.append((name, data))
                total += len(data)
            break
        out.append((name, data))
        total += len(data)
        if max_bytes is not None and total >= max_bytes:
            break
    return out, counts


# ----------------------------------------------------------------------------------------------------------- shards


class ShardWriter:
    """Append token arrays; write `<split>/shard_NNNNN.npy` files of exactly `shard_tokens` tokens (the last
    shorter)."""

    def __init__(self, root: Path, split: str, dtype: np.dtype, shard_tokens: int) -> None:
        self.root, self.split, self.dtype, self.shard_tokens = root, split, dtype, shard_tokens
        (root / split).mkdir(parents=True, exist_ok=True)
        self.pending: list[np.ndarray] = []
        self.pending_len = 0
        self.shards: list[str] = []
        self.tokens = 0

    def add(self, tokens: np.ndarray) -> None:
        self.pending.append(tokens.astype(self.dtype, copy=False))
        self.pending_len += len(tokens)
        self.tokens += len(tokens)
        while self.pending_len >= self.shard_tokens:
            self._flush(self.shard_tokens)

    def close(self) -> list[str]:
        if self.pending_len or not self.shards:
            self._flush(self.pending_len)
        return self.shards

    def _flush(self, n: int) -> None:
        buf = np.concatenate(self.pending) if self.pending else np.zeros(0, dtype=self.dtype)
        rel = f"{self.split}/shard_{len(self.shards):05d}.npy"
        with open(self.root / rel, "wb") as f:
            np.save(f, np.ascontiguousarray(buf[:n]), allow_pickle=False)
        self.shards.append(rel)
        rest = buf[n:]
        self.pending, self.pending_len = ([rest] if len(rest) else []), len(rest)


def encode_document(tokenizer: Tokenizer, data: bytes) -> np.ndarray:
    """The document's ids followed by the end-of-document id (int64)."""
    if isinstance(tokenizer, ByteTokenizer):
        ids = tokenizer.encode_bytes(data).astype(np.int64)
    else:
        ids = np.asarray(tokenizer.encode(data.decode("utf-8")), dtype=np.int64)
    return np.append(ids, tokenizer.eos_id)


# ------------------------------------------------------------------------------------------------------------ build


def _default_out(opts: TextBuildOptions) -> Path:
    first = opts.input[0]
    return Path("data") / ("text-stdlib" if first == STDLIB else f"text-{Path(first).stem or 'corpus'}")


def build_text(opts: TextBuildOptions, progress: bool = True) -> Path:
    """Build the dataset described by `opts` and return its directory (written atomically: all or nothing)."""
    out = Path(opts.out) if opts.out is not None else _default_out(opts)
    check_out(out, opts.overwrite, "text")
    if opts.tokenizer is None and opts.eos_token is not None:
        raise UserError("--eos-token is an option of --tokenizer (the byte tokenizer has its own end-of-document id)")
    tokenizer: Tokenizer = ByteTokenizer() if opts.tokenizer is None else HFTokenizer(opts.tokenizer, opts.eos_token)
    docs, source = list_documents(opts.input, opts.glob)
    lenient = {name for name, _ in docs if name.startswith(f"{STDLIB}/")}
    order = np.random.default_rng([opts.seed, _STREAM_ORDER]).permutation(len(docs))
    kept, counts = read_documents(docs, order, opts.max_bytes, lenient)
    if len(kept) < 2:
        raise UserError(
            f"--input {' '.join(opts.input)}: {len(kept)} non-empty document(s); a split by document needs at least 2 (add files or raise --max-bytes)"
        )
    n_val = min(len(kept) - 1, max(1, round(opts.val_fraction * len(kept))))
    split_docs = {"train": kept[n_val:], "val": kept[:n_val]}
    dtype = np.dtype(np.uint16 if tokenizer.vocab_size <= 1 << 16 else np.uint32)

    with atomic_directory(out, overwrite=opts.overwrite) as tmp:
        splits: dict[str, Any] = {}
        bar = progress_bar(
            total=sum(len(d) for _, d in kept),
            desc="tokenizing",
            unit="B",
            unit_scale=True,
            enabled=progress,
        )
        with bar:
            for split, items in split_docs.items():
                writer = ShardWriter(tmp, split, dtype, opts.shard_tokens)
                for _, data in items:
                    writer.add(encode_document(tokenizer, data))
                    bar.update(len(data))
                splits[split] = {"shards": writer.close(), "tokens": writer.tokens, "documents": len(items)}
        save_tokenizer(tokenizer, tmp)
        builder = {
            "name": "text",
            "version": BUILDER_VERSION,
            "source": source,
            "tokenizer": tokenizer.record()
            if opts.tokenizer is None
            else {**tokenizer.record(), "source": str(opts.tokenizer)},
            "seed": opts.seed,
            "options": opts.model_dump(mode="json", exclude={"out", "overwrite"}),
            "counts": {
                "documents_found": len(docs),
                "documents": len(kept),
                "bytes": sum(len(d) for _, d in kept),
                **counts,
                **{f"{s}_documents": v["documents"] for s, v in splits.items()},
                **{f"{s}_tokens": v["tokens"] for s, v in splits.items()},
            },
        }
        meta = {
            "kind": "text",
            "format_version": 1,
            "vocab_size": tokenizer.vocab_size,
            "dtype": dtype.name,
            "tokenizer": tokenizer.record(),
            "splits": splits,
            "builder": builder,
        }
        (tmp / DATASET_FILE).write_text(dumps_json(meta), encoding="utf-8")
        (tmp / DOCUMENTS_FILE).write_text(
            dumps_json({s: [name for name, _ in items] for s, items in split_docs.items()}), encoding="utf-8"
        )
    return out


def summary(out: Path) -> str:
    """One line for the CLI: where the dataset is and what it holds."""
    meta = json.loads((out / DATASET_FILE).read_text())
    s = meta["splits"]
    tok = meta["tokenizer"]
    return (
        f"wrote {out}: train {s['train']['documents']} documents / {s['train']['tokens']} tokens, "
        f"val {s['val']['documents']} documents / {s['val']['tokens']} tokens ({tok['kind']} tokenizer, vocab {meta['vocab_size']})"
    )
