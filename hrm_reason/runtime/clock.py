"""A run's clock for time to accuracy: training and evaluation time, wall and CPU, summed over every start and
resume of the run (the totals travel in the checkpoint's state). What each total includes: docs/training.md, "Time to
accuracy"."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

KEYS = ("train_wall_seconds", "train_cpu_seconds", "eval_wall_seconds", "eval_cpu_seconds", "checkpoint_wall_seconds")


def now() -> tuple[float, float]:
    """(wall, CPU) seconds; process_time counts every thread of the process (the prefetch thread, torch's pool)."""
    return time.perf_counter(), time.process_time()


@dataclass
class RunClock:
    """Time since the training loop began, split by what the process was doing. Training is everything between
    evaluations and checkpoint writes: data, forward, backward, optimizer, logging."""

    train_wall_seconds: float = 0.0
    train_cpu_seconds: float = 0.0
    eval_wall_seconds: float = 0.0
    eval_cpu_seconds: float = 0.0
    checkpoint_wall_seconds: float = 0.0
    _mark: tuple[float, float] = field(default_factory=now, repr=False)

    @classmethod
    def resumed(cls, state: dict[str, Any] | None) -> RunClock:
        """The totals saved with a checkpoint (zeros for a new run or a checkpoint from before the clock)."""
        saved = (state or {}).get("clock") or {}
        return cls(**{k: float(saved.get(k, 0.0)) for k in KEYS})

    def start(self) -> None:
        self._mark = now()

    def _lap(self) -> tuple[float, float]:
        mark, self._mark = self._mark, now()
        return self._mark[0] - mark[0], self._mark[1] - mark[1]

    def totals(self) -> dict[str, float]:
        """The totals at the last evaluation or checkpoint."""
        return {k: v for k, v in asdict(self).items() if k in KEYS}

    def _train_lap(self) -> None:
        wall, cpu = self._lap()
        self.train_wall_seconds += wall
        self.train_cpu_seconds += cpu

    @contextmanager
    def aside(self, what: Literal["eval", "checkpoint"]) -> Iterator[None]:
        """Time in the block is not training: it closes the training lap, and counts as `what` (checkpoint writes
        in wall time only: the disk waits, the CPU does not)."""
        self._train_lap()
        yield
        wall, cpu = self._lap()
        if what == "eval":
            self.eval_wall_seconds += wall
            self.eval_cpu_seconds += cpu
        else:
            self.checkpoint_wall_seconds += wall
