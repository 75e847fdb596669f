"""torchrun processes: set up and tear down the process group, agree on decisions every rank must take together, and
turn a lost process into one line instead of a hang or a backend's traceback (docs/training.md, "Several processes
and machines")."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import NoReturn

import torch
import torch.distributed as dist

from hrm_reason.errors import UserError

# How long a process waits in a collective for the others before it gives up (gloo and NCCL alike): a process that
# died is usually seen at once (its connections close), one that hangs or whose machine vanished only after this.
# Long enough for the slowest thing one rank does while the others wait: rank 0 writing a checkpoint, a first
# torch.compile, loading a large dataset at start.
TIMEOUT_ENV = "HRM_DIST_TIMEOUT"
DEFAULT_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class Processes:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    distributed: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def collective_timeout() -> timedelta:
    """$HRM_DIST_TIMEOUT seconds, else DEFAULT_TIMEOUT_SECONDS."""
    value = os.environ.get(TIMEOUT_ENV, "")
    try:
        seconds = float(value) if value else DEFAULT_TIMEOUT_SECONDS
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UserError(f"{TIMEOUT_ENV}={value}: expected a number of seconds > 0")
    return timedelta(seconds=seconds)


@contextmanager
def processes(device_name: str) -> Iterator[Processes]:
    """Under torchrun (LOCAL_RANK set): a process group (nccl on CUDA, gloo on a CPU), destroyed on exit."""
    if "LOCAL_RANK" not in os.environ:
        yield Processes()
        return
    backend = "nccl" if torch.cuda.is_available() and device_name != "cpu" else "gloo"
    dist.init_process_group(backend, timeout=collective_timeout())
    try:
        yield Processes(dist.get_rank(), dist.get_world_size(), int(os.environ["LOCAL_RANK"]), True)
    finally:
        dist.destroy_process_group()


def exit_without_teardown(main: Callable[[], None]) -> NoReturn:
    """Run a torchrun process's command, then end the process at once with its exit code, skipping the interpreter's
    teardown. Once DDP has wrapped a model, destroying the process group leaves gloo's worker threads running (the
    backend stays referenced); one still releasing the tensors of the last collective when the interpreter finalizes
    needs the GIL, is ended mid-call, and the process aborts ("terminate called without an active exception", seen on
    a rank that finished while rank 0 was saving). Output is flushed first; the run's files are closed by then."""
    try:
        main()
        code = 0
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def max_over_ranks(
    values: list[bool | int | float | torch.Tensor], world_size: int, device: torch.device
) -> list[float]:
    """Each value's maximum over the ranks."""
    stacked = torch.stack([torch.as_tensor(v, device=device) for v in values]).float()
    if world_size > 1:
        dist.all_reduce(stacked, op=dist.ReduceOp.MAX)
    return stacked.tolist()


def any_rank(flags: list[bool | torch.Tensor], world_size: int, device: torch.device) -> list[bool]:
    """Each flag true on some rank: every process must take the same branch (stop, fail) or the others wait forever."""
    return [bool(v) for v in max_over_ranks(list(flags), world_size, device)]


def barrier(world_size: int, device: torch.device) -> None:
    """Return once every rank has reached it (a collective on the run's device, as the loop's own)."""
    any_rank([False], world_size, device)


def sum_over_ranks(values: torch.Tensor, world_size: int) -> torch.Tensor:
    if world_size > 1:
        dist.all_reduce(values)
    return values


def lost_process(error: BaseException) -> str | None:
    """What a collective's failure says, in a line, when another process died or stopped answering; None for any other
    error. gloo raises a RuntimeError naming its source file (`[.../gloo/transport/tcp/pair.cc:537] Read error ...:
    Connection reset by peer. This is typically caused by ...`), NCCL and c10d a DistError."""
    text = str(error)
    if not (isinstance(error, dist.DistError) or (isinstance(error, RuntimeError) and "gloo" in text)):
        return None
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    first = re.sub(r"^\[[^\]]*\]\s*", "", first)  # the backend's source file and line
    return first.split(". ")[0].rstrip(".")
