"""The benchmarks, one `Task` each (tasks/base.py): Sudoku (`sudoku.SudokuTask`), the maze (`maze.MazeTask`), ARC
(`arc.ArcTask`) and any task a user declares with a file of examples (`declared.DeclaredTask`; a user's own package
adds more through an entry point, `plugin_task`), each holding its token layout, transforms and inverses, validity checks and solver or shortest-path
search, metrics, augmentation, the text people write puzzles in and how pictures draw it. `dihedral` holds the
square's symmetries that maze and ARC use. The text corpora of the language-model heads (hrm_reason/data/text.py)
have no task: they are scored by loss alone.

This module is the one place that picks a dataset's task: by its dataset.json `builder.name` (`task_of`), else, for
a dataset with no builder record (one the original HRM scripts wrote), by its layout: from the data where there is
data (`layout_task`; docs/training.md, "Task metrics of datasets without a builder record"), from the shapes alone
where there is only a model (`shape_task`). Everything else asks the task. Each task module is imported only when a
task is looked up.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from hrm_reason.errors import UserError

if TYPE_CHECKING:  # the builders import the task modules without torch's start-up cost
    from hrm_reason.data.puzzle import PuzzleDatasetMetadata, PuzzleSplit
    from hrm_reason.tasks.base import SegmentMetric, Task, TaskTransforms


ENTRY_POINTS = "hrm_reason.tasks"  # the entry-point group of tasks from other packages (docs/tasks.md)


def task_classes() -> tuple[type[Task], ...]:
    """The benchmarks, in the order a layout is tried (a declared task's dataset always has its builder record)."""
    from hrm_reason.tasks.arc import ArcTask
    from hrm_reason.tasks.maze import MazeTask
    from hrm_reason.tasks.sudoku import SudokuTask

    return SudokuTask, MazeTask, ArcTask


def task_class(kind: str | None) -> type[Task] | None:
    """The task whose datasets' builder record is named `kind`: a benchmark, the declared task of `hrm build-data
    file`, else one another package registers under the entry point `kind` of group hrm_reason.tasks (`plugin_task`);
    None when none has it."""
    from hrm_reason.tasks.declared import DeclaredTask

    own = next((cls for cls in (*task_classes(), DeclaredTask) if cls.kind == kind), None)
    return own if own is not None or not kind else plugin_task(kind)


def record_task(builder: dict | None, where: object) -> type[Task] | None:
    """The task of a dataset's builder record (`task_class` of its name; None: no record, or a builder no task
    knows). A record of `hrm build-data file --task KIND` whose package is not installed is a one-line UserError naming
    `where`: read as anonymous tokens, its task's own rules would go unchecked and unsaid."""
    if builder is None:
        return None
    name = builder.get("name")
    cls = task_class(name)
    if cls is None and "declaration" in builder:
        raise UserError(
            f"{where}: the dataset's task {name!r} is not installed (no entry point {name!r} in group {ENTRY_POINTS}); "
            "install the package that provides it"
        )
    return cls


def plugin_task(kind: str) -> type[Task] | None:
    """The Task subclass another package registers as entry point `kind` (pyproject.toml: [project.entry-points.
    "hrm_reason.tasks"] kind = "package.module:Class"), loaded only when a dataset names it, so that a broken plugin
    touches only its own datasets; one that does not load, or is not a Task of that kind, is a one-line UserError."""
    from importlib.metadata import entry_points

    from hrm_reason.tasks.base import Task

    found = entry_points(group=ENTRY_POINTS, name=kind)
    if not found:
        return None
    ep = next(iter(found))
    where = f"task {kind!r} (entry point {ep.value} of group {ENTRY_POINTS})"
    try:
        cls = ep.load()
    except Exception as e:
        raise UserError(f"{where}: does not load ({type(e).__name__}: {e})") from None
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise UserError(f"{where}: {ep.value} is not a subclass of hrm_reason.tasks.base.Task")
    if getattr(cls, "kind", None) != kind:
        raise UserError(f"{where}: the class's kind is {getattr(cls, 'kind', None)!r}, not the entry point's name")
    return cls


def task_of(metadata: PuzzleDatasetMetadata, where: str, names: list[str] | None = None) -> Task | None:
    """The task of a dataset: its builder record's, else (no record) the first whose shapes fit (`shape_task`); None
    for a builder the tasks do not know or shapes none fits. A known task whose shapes are not its own is a
    UserError naming `where`. `names`: identifiers.json, where there is one (ARC reads its task names there)."""
    if metadata.builder is not None:
        cls = record_task(metadata.builder, where)
        return cls.from_metadata(metadata, where, names) if cls is not None else None
    return shape_task(metadata, where, names)


def shape_task(metadata: PuzzleDatasetMetadata, where: str, names: list[str] | None = None) -> Task | None:
    """The task of a dataset with no builder record from its shapes alone: a square Sudoku board of n + 2 tokens, a
    maze grid over 9x9 of the maze's 6 tokens, ARC's 30x30 canvas of 12 tokens; None otherwise. What pictures and
    `hrm solve` go by when they only have a model's shapes (`layout_task` checks the data itself where it has it)."""
    for cls in task_classes():
        if cls.fits_shape(metadata.seq_len, metadata.vocab_size):
            return cls.from_metadata(metadata, where, names)
    return None


def layout_task(split: PuzzleSplit, tasks: Iterable[type[Task]] | None = None) -> tuple[Task, str] | None:
    """(task, why) of a split with no builder record whose data shows a task's layout, trying `tasks` (default:
    all) in order; None when none matches."""
    for cls in task_classes() if tasks is None else tasks:
        found = cls.layout_of(split)
        if found is not None:
            return found
    return None


def choose_metrics(split: PuzzleSplit, mmax: int) -> tuple[str | None, str, list[SegmentMetric]]:
    """(task, why, metrics): the builder record's task when there is a record, else the first whose layout matches."""
    builder = split.metadata.builder
    if builder is not None:
        name = builder.get("name")
        why = f"builder record {name!r}"
        cls = record_task(builder, split.path / "dataset.json")
        if cls is None or cls.metric_name is None:
            return None, why, []
        task = cls.from_metadata(split.metadata, str(split.path / "dataset.json"))
        return name, why, task.segment_metrics(split, mmax)
    found = layout_task(split, [cls for cls in task_classes() if cls.metric_name is not None])
    if found is None:
        owners = " nor ".join(cls.owner for cls in task_classes() if cls.metric_name is not None)
        return None, f"no builder record; the layout is neither {owners}", []
    task, why = found
    return task.kind, f"no builder record; {why}", task.segment_metrics(split, mmax)


def task_metrics(split: PuzzleSplit, mmax: int, announce: bool = False) -> list[SegmentMetric]:
    """The task's extra metrics; `announce` prints which were chosen and why (nothing when none is: exact accuracy
    alone, as on Sudoku)."""
    name, why, metrics = choose_metrics(split, mmax)
    cls = task_class(name)
    if announce and cls is not None and cls.metric_name is not None and metrics:
        print(f"metric: {cls.metric_name} ({why})", file=sys.stderr)
    return metrics


def task_transforms(split: PuzzleSplit, tta: int) -> TaskTransforms | None:
    """The symmetries of the split's task, for `--tta` > 1 (None for 1); an unknown task is a UserError."""
    if tta <= 1:
        return None
    name = (split.metadata.builder or {}).get("name")
    cls = record_task(split.metadata.builder, split.path / "dataset.json")
    if cls is None:
        raise UserError(
            f"--tta {tta}: {split.path / 'dataset.json'} has builder.name {name!r}; test-time augmentation knows "
            f"{', '.join(cls.kind for cls in task_classes())}"
        )
    return cls.from_metadata(split.metadata, str(split.path / "dataset.json")).transforms
