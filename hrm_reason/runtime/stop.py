"""Stop requests during training: Ctrl-C (SIGINT), SIGTERM (what SLURM and Kubernetes send before a kill) and SIGUSR1
(what SLURM sends before the time limit with `--signal`). The first asks the loop to finish the current step and write
a checkpoint; a second stops at once. The process then exits with the shell's code for the signal, 128 + its number
(130, 143, 138), so a scheduler sees a signalled run rather than a failure."""

from __future__ import annotations

import signal
from typing import Any

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
    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        def handler(signum: int, frame: Any) -> None:
            if self.requested:
                raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(signum)
            self.requested, self.signum = True, signum

        for s in STOP_SIGNALS:
            try:
                self._previous[s] = signal.signal(s, handler)
            except ValueError:  # not in the main thread
                break
        return self

    def stopped(self) -> Stopped | KeyboardInterrupt:
        """What to raise once the requested stop is done: Ctrl-C stays a plain KeyboardInterrupt (exit 130)."""
        return KeyboardInterrupt() if self.signum in (None, signal.SIGINT) else Stopped(self.signum)

    def __exit__(self, *exc: Any) -> None:
        for s, previous in self._previous.items():
            if previous is not None:  # None: a handler installed outside Python, which cannot be put back
                signal.signal(s, previous)
