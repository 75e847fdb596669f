"""Held-out splits that say what they hold (docs/data.md, "Held-out splits"): the solution-class counts a generated
Sudoku or maze build records match a brute-force recount; `--strict-split solution` leaves no test solution class in
train, or stops with an error naming the flag; the default split writes the bytes it wrote before the flag existed.

Recounts use independent code: `sudoku_class` (tests/builders/test_ladder.py) takes the smallest image of a grid over
the whole Sudoku group, enumerated explicitly, and mazes are compared through numpy's named rotations and flips.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from datasets_build import maze as M
from datasets_build import sudoku as S
from hrm_reason.errors import UserError
from tests.builders.test_ladder import hrm, sudoku_class
from tests.helpers import DIHEDRAL_REFERENCE

KEYS = (
    "train_solution_classes",
    "test_solution_classes",
    "test_solution_classes_in_train",
    "test_puzzles_with_solution_class_in_train",
)
S_KINDS = ("puzzle", "solution")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRM_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def builder(out: Path, split: str) -> dict[str, Any]:
    return json.loads((out / split / "dataset.json").read_text())["builder"]


def grids(out: Path, split: str, name: str) -> np.ndarray:
    return np.load(out / split / f"all__{name}.npy")


def recount(classes: dict[str, list[bytes]]) -> dict[str, int]:
    """The four counts from one class per original of each split, spelled out."""
    train, test = set(classes["train"]), set(classes["test"])
    return dict(
        zip(KEYS, (len(train), len(test), len(train & test), sum(k in train for k in classes["test"])), strict=True)
    )


def sudoku_solution_classes(out: Path, r: int, c: int) -> dict[str, list[bytes]]:
    """The class of each original's solution (the first example of each group; tokens are value + 1)."""
    classes = {}
    for split in ("train", "test"):
        labels = grids(out, split, "labels")
        originals = labels[np.load(out / split / "all__group_indices.npy")[:-1]]
        classes[split] = [sudoku_class(y.astype(int) - 1, r, c) for y in originals]
    return classes


def maze_class(grid: np.ndarray) -> bytes:
    return min(np.ascontiguousarray(f(grid)).tobytes() for f in DIHEDRAL_REFERENCE)


# ------------------------------------------------------------------------------------------------------- Sudoku


@pytest.mark.parametrize(
    "kw",
    [
        {"box": "2x2", "train_size": 60, "test_size": 20, "subsample_size": 30, "num_aug": 2, "seed": 3},
        {"box": "2x3", "min_givens": 20, "train_size": 40, "test_size": 30, "seed": 0},
    ],
    ids=["4x4", "6x6"],
)
def test_sudoku_solution_class_counts_match_a_brute_force_recount(tmp_path: Path, kw: dict[str, Any]) -> None:
    out = S.build_sudoku(S.SudokuBuildOptions(out=tmp_path / "ds", source="generate", **kw))
    r, c = S.BOXES[kw["box"]]
    want = recount(sudoku_solution_classes(out, r, c))
    for split in ("train", "test"):
        b = builder(out, split)
        assert {k: b["counts"][k] for k in KEYS} == want
        assert b["strict_split"] == b["options"]["strict_split"] == "puzzle"
    # the default split is strict on puzzles only: test solutions do recur in train, which is what is counted
    assert want["test_puzzles_with_solution_class_in_train"] > 0


