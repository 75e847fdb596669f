"""A run's life under schedulers and mistakes: SIGTERM/SIGUSR1 stops, one process per run directory, leftovers of
killed processes, runs killed before their first checkpoint, finished runs, a metrics.jsonl cut by a crash."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from hrm_reason.checkpoint import STATE, find_checkpoint
from hrm_reason.config import save_config
from hrm_reason.errors import UserError
from hrm_reason.runtime import stop as stop_module
from hrm_reason.runtime.clock import KEYS as CLOCK_KEYS
from hrm_reason.runtime.lock import RunLock
from hrm_reason.train.act import ACTTask
from hrm_reason.train.loop import train
from tests.helpers import read_metrics, rewind, tiny_config, torch_threads, write_original_layout

REPO = Path(__file__).resolve().parents[2]
# `hrm` in a child that, inside its training step PAUSE_AT, touches $HRM_TEST_PAUSED and waits until the file
# $HRM_TEST_SIGNALLED exists: the test's signal lands mid-run however busy the machine is, so the run can be short.
PAUSE_AT = 3
# One round (epochs and eval_interval far past the step cap), which the cap ends mid-round. PAUSE_AT is due an
# evaluation (a stop there saves before evaluating), and a checkpoint at step 2 is what a kill -9 there resumes from.
MAX_STEPS = 8
LONG = (
    "epochs=4000",
    "eval_interval=4000",
    f"max_steps={MAX_STEPS}",
    f"eval_every_steps={PAUSE_AT}",
    f"checkpoint_every_steps={PAUSE_AT - 1}",
)
PAUSING_HRM = f"""
import os, time
from pathlib import Path
from hrm_reason.train.act import ACTTask
forward = ACTTask.forward
def pausing(self, train_model, batch, step, progress=0.0):
    if step + 1 == {PAUSE_AT}:
        Path(os.environ["HRM_TEST_PAUSED"]).touch()
        while not Path(os.environ["HRM_TEST_SIGNALLED"]).exists():
            time.sleep(0.01)
    return forward(self, train_model, batch, step, progress)
ACTTask.forward = pausing
import cli
cli.main()
"""
pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: see conftest.one_thread


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("life") / "sudoku4")


@pytest.fixture(scope="module")
def uninterrupted(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    with torch_threads(1):  # as the tests that compare with it (module fixtures start before one_thread)
        return train(tiny_config(data, tmp_path_factory.mktemp("life") / "full", *LONG), progress=False)


def without_clock(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in CLOCK_KEYS} for r in rows]


def train_losses(run: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["train/lm_loss"]) for r in read_metrics(run) if "train/lm_loss" in r]


def hrm_popen(*args: str, code: str = "import cli; cli.main()", env: dict[str, str] | None = None) -> subprocess.Popen:
    """`hrm ARGS` (or the Python `code` with ARGS) in a child, `env` added to this process's environment."""
    # The thread count of this process: the in-process reference runs compare float for float with the child.
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(torch.get_num_threads()), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def hrm(*args: str) -> subprocess.CompletedProcess:
    proc = hrm_popen(*args)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1])
def test_stop_request_handles_sigterm_and_sigusr1_like_ctrl_c(signum: int) -> None:
    def outside(s: int, frame: Any) -> None:  # what runs when StopRequest does not handle the signal
        raise RuntimeError(f"signal {s} not handled by StopRequest")

    previous = signal.signal(signum, outside)
    try:
        with stop_module.StopRequest() as stop:
            os.kill(os.getpid(), signum)
            assert stop.requested and stop.signum == signum
            assert isinstance(stop.stopped(), stop_module.Stopped) and stop.stopped().exit_code == 128 + signum
            with pytest.raises(stop_module.Stopped) as second:  # a second signal stops at once
                os.kill(os.getpid(), signum)
            assert second.value.exit_code == 128 + signum
        assert signal.getsignal(signum) is outside
        with stop_module.StopRequest() as stop:
            os.kill(os.getpid(), signal.SIGINT)
            assert type(stop.stopped()) is KeyboardInterrupt  # Ctrl-C: exit 130 as before
    finally:
        signal.signal(signum, previous)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGKILL])
