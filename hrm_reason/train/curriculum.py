"""Training levers on the recursion itself (CGAR, arXiv 2511.08653; docs/training.md "Levers"): a depth curriculum
that runs fewer H/L cycles early in the run, and the weighting of each supervision segment's loss by lambda^(t-1).

Both are off by default. The depth of a stage is passed to the model per call (models/act.py `cycles`), so nothing is
rebuilt and the one-step gradient (HRM) or last-recursion gradient (TRM) holds at every depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from hrm_reason.config import DepthStage
from hrm_reason.models.flops import ACTFlops
from hrm_reason.models.registry import flop_count


def depth_at(stages: Sequence[DepthStage], progress: float) -> tuple[int, int] | None:
    """(H_cycles, L_cycles) of the stage at `progress` (the share of the run done before this step), or None when the
    run is past every stage (the model's own depth: the call is then exactly the one without a curriculum)."""
    for stage in stages:
        if progress < stage.until:
            return stage.H_cycles, stage.L_cycles
    return None


def flops_at_depth(config: Any, cycles: tuple[int, int] | None = None) -> ACTFlops:
    """The FLOPs per example of a resolved hrm or trm config at depth `cycles` (H_cycles, L_cycles; None: its own):
    what a curriculum's cheaper steps cost."""
    if cycles is not None:
        config = config.model_copy(update={"H_cycles": cycles[0], "L_cycles": cycles[1]})
    return flop_count(config)


def train_flops(config: Any, stages: Sequence[DepthStage], total_steps: int, steps: int | None = None) -> float:
    """Training FLOPs per example summed over the first `steps` steps (all by default) of a run of `total_steps`
    scheduled over steps, each step at its stage's depth (with schedule_over=seconds the stage follows the clock: sum
    the logged train/H_cycles, train/L_cycles instead)."""
    steps = total_steps if steps is None else steps
    progress = np.arange(steps) / total_steps
    per_stage = np.bincount(
        np.searchsorted([s.until for s in stages], progress, side="right"), minlength=len(stages) + 1
    )
    depths = [(s.H_cycles, s.L_cycles) for s in stages] + [None]
    return float(sum(int(n) * flops_at_depth(config, d).train_step for n, d in zip(per_stage, depths) if n))


def segment_weights(steps: torch.Tensor, decay: float, halt_max_steps: int) -> torch.Tensor:
    """[B] weight of each row's loss at its segment t = `steps` (1-based): decay^(t-1), normalised to average 1 over
    the halt_max_steps segments, so that decay 1 is the unweighted loss and the loss scale stays that of the original."""
    t = steps.clamp(1, halt_max_steps).to(torch.float64) - 1
    norm = sum(decay**k for k in range(halt_max_steps)) / halt_max_steps
    return (decay**t) / norm
