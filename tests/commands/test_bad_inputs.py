"""Bad input a user meets on a cluster (issue 16): a full disk, a read-only folder, damaged files, ambiguous configs.
Each is one line naming the file, flag or field, with exit code 2 (never a traceback), or is refused rather than
silently accepted. Commands run in-process through cli.main; the full disk is simulated by a write raising ENOSPC,
and a read-only folder is simulated where running as root ignores its mode."""

from __future__ import annotations

import builtins
import contextlib
import errno
import hashlib
import json
import os
import random
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import hrm_reason.atomic
from hrm_reason.checkpoint import STATE, WEIGHTS, find_checkpoint, load_checkpoint, read_state
from hrm_reason.config import load_config, save_config
from hrm_reason.errors import UserError
from hrm_reason.evaluate.run import load_model_for_eval
from hrm_reason.runtime.lock import RunLock
from hrm_reason.train.loop import train
from tests.helpers import REPO, TINY_CLI, tiny_config, write_original_layout
from tests.helpers import hrm_in_process as hrm

MANIFEST = "manifest.json"  # the sha256 of a checkpoint's files, written with them
TINY = [*TINY_CLI, "epochs=2", "eval_interval=2"]


def assert_one_line(result: tuple[int, str], *fragments: str) -> str:
    code, err = result
    # the notice and progress bars before the error
    noise = ("no --config given", "generating ", "augmenting ", "tokenizing")
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip() and not line.startswith(noise)]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob(".*.tmp"))


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """`directory` made read-only (mode 0500). Root writes there anyway: then creating a file or folder in it raises
    the PermissionError a user meets, so that the message is still checked."""
    directory.chmod(0o500)
    try:
        with pytest.MonkeyPatch.context() as mp:
            if os.access(directory, os.W_OK):
                inside = directory.resolve()

                def refuse(make):
                    def fake(path: Path):
                        if Path(path).parent.resolve().is_relative_to(inside):
                            raise PermissionError(
                                errno.EACCES, os.strerror(errno.EACCES), str(Path(path).parent / "x.tmp")
                            )
                        return make(path)

                    return fake

                mp.setattr(hrm_reason.atomic, "_temp_file", refuse(hrm_reason.atomic._temp_file))
                mp.setattr(hrm_reason.atomic, "_temp_dir", refuse(hrm_reason.atomic._temp_dir))
            yield
    finally:
        directory.chmod(0o700)


def full_disk_open(real_open=builtins.open):
    """An `open` whose files for writing refuse their first write as a full disk does (the file is created)."""

    def fake(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        if "w" in mode or "a" in mode:
            f.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return f

    return fake


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("bad") / "sudoku4")


@pytest.fixture(scope="module")
def run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tiny_config(data, tmp_path_factory.mktemp("bad") / "run", "epochs=2"), progress=False)


@pytest.fixture
def run_copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "run"))


# ---------------------------------------------------------------------------------------- full disk, read-only folder


def test_build_data_into_read_only_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"doc{i}.txt").write_text(f"document {i}\n" * 20)
    locked = tmp_path / "locked"
    locked.mkdir()
    with read_only(locked):
        sudoku = ["build-data", "sudoku", "--source", "generate", "--box", "2x2", "--train-size", "4"]
        result = hrm(capsys, monkeypatch, *sudoku, "--test-size", "4", "--workers", "1", "--out", str(locked / "s"))
        assert_one_line(result, "permission denied writing", str(locked / "s"))
        result = hrm(capsys, monkeypatch, "build-data", "text", "--input", str(corpus), "--out", str(locked / "t"))
        assert_one_line(result, "permission denied writing", str(locked / "t"))
    assert list(locked.iterdir()) == []