def test_strict_solution_split_shares_no_solution_class(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    hrm(
        *("build-data", "sudoku", "--source", "generate", "--box", "2x3", "--min-givens", "20"),
        *("--train-size", "40", "--test-size", "30", "--seed", "0", "--strict-split", "solution", "--out", str(out)),
    )
    solutions = sudoku_solution_classes(out, 2, 3)
    want = recount(solutions)
    assert want["test_solution_classes_in_train"] == want["test_puzzles_with_solution_class_in_train"] == 0
    assert want["test_solution_classes"] > 1
    puzzles = {s: {sudoku_class(p.astype(int) - 1, 2, 3) for p in grids(out, s, "inputs")} for s in ("train", "test")}
    assert not puzzles["train"] & puzzles["test"]  # strict on puzzles as well
    for split, size in (("train", 40), ("test", 30)):
        b = builder(out, split)
        assert {k: b["counts"][k] for k in KEYS} == want
        assert b["strict_split"] == b["options"]["strict_split"] == "solution"
        assert b["counts"]["originals"] == size and b["counts"][f"{split}_classes"] == len(puzzles[split])


def test_too_few_solution_classes_is_an_error_naming_the_flag(tmp_path: Path) -> None:
    """4x4 grids fall in 2 solution classes; at this seed both go to test first, so train cannot be filled."""
    opts = {"out": tmp_path / "ds", "source": "generate", "box": "2x2", "train_size": 10, "test_size": 10, "seed": 1}
    S.build_sudoku(S.SudokuBuildOptions(**opts))  # a puzzle-strict split has room
    with pytest.raises(UserError, match=r"^--strict-split solution: .* 0 train and 10 test 4x4 puzzles") as err:
        S.build_sudoku(S.SudokuBuildOptions(**opts, strict_split="solution", overwrite=True))
    assert "\n" not in str(err.value)
    assert not any(p.name.startswith(".ds.") for p in tmp_path.iterdir())  # the earlier build is left as it was
    with pytest.raises(UserError, match=r"^--strict-split solution: only generated puzzles"):
        S.build_sudoku(
            S.SudokuBuildOptions(out=tmp_path / "c", source="csv", csv_dir=tmp_path, strict_split="solution")
        )


# --------------------------------------------------------------------------------------------------------- maze


def test_maze_solution_counts_and_both_split_kinds(tmp_path: Path) -> None:
    """A maze's solution holds the maze, so a maze-strict split is solution-strict: both kinds write the same arrays."""
    kw = {"source": "generate", "size": 5, "min_path": 4, "train_size": 60, "test_size": 20, "seed": 2}
    outs = {kind: M.build_maze(M.MazeBuildOptions(out=tmp_path / kind, strict_split=kind, **kw)) for kind in S_KINDS}
    for kind, out in outs.items():
        want = recount({s: [maze_class(y.reshape(5, 5)) for y in grids(out, s, "labels")] for s in ("train", "test")})
        assert want == dict(zip(KEYS, (60, 20, 0, 0), strict=True))
        for split in ("train", "test"):
            b = builder(out, split)
            assert {k: b["counts"][k] for k in KEYS} == want and b["strict_split"] == kind
    for rel in ("train/all__inputs.npy", "train/all__labels.npy", "test/all__inputs.npy", "test/all__labels.npy"):
        assert (outs["puzzle"] / rel).read_bytes() == (outs["solution"] / rel).read_bytes()
    with pytest.raises(UserError, match=r"^--strict-split solution: only generated mazes"):
        M.build_maze(M.MazeBuildOptions(out=tmp_path / "c", source="csv", csv_dir=tmp_path, strict_split="solution"))


# ----------------------------------------------------------------------------------------------- byte identity

# SHA-256 of every file of the original format (dataset.json without the keys we add to it: our `builder` record,
# and `total_puzzles` and `grid_size` for the other implementations' loaders), written by the builders before
# --strict-split existed (commit fb43149). A change here is a change of the default datasets, also when it comes from
# numpy's random streams. The val/ split (the test split again, for nano-trm) is no part of the original format: it is
# checked to be test/'s bytes.
BEFORE = {
    "sudoku6x6": (
        lambda out: S.build_sudoku(
            S.SudokuBuildOptions(
                out=out, source="generate", box="2x3", min_givens=20, train_size=40, test_size=30, seed=0
            )
        ),
        {
            "identifiers.json": "e8bb2eeafecf5c72",
            "test/all__group_indices.npy": "bc5ff5ae502a141b",
            "test/all__inputs.npy": "d60e327369011e25",
            "test/all__labels.npy": "5e64ce76a909de0c",
            "test/all__puzzle_identifiers.npy": "133912fa93769c8f",
            "test/all__puzzle_indices.npy": "bc5ff5ae502a141b",
            "test/dataset.json": "1103e0c38f2f44a5",
            "train/all__group_indices.npy": "1652a65162ad39fd",
            "train/all__inputs.npy": "8978461a5aab7491",
            "train/all__labels.npy": "3659147ab5bf37ae",
            "train/all__puzzle_identifiers.npy": "491eda339bbb8390",
            "train/all__puzzle_indices.npy": "1652a65162ad39fd",
            "train/dataset.json": "db38df801243b672",
        },
    ),
    "sudoku4x4": (
        lambda out: S.build_sudoku(
            S.SudokuBuildOptions(
                out=out, source="generate", box="2x2", train_size=60, test_size=20, subsample_size=30, num_aug=2, seed=3
            )
        ),
        {
            "identifiers.json": "e8bb2eeafecf5c72",
            "test/all__group_indices.npy": "24d225f2371f4371",
            "test/all__inputs.npy": "1c50ffaf9410250c",
            "test/all__labels.npy": "a15974443f754eb0",
            "test/all__puzzle_identifiers.npy": "82d817028bfb111b",
            "test/all__puzzle_indices.npy": "24d225f2371f4371",
            "test/dataset.json": "3db43fe79a13384d",
            "train/all__group_indices.npy": "2ddb959c35cb41e6",
            "train/all__inputs.npy": "e6f573860e2ef97b",
            "train/all__labels.npy": "3da3db7ebc2c6092",
            "train/all__puzzle_identifiers.npy": "84d55973fd8124eb",
            "train/all__puzzle_indices.npy": "bea748c8fd1749e9",
            "train/dataset.json": "e4ce4d0a1cfe7afa",
        },
    ),
    "maze": (
        lambda out: M.build_maze(
            M.MazeBuildOptions(out=out, source="generate", size=6, train_size=30, test_size=20, aug=True, seed=0)
        ),
        {
            "identifiers.json": "e8bb2eeafecf5c72",
            "test/all__group_indices.npy": "24d225f2371f4371",
            "test/all__inputs.npy": "a4c44d7e525d68eb",
            "test/all__labels.npy": "76c5e811197cc5d7",
            "test/all__puzzle_identifiers.npy": "82d817028bfb111b",
            "test/all__puzzle_indices.npy": "24d225f2371f4371",
            "test/dataset.json": "e5bcc7d7c1b1b73a",
            "train/all__group_indices.npy": "450ded47778a2292",
            "train/all__inputs.npy": "dff921331c882e1b",
            "train/all__labels.npy": "b0517a5d0f5e6f8a",
            "train/all__puzzle_identifiers.npy": "3183290370014eb4",
            "train/all__puzzle_indices.npy": "e5084419908bc894",
            "train/dataset.json": "eee2543383615975",
        },
    ),
}


ADDED_KEYS = ("total_puzzles", "grid_size", "builder")


def original_format_hashes(out: Path) -> dict[str, str]:
    hashes = {}
    for p in sorted(out.rglob("*")):
        if p.is_file() and p.parts[len(out.parts)] != "val":
            data = p.read_bytes()
            if p.name == "dataset.json":
                meta = json.loads(data)
                assert list(meta)[-len(ADDED_KEYS) :] == list(ADDED_KEYS)  # after the original fields
                for key in ADDED_KEYS:
                    meta.pop(key)
                data = json.dumps(meta, sort_keys=True).encode()
            hashes[str(p.relative_to(out))] = hashlib.sha256(data).hexdigest()[:16]
    test = sorted(p.name for p in (out / "test").iterdir())
    assert sorted(p.name for p in (out / "val").iterdir()) == test
    assert all((out / "val" / n).read_bytes() == (out / "test" / n).read_bytes() for n in test)
    return hashes


@pytest.mark.parametrize("name", BEFORE)
def test_default_split_writes_the_bytes_it_wrote_before(tmp_path: Path, name: str) -> None:
    build, before = BEFORE[name]
    assert original_format_hashes(build(tmp_path / name)) == before
