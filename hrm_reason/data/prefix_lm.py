"""PrefixLM on puzzles: an LM head trained on a puzzle dataset (the original HRM layout, `hrm_reason.data.puzzle`) with the
puzzle as a bidirectional prefix and the solution as a causal response, scored by exact accuracy of greedy decoding.

Sequence layout (one example; L = the dataset's seq_len, V = its vocab_size, positions 0-based):

    position     0 .. L-1            L          L+1 .. 2L
    input_ids    puzzle tokens       SEP = V    solution tokens (the raw label ids)
    token_type   1                   1          0
    labels       -100                -100       solution tokens; -100 where the label is the ignore_label_id

The prefix (puzzle + SEP) is one bidirectional block (docs/training.md, "PrefixLM on puzzles"); labels are
unshifted, so the logits at SEP predict solution cell 0 and those at cell j (position L+1+j) predict cell j+1; the
last cell is fed but predicts nothing. Greedy decoding prefills the prefix with its token types and then adds cells
causally (cached or recomputed). The vocabulary is the puzzle's V ids, unchanged, plus SEP: predictions map back to
grids without a table.
Every example has the same length 2L + 1, so no padding and no end-of-sequence token are needed: greedy decoding runs
exactly L steps. Ignored label cells (ARC's padding outside the grid) are fed as their raw id and never scored.

Choices (documented, not in the reference):
- The prefix is bidirectional only for heads whose config has `prefix_lm: true` (hrm_text); the causal-only heads
  (hrm_lm, unitf_lm, ham_lm) get the same sequences without token_type_ids, i.e. the puzzle as a causal prompt.
- Puzzle identifiers are not used: the LM heads have no puzzle embedding (Sudoku and Maze only have the blank one).
- Training draws, per step, `batch` groups uniformly without replacement (with replacement if the split has fewer),
  then one random puzzle of each group and one random example of it, from a generator seeded by (seed, step), so a
  resumed run sees the batches an uninterrupted one would (the LM trainer's rule; the puzzle trainer's epochs differ).
- Accuracies follow `hrm_reason.evaluate.act`: exact = every scored cell right; token accuracy = the per-example fraction
  of scored cells right, averaged over examples. The response CE is teacher-forced (the training objective).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hrm_reason.data.puzzle import load_split
from hrm_reason.data.text import step_generator
from hrm_reason.errors import UserError
from hrm_reason.losses import IGNORE_LABEL_ID


@dataclass(frozen=True)
class PuzzleLayout:
    """Where the parts of a puzzle sequence sit, and the ids it adds to the puzzle vocabulary."""

    puzzle_len: int  # L: cells per grid (the dataset's seq_len)
    puzzle_vocab: int  # V: the dataset's vocab_size; ids 0..V-1 keep their meaning

    @property
    def sep_id(self) -> int:
        return self.puzzle_vocab

    @property
    def vocab_size(self) -> int:
        return self.puzzle_vocab + 1

    @property
    def prefix_len(self) -> int:
        """Puzzle + SEP: the bidirectional block, and the prompt of greedy decoding."""
        return self.puzzle_len + 1

    @property
    def seq_len(self) -> int:
        return 2 * self.puzzle_len + 1


@dataclass
class PuzzleSequences:
    input_ids: torch.Tensor  # (batch, 2L + 1) int64
    token_type_ids: torch.Tensor  # 1 on the prefix, 0 on the response
    labels: torch.Tensor  # -100 on the prefix and on ignored cells

    def to(self, device: torch.device | str) -> PuzzleSequences:
        return PuzzleSequences(self.input_ids.to(device), self.token_type_ids.to(device), self.labels.to(device))


def to_sequences(
    inputs: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    layout: PuzzleLayout,
    ignore_label_id: int | None,
) -> PuzzleSequences:
    """Puzzle grids [batch, L] and their raw solution grids [batch, L] (dataset ids) -> sequences in the layout."""
    inputs = torch.from_numpy(np.array(inputs, dtype=np.int64))  # a copy: memory-mapped arrays are read-only
    labels = torch.from_numpy(np.array(labels, dtype=np.int64))
    if inputs.ndim != 2 or inputs.shape != labels.shape or inputs.shape[1] != layout.puzzle_len:
        raise UserError(
            f"puzzle grids must be [batch, {layout.puzzle_len}] inputs and labels, got {tuple(inputs.shape)} "
            f"and {tuple(labels.shape)}"
        )
    batch = inputs.shape[0]
    sep = torch.full((batch, 1), layout.sep_id, dtype=torch.long)
    input_ids = torch.cat([inputs, sep, labels], dim=1)
    token_type_ids = torch.cat(
        [
            torch.ones(batch, layout.prefix_len, dtype=torch.long),
            torch.zeros(batch, layout.puzzle_len, dtype=torch.long),
        ],
        dim=1,
    )
    scored = labels if ignore_label_id is None else labels.masked_fill(labels == ignore_label_id, IGNORE_LABEL_ID)
    seq_labels = torch.cat([torch.full((batch, layout.prefix_len), IGNORE_LABEL_ID, dtype=torch.long), scored], dim=1)
    return PuzzleSequences(input_ids, token_type_ids, seq_labels)


def response_grid(ids: torch.Tensor, layout: PuzzleLayout) -> torch.Tensor:
    """The solution cells [batch, L] of full sequences (or of a prompt followed by L decoded ids)."""
    return ids[:, layout.prefix_len : layout.prefix_len + layout.puzzle_len]


def uses_prefix(model: nn.Module) -> bool:
    """Whether the head takes the puzzle as a bidirectional prefix (its config has prefix_lm true: hrm_text)."""
    return bool(getattr(getattr(model, "config", None), "prefix_lm", False))


def forward_sequences(model: nn.Module, seqs: PuzzleSequences) -> Any:
    """The head's output on whole sequences, with the prefix bidirectional where the head supports it."""
    types = seqs.token_type_ids if uses_prefix(model) else None
    return model(seqs.input_ids, token_type_ids=types, labels=seqs.labels)


# ------------------------------------------------------------------------------------------------------- the dataset


class PuzzleLMData:
    """A puzzle dataset's train and test splits seen as PrefixLM sequences."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.train = load_split(self.path, "train")
        self.test = load_split(self.path, "test")
        a, b = self.train.metadata, self.test.metadata
        for name in ("seq_len", "vocab_size", "ignore_label_id"):
            if getattr(a, name) != getattr(b, name):
                raise UserError(
                    f"{self.test.path / 'dataset.json'}: {name} {getattr(b, name)} differs from train's {getattr(a, name)}"
                )
        self.layout = PuzzleLayout(puzzle_len=a.seq_len, puzzle_vocab=a.vocab_size)
        self.ignore_label_id = a.ignore_label_id
        self._train_sets = list(self.train.sets.values())
        self._group_offsets = np.cumsum([0] + [s.group_indices.size - 1 for s in self._train_sets])

    @property
    def num_train_groups(self) -> int:
        return int(self._group_offsets[-1])

    def check_model(self, model: nn.Module, source: str) -> None:
        """One-line errors before training or evaluating a head that cannot hold the layout."""
        c = model.config
        if c.vocab_size < self.layout.vocab_size:
            raise UserError(
                f"{source}: the model's vocabulary has {c.vocab_size} ids; puzzles of {self.path} need "
                f"{self.layout.vocab_size} (the puzzle's {self.layout.puzzle_vocab} + SEP)"
            )
        for name in ("max_position_embeddings", "max_seq_len"):
            limit = getattr(c, name, None)
            if limit is not None and limit < self.layout.seq_len:
                raise UserError(
                    f"{source}: field 'arch.{name}' is {limit}, but a puzzle sequence of {self.path} holds "
                    f"{self.layout.seq_len} tokens (2 * seq_len + 1)"
                )

    def train_batch(self, batch_size: int, seed: int, step: int) -> PuzzleSequences:
        """The sequences of training step `step` (0-based), drawn from (seed, step) only."""
        rng = step_generator(seed, step)
        n = self.num_train_groups
        groups = rng.choice(n, size=batch_size, replace=batch_size > n)
        inputs, labels = [], []
        for g in groups:
            k = int(np.searchsorted(self._group_offsets, g, side="right")) - 1
            s, local = self._train_sets[k], int(g - self._group_offsets[k])
            puzzle = int(rng.integers(s.group_indices[local], s.group_indices[local + 1]))
            example = int(rng.integers(s.puzzle_indices[puzzle], s.puzzle_indices[puzzle + 1]))
            inputs.append(s.inputs[example])
            labels.append(s.labels[example])
        return to_sequences(np.stack(inputs), np.stack(labels), self.layout, self.ignore_label_id)

    def test_batches(self, batch_size: int, max_examples: int | None = None) -> Iterator[PuzzleSequences]:
        """Every example of the test split in order; up to `max_examples` per set, as `hrm eval`."""
        for s in self.test.sets.values():
            n = s.inputs.shape[0] if max_examples is None else min(max_examples, s.inputs.shape[0])
            for start in range(0, n, batch_size):
                stop = min(start + batch_size, n)
                yield to_sequences(
                    np.asarray(s.inputs[start:stop]),
                    np.asarray(s.labels[start:stop]),
                    self.layout,
                    self.ignore_label_id,
                )

    def num_test_examples(self, max_examples: int | None = None) -> int:
        return sum(
            s.inputs.shape[0] if max_examples is None else min(max_examples, s.inputs.shape[0])
            for s in self.test.sets.values()
        )

    def record(self) -> dict[str, Any]:
        """The step-0 line of metrics.jsonl."""
        return {
            "train_examples": self.train.num_examples,
            "test_examples": self.test.num_examples,
            "puzzle_seq_len": self.layout.puzzle_len,
            "sequence_len": self.layout.seq_len,
            "sep_id": self.layout.sep_id,
        }


# ------------------------------------------------------------------------------------------------------- evaluation
