"""Ctrl-C during training: the first asks the loop to stop after the current step and checkpoint; a second stops at once."""

from __future__ import annotations

import signal
from typing import Any


class StopRequest:
    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> StopRequest:
        def handler(signum: int, frame: Any) -> None:
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True

        try:
            self._previous = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not in the main thread
            self._previous = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
