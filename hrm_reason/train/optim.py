"""Optimizers and the learning-rate schedule of the original training recipe."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch
from torch.optim import Optimizer

from hrm_reason.errors import UserError
from hrm_reason.train.muon import LR_SCALE, SplitOptimizer, make_muon, muon_split

if TYPE_CHECKING:
    from hrm_reason.config import TrainConfig


class AdamAtan2(Optimizer):
    """Adam with atan2 in place of m / (sqrt(v) + eps): scale-invariant and eps-free.

    The update is the one of the original fused CUDA kernel (`adam-atan2`):
        p <- p * (1 - lr * wd);  m, v <- EMAs of g, g^2
        p <- p - lr / (1 - b1^t) * atan2(m, sqrt(v) / sqrt(1 - b2^t))
    `adam-atan2-pytorch` differs (bias correction inside atan2, a scale of 1.27), so it is not used here.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.95),
        weight_decay: float = 0.0,
    ) -> None:
        if lr < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"invalid AdamAtan2 settings: lr={lr}, betas={betas}, weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        for group in self.param_groups:
            lr, wd, (beta1, beta2) = group["lr"], group["weight_decay"], group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = state["step"].item()
                grad = p.grad.float() if p.grad.dtype != p.dtype else p.grad
                m, v = state["exp_avg"], state["exp_avg_sq"]
                p.mul_(1 - lr * wd)
                m.lerp_(grad, 1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = lr / (1 - beta1**t)
                denom = v.sqrt().div_(math.sqrt(1 - beta2**t))  # one temporary, reused for the atan2
                p.add_(torch.atan2(m, denom, out=denom), alpha=-step_size)
        return None


def make_adam_atan2(
    params: Iterable[torch.Tensor], lr: float, betas: tuple[float, float], weight_decay: float, device: torch.device
) -> Optimizer:
    """The fused CUDA kernel when it is installed (extra `[cuda]`) and we are on CUDA; the portable one otherwise."""
    if device.type == "cuda":
        try:
            from adam_atan2 import AdamATan2 as FusedAdamATan2  # type: ignore[import-not-found]

            return FusedAdamATan2(params, lr=lr, betas=betas, weight_decay=weight_decay)
        except ImportError:
            pass
    return AdamAtan2(params, lr=lr, betas=betas, weight_decay=weight_decay)


def make_optimizer(config: TrainConfig, model: torch.nn.Module, device: torch.device) -> Optimizer:
    """The run's optimizer (config.optimizer) over the model's trainable parameters. `muon`: Muon on the blocks'
    weight matrices at muon_lr, AdamAtan2 on the rest at lr (train/muon.py; docs/training.md, "Muon")."""
    params = [p for p in model.parameters() if p.requires_grad]
    betas = (config.beta1, config.beta2)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=config.lr, betas=betas, weight_decay=config.weight_decay)
    if config.optimizer == "muon":
        matrices, rest = muon_split(model)
        muon = make_muon(
            matrices, config.muon_lr, config.muon_weight_decay, config.muon_lr / config.lr, config.model_name
        )
        parts = {"muon": muon}
        if rest:
            parts["adam_atan2"] = make_adam_atan2(
                rest, lr=config.lr, betas=betas, weight_decay=config.weight_decay, device=device
            )
        return SplitOptimizer(parts)
    return make_adam_atan2(params, lr=config.lr, betas=betas, weight_decay=config.weight_decay, device=device)


def set_lr(optimizer: Optimizer, lr: float) -> None:
    """Every param group at `lr`, the schedule's value of the run's lr, but a group with its own base lr (Muon's,
    muon_lr) at `lr` times its LR_SCALE (muon_lr / lr): one schedule scales every group by the same factor
    (docs/training.md, "Muon: one schedule, two learning rates")."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group[LR_SCALE] if LR_SCALE in group else lr


def load_optimizer_state(optimizer: Optimizer, state: dict, name: str) -> None:
    """A checkpoint's optimizer state into `optimizer` (config.optimizer `name`); one line naming `optimizer` when the
    state is another optimizer's (a resume with optimizer=... changed) or is for other parameters."""
    try:
        optimizer.load_state_dict(state)
    except (KeyError, ValueError, TypeError) as e:
        reason = f"no {e}" if isinstance(e, KeyError) else (str(e).splitlines() or [type(e).__name__])[0]
        raise UserError(
            f"optimizer: the checkpoint's optimizer state does not fit optimizer {name} on this model ({reason}); "
            "resume with the optimizer and model the run was saved with"
        ) from None


def cosine_schedule_with_warmup(
    step: float, base_lr: float, warmup_steps: int, total_steps: int, min_ratio: float
) -> float:
    """Linear warmup from 0 (step counts from 1), then cosine from base_lr to min_ratio * base_lr."""
    if step < warmup_steps:
        return base_lr * step / max(1, warmup_steps)
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return base_lr * (min_ratio + max(0.0, (1 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))))


def lr_at(schedule: str, step: float, base_lr: float, warmup_steps: int, total_steps: int, min_ratio: float) -> float:
    """The learning rate of `schedule` (config lr_schedule) at `step` (counting from 1): the same linear warmup, then
    cosine or linear decay from base_lr to min_ratio * base_lr at total_steps, or base_lr throughout (constant)."""
    if schedule == "cosine":
        return cosine_schedule_with_warmup(step, base_lr, warmup_steps, total_steps, min_ratio)
    if step < warmup_steps:
        return base_lr * step / max(1, warmup_steps)
    if schedule == "constant":
        return base_lr
    if schedule != "linear":
        raise ValueError(f"unknown lr_schedule {schedule!r} (expected cosine, linear or constant)")
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return base_lr * (min_ratio + (1 - min_ratio) * (1 - progress))


def scheduled_lr(config: TrainConfig, base_lr: float, position: float, total_steps: int) -> float:
    """Warmup then config.lr_schedule (cosine decay to lr_min_ratio by default), at schedule position `position` of
    `total_steps`."""
    return lr_at(config.lr_schedule, position, base_lr, config.lr_warmup_steps, total_steps, config.lr_min_ratio)
