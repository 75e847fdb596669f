"""scripts/slurm_train.sbatch as far as a machine without SLURM allows: the script itself, run by bash with SLURM's
variables faked for one node, `SRUN=env` (its torchrun command line run here, without srun), a local c10d
rendezvous and a fake `scontrol` that answers `show hostnames` and records `requeue`. A first start trains from
--config; SIGUSR1 to the script (SLURM's `--signal=B:USR1@120`) stops every worker with a checkpoint and requeues the
job; the requeued job (the script again) resumes and trains on."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hrm_reason.checkpoint import read_state
from hrm_reason.config import save_config
from tests.helpers import read_metrics, tiny_config, write_original_layout
from tests.train.launchers import REPO, child_env, free_port, kill_leftovers

SCRIPT = REPO / "scripts" / "slurm_train.sbatch"
FAKE_SCONTROL = """#!/bin/sh
echo "$@" >> "$FAKE_SCONTROL_LOG"
if [ "$1 $2" = "show hostnames" ]; then echo 127.0.0.1; fi
"""


def sbatch_env(tmp_path: Path, run: Path, config: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    return child_env(
        PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        SLURM_JOB_ID="4242",
        SLURM_NNODES="1",
        SLURM_JOB_NODELIST="node001",
        MASTER_PORT=str(free_port()),
        NPROC_PER_NODE="2",
        SRUN="env",
        RUN_DIR=str(run),
        CONFIG=str(config),
        FAKE_SCONTROL_LOG=str(tmp_path / "scontrol.log"),
    )


def sbatch(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", str(SCRIPT), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def end(job: subprocess.Popen, tmp_path: Path) -> None:
    """The job's processes, whatever is left of them (torchrun's workers start in sessions of their own)."""
    kill_leftovers(str(tmp_path))
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)  # the script (its own session), which names no file of the test
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
        job.communicate(timeout=30)


def train_steps(run: Path) -> list[int]:
    return [r["step"] for r in read_metrics(run) if "train/lm_loss" in r]


def test_sbatch_script_trains_stops_on_usr1_requeues_and_resumes(tmp_path: Path) -> None:
    data = write_original_layout(tmp_path / "data")
    run, config = tmp_path / "run", tmp_path / "config.yaml"
    save_config(tiny_config(data, tmp_path / "unused", "epochs=4000", "eval_interval=4000"), config)
    env = sbatch_env(tmp_path, run, config)
    job = sbatch(env)
    try:
        deadline = time.monotonic() + 120
        while not ((run / "metrics.jsonl").is_file() and train_steps(run)) and job.poll() is None:
            assert time.monotonic() < deadline, "no training step within 120 s"
            time.sleep(0.05)
        job.send_signal(signal.SIGUSR1)  # SLURM's warning before the time limit, to the batch script
        _, err = job.communicate(timeout=90)
    finally:
        end(job, tmp_path)
    assert job.returncode == 0, err[-3000:]
    scontrol = (tmp_path / "scontrol.log").read_text().splitlines()
    assert scontrol == ["show hostnames node001", "requeue 4242"]
    step = int((run / "checkpoints" / "latest").read_text().removeprefix("step_"))
    assert step >= 1 and f"stopped by SIGTERM at step {step}" in err
    assert not read_state(run / "checkpoints" / f"step_{step}")["finished"]
    assert train_steps(run) == list(range(1, step + 1))

    # The requeued job: the same script, which finds the run and resumes it; two more steps and the run is done.
    job = sbatch(env, f"max_steps={step + 2}")
    try:
        _, err = job.communicate(timeout=90)
    finally:
        end(job, tmp_path)
    assert job.returncode == 0, err[-3000:]
    assert train_steps(run) == list(range(1, step + 3))
    state = read_state(run / "checkpoints" / f"step_{step + 2}")
    assert state["finished"] and state["world_size"] == 2
