"""Reader of the original HRM on-disk puzzle format, with the original sampling semantics.

Training: each "epoch" visits every group (an original puzzle and its augmentations) once in random order, picks one
random member puzzle of the group and adds all of that puzzle's examples to the batch (the last one truncated to fit);
an incomplete final batch is dropped. Every draw comes from a generator seeded by (seed, iteration[, batch]), so a run
can resume mid-iteration by batch index and two builds of the same run see the same batches.
Test: every example in order, in global batches, the last one padded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from hrm_reason.errors import UserError
from hrm_reason.losses import IGNORE_LABEL_ID
from hrm_reason.readers import read_json, read_json_model, read_npy

Batch = dict[str, torch.Tensor]
DatasetKind = Literal["puzzle", "text"]


class PuzzleDatasetMetadata(BaseModel):
    """`dataset.json` of one split: the original fields, plus an optional `builder` provenance record.

    Extra fields are kept (not rejected) so that datasets written by other tools still load.
    """

    model_config = ConfigDict(extra="allow")

    pad_id: int
    ignore_label_id: int | None
    blank_identifier_id: int
    vocab_size: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    num_puzzle_identifiers: int = Field(ge=1)
    total_groups: int = Field(ge=0)
    mean_puzzle_examples: float
    sets: list[str]
    builder: dict[str, Any] | None = None

    @classmethod
    def of_shape(
        cls, seq_len: int, vocab_size: int, num_puzzle_identifiers: int = 1, **extra: Any
    ) -> PuzzleDatasetMetadata:
        """A stand-in of the given shapes, for a model built without its dataset (hrm bench, weights alone, tests)."""
        return cls(
            pad_id=0,
            ignore_label_id=0,
            blank_identifier_id=0,
            vocab_size=vocab_size,
            seq_len=seq_len,
            num_puzzle_identifiers=num_puzzle_identifiers,
            total_groups=1,
            mean_puzzle_examples=1.0,
            sets=["all"],
            **extra,
        )


ARRAY_NAMES = ("inputs", "labels", "puzzle_identifiers", "puzzle_indices", "group_indices")


def dataset_kind(path: str | Path) -> DatasetKind | None:
    """What a dataset directory holds, from its layout alone (nothing is validated): "text" for one written by
    `hrm build-data text` (<dir>/dataset.json with kind "text", hrm_reason.data.text), "puzzle" for the original HRM
    layout (<dir>/{train,test}/dataset.json), None for anything else. The one test every command dispatches on."""
    path = Path(path)
    try:
        if read_json(path / "dataset.json", None).get("kind") == "text":
            return "text"
    except (UserError, AttributeError):  # no such file, or one the loaders will name
        pass
    if (path / "train" / "dataset.json").is_file() and (path / "test" / "dataset.json").is_file():
        return "puzzle"
    return None


@dataclass
class PuzzleSet:
    inputs: np.ndarray  # [N_examples, seq_len], memory-mapped
    labels: np.ndarray
    puzzle_identifiers: np.ndarray  # [N_puzzles]
    puzzle_indices: np.ndarray  # [N_puzzles + 1], CSR offsets of examples
    group_indices: np.ndarray  # [N_groups + 1], CSR offsets of puzzles


@dataclass
class PuzzleSplit:
    """One split of a puzzle dataset: its folder, its dataset.json and the arrays of each set."""

    path: Path
    metadata: PuzzleDatasetMetadata
    sets: dict[str, PuzzleSet]

    @property
    def num_examples(self) -> int:
        return sum(s.inputs.shape[0] for s in self.sets.values())


def load_split(data_dir: str | Path, split: str) -> PuzzleSplit:
    """Load and check one split; any inconsistency is a UserError naming the file."""
    data_dir = Path(data_dir)
    split_dir = data_dir / split
    if not data_dir.is_dir():
        where = "" if data_dir.is_absolute() else f" (a relative path, read from {Path.cwd()})"
        raise UserError(
            f"dataset directory {data_dir} does not exist{where}; build one with hrm build-data sudoku, maze, arc or "
            f"file ... --out {data_dir}, or give the path where it is (--data, data_path=)"
        )
    meta_path = split_dir / "dataset.json"
    metadata = read_json_model(
        meta_path, PuzzleDatasetMetadata, "expected a dataset in the HRM layout <dir>/{train,test}/dataset.json"
    )
    if not metadata.sets:  # nothing would be read: training would run on no batch, evaluation score nothing
        raise UserError(f'{meta_path}: sets is empty; expected the names of its sets (e.g. ["all"])')

    sets: dict[str, PuzzleSet] = {}
    for set_name in metadata.sets:
        arrays = {}
        for name in ARRAY_NAMES:
            path = split_dir / f"{set_name}__{name}.npy"
            if not path.is_file():
                raise UserError(f"{path} not found (listed set '{set_name}' in {meta_path})")
            arrays[name] = array = read_npy(path, mmap=name in ("inputs", "labels"))
            if array.dtype.kind not in "iu":  # floats would index embeddings, strings fail in min()
                raise UserError(f"{path}: expected an integer array, got dtype {array.dtype}")
        sets[set_name] = _check_set(PuzzleSet(**arrays), metadata, split_dir, set_name)
    loaded = PuzzleSplit(path=split_dir, metadata=metadata, sets=sets)
    if loaded.num_examples == 0:  # the builders never write one: a training run would take no step, an eval score 0/0
        names = ", ".join(f"{name}__inputs.npy" for name in sets)
        raise UserError(f"{split_dir}: 0 examples ({names} {'is' if len(sets) == 1 else 'are'} empty)")
    return loaded


def _check_set(s: PuzzleSet, meta: PuzzleDatasetMetadata, split_dir: Path, set_name: str) -> PuzzleSet:
    def fail(what: str) -> UserError:
        return UserError(f"{split_dir / set_name}__*.npy: {what}")

    if s.inputs.ndim != 2 or s.inputs.shape[1] != meta.seq_len:
        raise fail(f"inputs have shape {s.inputs.shape}, expected [N, seq_len={meta.seq_len}]")
    if s.labels.shape != s.inputs.shape:
        raise fail(f"labels have shape {s.labels.shape}, inputs {s.inputs.shape}")
    if s.puzzle_identifiers.ndim != 1:
        raise fail(f"puzzle_identifiers have shape {s.puzzle_identifiers.shape}, expected [N_puzzles]")
    if s.puzzle_indices.ndim != 1 or s.puzzle_indices.size != s.puzzle_identifiers.size + 1:
        raise fail("puzzle_indices must have one entry more than puzzle_identifiers")
    if s.puzzle_indices[0] != 0 or s.puzzle_indices[-1] != s.inputs.shape[0] or np.any(np.diff(s.puzzle_indices) <= 0):
        raise fail("puzzle_indices must rise from 0 to the number of examples")
    if (
        s.group_indices.ndim != 1
        or s.group_indices.size == 0
        or s.group_indices[0] != 0
        or s.group_indices[-1] != s.puzzle_identifiers.size
        or np.any(np.diff(s.group_indices) <= 0)
    ):
        raise fail("group_indices must rise from 0 to the number of puzzles")
    if s.inputs.size and (int(s.inputs.min()) < 0 or int(s.inputs.max()) >= meta.vocab_size):
        bad = int(s.inputs.min()) if int(s.inputs.min()) < 0 else int(s.inputs.max())
        raise fail(f"input tokens outside [0, vocab_size={meta.vocab_size}) (found {bad})")
    # Labels index the LM head's logits: one outside the vocabulary (other than the ignore label) would train silently
    # as a wrong target on CPU, or fail deep inside the loss on a GPU.
    bad_label = _label_outside(s.labels, meta)
    if bad_label is not None:
        ignore = f"{meta.ignore_label_id} or " if meta.ignore_label_id is not None else ""
        raise UserError(
            f"{split_dir / set_name}__labels.npy: label {bad_label} outside [0, vocab_size={meta.vocab_size}) and not the ignore label ({ignore}{IGNORE_LABEL_ID})"
        )
    if s.puzzle_identifiers.size and int(s.puzzle_identifiers.max()) >= meta.num_puzzle_identifiers:
        raise fail(f"puzzle identifiers outside [0, num_puzzle_identifiers={meta.num_puzzle_identifiers})")
    return s


def _label_outside(labels: np.ndarray, meta: PuzzleDatasetMetadata) -> int | None:
    """The first label that is neither a token id nor the ignore label, or None. min/max first: a memory-mapped ARC
    set holds gigabytes, so the element-wise test runs only when the range says it must, a block of rows at a time."""
    if not labels.size or (int(labels.min()) >= 0 and int(labels.max()) < meta.vocab_size):
        return None
    for start in range(0, labels.shape[0], 65536):
        block = np.asarray(labels[start : start + 65536])
        bad = (block < 0) | (block >= meta.vocab_size)
        bad &= block != IGNORE_LABEL_ID  # already the loss's ignore index
        if meta.ignore_label_id is not None:
            bad &= block != meta.ignore_label_id
        if bad.any():
            return int(block[bad][0])
    return None


def _collate(
    s: PuzzleSet,
    meta: PuzzleDatasetMetadata,
    example_ids: np.ndarray,
    puzzle_ids: np.ndarray,
    batch_size: int,
    augment: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
) -> Batch:
    """Gather examples, augment them (training with augment=symmetry), map the ignore label to -100 and pad to a full
    batch (the puzzle embedding needs one)."""
    inputs = np.asarray(s.inputs[example_ids], dtype=np.int32)
    labels = np.asarray(s.labels[example_ids], dtype=np.int32)
    if augment is not None:
        inputs, labels = augment(inputs, labels)
    if meta.ignore_label_id is not None:
        labels[labels == meta.ignore_label_id] = IGNORE_LABEL_ID
    identifiers = np.asarray(s.puzzle_identifiers[puzzle_ids], dtype=np.int32)
    pad = batch_size - len(example_ids)
    if pad > 0:
        inputs = np.concatenate([inputs, np.full((pad, meta.seq_len), meta.pad_id, dtype=np.int32)])
        labels = np.concatenate([labels, np.full((pad, meta.seq_len), IGNORE_LABEL_ID, dtype=np.int32)])
        identifiers = np.concatenate([identifiers, np.full(pad, meta.blank_identifier_id, dtype=np.int32)])
    return {
        "inputs": torch.from_numpy(inputs),
        "labels": torch.from_numpy(labels),
        "puzzle_identifiers": torch.from_numpy(identifiers),
    }


class Augmentation(Protocol):
    """A random symmetry of the task applied to every training example drawn (augment=symmetry; the tasks' own
    groups are in hrm_reason/tasks/augment.py)."""

    def __call__(
        self, rng: np.random.Generator, inputs: np.ndarray, labels: np.ndarray, rows: slice, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw `count` group elements (the global batch) and apply elements[rows] to this process's [b, seq_len]
        token rows; returns new arrays of the inputs' dtype."""


