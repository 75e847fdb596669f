"""`./run quickstart [key=value ...]` (issue 44, item 2): the arguments reach hrm train as overrides, the run they
make is the one resumed and evaluated (seed=1, run_dir=...), and a bad argument stops in one line before any work.

The script runs for real in a copy of the repository's entry points, with its setup already done (the stamp it
checks) and an `hrm` that only logs its arguments: the plumbing is tested, not the 10 CPU-minutes of training."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cli
from hrm_reason.commands.quickstart import EVAL_MMAX, QUICKSTART_CONFIG, QUICKSTART_DATA, quickstart_paths
from hrm_reason.errors import UserError
from tests.helpers import REPO

# Logs one line per call (the arguments joined by |) and makes the folders the real commands would.
FAKE_HRM = """#!/usr/bin/env bash
(IFS='|'; echo "$*") >> hrm-calls.log
case "$1" in
  build-data) while [ $# -gt 0 ]; do [ "$1" = --out ] && mkdir -p "$2"; shift; done ;;
  train) for a in "$@"; do case "$a" in run_dir=*) mkdir -p "${a#run_dir=}" ;; esac; done
         [ "$2" = --run-dir ] || [ ! -s next-run ] || mkdir -p "$(cat next-run)" ;;
esac
"""


def setup_stamp(root: Path) -> str:
    """What ./run's setup writes when .venv holds what it asks for (the same recipe as the script's)."""
    gpu = "no"
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        gpu = "yes"
    cksum = subprocess.run(["cksum"], stdin=open(root / "pyproject.toml", "rb"), capture_output=True, text=True)
    return f"torch==2.13.0 gpu={gpu} {cksum.stdout.strip()}"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """./run and pyproject.toml in a folder of their own, .venv's python the test's, its hrm the logging one."""
    root = tmp_path / "clone"
    (root / ".venv" / "bin").mkdir(parents=True)
    for name in ("run", "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)
    python = root / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    hrm = root / ".venv" / "bin" / "hrm"
    hrm.write_text(FAKE_HRM)
    for path in (python, hrm):
        path.chmod(0o755)
    (root / ".venv" / ".hrm-setup").write_text(setup_stamp(root) + "\n")
    return root


def quickstart(root: Path, *args: str, next_run: str = "") -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """`./run quickstart ARGS` in `root`: the process and the hrm calls it made."""
    (root / "next-run").write_text(next_run)
    log = root / "hrm-calls.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "TORCH_VERSION": "2.13.0"}
    proc = subprocess.run([str(root / "run"), "quickstart", *args], capture_output=True, text=True, env=env)
    calls = [line.split("|") for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls


def test_overrides_reach_hrm_train_and_the_trained_run_is_evaluated(checkout: Path) -> None:
    run = "runs/sudoku-6x6-easy-hrm-seed0"
    proc, calls = quickstart(checkout, "max_steps=2", "lr=1e-3", next_run=run)
    assert proc.returncode == 0, proc.stderr
    build, train, evaluate = calls
    assert build[:2] == ["build-data", "sudoku"] and build[-2:] == ["--out", str(QUICKSTART_DATA)]
    assert "--min-givens" in build and "--box" in build
    assert train == ["train", "max_steps=2", "lr=1e-3"]
    assert evaluate == ["eval", "--run", run, "--mmax", str(EVAL_MMAX), "--json", f"{run}/eval8.json"]
    # Again: the data is kept and the run resumed, with the new overrides.
    proc, calls = quickstart(checkout, "max_steps=4")
    assert proc.returncode == 0, proc.stderr
    assert [c[0] for c in calls] == ["train", "eval"]
    assert calls[0] == ["train", "--run-dir", run, "--resume", "max_steps=4"] and calls[1][2] == run


def test_a_seed_or_run_dir_override_trains_resumes_and_evaluates_that_run(checkout: Path) -> None:
    seed1 = "runs/sudoku-6x6-easy-hrm-seed1"
    proc, calls = quickstart(checkout, "seed=1", next_run=seed1)
    assert proc.returncode == 0, proc.stderr
    assert calls[1] == ["train", "seed=1"] and calls[2][:3] == ["eval", "--run", seed1]
    proc, calls = quickstart(checkout, "run_dir=runs/mine", "max_steps=3")
    assert proc.returncode == 0, proc.stderr
    assert calls == [
        ["train", "run_dir=runs/mine", "max_steps=3"],
        ["eval", "--run", "runs/mine", "--mmax", "8", "--json", "runs/mine/eval8.json"],
    ]
    assert (checkout / "runs" / "mine").is_dir()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--quiet"], "./run quickstart --quiet: expected key=value overrides of hrm train"),
        (["max_steps=2", "200"], "./run quickstart 200: expected key=value overrides"),
        (["lr=fast"], "'lr'"),
        (["no_such_key=1"], "no_such_key"),
    ],
)
def test_a_bad_argument_is_one_line_before_any_work(checkout: Path, args: list[str], named: str) -> None:
    proc, calls = quickstart(checkout, *args)
    assert proc.returncode == 2 and calls == []
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and named in line and "Traceback" not in proc.stderr


def test_the_paths_are_those_hrm_train_uses() -> None:
    assert QUICKSTART_CONFIG == cli.DEFAULT_CONFIG  # what hrm train trains without --config
    assert quickstart_paths([]) == (QUICKSTART_DATA, Path("runs/sudoku-6x6-easy-hrm-seed0"))
    assert quickstart_paths(["seed=2"])[1] == Path("runs/sudoku-6x6-easy-hrm-seed2")
    assert quickstart_paths(["data_path=data/mine"]) == (Path("data/mine"), Path("runs/mine-hrm-seed0"))
    with pytest.raises(UserError, match="expected key=value"):
        quickstart_paths(["-c", "x.yaml"])
