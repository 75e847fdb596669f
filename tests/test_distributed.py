"""Training under torchrun: 2 CPU processes (gloo) follow the same run as 1 process on the same global batch, and a
checkpoint resumes on a different number of processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hrm_reason.config import save_config
from hrm_reason.train import train
from tests.helpers import rewind, tiny_config, write_original_layout

REPO = Path(__file__).resolve().parents[1]
# Exploration off: its draws depend on the rank (seeded by seed, step and rank), everything else must not.
SETTINGS = ("epochs=4", "eval_interval=2", "arch.halt_exploration_prob=0.0", "device=cpu", "puzzle_emb_lr=0.1")
COMPARED = ("train/lm_loss", "train/q_halt_loss", "train/q_continue_loss", "train/accuracy", "train/steps", "train/count")


def torchrun(nproc: int, config_path: Path, *args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           str(REPO / "cli.py"), "train", "--config", str(config_path), "--quiet", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def assert_same_run(a: list[dict], b: list[dict]) -> None:
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        for key in set(ra) & set(COMPARED + ("eval/exact_accuracy", "eval/accuracy", "eval/lm_loss")):
            assert rb[key] == pytest.approx(ra[key], rel=1e-4, abs=1e-5), (ra["step"], key)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The reference: one process (no torch.distributed at all), 12 steps, checkpoints at steps 6 and 12."""
    root = tmp_path_factory.mktemp("dist")
    data = write_original_layout(root / "data", distinct_identifiers=True)
    return data, train(tiny_config(data, root / "single", *SETTINGS), progress=False)


def test_two_gloo_processes_match_one_process(single: tuple[Path, Path], tmp_path: Path) -> None:
    data, single_run = single
    config = tmp_path / "config.yaml"
    save_config(tiny_config(data, tmp_path / "run", *SETTINGS), config)
    torchrun(2, config)
    got, expected = records(tmp_path / "run"), records(single_run)
    assert len([r for r in expected if "train/lm_loss" in r]) == 12
    assert_same_run(expected, got)
    # The puzzle embedding (sparse, updated from ids and gradients gathered across ranks) and the weights agree too.
    from hrm_reason.checkpoint import read_weights

    ours, _ = read_weights(tmp_path / "run" / "checkpoints" / "step_12")
    ref, _ = read_weights(single_run / "checkpoints" / "step_12")
    assert ours.keys() == ref.keys()
    for name in ref:
        assert (ours[name] - ref[name]).abs().max() < 1e-4, name


def test_checkpoint_resumes_on_another_world_size(single: tuple[Path, Path], tmp_path: Path) -> None:
    """1 process -> 2 processes: the carry (halted rows, states, current examples) is saved for the global batch."""
    data, single_run = single
    resumed = rewind(single_run, tmp_path / "resumed", 6)
    torchrun(2, resumed / "config.yaml", "--resume", "--run-dir", str(resumed))
    expected = records(single_run)
    got = records(resumed)
    assert [r["step"] for r in got if "train/lm_loss" in r] == list(range(1, 13))
    assert_same_run(expected, got)
