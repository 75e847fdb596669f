"""`hrm train` under torchrun as on several machines: one launcher per "node" on this machine (static rendezvous on a
free port, gloo), a rank child that reports what each worker did, and what the multi-process tests compare a run with.
Used by test_distributed, test_machines, test_ranks and test_slurm."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

# The rank child: `hrm` run by a torchrun worker, which
# - counts its training steps and, at step $HRM_TEST_PAUSE_AT, writes its pid to $HRM_TEST_MARKS/rank{R}.paused and
#   waits for the file $HRM_TEST_MARKS/go, so that a test's signal or kill lands mid-step however busy the machine is;
# - with $HRM_TEST_WATCH set (a run directory), records every write this process makes under it, through Python's
#   audit events (opens for writing, mkdir, rename and replace, remove, rmdir, truncate, chmod, links, rmtree): every
#   run file is written by Python (hrm_reason.atomic), checkpoints included;
# - at exit writes $HRM_TEST_MARKS/rank{R}.json: {"steps", "exit_code", "writes"}.
RANK_CHILD = r"""
import json, os, sys, time
from pathlib import Path

rank = int(os.environ["RANK"])
marks = Path(os.environ["HRM_TEST_MARKS"])
pause_at = int(os.environ.get("HRM_TEST_PAUSE_AT", "0"))
watch = os.environ.get("HRM_TEST_WATCH")
steps, writes, recording = 0, [], True
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
EVENTS = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.truncate", "os.chmod", "os.symlink", "os.link",
          "shutil.rmtree", "os.utime"}

def under_watch(path):
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return False
    full = os.path.realpath(os.path.abspath(path))
    return full == root or full.startswith(root + os.sep)

def audit(event, args):
    if not recording:
        return
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
        if writing and under_watch(path):
            writes.append(["open", os.fsdecode(path)])
    elif event in EVENTS:
        for path in args[:2] if event in ("os.rename", "os.link", "os.symlink") else args[:1]:
            if under_watch(path):
                writes.append([event, os.fsdecode(path)])

if watch:
    root = os.path.realpath(watch)
    sys.addaudithook(audit)

from hrm_reason.train import loop
make_task = loop.make_task

def counting_task(*args, **kwargs):
    task = make_task(*args, **kwargs)
    forward = task.forward
    def counted(*a, **k):
        global steps
        steps += 1
        if steps == pause_at:
            (marks / f"rank{rank}.paused").write_text(str(os.getpid()))
            while not (marks / "go").exists():
                time.sleep(0.01)
        return forward(*a, **k)
    task.forward = counted
    return task

loop.make_task = counting_task
import cli
run_command = cli.run_command

def reported_command():
    # Inside cli.main(): a torchrun process ends without the teardown (no atexit, no finally after main).
    global recording
    code = None
    try:
        run_command()
    except SystemExit as e:
        code = e.code
        raise
    finally:
        recording = False
        (marks / f"rank{rank}.json").write_text(json.dumps({"steps": steps, "exit_code": code, "writes": writes}))

