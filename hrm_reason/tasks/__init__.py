"""The benchmarks' formats, written once each: token layout, transforms and their inverses, validity checks, metrics.

`sudoku`, `maze` and `arc` are what the builders (datasets_build), evaluation and the pictures (hrm_reason.viz) share;
`dihedral` holds the square's symmetries that maze and ARC augmentation use. `task_metrics` maps a dataset's
`builder.name` in dataset.json to its extra metrics and `task_transforms` to its test-time augmentation; each task module is imported only when its task is evaluated.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from hrm_reason.errors import UserError

if TYPE_CHECKING:  # the builders import the task modules without torch's start-up cost
    from hrm_reason.data import PuzzleSplit
    from hrm_reason.evaluate import SegmentMetric
    from hrm_reason.test_time import TaskTransforms

# builder name -> "module:function"; the function is (split, mmax) -> list[SegmentMetric].
TASK_METRICS: dict[str, str] = {
    "maze": "hrm_reason.tasks.maze:segment_metrics",
    "arc": "hrm_reason.tasks.arc:segment_metrics",
}


def task_metrics(split: PuzzleSplit, mmax: int) -> list[SegmentMetric]:
    name = (split.metadata.builder or {}).get("name")
    if name not in TASK_METRICS:
        return []
    module, function = TASK_METRICS[name].split(":")
    return getattr(import_module(module), function)(split, mmax)


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
