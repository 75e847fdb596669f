"""The original HRM on-disk puzzle format, shared by every builder.

Layout (reference: sapientinc/HRM `dataset/common.py`):
`<out>/{train,test}/dataset.json`, `<out>/{train,test}/<set>__{inputs,labels,puzzle_identifiers,puzzle_indices,
group_indices}.npy` and `<out>/identifiers.json`. Datasets written here load in the original code (which ignores the
extra `builder` record) and datasets written by the original code load here.

For the other implementations' loaders (docs/data.md, "Other implementations"), each dataset.json also holds
`total_puzzles` (the split's puzzles: the original TRM's loader requires it) and `grid_size` (the board's side:
nano-trm reads it), after the original fields, whose values and the .npy bytes stay those of the original format; and
`<out>/val/` is the test split again (nano-trm trains with a val split), as hard links to test/'s files.

Every write is deterministic: the same arrays and metadata give the same bytes, so a rebuild can be compared with `cmp`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hrm_reason.atomic import atomic_directory
from hrm_reason.data.puzzle import ARRAY_NAMES, PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.outputs import Output, Recognise, claim, folder_of, read_own_json


def dumps_json(obj: Any) -> str:
    """The one JSON spelling used for every file we write (stable key order as given, two-space indent, final
    newline)."""
    return json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _check_csr(name: str, offsets: np.ndarray, total: int) -> None:
    """CSR offsets must start at 0, never decrease and end at `total`; a builder bug here would corrupt training."""
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != total or np.any(np.diff(offsets) < 0):
        raise ValueError(f"{name}: expected non-decreasing CSR offsets from 0 to {total}, got shape {offsets.shape}")


def open_example_arrays(
    split_dir: str | Path, set_name: str, num_examples: int, seq_len: int, dtype: Any = np.uint8
) -> tuple[np.memmap, np.memmap]:
    """Pre-sized `inputs` and `labels` files of one set, memory-mapped for writing.

    For builders whose examples do not fit in memory (ARC with 1000 augmentations: ~3M examples, ~6 GB): fill them in
    place, then pass them to `write_split`. The bytes are those `np.save` would write.
    """
    split_dir = Path(split_dir)
    split_dir.mkdir(parents=True, exist_ok=True)
    return tuple(  # type: ignore[return-value]
        np.lib.format.open_memmap(
            split_dir / f"{set_name}__{name}.npy", mode="w+", dtype=dtype, shape=(num_examples, seq_len)
        )
        for name in ("inputs", "labels")
    )


def _filled_in_place(arr: np.ndarray, path: Path) -> bool:
    if isinstance(arr, np.memmap) and arr.filename is not None and Path(arr.filename).resolve() == path.resolve():
        arr.flush()
        return True
    return False


def write_split(
    split_dir: str | Path,
    set_name: str,
    inputs: np.ndarray,
    labels: np.ndarray,
    puzzle_identifiers: np.ndarray,
    puzzle_indices: np.ndarray,
    group_indices: np.ndarray,
    metadata: PuzzleDatasetMetadata,
) -> Path:
    """Write one set of one split plus the split's `dataset.json`; returns `split_dir`.

    `inputs`/`labels` keep their integer dtype (the original builders write uint8 grids; readers cast to int32);
    identifiers and CSR offsets are written as int32 like the original. `inputs`/`labels` obtained from
    `open_example_arrays` for this split and set are already in place: they are flushed, not written again.
    """
    split_dir = Path(split_dir)
    in_place = {
        name: _filled_in_place(arr, split_dir / f"{set_name}__{name}.npy")
        for name, arr in (("inputs", inputs), ("labels", labels))
    }
    inputs, labels = np.ascontiguousarray(inputs), np.ascontiguousarray(labels)
    if inputs.ndim != 2 or inputs.shape[1] != metadata.seq_len:
        raise ValueError(f"inputs: expected shape [N, {metadata.seq_len}], got {inputs.shape}")
    if labels.shape != inputs.shape:
        raise ValueError(f"labels: shape {labels.shape} differs from inputs {inputs.shape}")
    if not (np.issubdtype(inputs.dtype, np.integer) and np.issubdtype(labels.dtype, np.integer)):
        raise ValueError("inputs and labels must be integer arrays")
    if set_name not in metadata.sets:
        raise ValueError(f"set {set_name!r} is not listed in metadata.sets {metadata.sets}")
    arrays = {
        "inputs": inputs,
        "labels": labels,
        "puzzle_identifiers": np.ascontiguousarray(puzzle_identifiers, dtype=np.int32),
        "puzzle_indices": np.ascontiguousarray(puzzle_indices, dtype=np.int32),
        "group_indices": np.ascontiguousarray(group_indices, dtype=np.int32),
    }
    _check_csr("puzzle_indices", arrays["puzzle_indices"], inputs.shape[0])
    _check_csr("group_indices", arrays["group_indices"], arrays["puzzle_identifiers"].size)
    if arrays["puzzle_indices"].size != arrays["puzzle_identifiers"].size + 1:
        raise ValueError("puzzle_indices must have one entry more than puzzle_identifiers")

    split_dir.mkdir(parents=True, exist_ok=True)
    for name in ARRAY_NAMES:
        path = split_dir / f"{set_name}__{name}.npy"
        if in_place.get(name):
            continue  # filled in place through open_example_arrays; flushed above
        with open(path, "wb") as f:
            np.save(f, arrays[name], allow_pickle=False)
    meta = metadata.model_dump()
    builder = meta.pop("builder", None)  # last, and only when there is one: no `"builder": null`
    meta |= interop_fields(metadata.seq_len, arrays["puzzle_identifiers"].size)
    if builder is not None:
        meta["builder"] = builder
    (split_dir / "dataset.json").write_text(dumps_json(meta), encoding="utf-8")
    return split_dir


def interop_fields(seq_len: int, puzzles: int) -> dict[str, int]:
    """The dataset.json keys other implementations' loaders need beyond the original HRM's: `total_puzzles`, the
    split's puzzles (TRM's PuzzleDatasetMetadata requires it, and weighs mean_puzzle_examples by it), and `grid_size`,
    the side of the square board the sequence is (nano-trm reads it)."""
    fields = {"total_puzzles": int(puzzles)}
    side = math.isqrt(seq_len)
    if side * side == seq_len:
        fields["grid_size"] = side
    return fields


VAL_SPLIT = "val"


def write_val_split(out: Path) -> Path:
    """`<out>/val/`: the test split again, file for file, for loaders that want train, val and test (nano-trm). Hard
    links (no second copy on disk); a copy where the filesystem has none. Our commands read train and test only."""
    val = Path(out) / VAL_SPLIT
    val.mkdir()
    for path in sorted((Path(out) / "test").iterdir()):
        try:
            os.link(path, val / path.name)
        except OSError:
            shutil.copyfile(path, val / path.name)
    return val


def write_identifiers(out_dir: str | Path, names: Sequence[str]) -> Path:
    """`identifiers.json`: the puzzle-identifier names indexed by id, "<blank>" at 0 (Sudoku/Maze write only that)."""
    names = list(names)
    if not names or names[0] != "<blank>":
        raise ValueError("identifiers must start with '<blank>' (identifier 0)")
    path = Path(out_dir) / "identifiers.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps_json(names), encoding="utf-8")
    return path


def write_grid_split(
    split_dir: Path, inputs: np.ndarray, labels: np.ndarray, groups: int, vocab_size: int, builder: dict[str, Any]
) -> None:
    """The Sudoku and maze layout: one set "all", every example its own puzzle (identifier 0, the blank), and `groups`
    groups of equal size, each an original puzzle followed by its augmentations."""
    per = inputs.shape[0] // groups if groups else 1
    meta = PuzzleDatasetMetadata(
        pad_id=0,
        ignore_label_id=0,
        blank_identifier_id=0,
        vocab_size=vocab_size,
        seq_len=inputs.shape[1],
        num_puzzle_identifiers=1,
        total_groups=groups,
        mean_puzzle_examples=1.0,
        sets=["all"],
        builder=builder,
    )
    write_split(
        split_dir,
        "all",
        inputs,
        labels,
        puzzle_identifiers=np.zeros(inputs.shape[0], dtype=np.int32),
        puzzle_indices=np.arange(inputs.shape[0] + 1, dtype=np.int32),
        group_indices=np.arange(0, inputs.shape[0] + 1, per, dtype=np.int32),
        metadata=meta,
    )


# What each builder writes at the top of its --out: a folder holding anything else is not its dataset.
DATASET_ENTRIES = {
    "sudoku": ("train", "test", VAL_SPLIT, "identifiers.json"),
    "maze": ("train", "test", VAL_SPLIT, "identifiers.json"),
    "arc": ("train", "test", VAL_SPLIT, "identifiers.json", "test_tasks"),
    "text": ("dataset.json", "documents.json", "train", "val", "tokenizer.json"),
    "file": ("train", "test", VAL_SPLIT, "identifiers.json", "check.py", "test_examples.jsonl"),
}


def _dataset_record(builder: str) -> Recognise:
    """The builder's own dataset: each split's dataset.json (one for text) records `builder` as its builder's name."""
    records = ["dataset.json"] if builder == "text" else ["train/dataset.json", "test/dataset.json"]

    def recognise(out: Path) -> str | None:
        for name in records:
            meta = read_own_json(out / name)
            record = meta.get("builder") if isinstance(meta, dict) else None
            if not isinstance(record, dict) or not _of_builder(record, builder):
                return f"no {name} of hrm build-data {builder}"
        return None

    return recognise


