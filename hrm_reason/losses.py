"""Losses: stablemax / softmax cross-entropy and the ACT loss with its Q-learning terms (puzzle models), and the
next-token cross-entropy of the language-model heads."""

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


def stablemax_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_LABEL_ID) -> torch.Tensor:
    """Per-token loss, in float64 as the original (small probabilities lose precision in fp32); 0 where ignored."""
    logprobs = log_stablemax(logits.to(torch.float64), dim=-1)
    valid = labels != ignore_index
    picked = torch.gather(logprobs, -1, torch.where(valid, labels, 0).long().unsqueeze(-1)).squeeze(-1)
    return -torch.where(valid, picked, 0)


def softmax_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_LABEL_ID) -> torch.Tensor:
    loss = F.cross_entropy(logits.float().flatten(0, -2), labels.long().flatten(), ignore_index=ignore_index, reduction="none")
    return loss.view(labels.shape)


LOSS_FUNCTIONS = {"stablemax_cross_entropy": stablemax_cross_entropy, "softmax_cross_entropy": softmax_cross_entropy}


def act_loss(
    outputs: dict[str, torch.Tensor], labels: torch.Tensor, halted: torch.Tensor, steps: torch.Tensor, loss_type: LossType
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Total loss = lm + 0.5 * (q_halt + q_continue), each summed over the batch; plus summed metrics.

    lm is the per-sequence mean token loss summed over sequences; q_halt is trained towards "this segment's answer is
    exactly right"; q_continue towards the bootstrapped target computed by the model. Metrics count halted rows only.
    """
    logits = outputs["logits"]
    mask = labels != IGNORE_LABEL_ID
    loss_counts = mask.sum(-1)
    divisor = loss_counts.clamp_min(1).unsqueeze(-1)

    with torch.no_grad():
        is_correct = mask & (logits.argmax(-1) == labels)
        seq_is_correct = is_correct.sum(-1) == loss_counts
        valid = halted & (loss_counts > 0)
        metrics = {
            "count": valid.sum(),
            "accuracy": torch.where(valid, (is_correct.float() / divisor).sum(-1), 0).sum(),
            "exact_accuracy": (valid & seq_is_correct).sum(),
            "q_halt_accuracy": (valid & ((outputs["q_halt_logits"] >= 0) == seq_is_correct)).sum(),
            "steps": torch.where(valid, steps, 0).sum(),
        }

    lm_loss = (LOSS_FUNCTIONS[loss_type](logits, labels) / divisor).sum()
    q_halt_loss = F.binary_cross_entropy_with_logits(
        outputs["q_halt_logits"], seq_is_correct.to(outputs["q_halt_logits"].dtype), reduction="sum"
    )
    metrics.update(lm_loss=lm_loss.detach(), q_halt_loss=q_halt_loss.detach())
    total = lm_loss + 0.5 * q_halt_loss
    if "target_q_continue_mask" in outputs:  # q_target=next_segment: last step's continue prediction, on rows that went on
        terms = F.binary_cross_entropy_with_logits(outputs["q_continue_prediction"], outputs["target_q_continue"], reduction="none")
        q_continue_loss = torch.where(outputs["target_q_continue_mask"], terms, 0).sum()
    elif "target_q_continue" in outputs:
        q_continue_loss = F.binary_cross_entropy_with_logits(outputs["q_continue_logits"], outputs["target_q_continue"], reduction="sum")
    if "target_q_continue" in outputs:
        metrics["q_continue_loss"] = q_continue_loss.detach()
        total = total + 0.5 * q_continue_loss
    return total, metrics


def next_token_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean CE of logits[:, :-1] against labels[:, 1:] (HF-style unshifted labels) over labels != -100, in fp32;
    0 when nothing is labelled."""
    targets = labels[:, 1:].reshape(-1)
    total = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), targets, ignore_index=IGNORE_LABEL_ID,
                            reduction="sum")
    return total / (targets != IGNORE_LABEL_ID).sum().clamp(min=1)
