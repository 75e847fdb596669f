"""The task formats (hrm_reason/tasks/): one direction between the packages, and every augmentation undone by its
inverse.

The per-task tests use only the task modules (no builder, no dataset on disk), so they run in well under a second.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from hrm_reason.tasks import arc, maze, sudoku
from hrm_reason.tasks.dihedral import DIHEDRAL_INVERSE, dihedral_transform, inverse_dihedral_transform
from tests.helpers import DIHEDRAL_REFERENCE
from tests.reference import augment_grid

PACKAGE = Path(__file__).resolve().parents[2] / "hrm_reason"


def _imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.append(node.module)
    return names


def test_no_module_of_hrm_reason_imports_datasets_build() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 30  # the scan sees the package, not an empty folder
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path in files
        for name in _imported_modules(path)
        if name == "datasets_build" or name.startswith("datasets_build.")
    ]
    assert offenders == []


def test_the_scan_finds_an_import_of_datasets_build(tmp_path: Path) -> None:
    """The check above can fail: both import spellings, also inside a function, are seen."""
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n\ndef f():\n    from datasets_build.arc import build_arc\n    import datasets_build.maze\n"
    )
    assert _imported_modules(module) == ["os", "datasets_build.arc", "datasets_build.maze"]


# ---------------------------------------------------------------------------------------------- dihedral / maze


@pytest.mark.parametrize("t", range(8))
def test_dihedral_transform_then_inverse_is_identity(t: int) -> None:
    grids = np.random.default_rng(t).integers(0, 6, size=(3, 4, 7)).astype(np.uint8)  # a batch, not square
    assert np.array_equal(inverse_dihedral_transform(dihedral_transform(grids, t), t), grids)
    assert np.array_equal(dihedral_transform(inverse_dihedral_transform(grids, t), t), grids)
    assert dihedral_transform(dihedral_transform(grids, t), DIHEDRAL_INVERSE[t]).shape == grids.shape


def test_dihedral_transforms_are_the_eight_symmetries_numbered_as_the_original() -> None:
    g = np.arange(12).reshape(3, 4)
    for t, reference in enumerate(DIHEDRAL_REFERENCE):
        assert np.array_equal(dihedral_transform(g, t), reference(g))
    with pytest.raises(ValueError, match="0..7"):
        dihedral_transform(g, 8)


def test_maze_augmentation_then_inverse_is_identity_and_keeps_the_rules() -> None:
    """A maze and its labelled path, under each of the 8 transforms and back; the rules hold in every image."""
    rows = ["#S  #", "# # #", "#  G#"]
    given = maze.TOKEN_OF[np.frombuffer("".join(rows).encode(), dtype=np.uint8)].reshape(3, 5)
    label = given.copy()
    label[0, 2] = label[0, 3] = label[1, 3] = maze.PATH  # S (0, 1) -> (0, 2) -> (0, 3) -> (1, 3) -> G (2, 3)
    assert not maze.rule_violations(label, given).any()
    broken = label.copy()
    broken[0, 3] = maze.OPEN
    assert maze.rule_violations(broken, given).any()  # the check can fail
    for t in range(8):
        x, y = dihedral_transform(given, t), dihedral_transform(label, t)
        assert not maze.rule_violations(y, x).any()
        assert np.array_equal(inverse_dihedral_transform(x, t), given)
        assert np.array_equal(inverse_dihedral_transform(y, t), label)


# ------------------------------------------------------------------------------------------------------- sudoku


@pytest.mark.parametrize("box", ["2x2", "2x3", "3x3"])
def test_sudoku_augmentation_then_inverse_is_identity(box: str) -> None:
    r, c = sudoku.BOXES[box]
    n = r * c
    rng = np.random.default_rng(n)
    grids = rng.integers(0, n + 1, size=(64, n, n)).astype(np.uint8)  # any cell values 0..n, blanks included
    tf = sudoku.random_transforms(rng, r, c, len(grids))
    assert (tf.transpose.any() and not tf.transpose.all()) if r == c else not tf.transpose.any()
    moved = sudoku.apply_transforms(grids, tf)
    assert not np.array_equal(moved, grids)
    inv = sudoku.inverse_transforms(tf)
    assert np.array_equal(sudoku.apply_transforms(moved, inv), grids)
    assert np.array_equal(sudoku.apply_transforms(sudoku.apply_transforms(grids, inv), tf), grids)


def test_sudoku_augmentation_keeps_a_solution_valid_and_its_tokens_in_the_layout() -> None:
    r, c = 2, 3
    base = np.array([[(c * (i % r) + i // r + j) % 6 + 1 for j in range(6)] for i in range(6)], dtype=np.uint8)
    assert sudoku.is_valid_solution(base, r, c)
    tf = sudoku.random_transforms(np.random.default_rng(0), r, c, 16)
    for g in sudoku.apply_transforms(base, tf):
        assert sudoku.is_valid_solution(g, r, c)
        tokens = sudoku.to_tokens(g)
        assert tokens.min() >= 2 and tokens.max() < sudoku.vocab_size(6)
        assert not sudoku.rule_violations(tokens, np.full_like(tokens, sudoku.BLANK), (r, c)).any()


# ---------------------------------------------------------------------------------------------------------- ARC


def test_arc_augmentation_then_inverse_is_identity_and_names_round_trip() -> None:
    rng = np.random.default_rng(3)
    grid = rng.integers(0, 10, size=(4, 7)).astype(np.uint8)
    for t in range(8):
        colours = np.concatenate([[0], rng.permutation(np.arange(1, 10))]).astype(np.uint8)
        augmented = augment_grid(grid, t, colours)
        assert np.array_equal(arc.inverse_augment(augmented, t, np.argsort(colours)), grid)
        task, t2, colours2 = arc.parse_identifier(arc.augmentation_name("007bbfb7", t, colours))
        assert (task, t2) == ("007bbfb7", t) and np.array_equal(colours2, colours)
    assert arc.parse_identifier("007bbfb7")[1:2] == (0,)


def test_arc_crop_undoes_the_canvas_encoding() -> None:
    grid = np.random.default_rng(4).integers(0, 10, size=(5, 3)).astype(np.uint8)
    out = np.zeros((2, 2), dtype=np.uint8)
    for t in range(8):
        inputs, labels = arc.encode_pairs([(grid, out)], [(t, arc.IDENTITY_COLOURS)], 8, None)
        assert np.array_equal(arc.crop(inputs[0].reshape(8, 8)), dihedral_transform(grid, t))
        assert np.array_equal(arc.crop(labels[0].reshape(8, 8)), out)


def test_the_build_options_restate_the_tasks_limits() -> None:
    """datasets_build/options.py restates two limits so that `hrm --help` does not import the task modules (torch):
    they must stay the tasks' own."""
    from datasets_build import options
    from hrm_reason.tasks import arc, maze

    assert (options.ARC_MAX_GRID, options.MAZE_MAX_SIDE) == (arc.MAX_SIZE, maze.MAX_SIDE)
