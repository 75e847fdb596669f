"""Training under torchrun: 2 CPU processes (gloo) follow the same run as 1 process on the same global batch, for an
ACT puzzle model and for an LM head, and a puzzle checkpoint resumes on a different number of processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hrm_reason.checkpoint import read_weights
from hrm_reason.config import load_config, save_config
from hrm_reason.train.loop import train
from tests.helpers import TINY_HRM_TEXT, arch_overrides, read_metrics, rewind, tiny_config, write_original_layout
from tests.train.launchers import assert_same_run, text_dataset

REPO = Path(__file__).resolve().parents[2]
# Exploration off: its draws depend on the rank (seeded by seed, step and rank), everything else must not.
SETTINGS = ("epochs=4", "eval_interval=2", "arch.halt_exploration_prob=0.0", "device=cpu", "puzzle_emb_lr=0.1")
COMPARED = (
    "train/lm_loss",
    "train/q_halt_loss",
    "train/q_continue_loss",
    "train/accuracy",
    "train/steps",
    "train/count",
    "eval/exact_accuracy",
    "eval/accuracy",
    "eval/lm_loss",
)
# A tiny HRM-Text head on a tiny text corpus: 6 steps of 8 windows, validation after steps 3 and 6.
LM_SETTINGS = (
    "arch.name=hrm_text",
    *arch_overrides({**TINY_HRM_TEXT, "max_position_embeddings": 64}),
    "seq_len=16",
    "global_batch_size=8",
    "max_steps=6",
    "eval_every_steps=3",
    "eval_max_tokens=256",
    "lr=3e-3",
    "lr_warmup_steps=2",
    "device=cpu",
    "seed=0",
)
LM_COMPARED = ("train/loss", "train/ce", "train/grad_norm", "eval/ce", "eval/perplexity")


def torchrun(nproc: int, config_path: Path, *args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        str(REPO / "cli.py"),
        "train",
        "--config",
        str(config_path),
        "--quiet",
        *args,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def assert_same_weights(a: Path, b: Path) -> None:
    ours, _ = read_weights(a)
    ref, _ = read_weights(b)
    assert ours.keys() == ref.keys()
    for name in ref:
        assert (ours[name] - ref[name]).abs().max() < 1e-4, name


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
    got, expected = read_metrics(tmp_path / "run"), read_metrics(single_run)
    assert len([r for r in expected if "train/lm_loss" in r]) == 12
    assert_same_run(expected, got, COMPARED)
    # The puzzle embedding (sparse, updated from ids and gradients gathered across ranks) and the weights agree too.
    assert_same_weights(tmp_path / "run" / "checkpoints" / "step_12", single_run / "checkpoints" / "step_12")


def test_checkpoint_resumes_on_another_world_size(single: tuple[Path, Path], tmp_path: Path) -> None:
    """1 process -> 2 processes: the carry (halted rows, states, current examples) is saved for the global batch."""
    data, single_run = single
    resumed = rewind(single_run, tmp_path / "resumed", 6)
    torchrun(2, resumed / "config.yaml", "--resume", "--run-dir", str(resumed))
    expected = read_metrics(single_run)
    got = read_metrics(resumed)
    assert [r["step"] for r in got if "train/lm_loss" in r] == list(range(1, 13))
    assert_same_run(expected, got, COMPARED)


def test_lm_head_two_gloo_processes_match_one_process(tmp_path: Path) -> None:
    """Each process takes its rows of every step's windows; DDP averages the gradients, the logged losses are the
    mean over processes: the same losses, gradient norms, validation CE and weights as one process."""
    data = text_dataset(tmp_path)
    single = train(
        load_config(None, [f"data_path={data}", f"run_dir={tmp_path / 'single'}", *LM_SETTINGS]), progress=False
    )
    config = tmp_path / "config.yaml"
    save_config(load_config(None, [f"data_path={data}", f"run_dir={tmp_path / 'run'}", *LM_SETTINGS]), config)
    torchrun(2, config)
    expected, got = read_metrics(single), read_metrics(tmp_path / "run")
    assert [r["step"] for r in expected if "train/loss" in r] == list(range(1, 7))
    assert [r["step"] for r in expected if "eval/ce" in r] == [3, 6]
    assert_same_run(expected, got, LM_COMPARED)
    assert_same_weights(tmp_path / "run" / "checkpoints" / "step_6", single / "checkpoints" / "step_6")
