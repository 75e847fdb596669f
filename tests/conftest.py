"""Shared by every test module: the helpers' assertions report their operands as a test's own do, fixtures, and the
device guard."""

import importlib.util
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("tests.helpers")

# --- The device guard (tests/device_guard/sitecustomize.py): a test that leaves `device` at `auto` fails, in this
# process or in any Python child of it, since on a machine with CUDA it would run on the GPU in bf16 rather than on the
# CPU in fp32. Installed before any test module imports hrm_reason. Children get it as their `sitecustomize` through
# PYTHONPATH, also when a test gives a child an environment of its own (subprocess.Popen below).
GUARD_DIR = str(Path(__file__).resolve().parent / "device_guard")
_spec = importlib.util.spec_from_file_location("tests_device_guard", Path(GUARD_DIR) / "sitecustomize.py")
device_guard = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(device_guard)  # type: ignore[union-attr]
_fd, GUARD_REPORTS = tempfile.mkstemp(prefix="hrm-device-guard-", suffix=".txt")
os.close(_fd)
os.environ[device_guard.ENV] = GUARD_REPORTS


def with_guard(env: dict[str, str]) -> dict[str, str]:
    """A child's environment with the guard's report file and its directory first on PYTHONPATH."""
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != GUARD_DIR]
    return {**env, device_guard.ENV: GUARD_REPORTS, "PYTHONPATH": os.pathsep.join([GUARD_DIR, *path])}


os.environ.update(with_guard(dict(os.environ)))
device_guard.install()


class GuardedPopen(subprocess.Popen):
    """subprocess.Popen (and so subprocess.run) whose child keeps the guard when the test passes `env`."""

    def __init__(self, *args: Any, env: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, env=None if env is None else with_guard(dict(env)), **kwargs)


subprocess.Popen = GuardedPopen  # type: ignore[misc]


def take_guard_reports() -> list[str]:
    with open(GUARD_REPORTS, "r+") as f:
        reports = f.read().splitlines()
        f.truncate(0)
    return reports


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A phase of a test (its fixtures' setup and teardown included) that resolved `auto` fails, with the reports."""
    outcome = yield
    report = outcome.get_result()
    reports = take_guard_reports()
    if reports:
        message = "device guard: " + "\n".join(dict.fromkeys(reports))
        if report.failed:
            report.sections.append(("device guard", message))
        else:
            report.outcome, report.longrepr = "failed", message


def pytest_sessionfinish(session: pytest.Session) -> None:
    leftover = take_guard_reports()  # resolved after the last test's teardown (a session fixture's)
    if leftover:
        print("\ndevice guard: " + "\n".join(dict.fromkeys(leftover)))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    os.unlink(GUARD_REPORTS)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread for the test. Tiny models' products are too small to share between threads: a second
    intra-op thread spinning while the other core is busy burns CPU time without progress (on a loaded 2-core machine
    a tiny HRM trained 10x slower on two threads than on one; a CPU-time budget got one step out of 1 CPU-second)."""
    from tests.helpers import torch_threads

    with torch_threads(1):
        yield
