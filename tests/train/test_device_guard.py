"""The suite's device guard (tests/conftest.py, tests/device_guard/sitecustomize.py) fires: a planted suite, run by a
child pytest with the guard, holds a test that trains with `device` left at `auto` and asserts the CPU's numbers
(passing on a CPU machine, failing on a GPU one), one that leaves it to an `hrm train` child process, and one that
pins the CPU. The first two fail with the guard's message, the third passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

PLANTED = """
from hrm_reason.train.loop import train
from tests.helpers import TINY_CLI, read_metrics, run_hrm, tiny_config, write_original_layout


def losses(run):
    return [r["train/lm_loss"] for r in read_metrics(run) if "train/lm_loss" in r]


def test_planted_auto_asserts_cpu_numbers(tmp_path):
    data = write_original_layout(tmp_path / "data")
    cpu = train(tiny_config(data, tmp_path / "cpu", "max_steps=1"), progress=False)
    auto = train(tiny_config(data, tmp_path / "auto", "max_steps=1", "device=auto"), progress=False)
    assert losses(auto) == losses(cpu)


def test_planted_auto_in_a_child(tmp_path):
    data = write_original_layout(tmp_path / "data")
    args = ["--data", str(data), "--run-dir", str(tmp_path / "run"), "--quiet", *TINY_CLI, "max_steps=1", "device=auto"]
    assert run_hrm("train", *args).returncode == 0


def test_planted_cpu(tmp_path):
    data = write_original_layout(tmp_path / "data")
    train(tiny_config(data, tmp_path / "cpu", "max_steps=1"), progress=False)
"""


def test_guard_fails_tests_that_leave_device_at_auto(tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(PLANTED)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "tests.conftest"]
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [*cmd, "-rf", "test_planted.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "2 failed, 1 passed" in out, out[-3000:]
    for name in ("test_planted_auto_asserts_cpu_numbers", "test_planted_auto_in_a_child"):
        assert f"FAILED test_planted.py::{name}" in out, out[-3000:]
    assert out.count("device guard: device left at auto (") == 2, out[-3000:]
    assert "test_planted.py:13)" in out  # in this process: the test's line
    assert "(command: -c train --data" in out  # in a child: its command line
