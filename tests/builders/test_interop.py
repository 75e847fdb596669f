"""Datasets of `hrm build-data` read by other implementations' loaders (issue 44 item 9; docs/data.md, "Other
implementations"). Each loader below is written here from what that implementation documents and reads, not imported
from it:

- the original HRM (sapientinc/HRM, `puzzle_dataset.py` and `dataset/common.py`): `<split>/dataset.json` validated by
  a pydantic model of its nine fields (extra keys ignored, pydantic's default), then `<set>__<field>.npy` for every set
  it lists, and `identifiers.json`;
- the original TRM (SamsungSAILMontreal/TinyRecursiveModels): the same files, with `total_puzzles` a required field,
  by which it weighs `mean_puzzle_examples` when it mixes datasets;
- nano-trm (olivkoch/nano-trm, `src/nn/data`): `train/`, `val/` and `test/`, each `all__{inputs,labels,
  puzzle_identifiers}.npy` and a dataset.json, the board side read as `grid_size`.

A dataset without the added keys or without val/ fails the second and third loaders: the test can fail."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest

from datasets_build import arc as A
from datasets_build import maze as M
from datasets_build import sudoku as S
from datasets_build.hrm_format import check_out
from hrm_reason.data.puzzle import load_split
from hrm_reason.errors import UserError


class HRMMetadata(pydantic.BaseModel):
    """The original HRM's PuzzleDatasetMetadata: nine fields, anything else ignored."""

    pad_id: int
    ignore_label_id: int | None
    blank_identifier_id: int
    vocab_size: int
    seq_len: int
    num_puzzle_identifiers: int
    total_groups: int
    mean_puzzle_examples: float
    sets: list[str]


class TRMMetadata(HRMMetadata):
    """TRM's: HRM's fields and total_puzzles, required."""

    total_puzzles: int


FIELDS = ("inputs", "labels", "puzzle_identifiers", "puzzle_indices", "group_indices")


def hrm_loader(root: Path, split: str, model: type[HRMMetadata] = HRMMetadata) -> tuple[HRMMetadata, dict[str, Any]]:
    """What the original code reads of one split: its metadata and every set's arrays (inputs and labels mapped)."""
    meta = model(**json.loads((root / split / "dataset.json").read_text()))
    sets = {
        name: {
            f: np.load(root / split / f"{name}__{f}.npy", mmap_mode="r" if f in ("inputs", "labels") else None)
            for f in FIELDS
        }
        for name in meta.sets
    }
    for arrays in sets.values():
        assert arrays["inputs"].shape == arrays["labels"].shape and arrays["inputs"].shape[1] == meta.seq_len
        assert arrays["puzzle_indices"][-1] == arrays["inputs"].shape[0]
        assert arrays["group_indices"][-1] == arrays["puzzle_identifiers"].size
        assert arrays["puzzle_identifiers"].max() < meta.num_puzzle_identifiers
    assert len(json.loads((root / "identifiers.json").read_text())) == meta.num_puzzle_identifiers
    return meta, sets


def trm_loader(root: Path, split: str) -> TRMMetadata:
    """TRM's reading of a split: total_puzzles required, and the examples it implies (mean_puzzle_examples times
    total_puzzles, the weight of a dataset in a mix) are the examples on disk."""
    meta, sets = hrm_loader(root, split, TRMMetadata)
    assert isinstance(meta, TRMMetadata)
    assert meta.total_puzzles == sum(a["puzzle_identifiers"].size for a in sets.values())
    examples = sum(a["inputs"].shape[0] for a in sets.values())
    assert meta.mean_puzzle_examples * meta.total_puzzles == pytest.approx(examples)
    return meta


