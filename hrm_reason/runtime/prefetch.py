"""Batches collated on a background thread while the current step runs. The thread is joined when the batches are
closed: a daemon thread still inside torch when the interpreter exits is ended mid-call, and the process aborts
("terminate called without an active exception"; seen on a rank finishing while its batch thread worked)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import Any

import torch


def prefetch(
    batches: Iterator[dict[str, torch.Tensor]], device: torch.device, depth: int = 2
) -> Generator[dict[str, torch.Tensor], None, None]:
    """Same batches, same order, `depth` ahead; on CUDA they are pinned and copied asynchronously."""
    ready: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def work() -> None:
        try:
            for batch in batches:
                if device.type == "cuda":
                    batch = {k: v.pin_memory() for k, v in batch.items()}
                if not put(batch):
                    return
            put(done)
        except BaseException as e:  # handed to the consumer, raised there
            put(e)

    worker = threading.Thread(target=work, daemon=True, name="hrm-prefetch")
    worker.start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield {k: v.to(device, non_blocking=True) for k, v in item.items()}
    finally:
        stop.set()
        worker.join()  # the batch in hand is finished, put() gives up within 0.1 s