def test_stop_mid_training_resumes_to_the_uninterrupted_records(
    signum: int, data: Path, uninterrupted: Path, tmp_path: Path
) -> None:
    """Ctrl-C, SIGTERM and SIGUSR1 at a step due an evaluation save the step, and the resume evaluates it first; a kill
    -9 resumes from the checkpoint before. Either way metrics.jsonl ends as the uninterrupted run's, record for
    record (its clock keys aside)."""
    config = tmp_path / "config.yaml"
    save_config(tiny_config(data, tmp_path / "unused", *LONG), config)
    run, paused, signalled = tmp_path / "run", tmp_path / "paused", tmp_path / "signalled"
    marks = {"HRM_TEST_PAUSED": str(paused), "HRM_TEST_SIGNALLED": str(signalled)}
    proc = hrm_popen("train", "--config", str(config), "--run-dir", str(run), "--quiet", code=PAUSING_HRM, env=marks)
    deadline = time.time() + 120
    while time.time() < deadline and not paused.exists() and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signum)
    signalled.touch()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (128 + signum, -signum), err  # 130 for Ctrl-C, 143 SIGTERM, 138 SIGUSR1; -9
    step = int((run / "checkpoints" / "latest").read_text().removeprefix("step_"))
    if signum == signal.SIGKILL:
        assert step == PAUSE_AT - 1
    else:
        assert "Traceback" not in err and "checkpoint written" in err and "--resume" in err
        assert step == PAUSE_AT and str(run / "checkpoints" / f"step_{step}") in err
        assert not [r for r in read_metrics(run) if r["step"] == PAUSE_AT and "eval/exact_accuracy" in r]
        assert not [p for p in run.rglob("*.tmp")]
    resumed = train(tiny_config(data, run, *LONG), resume=True, progress=False)
    assert without_clock(read_metrics(resumed)) == without_clock(read_metrics(uninterrupted))
    assert [r["step"] for r in read_metrics(resumed) if "eval/exact_accuracy" in r] == [3, 6, MAX_STEPS]