def nano_trm_loader(root: Path) -> dict[str, dict[str, Any]]:
    """nano-trm's: three splits of `all__` arrays with their dataset.json; the board side is train's grid_size."""
    side = json.loads((root / "train" / "dataset.json").read_text())["grid_size"]
    splits = {}
    for split in ("train", "val", "test"):
        d = root / split
        metadata = json.loads((d / "dataset.json").read_text())
        arrays = {f: np.load(d / f"all__{f}.npy") for f in ("inputs", "labels", "puzzle_identifiers")}
        assert metadata["grid_size"] == side and arrays["inputs"].shape[1] == side * side
        assert arrays["labels"].shape == arrays["inputs"].shape
        splits[split] = {"metadata": metadata, **arrays}
    return splits


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("interop")
    common = {"source": "generate", "train_size": 12, "test_size": 5}
    return {
        "sudoku": S.build_sudoku(S.SudokuBuildOptions(out=root / "sudoku", box="2x3", num_aug=2, **common)),
        "maze": M.build_maze(M.MazeBuildOptions(out=root / "maze", size=6, aug=True, **common)),
        "arc": A.build_arc(
            A.ArcBuildOptions(
                out=root / "arc", version="1", num_aug=2, task_ids=["6ea4a07e"], max_grid_size=8, quiet=True
            )
        ),
    }


SIDES = {"sudoku": 6, "maze": 6, "arc": 8}


@pytest.mark.parametrize("task", SIDES)
def test_the_original_hrm_loader_reads_every_split_as_before(built: dict[str, Path], task: str) -> None:
    for split in ("train", "test"):
        meta, _ = hrm_loader(built[task], split)
        assert meta.seq_len == SIDES[task] ** 2
        ours = load_split(built[task], split)  # and ours, unchanged
        assert ours.metadata.seq_len == meta.seq_len


@pytest.mark.parametrize("task", SIDES)
def test_the_trm_loader_finds_total_puzzles(built: dict[str, Path], task: str) -> None:
    for split in ("train", "test", "val"):
        trm_loader(built[task], split)
    train = trm_loader(built[task], "train")
    if task != "arc":  # each augmented copy of a grid puzzle is a puzzle: 12 originals and 2 copies (maze: 8 each)
        assert train.total_puzzles == 12 * (3 if task == "sudoku" else 8)


@pytest.mark.parametrize("task", SIDES)
def test_the_nano_trm_loader_finds_val_and_grid_size(built: dict[str, Path], task: str) -> None:
    splits = nano_trm_loader(built[task])
    assert splits["train"]["metadata"]["grid_size"] == SIDES[task]
    for name in ("inputs", "labels", "puzzle_identifiers"):
        assert np.array_equal(splits["val"][name], splits["test"][name])  # val is the test split again
    val, test = built[task] / "val", built[task] / "test"
    assert sorted(p.name for p in val.iterdir()) == sorted(p.name for p in test.iterdir())
    # Hard links where the filesystem has them: no second copy of the test split on disk.
    assert all((val / p.name).stat().st_ino == p.stat().st_ino for p in test.iterdir())


def test_a_dataset_of_the_original_format_alone_fails_the_other_loaders(built: dict[str, Path], tmp_path: Path) -> None:
    """What the loaders above would meet before issue 44: no total_puzzles, no grid_size, no val/."""
    old = tmp_path / "old"
    shutil.copytree(built["sudoku"], old)
    shutil.rmtree(old / "val")
    for split in ("train", "test"):
        path = old / split / "dataset.json"
        meta = json.loads(path.read_text())
        path.write_text(json.dumps({k: v for k, v in meta.items() if k not in ("total_puzzles", "grid_size")}))
    hrm_loader(old, "train")
    with pytest.raises(pydantic.ValidationError, match="total_puzzles"):
        trm_loader(old, "train")
    with pytest.raises(KeyError, match="grid_size"):
        nano_trm_loader(old)
    # A dataset built before val/ existed is still the builder's own: --overwrite replaces it.
    check_out(old, True, "sudoku")
    with pytest.raises(UserError, match="already exists"):
        check_out(built["sudoku"], False, "sudoku")
    check_out(built["sudoku"], True, "sudoku")
