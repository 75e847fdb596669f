"""Augmentation drawn on the fly (`augment=symmetry`, docs/training.md "Levers"): every training draw applies a fresh
random element of the task's symmetry group to the input and its label together, instead of (or on top of) the copies
the builder materialised on disk. The group is the builder's: Sudoku's digit relabelling, band/stack and row/column
shuffles and transpose (tasks/sudoku.py), the maze's 8 dihedral maps (tasks/dihedral.py). A group element of a valid
(puzzle, solution) pair is a valid pair, so labels stay right. Generated mazes are the exception: most have several
shortest paths and the generator's label picks one by a rule that prefers directions (up, down, left, right), so a
mapped label follows a rotated rule and one input would get different targets; their labels are recomputed by the
generator's rule instead (docs/training.md, "Augmentation drawn on the fly"). A dataset of the original HRM scripts
(no builder record) gets the group of the task its layout shows, or none, with one line saying which (docs/data.md,
"Datasets of the original scripts").

The elements are drawn for the whole global batch from the generator the sampler seeds per batch, and each process
applies its slice: the batches depend on (seed, iteration, batch) only, so a resumed run, or one on another number of
processes, sees the same examples.
"""

from __future__ import annotations

import math
import sys
from dataclasses import fields

import numpy as np
import torch.distributed as dist

from hrm_reason.data.puzzle import Augmentation, PuzzleSplit
from hrm_reason.errors import UserError
from hrm_reason.tasks.arc import MAX_SIZE as ARC_SIZE
from hrm_reason.tasks.arc import VOCAB_SIZE as ARC_VOCAB_SIZE
from hrm_reason.tasks.dihedral import DihedralTransforms
from hrm_reason.tasks.maze import label_paths
from hrm_reason.tasks.maze import matches_layout as maze_layout
from hrm_reason.tasks.sudoku import BOX_OF_SIDE, BOXES, GridTransforms, SudokuTransforms, vocab_size
from hrm_reason.tasks.sudoku import matches_layout as sudoku_layout


class SudokuSymmetry:
    """Sudoku's group on token rows: test-time augmentation's `SudokuTransforms`, one element per row."""

    def __init__(self, r: int, c: int) -> None:
        self.transforms = SudokuTransforms(r, c)

    def __call__(
        self, rng: np.random.Generator, inputs: np.ndarray, labels: np.ndarray, rows: slice, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        (drawn,) = self.transforms.draw(rng, count, 2)  # copy 1 of `count` rows: one element per global-batch row
        tf = GridTransforms(**{f.name: getattr(drawn, f.name)[rows] for f in fields(GridTransforms)})
        return tuple(self.transforms.apply(x, tf).astype(x.dtype) for x in (inputs, labels))  # type: ignore[return-value]


class DihedralSymmetry:
    """The maze's 8 dihedral maps on token rows, drawn uniformly (identity included): `DihedralTransforms.apply`.

    relabel: the label of a mapped maze is the generator's label of that maze (tasks/maze.label_paths), not the mapped
    label; the two differ where the maze has several shortest paths.
    """

    def __init__(self, side: int, relabel: bool = False) -> None:
        self.side, self.relabel = side, relabel
        self.transforms = DihedralTransforms(side)

    def __call__(
        self, rng: np.random.Generator, inputs: np.ndarray, labels: np.ndarray, rows: slice, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        tids = rng.integers(0, 8, count)[rows]
        inputs = self.transforms.apply(inputs, tids)
        if not self.relabel:
            return inputs, self.transforms.apply(labels, tids)
        relabelled, _ = label_paths(inputs.reshape(-1, self.side, self.side))
        return inputs, relabelled.reshape(inputs.shape).astype(labels.dtype)


def train_augmentation(kind: str, split: PuzzleSplit) -> Augmentation | None:
    """The augmentation `augment=kind` gives for a training split: its dataset.json `builder` record names the task
    (a task without a group is a one-line error naming the option and the file); with no record (the original HRM
    scripts' datasets) the layout does (`layout_augmentation`)."""
    if kind == "none":
        return None
    metadata, where = split.metadata, split.path / "dataset.json"
    if metadata.builder is None:
        return layout_augmentation(kind, split)
    builder = metadata.builder
    name = builder.get("name")
    seq_len, vocab = metadata.seq_len, metadata.vocab_size
    side = math.isqrt(seq_len)
    if name == "sudoku":
        box = BOXES.get(builder.get("box", "")) or BOX_OF_SIDE.get(side)
        if box is not None and side * side == seq_len and box[0] * box[1] == side and vocab == vocab_size(side):
            return SudokuSymmetry(*box)
        raise UserError(f"augment={kind}: {where} is not a Sudoku grid layout augment knows (seq_len {seq_len})")
    if name == "maze":
        if side * side != seq_len:
            raise UserError(f"augment={kind}: {where} holds mazes of seq_len {seq_len}, not a square grid")
        return DihedralSymmetry(side, relabel=builder.get("source") == "generate")
    raise UserError(
        f"augment={kind}: {where} has builder {name!r}; augmentation on the fly knows the sudoku and maze builders' "
        "datasets (use augment=none)"
    )


def layout_augmentation(kind: str, split: PuzzleSplit) -> Augmentation | None:
    """A split with no builder record (docs/data.md, "Datasets of the original scripts"): the task its layout and data
    show (a Sudoku board, a maze), with that task's group; labels are mapped, as for labels of unknown rule. Any other
    layout (ARC's included, whose augmentations live on disk with their own puzzle identifiers) trains without
    augmentation on the fly. Either way one line on stderr says what was chosen, so that `augment: symmetry` of the
    default config runs on any dataset and is never silent."""
    where, meta = split.path / "dataset.json", split.metadata
    side = math.isqrt(meta.seq_len)
    box = sudoku_layout(split)
    if box is not None:
        _say(
            f"augment={kind}: Sudoku {side}x{side} symmetries ({box[0]}x{box[1]} boxes; no builder record in {where}, "
            "the layout and the solved labels are a Sudoku's)"
        )
        return SudokuSymmetry(*box)
    if maze_layout(split):
        _say(
            f"augment={kind}: the maze's 8 dihedral maps, labels mapped (no builder record in {where}; vocabulary "
            "and characters match the maze layout)"
        )
        return DihedralSymmetry(side)
    if meta.seq_len == ARC_SIZE**2 and meta.vocab_size == ARC_VOCAB_SIZE:
        what = "ARC's 30x30 layout, whose augmentations are copies on disk with their own puzzle identifiers"
    else:
        what = (
            "neither a Sudoku's layout (a square board, vocab_size n + 2, solved labels) nor the maze's "
            f"(seq_len {meta.seq_len}, vocab_size {meta.vocab_size})"
        )
    _say(f"warning: augment={kind}: {where} has no builder record and {what}: training without augmentation on the fly")
    return None


def _say(line: str) -> None:
    """One line on stderr, from the first process only (every process chooses the same augmentation)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(line, file=sys.stderr)