def _of_builder(record: dict[str, Any], builder: str) -> bool:
    """A builder record written by `builder`; `hrm build-data file` names the record after its task (a user's own
    included) and is known by its declaration."""
    return "declaration" in record if builder == "file" else record.get("name") == builder


def dataset_output(builder: str) -> Output:
    """--out of `hrm build-data BUILDER`: a dataset that builder wrote may be replaced (with --overwrite)."""
    article = "an" if builder[0] in "aeiou" else "a"  # "an arc dataset"
    recognise = folder_of(DATASET_ENTRIES[builder], f"{article} {builder} dataset", _dataset_record(builder))
    return Output("--out", f"hrm build-data {builder}", recognise, folder=True)


def check_out(out: Path, overwrite: bool, builder: str) -> None:
    """Before any long download or generation: `out` is new, or a dataset this builder wrote (replaced only with
    --overwrite); anything else (a run, another builder's dataset, a user's folder or file) is refused whatever
    --overwrite says, since replacing it would delete what the builder never wrote. Its folder must take a new file."""
    claim(out, dataset_output(builder))
    if out.exists() and not overwrite:
        raise UserError(f"--out {out}: already exists; pass --overwrite to replace it")


def record_head(
    name: str, version: str, split: str, source: str, detail: dict[str, Any], options: dict[str, Any], seed: int
) -> dict[str, Any]:
    """The first keys of every grid builder's `builder` record, in the order they are written."""
    return {
        "name": name,
        "version": version,
        "split": split,
        "source": source,
        "source_detail": detail,
        "options": options,
        "seed": seed,
    }


