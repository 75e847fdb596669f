"""Stop requests during training: Ctrl-C (SIGINT), SIGTERM (what SLURM and Kubernetes send before a kill) and SIGUSR1
(what SLURM sends before the time limit with `--signal`). The first asks the loop to finish the current step and write
a checkpoint; a second stops at once. The process then exits with the shell's code for the signal, 128 + its number
(130, 143, 138), so a scheduler sees a signalled run rather than a failure.

Under torchrun one stop often reaches a worker twice: a scheduler signals every process of the job (SLURM at the time
limit, `scancel`), torchrun among them, and torchrun forwards what it receives to its workers. So there a signal within
`repeat_window` seconds of the first is the same request, not a second one."""

from __future__ import annotations

import signal
import time
from typing import Any

# Under torchrun: a repeat within this many seconds of the first signal is the same stop (the module's docstring).
FORWARDED_WITHIN = 5.0

# SIGUSR1 does not exist on Windows.
STOP_SIGNALS = tuple(
    s for s in (getattr(signal, name, None) for name in ("SIGINT", "SIGTERM", "SIGUSR1")) if s is not None
)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class Stopped(SystemExit):
    """The run stopped on SIGTERM or SIGUSR1. A SystemExit with the shell's code, so the process exits with it through
    any caller (typer turns a KeyboardInterrupt into exit 130 whatever its type)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum
        self.exit_code = 128 + signum


class StopRequest:
    def __init__(self, repeat_window: float = 0.0) -> None:
        self.requested = False
        self.signum: int | None = None
        self.repeat_window = repeat_window
        self._first_at = 0.0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        def handler(signum: int, frame: Any) -> None:
            if self.requested:
                if time.monotonic() - self._first_at < self.repeat_window:
                    return  # the same stop, delivered again (torchrun forwarding the scheduler's signal)
                raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(signum)
            self.requested, self.signum, self._first_at = True, signum, time.monotonic()

        for s in STOP_SIGNALS:
            try:
                self._previous[s] = signal.signal(s, handler)
            except ValueError:  # not in the main thread
                break
        return self

    def join(self, signum: int) -> None:
        """Stop with the others: another process of the run was asked to stop by `signum` (0: unknown), so that every
        process stops at the same step and exits with the same code."""
        if not self.requested:
            self.requested, self.signum, self._first_at = True, signum or None, time.monotonic()

    def stopped(self) -> Stopped | KeyboardInterrupt:
        """What to raise once the requested stop is done: Ctrl-C stays a plain KeyboardInterrupt (exit 130)."""
        return KeyboardInterrupt() if self.signum in (None, signal.SIGINT) else Stopped(self.signum)

    def __exit__(self, *exc: Any) -> None:
        for s, previous in self._previous.items():
            if previous is not None:  # None: a handler installed outside Python, which cannot be put back
                signal.signal(s, previous)
