"""The prefetching thread: the same batches in the same order, its errors raised to the consumer, and no thread left
once the batches are closed (one left inside torch at interpreter exit aborts the process)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import torch

from hrm_reason.runtime.prefetch import prefetch


def source(n: int, pause: float = 0.0) -> Iterator[dict[str, torch.Tensor]]:
    for i in range(n):
        time.sleep(pause)
        yield {"inputs": torch.full((2, 3), i)}


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "hrm-prefetch"]


def test_same_batches_in_order() -> None:
    got = [b["inputs"] for b in prefetch(source(7), torch.device("cpu"))]
    assert [int(b[0, 0]) for b in got] == list(range(7))
    assert not prefetch_threads()


def test_closing_early_ends_the_thread_while_it_is_producing() -> None:
    batches = prefetch(source(1000, pause=0.05), torch.device("cpu"))
    assert int(next(batches)["inputs"][0, 0]) == 0
    assert prefetch_threads(), "the thread works ahead"
    batches.close()
    assert not prefetch_threads()


def test_a_producer_error_is_raised_to_the_consumer() -> None:
    def failing() -> Iterator[dict[str, torch.Tensor]]:
        yield {"inputs": torch.zeros(1)}
        raise ValueError("bad batch 1")

    batches = prefetch(failing(), torch.device("cpu"))
    next(batches)
    with pytest.raises(ValueError, match="bad batch 1"):
        next(batches)
    assert not prefetch_threads()