def solution_class_counts(train_keys: Iterable[bytes], test_keys: Sequence[bytes]) -> dict[str, int]:
    """What the held-out split holds at the level of solutions (docs/data.md, "Held-out splits"), from one solution-class
    key per original of each split (the canonical form of its solution under the task's symmetry group): the distinct
    classes of each split, the test classes that also occur in train, and the test originals whose class does."""
    train = set(train_keys)
    test = set(test_keys)
    return {
        "train_solution_classes": len(train),
        "test_solution_classes": len(test),
        "test_solution_classes_in_train": len(test & train),
        "test_puzzles_with_solution_class_in_train": sum(k in train for k in test_keys),
    }


def write_grid_dataset(
    out: Path, overwrite: bool, vocab_size: int, splits: dict[str, tuple[np.ndarray, np.ndarray, int, dict[str, Any]]]
) -> Path:
    """Write a Sudoku/maze dataset atomically (all or nothing): per split (inputs, labels, groups, builder record) in
    the layout of `write_grid_split`, then identifiers.json with the blank identifier only, and val/ (the test split
    again, `write_val_split`)."""
    with atomic_directory(out, overwrite=overwrite) as tmp:
        for split, (inputs, labels, groups, record) in splits.items():
            write_grid_split(tmp / split, inputs, labels, groups, vocab_size, record)
        write_identifiers(tmp, ["<blank>"])
        write_val_split(tmp)
    return out
