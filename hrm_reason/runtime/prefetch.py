"""Batches collated on a background thread while the current step runs."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import torch


def prefetch(
    batches: Iterator[dict[str, torch.Tensor]], device: torch.device, depth: int = 2
) -> Iterator[dict[str, torch.Tensor]]:
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

    threading.Thread(target=work, daemon=True, name="hrm-prefetch").start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield {k: v.to(device, non_blocking=True) for k, v in item.items()}
    finally:
        stop.set()