def test_second_process_on_a_run_directory_refuses_and_a_dead_holder_is_taken_over(data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from hrm_reason.runtime.lock import RunLock\n"
            "with RunLock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(120)",
            str(run),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert (run / ".lock").read_text().strip() == f"host {socket.gethostname()} pid {holder.pid}"
        config = tmp_path / "config.yaml"
        save_config(tiny_config(data, run, "epochs=2", "eval_interval=2"), config)
        proc = hrm("train", "--config", str(config), "--run-dir", str(run), "--quiet")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "in use by another process" in lines[0], proc.stderr
        assert f"host {socket.gethostname()} pid {holder.pid}" in lines[0]
        with pytest.raises(UserError, match=f"in use by another process .*pid {holder.pid}"):  # --resume as well
            train(tiny_config(data, run, "epochs=2", "eval_interval=2"), resume=True, progress=False)
        assert sorted(p.name for p in run.iterdir()) == [".lock"]  # the refused runs wrote nothing
    finally:
        holder.kill()  # kill -9: flock is released by the kernel, the file stays
        holder.wait()
    assert (run / ".lock").exists()
    out = train(tiny_config(data, run, "epochs=2", "eval_interval=2"), progress=False)
    assert (out / "checkpoints" / "latest").is_file()
    assert (run / ".lock").read_text().strip() == f"host {socket.gethostname()} pid {os.getpid()}"


def test_lock_is_held_for_the_whole_run(data: Path, tmp_path: Path) -> None:
    with RunLock(tmp_path / "run"), pytest.raises(UserError, match="in use by another process"):
        train(tiny_config(data, tmp_path / "run", "epochs=2", "eval_interval=2"), progress=False)


def test_stale_temporaries_of_a_killed_run_are_removed(data: Path, tmp_path: Path) -> None:
    run = train(tiny_config(data, tmp_path / "run", "epochs=2", "eval_interval=2"), progress=False)
    stale_dir = run / "checkpoints" / ".step_9.x1y2.tmp"
    stale_dir.mkdir()
    (stale_dir / STATE).write_bytes(b"half")
    (run / ".metrics.jsonl.ab12.tmp").write_text("{")
    (run / ".config.yaml.cd34.tmp").write_text("")
    train(tiny_config(data, run, "epochs=4", "eval_interval=2"), resume=True, progress=False)
    assert not stale_dir.exists() and not list(run.glob(".*.tmp"))
    # A directory holding nothing but leftovers is free for a new run.
    fresh = tmp_path / "fresh"
    (fresh / "checkpoints" / ".step_2.zz.tmp").mkdir(parents=True)
    (fresh / ".config.yaml.q.tmp").write_text("")
    train(tiny_config(data, fresh, "epochs=2", "eval_interval=2"), progress=False)
    assert not list(fresh.rglob("*.tmp"))


def test_run_killed_before_its_first_checkpoint_resumes_or_restarts(data: Path, tmp_path: Path, capsys) -> None:
    overrides = ("epochs=2", "eval_interval=2")
    full = train(tiny_config(data, tmp_path / "full", *overrides), progress=False)
    for resume in (True, False):
        killed = tmp_path / f"killed-{resume}"
        killed.mkdir()
        (killed / "config.yaml").write_text((full / "config.yaml").read_text())
        (killed / "metrics.jsonl").write_text(
            "".join(line + "\n" for line in (full / "metrics.jsonl").read_text().splitlines()[:3])
        )
        train(tiny_config(data, killed, *overrides), resume=resume, progress=False)
        assert train_losses(killed) == train_losses(full)
        assert [r["step"] for r in read_metrics(killed)] == [r["step"] for r in read_metrics(full)]
    assert "no checkpoint yet: starting the run from the beginning" in capsys.readouterr().err
    # With a checkpoint, a plain restart still refuses; a folder of other files is not a run.
    with pytest.raises(UserError, match="not empty"):
        train(tiny_config(data, full, *overrides), progress=False)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        train(tiny_config(data, other, *overrides), progress=False)


def test_resume_of_a_finished_run_does_nothing(data: Path, tmp_path: Path, capsys) -> None:
    overrides = ("epochs=4", "eval_interval=4", "max_steps=5")  # the step cap ends the run inside its round
    run = train(tiny_config(data, tmp_path / "run", *overrides), progress=False)
    before = (run / "metrics.jsonl").read_text()
    assert sum("eval/exact_accuracy" in line for line in before.splitlines()) == 1
    capsys.readouterr()
    for _ in range(2):
        train(tiny_config(data, run, *overrides), resume=True, progress=False)
        assert (run / "metrics.jsonl").read_text() == before
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    # Each resume says where it continues from, then that there is nothing left to do.
    assert err == [err[0], err[1]] * 2 and "already finished at step 5" in err[1]
    assert err[0] == f"resuming {run} at step 5 from checkpoints/step_5; config unchanged"
    # Raising the cap trains on, and the resume names what changed.
    train(tiny_config(data, run, "epochs=4", "eval_interval=4", "max_steps=7"), resume=True, progress=False)
    assert max(r["step"] for r in read_metrics(run)) == 7
    assert f"resuming {run} at step 5 from checkpoints/step_5; changed: max_steps 5 -> 7" in capsys.readouterr().err


def test_stop_on_the_last_step_is_evaluated_by_the_resume(data: Path, tmp_path: Path) -> None:
    overrides = ("epochs=4", "eval_interval=4", "max_steps=5")
    full = train(tiny_config(data, tmp_path / "full", *overrides), progress=False)
    # As if stopped on step 5 before its final evaluation: the checkpoint is not marked finished, no eval logged.
    run = rewind(full, tmp_path / "run", 5)
    ckpt = find_checkpoint(run)
    state = torch.load(ckpt / STATE, map_location="cpu", weights_only=False)
    assert state["finished"] is True
    torch.save({**state, "finished": False}, ckpt / STATE)
    (ckpt / "manifest.json").unlink()  # a hand-edited checkpoint: its recorded checksums no longer apply
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("".join(line + "\n" for line in lines if "eval/" not in line))
    train(tiny_config(data, run, *overrides), resume=True, progress=False)
    assert without_clock(read_metrics(run)) == without_clock(read_metrics(full))  # seconds differ between any two runs
    assert torch.load(ckpt / STATE, map_location="cpu", weights_only=False)["finished"] is True


def test_cut_last_metrics_line_is_dropped_on_resume(data: Path, tmp_path: Path, capsys) -> None:
    overrides = ("epochs=4", "eval_interval=2", "checkpoint_every_steps=4")
    full = train(tiny_config(data, tmp_path / "full", *overrides), progress=False)
    cut = rewind(full, tmp_path / "cut", 4)
    lines = (cut / "metrics.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["step"] <= 5]
    (cut / "metrics.jsonl").write_text("".join(line + "\n" for line in kept) + '{"step": 6, "train/lm_lo')
    capsys.readouterr()
    train(tiny_config(data, cut, *overrides), resume=True, progress=False)
    assert "dropped its last line" in capsys.readouterr().err
    assert [r["step"] for r in read_metrics(cut)] == [r["step"] for r in read_metrics(full)]
    # A damaged line before the last is not guessed at: one line naming the file and the line.
    broken = rewind(full, tmp_path / "broken", 4)
    lines = (broken / "metrics.jsonl").read_text().splitlines()
    (broken / "metrics.jsonl").write_text("".join(line + "\n" for line in [lines[0], "{oops", *lines[1:]]))
    with pytest.raises(UserError, match="metrics.jsonl: line 2"):
        train(tiny_config(data, broken, *overrides), resume=True, progress=False)


def test_divergence_before_any_checkpoint_says_none_exists(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forward = ACTTask.forward

    def diverging(
        self: ACTTask, train_model: torch.nn.Module, batch: Any, step: int, progress: float = 0.0
    ) -> tuple[torch.Tensor, Any]:
        loss, outputs = forward(self, train_model, batch, step, progress)
        return (loss * float("nan") if step == 2 else loss), outputs

    monkeypatch.setattr(ACTTask, "forward", diverging)
    with pytest.raises(UserError, match="loss became nan at step 3") as e:
        train(tiny_config(data, tmp_path / "run", "epochs=2", "eval_interval=2"), progress=False)
    assert "No checkpoint was written" in str(e.value) and "last good checkpoint" not in str(e.value)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_run_dir_naming_a_file_is_one_line(data: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    with pytest.raises(UserError, match="afile is a file"):
        train(tiny_config(data, tmp_path / "afile", "epochs=2", "eval_interval=2"), progress=False)


def test_filesystem_without_flock_warns_and_runs_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import errno

    from hrm_reason.runtime import lock

    def no_flock(fd: int, op: int) -> None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(lock.fcntl, "flock", no_flock)
    with RunLock(tmp_path / "run"):
        pass
    assert "no file locks on this filesystem" in capsys.readouterr().err
