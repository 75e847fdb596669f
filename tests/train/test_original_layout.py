"""Datasets the original HRM scripts wrote (no builder record) under the default config (issue #32): `augment=symmetry`
takes the task from the layout and data (docs/data.md, "Datasets of the original scripts"), or trains without
augmentation on the fly, saying so in one line; `hrm train --data DIR` and `hrm eval` then need no other option."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hrm_reason.data.puzzle import PuzzleDatasetMetadata, PuzzleSet, PuzzleSplit, load_split
from hrm_reason.tasks.augment import DihedralSymmetry, SudokuSymmetry, train_augmentation
from hrm_reason.tasks.sudoku import is_valid_solution
from tests.helpers import hrm_in_process, write_original_layout


def stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_default_config_trains_and_evaluates_a_dataset_of_the_original_scripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acceptance of issue #32: the quickstart config (augment: symmetry) on a 4x4 Sudoku without a builder
    record, then its evaluation, each with no option but the paths, the step cap and the device (pinned: the suite's
    device guard, tests/conftest.py, refuses `auto`)."""
    data = write_original_layout(tmp_path / "sudoku4")
    run = tmp_path / "run"
    args = ["--data", str(data), "--run-dir", str(run), "max_steps=5", "device=cpu"]
    code, err = hrm_in_process(capsys, monkeypatch, "train", *args)
    assert code == 0, err
    assert "no --config given" in err and "augment=symmetry: Sudoku 4x4 symmetries (2x2 boxes" in err
    config = (run / "config.yaml").read_text()
    assert "augment: symmetry" in config and "max_steps: 5" in config
    out = tmp_path / "eval.json"
    args = ["--run", str(run), "--mmax", "4", "--device", "cpu", "--json", str(out)]
    code, err = hrm_in_process(capsys, monkeypatch, "eval", *args)
    assert code == 0, err
    assert len(json.loads(out.read_text())["exact_accuracy"]) == 4  # one per segment


def test_a_sudoku_without_builder_record_draws_sudokus_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = load_split(write_original_layout(tmp_path / "sudoku4"), "train")
    augment = train_augmentation("symmetry", split)
    assert isinstance(augment, SudokuSymmetry) and (augment.transforms.r, augment.transforms.c) == (2, 2)
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and str(split.path / "dataset.json") in lines[0], lines
    s = split.sets["all"]
    q, a = augment(np.random.default_rng(0), np.asarray(s.inputs[:8]), np.asarray(s.labels[:8]), slice(0, 8), 8)
    assert not np.array_equal(a, s.labels[:8])  # drawn, and still solved boards with their givens
    assert all(is_valid_solution(row.reshape(4, 4) - 1, 2, 2) for row in a)
    assert ((q == 1) | (q == a)).all()


def test_a_sudoku_shaped_dataset_whose_labels_are_not_solved_boards_trains_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shapes alone do not decide: relabelling digits of something that is not a Sudoku would corrupt its labels."""
    root = write_original_layout(tmp_path / "sudoku4")
    labels = np.load(root / "train" / "all__labels.npy")
    labels[0, [0, 1]] = labels[0, [1, 0]]  # two cells of one row swapped: no longer solved
    np.save(root / "train" / "all__labels.npy", labels)
    assert train_augmentation("symmetry", load_split(root, "train")) is None
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("warning: augment=symmetry: "), lines
    assert "no builder record" in lines[0] and "training without augmentation on the fly" in lines[0]


def test_a_maze_without_builder_record_draws_the_dihedral_maps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from datasets_build.maze import MazeBuildOptions, build_maze

    root = build_maze(MazeBuildOptions(out=tmp_path / "m", source="generate", size=6, train_size=16, test_size=4))
    meta = json.loads((root / "train" / "dataset.json").read_text())
    del meta["builder"]  # as the original maze script writes it
    (root / "train" / "dataset.json").write_text(json.dumps(meta))
    capsys.readouterr()  # the builder's progress
    augment = train_augmentation("symmetry", load_split(root, "train"))
    assert isinstance(augment, DihedralSymmetry) and augment.side == 6 and not augment.relabel  # labels mapped
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and "maze's 8 dihedral maps" in lines[0], lines


def test_an_arc_layout_without_builder_record_trains_without_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = np.zeros((2, 900), dtype=np.int32)
    rows[:, :3] = 5
    one = np.array([0, 1], dtype=np.int32)
    split = PuzzleSplit(
        tmp_path / "train",
        PuzzleDatasetMetadata.of_shape(900, 12),
        {"all": PuzzleSet(rows, rows.copy(), one[:1], np.array([0, 2], dtype=np.int32), one)},
    )
    assert train_augmentation("symmetry", split) is None
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("warning: augment=symmetry: "), lines
    assert "ARC's 30x30 layout" in lines[0] and str(tmp_path / "train" / "dataset.json") in lines[0]
