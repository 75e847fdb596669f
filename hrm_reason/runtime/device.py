"""Device choice, the precision policy and compilation.

Precision, one policy for every model, set by the run's `forward_dtype`: fp32 on a CPU, always (bf16 matmuls there
are slow and inexact); on CUDA, bf16 compute over fp32 master weights unless the run asks for float32. The ACT puzzle
models apply it inside their layers (weights cast to the compute dtype as the original HRM code does, so that their
bf16 numerics are the original's); the language-model heads run under `autocast_context` (docs/training.md,
Precision)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Literal

import torch

from hrm_reason.errors import UserError

DeviceName = Literal["auto", "cpu", "cuda"]
DEVICE_NAMES: tuple[str, ...] = ("auto", "cpu", "cuda")


def check_device_name(name: str, flag: str = "--device") -> str:
    """The one check of a `--device` value, as a one-line error."""
    if name not in DEVICE_NAMES:
        raise UserError(f"{flag} {name}: expected {', '.join(DEVICE_NAMES[:-1])} or {DEVICE_NAMES[-1]}")
    return name


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device=cuda was asked for but CUDA is not available; use device=cpu or device=auto")
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def autocast_context(device: torch.device, forward_dtype: str = "auto") -> AbstractContextManager[None]:
    """bf16 autocast on CUDA (auto or bfloat16), never on a CPU; float32 turns it off everywhere."""
    bf16 = forward_dtype in ("auto", "bfloat16") and device.type == "cuda"
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16)


def compile_model(model: torch.nn.Module) -> None:
    """torch.compile the recurrent core in place (`model.inner` where a model has one, else the whole model): parameter
    names, hence checkpoints, are unchanged; ACT bookkeeping around the core stays eager."""
    getattr(model, "inner", model).compile()