def test_build_data_on_a_full_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets_build.hrm_format

    monkeypatch.setattr(datasets_build.hrm_format, "open", full_disk_open(), raising=False)
    out = tmp_path / "s"
    sudoku = ["build-data", "sudoku", "--source", "generate", "--box", "2x2", "--train-size", "4", "--test-size", "4"]
    result = hrm(capsys, monkeypatch, *sudoku, "--workers", "1", "--out", str(out))
    assert_one_line(result, "no space left on device writing", str(out))
    assert list(tmp_path.iterdir()) == [] and leftovers(tmp_path) == []


def test_build_data_on_a_full_disk_short_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy writes a large array into a real file with fwrite and reports a full disk as a short write, an OSError
    without an errno: still the full-disk line, not a traceback."""
    import datasets_build.hrm_format

    def short_write(file: Any, arr: np.ndarray, allow_pickle: bool = True) -> None:
        raise OSError(f"{arr.nbytes} requested and {arr.nbytes // 2} written")

    monkeypatch.setattr(datasets_build.hrm_format.np, "save", short_write)
    out = tmp_path / "s"
    sudoku = ["build-data", "sudoku", "--source", "generate", "--box", "2x2", "--train-size", "4", "--test-size", "4"]
    result = hrm(capsys, monkeypatch, *sudoku, "--workers", "1", "--num-aug", "2", "--out", str(out))
    assert_one_line(result, "no space left on device writing", str(out))
    assert list(tmp_path.iterdir()) == [] and leftovers(tmp_path) == []


def test_train_on_a_full_disk_at_the_checkpoint(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import hrm_reason.checkpoint

    monkeypatch.setattr(hrm_reason.checkpoint, "open", full_disk_open(), raising=False)
    result = hrm(capsys, monkeypatch, "train", "--data", str(data), "--run-dir", str(tmp_path / "r"), "--quiet", *TINY)
    assert_one_line(result, "no space left on device writing", str(tmp_path / "r" / "checkpoints" / "step_"))
    assert leftovers(tmp_path) == []


def test_atomic_file_write_on_a_full_disk_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hrm_reason.atomic import atomic_write_text

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(UserError, match=f"no space left on device writing {tmp_path / 'out.json'}$"):
        atomic_write_text(tmp_path / "out.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_eval_json_and_viz_into_read_only_folder(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    with read_only(locked):
        result = hrm(
            capsys, monkeypatch, "eval", "--run", str(run), "--mmax", "2", "--quiet", "--json", str(locked / "e.json")
        )
        assert_one_line(result, "permission denied writing", str(locked / "e.json"))
        pytest.importorskip("matplotlib")
        data = load_config(run / "config.yaml").data_path
        result = hrm(capsys, monkeypatch, "viz", "puzzle", "--data", data, "--out", str(locked))
        assert_one_line(result, "permission denied writing", str(locked))
    assert list(locked.iterdir()) == []


# ---------------------------------------------------------------------------------------- paths of the wrong kind


def test_run_dir_naming_a_file(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("not a run")
    for extra in ([], ["--resume"]):
        result = hrm(capsys, monkeypatch, "train", "--data", str(data), "--run-dir", str(file), *extra, *TINY)
        assert_one_line(result, "--run-dir", str(file), "is a file")


def test_json_naming_a_directory(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = hrm(capsys, monkeypatch, "eval", "--run", str(run), "--mmax", "2", "--quiet", "--json", str(tmp_path))
    assert_one_line(result, str(tmp_path), "is a directory")


# ---------------------------------------------------------------------------------------- damaged files


def test_checkpoint_records_checksums(run: Path) -> None:
    ckpt = find_checkpoint(run)
    assert sorted(p.name for p in ckpt.iterdir()) == sorted([WEIGHTS, STATE, MANIFEST])


def test_truncated_state_is_one_line(
    run_copy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = find_checkpoint(run_copy) / STATE
    state.write_bytes(state.read_bytes()[:1000])
    resume = ["train", "--run-dir", str(run_copy), "--resume", "--quiet", "epochs=4"]
    assert_one_line(hrm(capsys, monkeypatch, *resume), str(state), "checksum mismatch")
    # A checkpoint from before the checksums: the cut file itself is refused, naming it.
    (state.parent / MANIFEST).unlink()
    assert_one_line(hrm(capsys, monkeypatch, *resume), str(state), "not a readable training state")


def test_flipped_weight_bytes_are_detected(
    run_copy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ckpt = find_checkpoint(run_copy)
    weights = ckpt / WEIGHTS
    clean = weights.read_bytes()
    damaged = bytearray(clean)
    header = 8 + int.from_bytes(clean[:8], "little")
    for i in random.Random(0).sample(range(header, len(clean)), 1000):
        damaged[i] ^= 0xFF
    weights.write_bytes(bytes(damaged))
    load_file(str(weights))  # still parses: only the checksum tells
    result = hrm(capsys, monkeypatch, "eval", "--run", str(run_copy), "--mmax", "2", "--quiet")
    assert_one_line(result, str(weights), "checksum mismatch, the file is damaged")


def test_checkpoint_without_manifest_still_loads(run_copy: Path) -> None:
    """Loaded unchecked, and loaded whole: every tensor is the one saved (not the model's fresh initialisation)."""
    ckpt = find_checkpoint(run_copy)
    assert (ckpt / MANIFEST).is_file()
    (ckpt / MANIFEST).unlink()  # as written before the checksums
    saved = load_file(ckpt / WEIGHTS)

    def assert_saved_weights(model: torch.nn.Module) -> None:
        state = model.state_dict()
        assert state.keys() == saved.keys()
        for key, value in saved.items():
            assert torch.equal(state[key], value), key

    model = load_model_for_eval(run_copy, None, None, "cpu")[0]
    assert_saved_weights(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    load_checkpoint(model, ckpt)
    assert_saved_weights(model)


# ---------------------------------------------------------------------------------------- no code from a checkpoint


class RunsCode:
    """Pickled, a call of exec that writes `marker`: what a state.pt handed to a user may hold."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


@pytest.mark.parametrize("protocol", [2, 4])  # torch.save's own, and one naming its callables by STACK_GLOBAL
def test_a_state_whose_pickle_would_run_code_is_refused_without_running_it(
    run_copy: Path, tmp_path: Path, protocol: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 60: a run folder someone hands you runs nothing of its state.pt, the manifest beside it (in the same
    folder, so written by the same hand) vouching for nothing."""
    ckpt = find_checkpoint(run_copy)
    state = read_state(ckpt)
    marker = tmp_path / "ran"
    torch.save({**state, "extra": RunsCode(marker)}, ckpt / STATE, pickle_protocol=protocol)
    manifest = json.loads((ckpt / MANIFEST).read_text())
    manifest["sha256"][STATE] = hashlib.sha256((ckpt / STATE).read_bytes()).hexdigest()
    (ckpt / MANIFEST).write_text(json.dumps(manifest))
    torch.load(ckpt / STATE, map_location="cpu", weights_only=False)  # the payload is live: loaded as before, it runs
    assert marker.read_text() == "ran"
    marker.unlink()

    result = hrm(capsys, monkeypatch, "train", "--run-dir", str(run_copy), "--resume", "--quiet", "epochs=4")
    named = "__builtin__.exec" if protocol == 2 else "a callable by STACK_GLOBAL"  # protocol 2: Python 2 names
    assert_one_line(result, str(ckpt / STATE), f"its pickle names {named}", "refused unread")
    with pytest.raises(UserError, match="could run code"):
        read_state(ckpt)
    assert not marker.exists()


def test_every_state_hrm_train_writes_reads_with_nothing_but_data(run: Path, data: Path, tmp_path: Path) -> None:
    """The allowlist holds what a training state holds: the default optimizer's run, and Muon's with an EMA (the
    richest optimizer state, and the EMA's trained weights)."""
    muon = train(tiny_config(data, tmp_path / "muon", "epochs=2", "optimizer=muon", "ema=0.99"), progress=False)
    for ckpt in (find_checkpoint(run), find_checkpoint(muon)):
        assert read_state(ckpt)["step"] > 0
    assert "ema_live_weights" in read_state(find_checkpoint(muon))


# ---------------------------------------------------------------------------------------- a live run, errors alone


@pytest.mark.parametrize("resume", [False, True])
def test_a_live_run_is_named_as_live_not_as_not_empty(
    run_copy: Path,
    data: Path,
    tmp_path: Path,
    resume: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 60: a second `hrm train` on a run another process trains in is told so, with that process, before the
    run directory is called "not empty" (whose advice, --resume, would meet the lock)."""
    other = tmp_path / "other.yaml"
    save_config(tiny_config(data, tmp_path / "elsewhere", "epochs=2"), other)
    args = ["--resume", "epochs=4"] if resume else ["-c", str(other)]
    with RunLock(run_copy):  # as the training process holds it
        result = hrm(capsys, monkeypatch, "train", "--run-dir", str(run_copy), "--quiet", *args)
    line = assert_one_line(result, f"run directory {run_copy} is in use by another process")
    assert f"host {socket.gethostname()} pid {os.getpid()}" in line and "not empty" not in line
    result = hrm(capsys, monkeypatch, "train", "--run-dir", str(run_copy), "--quiet", "-c", str(other))
    assert_one_line(result, "is not empty: pass --resume")  # once it has ended, its folder is what it was


def test_compare_runs_on_a_full_disk_is_one_line_without_a_note(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 60: the note on runs without an hrm eval --json output came before the refusal, about work that did not
    happen; a refusal is its one line alone."""
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fsync(fd: int) -> None:
        raise full

    monkeypatch.setattr(os, "fsync", fsync)
    code, err = hrm(capsys, monkeypatch, "compare", "--runs", str(run), "--out", str(tmp_path / "cmp"))
    assert code == 2 and err.splitlines() == [f"error: no space left on device writing {tmp_path / 'cmp'}/results.json"]
    monkeypatch.undo()
    code, err = hrm(capsys, monkeypatch, "compare", "--runs", str(run), "--out", str(tmp_path / "cmp"))
    assert code == 0 and err.startswith("note: 1 run(s) without an hrm eval --json output"), err  # said once written


@pytest.mark.parametrize("damage", ["quote in header", "cut header"])
def test_damaged_npy_header_is_one_line(
    data: Path, tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = Path(shutil.copytree(data, tmp_path / "data"))
    npy = copy / "train" / "all__inputs.npy"
    raw = bytearray(npy.read_bytes())
    if damage == "quote in header":
        raw[8] = ord("'")  # numpy's header parser raises tokenize.TokenError
    else:
        raw = raw[:100]
    npy.write_bytes(bytes(raw))
    result = hrm(capsys, monkeypatch, "train", "--data", str(copy), "--run-dir", str(tmp_path / "r"), *TINY)
    assert_one_line(result, str(npy), "not a readable .npy array")


def test_config_of_random_bytes_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "noise.yaml"
    cfg.write_bytes(random.Random(0).randbytes(512))
    assert_one_line(hrm(capsys, monkeypatch, "train", "--config", str(cfg)), str(cfg))


# ---------------------------------------------------------------------------------------- accepted silently before


def test_labels_outside_the_vocabulary_are_refused(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = Path(shutil.copytree(data, tmp_path / "data"))
    labels_file = copy / "train" / "all__labels.npy"
    labels = np.load(labels_file)
    labels[3, 5] = 17  # vocab_size is 6
    np.save(labels_file, labels)
    result = hrm(capsys, monkeypatch, "train", "--data", str(copy), "--run-dir", str(tmp_path / "r"), *TINY)
    assert_one_line(result, str(labels_file), "label 17", "vocab_size=6")
    assert not (tmp_path / "r").exists()


def test_ignore_labels_outside_the_vocabulary_are_accepted(data: Path, tmp_path: Path) -> None:
    from hrm_reason.data.puzzle import load_split

    copy = Path(shutil.copytree(data, tmp_path / "data"))
    labels_file = copy / "test" / "all__labels.npy"
    labels = np.load(labels_file)
    labels[0, :3] = -100  # the loss's own ignore index
    np.save(labels_file, labels)
    assert load_split(copy, "test").sets["all"].labels[0, 0] == -100


def test_odd_head_size_is_a_config_error(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["train", "--data", str(data), "--run-dir", str(tmp_path / "r"), *TINY]
    result = hrm(capsys, monkeypatch, *args, "arch.hidden_size=30", "arch.num_heads=2")
    assert_one_line(result, "arch.hidden_size 30", "arch.num_heads 2", "odd head size")
    # Without RoPE an odd head size is fine.
    load_config(None, [f"data_path={data}", "arch.hidden_size=30", "arch.num_heads=2", "arch.pos_encodings=learned"])


@pytest.mark.parametrize("text", ["", "\n", "# nothing but a comment\n"])
def test_empty_config_file_is_an_error(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "empty.yaml"
    cfg.write_text(text)
    assert_one_line(hrm(capsys, monkeypatch, "train", "--config", str(cfg)), str(cfg), "empty")


@pytest.mark.parametrize(
    "text, key, line",
    [
        ("lr: 1.0e-4\nepochs: 10\nlr: 3.0e-4\n", "lr", 3),
        ("arch:\n  name: hrm\n  hidden_size: 64\n  num_heads: 2\n  hidden_size: 128\n", "hidden_size", 5),
    ],
)
def test_duplicate_yaml_key_is_an_error(
    text: str,
    key: str,
    line: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = tmp_path / "twice.yaml"
    cfg.write_text(text)
    result = hrm(capsys, monkeypatch, "train", "--config", str(cfg))
    assert_one_line(result, str(cfg), f"duplicate key '{key}' at line {line}")


# The all_config.yaml the original HRM code writes into its checkpoint folder (Sudoku-Extreme 1k run).
ORIGINAL_ALL_CONFIG = """\
arch:
  H_cycles: 2
  H_layers: 4
  L_cycles: 2
  L_layers: 4
  expansion: 4
  halt_exploration_prob: 0.1
  halt_max_steps: 16
  hidden_size: 512
  loss:
    loss_type: stablemax_cross_entropy
    name: losses@ACTLossHead
  name: hrm.hrm_act_v1@HierarchicalReasoningModel_ACTV1
  num_heads: 8
  pos_encodings: rope
  puzzle_emb_ndim: 512
beta1: 0.9
beta2: 0.95
checkpoint_every_eval: true
checkpoint_path: checkpoints/Sudoku-extreme-1k-aug-1000 ACT-torch/HierarchicalReasoningModel_ACTV1 amphibian-turaco
data_path: data/sudoku-extreme-1k-aug-1000
epochs: 20000
eval_interval: 2000
eval_save_outputs: []
global_batch_size: 768
lr: 7.0e-05
lr_min_ratio: 1.0
lr_warmup_steps: 2000
project_name: Sudoku-extreme-1k-aug-1000 ACT-torch
puzzle_emb_lr: 7.0e-05
puzzle_emb_weight_decay: 1.0
run_name: HierarchicalReasoningModel_ACTV1 amphibian-turaco
seed: 0
weight_decay: 1.0
"""


def test_shipped_and_original_configs_still_load(tmp_path: Path) -> None:
    original = tmp_path / "all_config.yaml"
    original.write_text(ORIGINAL_ALL_CONFIG)
    assert load_config(original).arch.hidden_size == 512
    configs = sorted((REPO / "configs").glob("*.yaml"))
    assert len(configs) > 10
    for path in configs:
        load_config(path)