AUGMENT_STREAM = 1  # the last entropy word of the augmentation draws of a batch (hrm_reason.tasks.augment)


class TrainSampler:
    """Training batches for one rank: iteration i covers `epochs_per_iter` passes over the groups; `augment` applies a
    fresh random symmetry to every example drawn (tasks/augment.py)."""

    def __init__(
        self,
        split: PuzzleSplit,
        global_batch_size: int,
        epochs_per_iter: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        augment: Augmentation | None = None,
    ) -> None:
        if global_batch_size % world_size:
            raise UserError(
                f"global_batch_size {global_batch_size} is not divisible by the number of processes {world_size}"
            )
        self.split, self.global_batch_size, self.epochs_per_iter = split, global_batch_size, epochs_per_iter
        self.seed, self.rank, self.local_batch_size = seed, rank, global_batch_size // world_size
        self.augment = augment

    def _plan(self, iteration: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Per batch: set name, chosen puzzles and how many of each puzzle's examples to take."""
        rng = np.random.default_rng([self.seed, iteration])
        plan = []
        for set_name, s in self.split.sets.items():
            num_groups = s.group_indices.size - 1
            order = np.concatenate([rng.permutation(num_groups) for _ in range(self.epochs_per_iter)])
            lo, hi = s.group_indices[order], s.group_indices[order + 1]
            puzzles = lo + (rng.random(order.size) * (hi - lo)).astype(np.int64)
            sizes = (s.puzzle_indices[puzzles + 1] - s.puzzle_indices[puzzles]).astype(np.int64)
            ends = np.cumsum(sizes)
            start, consumed = 0, 0
            while start < puzzles.size:
                # The batch takes puzzles start..stop-1, the last one truncated to fill it.
                stop = int(np.searchsorted(ends, consumed + self.global_batch_size, side="left")) + 1
                if stop > puzzles.size:
                    break  # incomplete last batch is dropped
                take = sizes[start:stop].copy()
                take[-1] -= ends[stop - 1] - (consumed + self.global_batch_size)
                plan.append((set_name, puzzles[start:stop], take))
                start, consumed = stop, int(ends[stop - 1])
        return plan

    def batches_in(self, iteration: int) -> int:
        """The training batches of an iteration (none where its epochs hold fewer examples than a batch)."""
        return len(self._plan(iteration))

    def batches(self, iteration: int, start_batch: int = 0) -> Iterator[Batch]:
        for b, (set_name, puzzles, take) in enumerate(self._plan(iteration)):
            if b < start_batch:
                continue
            s = self.split.sets[set_name]
            rng = np.random.default_rng([self.seed, iteration, b])
            examples = np.concatenate(
                [
                    s.puzzle_indices[p] + rng.permutation(int(s.puzzle_indices[p + 1] - s.puzzle_indices[p]))[:n]
                    for p, n in zip(puzzles, take)
                ]
            )
            puzzle_of_example = np.repeat(puzzles, take)
            lo = self.rank * self.local_batch_size
            sl = slice(lo, lo + self.local_batch_size)
            augment = None
            if self.augment is not None:  # its own stream of the batch's seed: the example draws stay as without it
                augment = partial(
                    self.augment,
                    np.random.default_rng([self.seed, iteration, b, AUGMENT_STREAM]),
                    rows=sl,
                    count=self.global_batch_size,
                )
            yield _collate(s, self.split.metadata, examples[sl], puzzle_of_example[sl], self.local_batch_size, augment)


def eval_batches(
    split: PuzzleSplit, global_batch_size: int, rank: int = 0, world_size: int = 1, max_examples: int | None = None
) -> Iterator[tuple[str, Batch]]:
    """Every example in order; the rank's slice of each global batch, padded (padded rows have no valid label)."""
    local = global_batch_size // world_size
    for set_name, s in split.sets.items():
        n = s.inputs.shape[0] if max_examples is None else min(max_examples, s.inputs.shape[0])
        for start in range(0, n, global_batch_size):
            lo, hi = start + rank * local, min(start + (rank + 1) * local, n)
            example_ids = np.arange(lo, max(lo, hi))
            puzzle_ids = np.searchsorted(s.puzzle_indices, example_ids, side="right") - 1
            yield set_name, _collate(s, split.metadata, example_ids, puzzle_ids, local)


def total_train_steps(metadata: PuzzleDatasetMetadata, epochs: int, global_batch_size: int) -> int:
    """The original step budget: epochs * groups * mean examples per puzzle / global batch."""
    return int(epochs * metadata.total_groups * metadata.mean_puzzle_examples / global_batch_size)
