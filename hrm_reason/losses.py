"""Token losses: stablemax / softmax cross-entropy (the ACT loss of the puzzle models, models/act.py, is built on them)
and the next-token cross-entropy of the language-model heads."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

IGNORE_LABEL_ID = -100
LossType = Literal["stablemax_cross_entropy", "softmax_cross_entropy"]


def stablemax_s(x: torch.Tensor, epsilon: float = 1e-30) -> torch.Tensor:
    """s(x) = x + 1 for x >= 0 and 1 / (1 - x) for x < 0: positive, monotone, linear growth instead of exponential."""
    return torch.where(x < 0, 1 / (1 - x + epsilon), x + 1)


def log_stablemax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    s_x = stablemax_s(x)
    return torch.log(s_x / s_x.sum(dim=dim, keepdim=True))


def stablemax_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_LABEL_ID
) -> torch.Tensor:
    """Per-token loss, in float64 as the original (small probabilities lose precision in fp32); 0 where ignored."""
    logprobs = log_stablemax(logits.to(torch.float64), dim=-1)
    valid = labels != ignore_index
    picked = torch.gather(logprobs, -1, torch.where(valid, labels, 0).long().unsqueeze(-1)).squeeze(-1)
    return -torch.where(valid, picked, 0)


def softmax_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_LABEL_ID
) -> torch.Tensor:
    loss = F.cross_entropy(
        logits.float().flatten(0, -2), labels.long().flatten(), ignore_index=ignore_index, reduction="none"
    )
    return loss.view(labels.shape)


LOSS_FUNCTIONS = {"stablemax_cross_entropy": stablemax_cross_entropy, "softmax_cross_entropy": softmax_cross_entropy}


def next_token_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean CE of logits[:, :-1] against labels[:, 1:] (HF-style unshifted labels) over labels != -100, in fp32;
    0 when nothing is labelled."""
    targets = labels[:, 1:].reshape(-1)
    total = F.cross_entropy(
        logits[:, :-1].float().reshape(-1, logits.shape[-1]), targets, ignore_index=IGNORE_LABEL_ID, reduction="sum"
    )
    return total / (targets != IGNORE_LABEL_ID).sum().clamp(min=1)
