"""Task-specific evaluation, chosen from the dataset's `builder.name` in dataset.json.

The one place that maps a benchmark to its extra metrics; each entry is imported only when its task is evaluated.
"""

from __future__ import annotations

from importlib import import_module

from hrm_reason.data import PuzzleSplit
from hrm_reason.evaluate import SegmentMetric

# builder name -> "module:function"; the function is (split, mmax) -> list[SegmentMetric].
TASK_METRICS: dict[str, str] = {
    "maze": "hrm_reason.maze_eval:segment_metrics",
    "arc": "hrm_reason.arc:segment_metrics",
}


def task_metrics(split: PuzzleSplit, mmax: int) -> list[SegmentMetric]:
    name = (split.metadata.builder or {}).get("name")
    if name not in TASK_METRICS:
        return []
    module, function = TASK_METRICS[name].split(":")
    return getattr(import_module(module), function)(split, mmax)