cli.run_command = reported_command
cli.main()
"""


def kill_leftovers(marker: str) -> list[int]:
    """SIGKILL every other process whose command line holds `marker` (a test's own tmp_path: only the processes the
    test started name it), whoever their parent: the last sweep of a test's cleanup, for workers that outlived their
    launcher. Returns their pids."""
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
    return killed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(**extra: str) -> dict[str, str]:
    """This checkout first on the path, one thread per worker (two workers share this machine's cores), and a worker
    left without its peers by a failed test gives up within a minute (HRM_DIST_TIMEOUT)."""
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HRM_DIST_TIMEOUT": "60", **extra}


def torchrun_signals_flag() -> list[str]:
    """torchrun's `--signals-to-handle` with SIGUSR1 added (SLURM's warning), where this torch has it."""
    from torch.distributed.run import get_args_parser

    has = "--signals-to-handle" in get_args_parser()._option_string_actions
    return ["--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"] if has else []


@dataclass
class Nodes:
    """The launchers of one run, one per node, and where their workers report."""

    launchers: list[subprocess.Popen]
    marks: Path
    root: Path  # the test's tmp_path, named in every command line of the run

    def wait(self, timeout: float = 120) -> list[tuple[int, str]]:
        """(return code, stderr) of every launcher."""
        deadline = time.monotonic() + timeout
        results = []
        for proc in self.launchers:
            _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results.append((proc.returncode, err))
        return results

    def wait_paused(self, ranks: int, timeout: float = 120) -> list[int]:
        """The pids of the workers, once each is paused at $HRM_TEST_PAUSE_AT."""
        deadline = time.monotonic() + timeout
        paths = [self.marks / f"rank{r}.paused" for r in range(ranks)]
        while not all(p.exists() and p.read_text() for p in paths):
            failed = [p.args for p in self.launchers if p.poll() not in (None, 0)]
            assert not failed and time.monotonic() < deadline, f"workers did not reach their pause: {failed}"
            time.sleep(0.02)
        return [int(p.read_text()) for p in paths]

    def go(self) -> None:
        (self.marks / "go").touch()

    def report(self, rank: int) -> dict[str, Any]:
        return json.loads((self.marks / f"rank{rank}.json").read_text())

    def kill(self) -> None:
        """End whatever of the run still runs (a test's cleanup, in a finally): launchers and workers alike, every
        process naming the test's folder (torchrun starts its workers in sessions of their own, and a worker may
        outlive its launcher)."""
        kill_leftovers(str(self.root))
        for proc in self.launchers:
            with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
                proc.communicate(timeout=30)


def launch_nodes(
    tmp_path: Path,
    hrm_args: list[str],
    nnodes: int = 2,
    child: bool = False,
    extra_env: dict[str, str] | None = None,
    torchrun_args: list[str] = (),  # type: ignore[assignment]
) -> Nodes:
    """`hrm HRM_ARGS` under `nnodes` torchrun launchers of one worker each, as on `nnodes` machines: static rendezvous
    at 127.0.0.1 on a free port, node ranks 0..nnodes-1 (so worker rank = node rank). With `child`, the workers run
    RANK_CHILD, reporting to tmp_path/marks."""
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    script = REPO / "cli.py"
    if child:
        script = tmp_path / "rank_child.py"
        script.write_text(RANK_CHILD)
    port = free_port()
    env = child_env(HRM_TEST_MARKS=str(marks), **(extra_env or {}))
    launchers = []
    for node in range(nnodes):
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nnodes={nnodes}",
            "--nproc-per-node=1",
            f"--node-rank={node}",
            "--master-addr=127.0.0.1",
            f"--master-port={port}",
            *torchrun_args,
            str(script),
            *hrm_args,
        ]
        launchers.append(
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
            )
        )
    return Nodes(launchers, marks, tmp_path)


def error_lines(stderr: str) -> list[str]:
    """The `error: ...` lines of a launcher's stderr (its workers' one-line errors)."""
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def text_dataset(root: Path) -> Path:
    """A tiny text dataset of Python-like lines for the language-model heads: 6 documents, a fifth for validation."""
    from datasets_build.text import TextBuildOptions, build_text

    corpus = root / "corpus"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"{i}.txt").write_text(f"def f{i}(x):\n    return x * {i} + 1\n" * 20)
    return build_text(TextBuildOptions(input=[str(corpus)], out=root / "text", val_fraction=0.2), progress=False)


def assert_same_run(
    expected: list[dict], got: list[dict], compared: tuple[str, ...], rel: float = 1e-4, abs: float = 1e-5
) -> None:
    """The same steps, and at each the `compared` figures of metrics.jsonl within rel/abs (runs in several processes
    differ from one process only in the order of float additions); at least one figure compared."""
    assert [r["step"] for r in got] == [r["step"] for r in expected]
    checked = 0
    for a, b in zip(expected, got):
        for key in set(a) & set(compared):
            assert b[key] == pytest.approx(a[key], rel=rel, abs=abs), (a["step"], key)
            checked += 1
    assert checked > 0
