"""One `Task` per benchmark (tasks/base.py): the one place that picks a dataset's task (`task_of`), what each task
answers for the layers above it, and the two scans that keep it so: no module outside hrm_reason/tasks asks which
task it is, and the builders hold no solver or search of their own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.tasks import shape_task, task_class, task_classes, task_of
from hrm_reason.tasks.arc import ArcTask
from hrm_reason.tasks.maze import MazeTask
from hrm_reason.tasks.sudoku import SudokuTask

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"sudoku", "maze", "arc"}


def meta(seq_len: int, vocab: int, builder: dict | None = None) -> PuzzleDatasetMetadata:
    return PuzzleDatasetMetadata.of_shape(seq_len, vocab, builder=builder)


def test_the_builder_record_names_the_task_and_the_shapes_decide_without_one() -> None:
    assert task_of(meta(36, 8, {"name": "sudoku", "box": "3x2"}), "x") == SudokuTask(3, 2)
    assert task_of(meta(36, 8), "x") == SudokuTask(2, 3)  # no record: the usual boxes of the side
    assert task_of(meta(16, 6, {"name": "maze"}), "x") == MazeTask(4)  # the record decides a 4x4 maze
    assert task_of(meta(16, 6), "x") == SudokuTask(2, 2)  # without one a 4x4 board of 6 tokens is a Sudoku
    assert task_of(meta(900, 6), "x") == MazeTask(30)
    assert task_of(meta(900, 12, {"name": "arc", "grid_size": 30}), "x") == ArcTask(30)
    assert task_of(meta(49, 20), "x") is None and shape_task(meta(81, 40), "x") is None
    assert task_of(meta(81, 11, {"name": "chess"}), "x") is None
    assert task_of(meta(900, 6, {"name": "maze", "source": "generate"}), "x").relabel  # generated labels: the rule
    with pytest.raises(UserError, match="^d/dataset.json: a Sudoku dataset"):
        task_of(meta(81, 12, {"name": "sudoku"}), "d/dataset.json")
    assert [cls.kind for cls in task_classes()] == ["sudoku", "maze", "arc"] and task_class("maze") is MazeTask


@pytest.mark.parametrize("task", [SudokuTask(2, 3), MazeTask(7), ArcTask(10)], ids=lambda t: t.kind)
def test_every_task_answers_what_the_layers_above_ask(task) -> None:
    n = {"sudoku": 36, "maze": 49, "arc": 100}[task.kind]
    tokens = np.ones(n, dtype=np.int64)
    assert task.rule_violations(tokens, tokens).shape == (n,)
    assert task.transforms.group_size > 1 and task.describe() and task.symmetry_name
    look = task.look
    assert len(look.panel_inches) == 2 and look.legend and look.puzzle_legend
    assert (task.metric_name is not None) == (task.kind != "sudoku")
    assert task.on_the_fly == (task.kind != "arc")


def _names_a_task(node: ast.AST) -> bool:
    """A comparison with a task's name, a `.startswith` of one, or a table keyed by them."""
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        return any(isinstance(s, ast.Constant) and s.value in KINDS for s in sides)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
        return any(isinstance(a, ast.Constant) and a.value in KINDS for a in node.args)
    if isinstance(node, ast.Dict):
        return sum(isinstance(k, ast.Constant) and k.value in KINDS for k in node.keys) >= 2
    return False


def test_no_module_outside_tasks_asks_which_task_it_is() -> None:
    found = []
    for path in sorted((ROOT / "hrm_reason").rglob("*.py")):
        if path.parent.name == "tasks":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if _names_a_task(node):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_scan_sees_a_dispatch_on_a_task_name() -> None:
    tree = ast.parse('if kind == "maze": pass\nLOOK = {"sudoku": 1, "arc": 2}\nname.startswith("arc")')
    assert sum(_names_a_task(node) for node in ast.walk(tree)) == 3


def test_the_builders_hold_no_solver_or_search_of_their_own() -> None:
    """The acceptance line of issue 45: `grep -n "def solve\\b\\|def _solve\\|bfs" datasets_build/*.py` finds nothing."""
    pattern = re.compile(r"def solve\b|def _solve|bfs")
    hits = [
        f"{path.name}:{i}"
        for path in sorted((ROOT / "datasets_build").glob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []
