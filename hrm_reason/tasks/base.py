"""What a task gives evaluation, declared once: its own score per segment (`SegmentMetric`: maze optimal paths, ARC
votes), its symmetry group for test-time augmentation (`TaskTransforms`), and the one ranking of votes (`vote_order`).
The task modules implement them; hrm_reason/evaluate runs them."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from hrm_reason.models.act import ACTOutput


class SegmentMetric(Protocol):
    """A task's own score, computed on the fly beside exact accuracy (maze: optimal paths; ARC: votes).

    `update` sees every segment of every batch (segment is 0-based; rows where `valid` is false are padding) and must
    only reduce, never keep logits. `result` runs once, after all batches, on every rank: it reduces across ranks when
    world_size > 1 and returns JSON-ready values. A list of length mmax is a per-segment column in the eval table.
    """

    def update(
        self, segment: int, preds: torch.Tensor, out: ACTOutput, batch: dict[str, torch.Tensor], valid: torch.Tensor
    ) -> None: ...

    def result(self, world_size: int) -> dict[str, Any]: ...


class TaskTransforms(Protocol):
    """A task's symmetry group acting on token sequences [rows, seq_len], with exact inverses (hrm_reason.tasks).

    `draw` returns the elements of copies 1..copies-1 (copy 0 is the identity), each one element per row; drawn
    sequentially from `rng`, so the first k copies do not depend on how many are drawn."""

    @property
    def group_size(self) -> int:
        """Elements of the group: more copies than this only repeat them (evaluate/tta.py caps --tta there)."""
        ...

    @property
    def group_name(self) -> str: ...

    def draw(self, rng: np.random.Generator, rows: int, copies: int) -> list[Any]: ...

    def apply(self, tokens: np.ndarray, element: Any) -> np.ndarray: ...

    def invert(self, tokens: np.ndarray, element: Any) -> np.ndarray: ...


def vote_order(counts: torch.Tensor, mean_q: torch.Tensor) -> torch.Tensor:
    """Candidates best first along the last axis: most votes, then the highest mean confidence, then the earlier
    candidate. The one ranking of every vote here and in ARC's (tasks/arc.py `rank_candidates`)."""
    by_q = torch.sort(mean_q, dim=-1, descending=True, stable=True).indices
    by_count = torch.sort(counts.gather(-1, by_q), dim=-1, descending=True, stable=True).indices
    return by_q.gather(-1, by_count)
