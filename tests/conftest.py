"""Shared by every test module: the helpers' assertions report their operands as a test's own do, and fixtures."""

from collections.abc import Iterator

import pytest

pytest.register_assert_rewrite("tests.helpers")


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread for the test. Tiny models' products are too small to share between threads: a second
    intra-op thread spinning while the other core is busy burns CPU time without progress (on a loaded 2-core machine
    a tiny HRM trained 10x slower on two threads than on one; a CPU-time budget got one step out of 1 CPU-second)."""
    from tests.helpers import torch_threads

    with torch_threads(1):
        yield
