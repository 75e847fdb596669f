"""Readers that never trace back (issue 35): every file the project reads - text, JSON, JSON lines, .npy arrays,
safetensors weights, checkpoint pointers and manifests, metrics logs, puzzle files - turns a missing, undecodable,
unparsable or wrongly shaped file into one UserError line that names the file (or the flag that gave it).

The shared readers of hrm_reason.readers are tested on garbage, truncated and foreign files; then the readers built on
them, each with the damage a user meets: random bytes where a text file was, a file cut by a crash, an array of the
wrong dtype or shape."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import BaseModel
from safetensors.torch import save_file

from hrm_reason.checkpoint import (
    MANIFEST,
    STATE,
    WEIGHTS,
    find_checkpoint,
    prune_checkpoints,
    read_weights,
    saved_model_config,
    verify_file,
)
from hrm_reason.commands.compare_tables import eval_curve
from hrm_reason.commands.solver import read_puzzles
from hrm_reason.data.puzzle import dataset_kind, load_split
from hrm_reason.data.text import load_text_dataset
from hrm_reason.errors import UserError
from hrm_reason.readers import read_json, read_json_model, read_jsonl, read_npy, read_text
from hrm_reason.tasks import sudoku
from tests.helpers import write_original_layout

# Bytes that are not UTF-8 from their second byte on, with newlines inside (as random bytes have).
GARBAGE = b"\x00\xff\xfe\x8b garbage\n\x91\x92\n\xc3"


def error(call, *args, **kwargs) -> str:
    """The one-line message of the UserError `call(*args, **kwargs)` raises."""
    with pytest.raises(UserError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ----------------------------------------------------------------------------------------------- text and JSON


def test_read_text_names_the_file_and_the_first_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"ok\n\xff rest")
    assert error(read_text, path) == f"{path}: not UTF-8 text (invalid byte 0xff at offset 3)"
    assert error(read_text, path, name="--file f.txt") == "--file f.txt: not UTF-8 text (invalid byte 0xff at offset 3)"
    assert (
        error(read_text, path, expected="a pointer")
        == f"{path}: not a pointer (not UTF-8 text: invalid byte 0xff at offset 3)"
    )
    path.write_text("héllo\n", encoding="utf-8")
    assert read_text(path) == "héllo\n"
    path.write_text("héllo\r\n", encoding="utf-8-sig")  # as Windows editors save it: the byte-order mark dropped
    assert read_text(path) == "héllo\r\n"
    path.write_bytes(b"\xef\xbb\xbfok\xff")
    assert error(read_text, path) == f"{path}: not UTF-8 text (invalid byte 0xff at offset 5)"


def test_read_text_missing_and_directory(tmp_path: Path) -> None:
    missing = tmp_path / "none.txt"
    assert error(read_text, missing, "the dataset's list") == f"{missing} not found: the dataset's list"
    assert (
        error(read_text, missing, name="--file none.txt")
        == "--file none.txt: cannot read it (No such file or directory)"
    )
    assert error(read_text, tmp_path / "none" / "below.txt", "x").endswith("not found: x")
    assert error(read_text, tmp_path) == f"{tmp_path} is a directory: expected a file"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (GARBAGE, "not valid JSON (not UTF-8 text: invalid byte 0xff at offset 1)"),
        (b'{"a": 1,\n "b": ', "not valid JSON (Expecting value at line 2)"),  # cut by a crash
        (b"", "not valid JSON (Expecting value at line 1)"),
        (b"[" * 100_000, "not valid JSON (nested too deeply)"),
        (b"1" * 5000, "not valid JSON (Exceeds the limit"),
    ],
)
def test_read_json_of_damaged_files(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "d.json"
    path.write_bytes(content)
    message = error(read_json, path, "expected a dataset")
    assert message.startswith(f"{path}: ") and fragment in message, message


def test_read_json_model_names_the_field(tmp_path: Path) -> None:
    class Meta(BaseModel):
        seq_len: int

    path = tmp_path / "m.json"
    path.write_text('{"seq_len": "long"}')
    assert error(read_json_model, path, Meta, "x").startswith(f"{path}: field 'seq_len'")
    path.write_bytes(GARBAGE)
    assert "not valid JSON (not UTF-8 text" in error(read_json_model, path, Meta, "x")


# ----------------------------------------------------------------------------------------------------- JSON lines


def write_lines(path: Path, *lines: str | bytes) -> Path:
    path.write_bytes(b"".join(x if isinstance(x, bytes) else x.encode() for x in lines))
    return path


def test_read_jsonl_drops_only_a_cut_last_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "m.jsonl", '{"step": 1}\n', "\n", '{"step": 2}\r\n', '{"step": 3, "a')
    assert read_jsonl(path, int_key="step") == [{"step": 1}, {"step": 2}]
    write_lines(path, '{"step": 1}\n', '{"step": 3, "a\n', '{"step": 4}\n')
    assert error(read_jsonl, path) == f"{path} line 2: not valid JSON (Unterminated string starting at)"
    write_lines(path, '{"step": 1}\n', '{"step": 2, "a": [1')
    assert read_jsonl(path) == [{"step": 1}]
    write_lines(path, '{"step": 1}\n', '{"step": 2, "a": [1\n')  # ended by its newline: damaged, not being written
    assert error(read_jsonl, path).startswith(f"{path} line 2: not valid JSON")
    write_lines(path)
    assert read_jsonl(path) == []


def test_read_jsonl_of_random_bytes_names_the_line_and_the_file_offset(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "m.jsonl", '{"step": 1}\n', GARBAGE)
    assert error(read_jsonl, path) == f"{path} line 2: not UTF-8 text (invalid byte 0xff at offset 13)"
    write_lines(path, GARBAGE[:3])  # one line without a newline: still not taken for a line being written
    assert error(read_jsonl, path, name="--log m") == "--log m line 1: not UTF-8 text (invalid byte 0xff at offset 1)"
    assert read_jsonl(write_lines(path, '{"step": 1}\n', GARBAGE), skip_damaged=True) == [{"step": 1}]


@pytest.mark.parametrize(
    "line", ["[1, 2]", '"step"', '{"loss": 1}', '{"step": "3"}', '{"step": true}', '{"step": 1.5}']
)
def test_read_jsonl_wants_objects_with_an_integer_key(tmp_path: Path, line: str) -> None:
    path = write_lines(tmp_path / "m.jsonl", '{"step": 0}\n', line + "\n", '{"step": 2}\n')
    assert error(read_jsonl, path, int_key="step") == f"{path} line 2: expected a JSON object with an integer 'step'"
    assert read_jsonl(path, int_key="step", skip_damaged=True) == [{"step": 0}, {"step": 2}]


def test_read_jsonl_missing(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert error(read_jsonl, path, "not a run directory") == f"{path} not found: not a run directory"


# ------------------------------------------------------------------------------------------------------------ .npy


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


ARRAY = np.arange(200, dtype=np.int32).reshape(20, 10)


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (GARBAGE, "no .npy header"),
        (b"", "the file is empty"),
        (npy_bytes(ARRAY)[:50], "EOF: reading array header"),
        (npy_bytes(ARRAY)[:-100], None),  # the data cut: numpy's words differ with and without mmap
        (npy_bytes(np.array([{"a": 1}], dtype=object)), None),  # pickled objects are never loaded
        (npy_bytes(ARRAY).replace(b"'<i4'", b"\xff<i4'"), "Cannot parse header"),
    ],
)
@pytest.mark.parametrize("mmap", [False, True])
def test_read_npy_of_damaged_files(tmp_path: Path, content: bytes, detail: str | None, mmap: bool) -> None:
    path = tmp_path / "a.npy"
    path.write_bytes(content)
    message = error(read_npy, path, mmap=mmap)
    assert message.startswith(f"{path}: not a readable .npy array, the file is damaged ("), message
    assert detail is None or detail in message, message


def test_read_npy_refuses_an_archive_and_reads_an_array(tmp_path: Path) -> None:
    archive = tmp_path / "z.npy"
    with open(archive, "wb") as f:
        np.savez(f, inputs=ARRAY)
    assert "an .npz archive" in error(read_npy, archive)
    path = tmp_path / "a.npy"
    np.save(path, ARRAY)
    got = read_npy(path, mmap=True)
    assert isinstance(got, np.memmap) and np.array_equal(got, ARRAY)
    assert error(read_npy, tmp_path / "none.npy", "listed in dataset.json").endswith(
        "not found: listed in dataset.json"
    )
    assert error(read_npy, tmp_path) == f"{tmp_path} is a directory: expected a .npy file"


# ----------------------------------------------------------------------------------------------------- checkpoints


def fake_run(root: Path, steps: list[int], latest: bytes | None) -> Path:
    """A run directory with complete checkpoints step_N (placeholder files) and checkpoints/latest holding `latest`."""
    for s in steps:
        d = root / "checkpoints" / f"step_{s}"
        d.mkdir(parents=True)
        (d / WEIGHTS).write_bytes(b"w")
        (d / STATE).write_bytes(b"s")
    if latest is not None:
        (root / "checkpoints" / "latest").write_bytes(latest)
    return root


def test_a_damaged_latest_pointer_is_named_and_deleting_it_recovers(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", [2, 4], b"\x00\xff\xfe garbage")
    latest = run / "checkpoints" / "latest"
    fix = "; delete it to use the newest complete checkpoint"
    assert error(find_checkpoint, run) == (
        f"{latest}: not a checkpoint pointer (not UTF-8 text: invalid byte 0xff at offset 1){fix}"
    )
    latest.write_bytes(b"hello\x00")
    assert error(find_checkpoint, run) == f"{latest}: not a checkpoint pointer (expected step_N, got 'hello\\x00'){fix}"
    latest.write_text("step_9\n")
    assert error(find_checkpoint, run) == f"{latest}: names step_9, which is not a directory in {latest.parent}{fix}"
    assert error(prune_checkpoints, run, 1).startswith(f"{latest}: names step_9")  # nothing removed on a guess
    assert sorted(p.name for p in (run / "checkpoints").glob("step_*")) == ["step_2", "step_4"]
    latest.write_text("step_2\n")
    assert find_checkpoint(run) == run / "checkpoints" / "step_2"
    latest.unlink()
    assert find_checkpoint(run) == run / "checkpoints" / "step_4"


def test_prune_keep_best_survives_a_damaged_log(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", [1, 2, 3], b"step_3")
    lines = [
        b'{"step": 1, "eval/exact_accuracy": 0.9}\n',
        GARBAGE + b"\n",
        b'{"step": 2, "eval/exact_accuracy": 0.1}\n',
    ]
    (run / "metrics.jsonl").write_bytes(b"".join(lines))
    prune_checkpoints(run, 1, keep_best=True)
    assert sorted(p.name for p in (run / "checkpoints").glob("step_*")) == ["step_1", "step_3"]


def test_damaged_weights_and_manifest_are_one_line(tmp_path: Path) -> None:
    weights = tmp_path / WEIGHTS
    weights.write_bytes(GARBAGE)
    assert error(read_weights, tmp_path).startswith(f"{weights}: not a readable safetensors checkpoint (")
    assert saved_model_config(tmp_path) is None
    save_file({"w": torch.zeros(2)}, str(weights), metadata={"model_config": "[1, 2]"})
    assert error(read_weights, weights) == (
        f"{weights}: not a readable safetensors checkpoint (its header's model_config is a list, expected a JSON object)"
    )
    assert saved_model_config(weights) is None
    save_file({"w": torch.zeros(2)}, str(weights), metadata={"model_config": '{"seq_len": 16}'})
    assert saved_model_config(weights) == {"seq_len": 16}
    (tmp_path / MANIFEST).write_bytes(GARBAGE)
    message = error(verify_file, weights)
    assert message.startswith(f"{tmp_path / MANIFEST}: not valid JSON (not UTF-8 text") and "damaged" in message
    (tmp_path / MANIFEST).write_text('{"sha256": ["not", "a", "map"]}')
    assert (
        error(verify_file, weights) == f"{tmp_path / MANIFEST}: not a readable checkpoint manifest; the file is damaged"
    )


# --------------------------------------------------------------------------------------------------------- datasets


@pytest.fixture
def puzzles(tmp_path: Path) -> Path:
    return write_original_layout(tmp_path / "sudoku4", n_train_groups=2, n_test=3)


@pytest.mark.parametrize(
    ("name", "array", "fragment"),
    [
        (
            "labels",
            np.zeros((3, 16), dtype=np.float32),
            "all__labels.npy: expected an integer array, got dtype float32",
        ),
        (
            "inputs",
            np.array(["a"] * 16 * 3).reshape(3, 16),
            "all__inputs.npy: expected an integer array, got dtype <U1",
        ),
        ("group_indices", np.zeros(0, dtype=np.int32), "group_indices must rise from 0"),
        ("puzzle_identifiers", np.zeros((3, 1), dtype=np.int32), "puzzle_identifiers have shape (3, 1)"),
        ("inputs", np.ones((3, 4), dtype=np.int32), "inputs have shape (3, 4), expected [N, seq_len=16]"),
    ],
)
def test_arrays_of_the_wrong_dtype_or_shape_are_named(
    puzzles: Path, name: str, array: np.ndarray, fragment: str
) -> None:
    np.save(puzzles / "test" / f"all__{name}.npy", array)
    message = error(load_split, puzzles, "test")
    assert str(puzzles / "test") in message and fragment in message, message


def test_damaged_dataset_files_are_named(puzzles: Path) -> None:
    (puzzles / "test" / "all__puzzle_indices.npy").write_bytes(GARBAGE)
    assert error(load_split, puzzles, "test").startswith(
        f"{puzzles / 'test' / 'all__puzzle_indices.npy'}: not a readable"
    )
    (puzzles / "test" / "dataset.json").write_bytes(GARBAGE)
    assert "dataset.json: not valid JSON (not UTF-8 text" in error(load_split, puzzles, "test")
    (puzzles / "dataset.json").write_bytes(GARBAGE)  # a text dataset's file, damaged: not taken for one
    assert dataset_kind(puzzles) == "puzzle"


def text_dataset(root: Path, shard: bytes) -> Path:
    root.mkdir()
    (root / "train").mkdir()
    (root / "val").mkdir()
    (root / "train" / "shard_00000.npy").write_bytes(shard)
    np.save(root / "val" / "shard_00000.npy", np.arange(10, dtype=np.uint16))
    split = {"shards": [], "tokens": 10, "documents": 1}
    meta = {
        "kind": "text",
        "vocab_size": 259,
        "dtype": "uint16",
        "tokenizer": {"kind": "byte"},
        "splits": {
            "train": {**split, "shards": ["train/shard_00000.npy"]},
            "val": {**split, "shards": ["val/shard_00000.npy"]},
        },
    }
    (root / "dataset.json").write_text(json.dumps(meta))
    return root


@pytest.mark.parametrize("shard", [b"", GARBAGE, npy_bytes(np.arange(10, dtype=np.uint16))[:-4]])
def test_damaged_token_shards_are_named(tmp_path: Path, shard: bytes) -> None:
    root = text_dataset(tmp_path / "text", shard)
    message = error(load_text_dataset, root)
    assert message.startswith(f"{root / 'train' / 'shard_00000.npy'}: not a readable .npy array"), message


def test_a_token_shard_of_another_dtype_is_named(tmp_path: Path) -> None:
    root = text_dataset(tmp_path / "text", npy_bytes(np.arange(10, dtype=np.float32)))
    assert "expected a 1-D uint16 array, got 1-D float32" in error(load_text_dataset, root)
    shutil.rmtree(root)
    root = text_dataset(tmp_path / "text", npy_bytes(np.arange(10, dtype=np.uint16)))
    assert len(load_text_dataset(root).splits["train"]) == 10


# --------------------------------------------------------------------------------------- commands' own readers


class BinaryStdin:
    """sys.stdin as a terminal or a pipe gives it: a text layer over `buffer`."""

    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)

    def read(self) -> str:
        raise AssertionError("the text layer decodes with the locale: read the bytes")


def test_solve_reads_a_puzzle_file_or_stdin_as_one_line_errors(tmp_path: Path) -> None:
    task = sudoku.SudokuTask(2, 2, 0)
    file = tmp_path / "garbage.bin"
    file.write_bytes(GARBAGE)
    assert (
        error(read_puzzles, task, None, file, None) == f"--file {file}: not UTF-8 text (invalid byte 0xff at offset 1)"
    )
    missing = tmp_path / "none.txt"
    assert (
        error(read_puzzles, task, None, missing, None)
        == f"--file {missing}: cannot read it (No such file or directory)"
    )
    assert error(read_puzzles, task, None, tmp_path, None) == f"--file {tmp_path} is a directory: expected a file"
    assert (
        error(read_puzzles, task, "-", None, BinaryStdin(GARBAGE))
        == "stdin: not UTF-8 text (invalid byte 0xff at offset 1)"
    )
    board = "1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 0\n"
    assert len(read_puzzles(task, "-", None, BinaryStdin(board.encode()))) == 1
    assert len(read_puzzles(task, "-", None, io.StringIO(board))) == 1  # a stream without bytes below it


def test_compare_reads_a_damaged_log_as_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert (
        error(eval_curve, run)
        == f"{run / 'metrics.jsonl'} not found: {run} is not a run directory written by hrm train"
    )
    write_lines(run / "metrics.jsonl", GARBAGE)
    assert error(eval_curve, run).startswith(f"{run / 'metrics.jsonl'} line 1: not UTF-8 text")
    write_lines(
        run / "metrics.jsonl", '{"step": 4, "eval/exact_accuracy": 0.5, "step_seconds": 1, "train_flops": "many"}\n'
    )
    (point,) = eval_curve(run)
    assert point["step"] == 4 and point["eval/exact_accuracy"] == 0.5 and point["train_flops"] is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "locked.json"
    path.write_text("{}")
    path.chmod(0)
    try:
        assert error(read_json, path, "x") == f"{path}: cannot read it (Permission denied)"
        assert error(read_npy, path) == f"{path}: cannot read it (Permission denied)"
    finally:
        path.chmod(0o600)
