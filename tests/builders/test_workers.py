"""The builders' worker processes never outlive their build: `kill -9` of `hrm build-data ... --workers 2` must not
leave generators burning every core (datasets_build.workers). Linux only: processes are found in /proc."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datasets_build import workers

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="finds processes through /proc (Linux)")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) ": the name may hold spaces
    return fields[0], int(fields[1]), int(fields[19])


def _children(pid: int) -> dict[int, int]:
    """{child pid: start time} of the live children of `pid`."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None and st[1] == pid and st[0] != "Z":
            out[int(entry.name)] = st[2]
    return out


def _alive(pid: int, started: int) -> bool:
    """The same process (same start time: not a reused pid), not yet a zombie."""
    st = _stat(pid)
    return st is not None and st[2] == started and st[0] != "Z"


def _kill_and_check(proc: subprocess.Popen, workers: int, ready: float = 90.0) -> None:
    """Wait until `proc` has `workers` worker processes (besides multiprocessing's resource tracker), kill -9 it, and
    check that none of its children lives 3 seconds later."""
    deadline = time.monotonic() + ready
    kids: dict[int, int] = {}
    while time.monotonic() < deadline and proc.poll() is None:
        kids = _children(proc.pid)
        if len(kids) >= workers + 1:
            break
        time.sleep(0.1)
    try:
        assert proc.poll() is None and len(kids) >= workers + 1, f"workers never started: {kids}, rc {proc.poll()}"
        time.sleep(0.5)  # let them get busy
        kids = {**kids, **_children(proc.pid)}
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(_alive(p, s) for p, s in kids.items()):
        time.sleep(0.1)
    left = [p for p, s in kids.items() if _alive(p, s)]
    for p in left:  # do not leave them running after a failure
        os.kill(p, signal.SIGKILL)
    assert not left, f"processes of the killed build still alive 3 s later: {left}"


@pytest.mark.parametrize(
    "args",
    [
        ["maze", "--source", "generate", "--size", "30", "--train-size", "100000"],
        ["sudoku", "--source", "generate", "--box", "3x3", "--train-size", "100000"],
    ],
    ids=["maze", "sudoku"],
)
def test_kill_9_of_a_build_kills_its_workers(args: list[str], tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import cli; cli.main()", "build-data", *args, "--workers", "2", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HRM_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [*cmd, "--out", str(tmp_path / "ds")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _kill_and_check(proc, workers=2)
    # what the killed build left (nothing: it died generating) is no obstacle to the next one
    assert not (tmp_path / "ds").exists()


def watcher_only(parent: int) -> None:
    """A worker initializer with the portable watcher alone: worker_pool's, then PR_SET_PDEATHSIG taken back off."""
    workers.die_with_parent(parent)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(workers.PR_SET_PDEATHSIG, 0, 0, 0, 0)


WATCHER_PARENT = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from tests.builders.test_workers import watcher_only
pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"), initializer=watcher_only,
                           initargs=(os.getpid(),))
for _ in range(2):
    pool.submit(time.sleep, 120)
time.sleep(120)
"""


def test_workers_also_die_with_their_parent_without_pdeathsig() -> None:
    """The fallback of non-Linux systems (and of a parent thread that ended): the parent-sentinel watcher thread."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", WATCHER_PARENT], env=env, cwd=REPO)
    _kill_and_check(proc, workers=2)


def test_the_next_build_removes_what_a_killed_one_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build killed while writing leaves its temporary folder beside --out (named by its host and pid; workers write
    nothing): the next build of that output removes it (hrm_reason.atomic.remove_dead_temporaries)."""
    from datasets_build import sudoku
    from hrm_reason import atomic

    monkeypatch.setenv("HRM_OFFLINE", "1")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f".ds.{atomic._owner().split('-')[0]}-{dead.pid}-0123abcd.tmp"
    (left / "train").mkdir(parents=True)
    (left / "train" / "all__inputs.npy").write_bytes(b"x" * 1000)
    opts = sudoku.SudokuBuildOptions(out=tmp_path / "ds", source="generate", box="2x2", train_size=4, test_size=2)
    sudoku.build_sudoku(opts)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
