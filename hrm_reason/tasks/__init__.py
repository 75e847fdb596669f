"""The benchmarks' formats, written once each: token layout, transforms and their inverses, validity checks, metrics.

`sudoku`, `maze` and `arc` are what the builders (datasets_build), evaluation and the pictures (hrm_reason.viz) share;
`dihedral` holds the square's symmetries that maze and ARC augmentation use. `task_metrics` maps a dataset's
`builder.name` in dataset.json to its extra metrics, and a dataset with no builder record (one the original HRM
scripts wrote) to those whose layout it has (docs/training.md, "Task metrics of datasets without a builder record");
`task_transforms` maps `builder.name` to its test-time augmentation. Each task module is imported only when its
task is evaluated.
"""

from __future__ import annotations

import math
import sys
from importlib import import_module
from typing import TYPE_CHECKING

from hrm_reason.errors import UserError

if TYPE_CHECKING:  # the builders import the task modules without torch's start-up cost
    from hrm_reason.data.puzzle import PuzzleSplit
    from hrm_reason.tasks.base import SegmentMetric, TaskTransforms

# builder name -> "module:function"; the function is (split, mmax) -> list[SegmentMetric].
TASK_METRICS: dict[str, str] = {
    "maze": "hrm_reason.tasks.maze:segment_metrics",
    "arc": "hrm_reason.tasks.arc:segment_metrics",
}
# Without a builder record, tried in order: (split, mmax) -> list[SegmentMetric], or None when the layout differs.
LAYOUT_METRICS: dict[str, tuple[str, str]] = {
    "maze": ("hrm_reason.tasks.maze:layout_metrics", "vocabulary and characters match the maze layout"),
    "arc": ("hrm_reason.tasks.arc:layout_metrics", "identifiers.json names and the EOS canvas match the ARC layout"),
}
METRIC_NAMES = {"maze": "maze optimal-path", "arc": "ARC voting (pass@k)"}


def _call(target: str, split: PuzzleSplit, mmax: int) -> list[SegmentMetric] | None:
    module, function = target.split(":")
    return getattr(import_module(module), function)(split, mmax)


def choose_metrics(split: PuzzleSplit, mmax: int) -> tuple[str | None, str, list[SegmentMetric]]:
    """(task, why, metrics): the builder record's task when there is a record, else the first whose layout matches."""
    builder = split.metadata.builder
    if builder is not None:
        name = builder.get("name")
        if name not in TASK_METRICS:
            return None, f"builder record {name!r}", []
        return name, f"builder record {name!r}", _call(TASK_METRICS[name], split, mmax) or []
    for name, (target, why) in LAYOUT_METRICS.items():
        metrics = _call(target, split, mmax)
        if metrics is not None:
            return name, f"no builder record; {why}", metrics
    return None, "no builder record; the layout is neither the maze's nor ARC's", []


def task_metrics(split: PuzzleSplit, mmax: int, announce: bool = False) -> list[SegmentMetric]:
    """The task's extra metrics; `announce` prints which were chosen and why (nothing when none is: exact accuracy
    alone, as on Sudoku)."""
    name, why, metrics = choose_metrics(split, mmax)
    if announce and name is not None:
        print(f"metric: {METRIC_NAMES[name]} ({why})", file=sys.stderr)
    return metrics


# builder name -> "module:function"; the function is (dataset metadata) -> TaskTransforms (test-time augmentation).
TASK_TRANSFORMS: dict[str, str] = {
    "sudoku": "hrm_reason.tasks.sudoku:tta_transforms",
    "maze": "hrm_reason.tasks.maze:tta_transforms",
    "arc": "hrm_reason.tasks.arc:tta_transforms",
}


def task_transforms(split: PuzzleSplit, tta: int) -> TaskTransforms | None:
    """The symmetries of the split's task, for `--tta` > 1 (None for 1); an unknown task is a UserError."""
    if tta <= 1:
        return None
    name = (split.metadata.builder or {}).get("name")
    if name not in TASK_TRANSFORMS:
        raise UserError(
            f"--tta {tta}: {split.path / 'dataset.json'} has builder.name {name!r}; test-time augmentation knows "
            f"{', '.join(TASK_TRANSFORMS)}"
        )
    module, function = TASK_TRANSFORMS[name].split(":")
    return getattr(import_module(module), function)(split.metadata)


def layout_task(seq_len: int, vocab_size: int) -> str | None:
    """The task of a dataset with no builder record, from its token layout alone: a square Sudoku board of n + 2
    tokens, a maze grid over 9x9 of the maze's 6 tokens, ARC's 30x30 canvas of 12 tokens; None otherwise. What
    pictures and `hrm solve` go by when they only have a model's shapes (docs/training.md, "Task metrics of datasets
    without a builder record", checks the data itself where it has it)."""
    from hrm_reason.tasks import arc, maze, sudoku

    side = math.isqrt(seq_len)
    square = side * side == seq_len
    if square and side in sudoku.BOX_OF_SIDE and vocab_size == sudoku.vocab_size(side):
        return "sudoku"
    if square and vocab_size == maze.VOCAB_SIZE and side > 9:
        return "maze"
    if seq_len == arc.MAX_SIZE**2 and vocab_size == arc.VOCAB_SIZE:
        return "arc"
    return None
