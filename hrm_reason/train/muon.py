"""`optimizer: muon`: torch's Muon on the weight matrices of the model's blocks, another optimizer on the rest.

Muon orthogonalises the momentum of a matrix that maps hidden activations to hidden activations; an embedding row,
an output head, a gain or a bias is not such a matrix (Muon's authors train those with Adam), so the split is by what
a parameter does, not only by its shape: docs/training.md, "Muon: the parameter split".
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import Optimizer

from hrm_reason.errors import UserError
from hrm_reason.models.layers import CastedEmbedding, CastedLinear

# Linear layers whose output leaves the network (token logits, halting logits): Adam's, as Muon's authors advise for
# the output layer (docs/training.md, "Muon: the parameter split").
OUTPUT_HEADS = ("lm_head", "q_head")
# A param group's lr relative to the run's `lr`: the schedule sets group lr = scheduled lr * this (optim.set_lr;
# docs/training.md, "Muon: one schedule, two learning rates").
LR_SCALE = "lr_scale"


def muon_split(model: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(Muon's, the other optimizer's) trainable parameters, each in the model's parameter order: Muon takes the
    weight of every linear layer but the output heads; embeddings (a tied head among them), norms, biases, scalars
    and convolution kernels go to the other."""
    not_hidden: set[int] = set()
    linear: set[int] = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Embedding | CastedEmbedding):
            not_hidden.add(id(module.weight))
        elif name.rpartition(".")[2] in OUTPUT_HEADS:
            not_hidden.update(id(p) for p in module.parameters())
        if isinstance(module, nn.Linear | CastedLinear):
            linear.add(id(module.weight))
    trainable = [p for p in model.parameters() if p.requires_grad]
    muon = [p for p in trainable if id(p) in linear and id(p) not in not_hidden and p.ndim == 2]
    chosen = {id(p) for p in muon}
    return muon, [p for p in trainable if id(p) not in chosen]


def make_muon(
    params: list[nn.Parameter], lr: float, weight_decay: float, lr_scale: float, model_name: str
) -> Optimizer:
    """torch.optim.Muon (`Muon`: fp32 on a CPU) with the defaults of Muon's reference implementation (momentum 0.95,
    Nesterov, 5 Newton-Schulz steps, lr scaled by sqrt(max(1, rows / cols))); refused in one line naming `optimizer`
    where it cannot apply.
    The defaults and their sources: docs/training.md, "Muon (`optimizer: muon`)"."""
    if getattr(torch.optim, "Muon", None) is None:
        raise UserError(
            f"optimizer: muon needs torch.optim.Muon (torch 2.9 or later); this torch is {torch.__version__}"
        )
    if not params:
        raise UserError(
            f"optimizer: muon trains the weight matrices of the blocks' linear layers, and arch.name {model_name} "
            "has none to train: use adam_atan2 or adamw"
        )
    group: dict[str, Any] = {"params": params, LR_SCALE: lr_scale}
    return Muon([group], lr=lr, weight_decay=weight_decay)


def newton_schulz(update: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float) -> Tensor:
    """torch.optim.Muon's orthogonalisation of `update` (its quintic Newton-Schulz iteration, op for op), computed in
    the dtype of `update` where torch casts to bf16."""
    a, b, c = coefficients
    tall = update.size(0) > update.size(1)
    x = update.T if tall else update
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def newton_schulz_flops(model: nn.Module, steps: int = 5) -> float:
    """FLOPs of one Muon step's orthogonalisations over the model's Muon matrices (`muon_split`): each of its `steps`
    iterations on an m x n matrix (m <= n) makes a Gram matrix (2 m^2 n), a cubic of it (2 m^3) and the product with
    the matrix (2 m^2 n). Not in the model's count (`train_flops`): the lever study adds it for Muon's arms."""
    total = 0
    for p in muon_split(model)[0]:
        m, n = sorted(p.shape)
        total += steps * (4 * m * m * n + 2 * m**3)
    return float(total)


# torch.optim.Muon (torch 2.9 and later); on an older torch make_muon refuses before building one.
TorchMuon: type[Optimizer] = getattr(torch.optim, "Muon", Optimizer)


class Muon(TorchMuon):  # type: ignore[misc,valid-type]
    """torch.optim.Muon whose Newton-Schulz iteration runs in fp32 on a CPU. torch computes it in bf16, which CPUs
    run about 30 times slower than fp32: on the quickstart model that tripled a training step (docs/training.md,
    "Muon on a CPU"). On a GPU the step is torch's own. Same state and groups, so checkpoints load either way."""

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        if not any(p.device.type == "cpu" for group in self.param_groups for p in group["params"]):
            return super().step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params: list[Tensor] = []
            grads: list[Tensor] = []
            buffers: list[Tensor] = []
            self._init_group(group, params, grads, buffers)
            lr, momentum, weight_decay = float(group["lr"]), group["momentum"], group["weight_decay"]
            for param, grad, buffer in zip(params, grads, buffers, strict=True):
                buffer.lerp_(grad, 1 - momentum)
                update = grad.lerp(buffer, momentum) if group["nesterov"] else buffer
                update = newton_schulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
                param.mul_(1 - lr * weight_decay)
                param.add_(update, alpha=-lr * adjusted_lr_ratio(group["adjust_lr_fn"], param.shape))
        return loss


def adjusted_lr_ratio(adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """torch.optim.Muon's per-matrix lr factor: 0.2 sqrt(max(rows, cols)) for "match_rms_adamw", else (None or
    "original", the only other value torch's constructor accepts) sqrt(max(1, rows / cols)), the reference's."""
    rows, cols = shape[:2]
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return math.sqrt(max(1, rows / cols))


class SplitOptimizer(Optimizer):
    """Several optimizers, each over its own parameters, stepped, scheduled and checkpointed as one: `param_groups` is
    theirs (the same dicts, so setting a group's lr sets it in its optimizer) and the state dict holds each one's
    under its name, so a resumed run restores every state."""

    def __init__(self, parts: dict[str, Optimizer]) -> None:
        self.parts = parts
        super().__init__(self._groups(), {})

    def _groups(self) -> list[dict[str, Any]]:
        return [group for part in self.parts.values() for group in part.param_groups]

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for part in self.parts.values():
            part.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for part in self.parts.values():
            part.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        return {name: part.state_dict() for name, part in self.parts.items()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:  # type: ignore[override]
        if not isinstance(state_dict, dict) or set(state_dict) != set(self.parts):
            found = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise ValueError(f"it holds {found}, not the states of {sorted(self.parts)}")
        for name, part in self.parts.items():
            part.load_state_dict(state_dict[name])
        self.param_groups = self._groups()  # loading replaces each optimizer's group dicts
