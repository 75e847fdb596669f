"""Device choice and the precision policy (the matrix-product peak that MFU is measured against: runtime/peak.py).

Precision, one policy for every model, set by the run's `forward_dtype`: fp32 on a CPU, always (bf16 matmuls there
are slow and inexact; bfloat16 asked for there says so in one warning line); on CUDA, bf16 compute over fp32 master
weights unless the run asks for float32. `compute_dtype` is the one place that decides. The ACT puzzle models apply it
inside their layers (weights cast to the compute dtype as the original HRM code does, so that their bf16 numerics are
the original's); the language-model heads run under `autocast_context` (docs/training.md, Precision)."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from functools import cache
from typing import Literal

import torch
import torch.distributed as dist

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


def compute_dtype(forward_dtype: str, device: torch.device) -> Literal["float32", "bfloat16"]:
    """The dtype a model computes in on `device` (docs/training.md, Precision): bf16 on CUDA for auto and bfloat16,
    fp32 otherwise. Every family asks here, so a CPU computes in fp32 whatever the model; bfloat16 asked for on a CPU
    is not silently dropped but said once (`warn_bf16_on_cpu`)."""
    if device.type == "cuda" and forward_dtype in ("auto", "bfloat16"):
        return "bfloat16"
    if forward_dtype == "bfloat16":
        warn_bf16_on_cpu()
    return "float32"


@cache
def warn_bf16_on_cpu() -> None:
    """One line per process, from the first process only: the dtype is resolved at every build and every autocast
    (each LM step), and the answer never changes within a run. `cache_clear()` re-arms it (tests)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(
            "warning: forward_dtype=bfloat16 on a CPU: computing in float32 (bf16 matrix products on CPUs are slow "
            "and inexact; docs/training.md, Precision)",
            file=sys.stderr,
        )


def autocast_context(device: torch.device, forward_dtype: str = "auto") -> AbstractContextManager[None]:
    """bf16 autocast where `compute_dtype` says bf16 (CUDA, auto or bfloat16), never on a CPU."""
    bf16 = compute_dtype(forward_dtype, device) == "bfloat16"
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16)


def free_memory(device: torch.device) -> int:
    """Bytes free for tensors on `device` now: the GPU's free memory, or the machine's available memory (Linux's
    MemAvailable, counting reclaimable caches); 4 GiB where neither can be read."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
