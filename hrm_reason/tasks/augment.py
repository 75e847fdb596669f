"""Augmentation drawn on the fly (`augment=symmetry`, docs/training.md "Levers"): every training draw applies a fresh
random element of the task's symmetry group to the input and its label together, instead of (or on top of) the copies
the builder materialised on disk. The group is the builder's, held by the task (tasks/base.py `Task.augmentation`):
Sudoku's digit relabelling, band/stack and row/column shuffles and transpose (tasks/sudoku.py `SudokuSymmetry`), the
maze's 8 dihedral maps (tasks/maze.py `DihedralSymmetry`). A group element of a valid (puzzle, solution) pair is a
valid pair, so labels stay right. Generated mazes are the exception: most have several shortest paths and the
generator's label picks one by a rule that prefers directions (up, down, left, right), so a mapped label follows a
rotated rule and one input would get different targets; their labels are recomputed by the generator's rule instead
(docs/training.md, "Augmentation drawn on the fly"). A dataset of the original HRM scripts (no builder record) gets
the group of the task its layout shows, or none, with one line saying which (docs/data.md, "Datasets of the original
scripts").

The elements are drawn for the whole global batch from the generator the sampler seeds per batch, and each process
applies its slice: the batches depend on (seed, iteration, batch) only, so a resumed run, or one on another number of
processes, sees the same examples.
"""

from __future__ import annotations

import sys

import torch.distributed as dist

from hrm_reason.data.puzzle import Augmentation, PuzzleSplit
from hrm_reason.errors import UserError
from hrm_reason.tasks import layout_task, record_task, task_classes
from hrm_reason.tasks.maze import DihedralSymmetry
from hrm_reason.tasks.sudoku import SudokuSymmetry

__all__ = ["DihedralSymmetry", "SudokuSymmetry", "layout_augmentation", "train_augmentation"]


def train_augmentation(kind: str, split: PuzzleSplit) -> Augmentation | None:
    """The augmentation `augment=kind` gives for a training split: its dataset.json `builder` record names the task
    (a task without a group is a one-line error naming the option and the file); with no record (the original HRM
    scripts' datasets) the layout does (`layout_augmentation`)."""
    if kind == "none":
        return None
    metadata, where = split.metadata, split.path / "dataset.json"
    if metadata.builder is None:
        return layout_augmentation(kind, split)
    cls = record_task(metadata.builder, where)
    if cls is None or not cls.on_the_fly:
        kinds = " and ".join(c.kind for c in task_classes() if c.on_the_fly)
        raise UserError(
            f"augment={kind}: {where} has builder {metadata.builder.get('name')!r}; augmentation on the fly knows the "
            f"{kinds} builders' datasets (use augment=none)"
        )
    return cls.from_metadata(metadata, str(where)).augmentation(kind, split)


def layout_augmentation(kind: str, split: PuzzleSplit) -> Augmentation | None:
    """A split with no builder record (docs/data.md, "Datasets of the original scripts"): the task its layout and data
    show (a Sudoku board, a maze), with that task's group; labels are mapped, as for labels of unknown rule. Any other
    layout (ARC's included, whose augmentations live on disk with their own puzzle identifiers) trains without
    augmentation on the fly. Either way one line on stderr says what was chosen, so that `augment: symmetry` of the
    default config runs on any dataset and is never silent."""
    where, meta = split.path / "dataset.json", split.metadata
    augmenting = [cls for cls in task_classes() if cls.on_the_fly]
    found = layout_task(split, augmenting)
    if found is not None:
        task, why = found
        _say(f"augment={kind}: {task.symmetry_name} ({why}; no builder record in {where})")
        return task.augmentation(kind, split)
    other = next((c for c in task_classes() if not c.on_the_fly and c.fits_shape(meta.seq_len, meta.vocab_size)), None)
    if other is not None:
        what = other.from_metadata(meta, str(where)).symmetry_name
    else:
        owners = " nor ".join(cls.owner for cls in augmenting)
        what = f"neither {owners} layout (seq_len {meta.seq_len}, vocab_size {meta.vocab_size})"
    _say(f"warning: augment={kind}: {where} has no builder record and {what}: training without augmentation on the fly")
    return None


def _say(line: str) -> None:
    """One line on stderr, from the first process only (every process chooses the same augmentation)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(line, file=sys.stderr)
