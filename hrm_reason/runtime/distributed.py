"""torchrun processes: set up and tear down the process group, and agree on decisions every rank must take together."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Processes:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    distributed: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0


@contextmanager
def processes(device_name: str) -> Iterator[Processes]:
    """Under torchrun (LOCAL_RANK set): a process group (nccl on CUDA, gloo on a CPU), destroyed on exit."""
    if "LOCAL_RANK" not in os.environ:
        yield Processes()
        return
    backend = "nccl" if torch.cuda.is_available() and device_name != "cpu" else "gloo"
    dist.init_process_group(backend)
    try:
        yield Processes(dist.get_rank(), dist.get_world_size(), int(os.environ["LOCAL_RANK"]), True)
    finally:
        dist.destroy_process_group()


def any_rank(flags: list[bool | torch.Tensor], world_size: int, device: torch.device) -> list[bool]:
    """Each flag true on some rank: every process must take the same branch (stop, fail) or the others wait forever."""
    values = torch.stack([torch.as_tensor(f, device=device) for f in flags]).float()
    if world_size > 1:
        dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return [bool(v) for v in values.tolist()]


def sum_over_ranks(values: torch.Tensor, world_size: int) -> torch.Tensor:
    if world_size > 1:
        dist.all_reduce(values)
    return values
