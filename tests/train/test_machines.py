"""Training on several machines: two torchrun launchers (`--nnodes 2 --nproc-per-node 1 --node-rank {0,1}`, static
rendezvous on 127.0.0.1, gloo) follow the run of one process on the same global batch, for a puzzle model (HRM) and
a language-model head (hrm_lm): the same losses in metrics.jsonl, step for step."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrm_reason.config import load_config, save_config
from hrm_reason.train.loop import train
from tests.helpers import read_metrics, tiny_config, write_original_layout
from tests.train.launchers import assert_same_run, launch_nodes, text_dataset

pytestmark = pytest.mark.usefixtures("one_thread")  # the one-process references: tiny models (conftest.one_thread)
# One tolerance for every compared figure: the two runs differ only in the order of float additions (DDP's average of
# two gradients against one backward over both halves, the mean of two halves' losses). Measured: HRM's lm_loss 1.4e-8
# apart over 6 steps, hrm_lm's loss 8.6e-8.
RTOL = 1e-6
PUZZLE_SETTINGS = ("epochs=4", "eval_interval=2", "max_steps=6", "arch.halt_exploration_prob=0.0", "device=cpu")
PUZZLE_COMPARED = ("train/lm_loss", "train/q_halt_loss", "train/q_continue_loss", "train/accuracy", "eval/lm_loss")
LM_SETTINGS = (
    "arch.name=hrm_lm",
    "arch.hidden_size=32",
    "arch.num_heads=2",
    "arch.N=2",
    "arch.T=2",
    "arch.max_seq_len=32",
    # The fusion-entropy term is of each process's batch mean of the fusion weights, not a mean over rows: with it
    # two processes train a slightly different objective than one (w_H 5e-4 apart after 2 steps).
    "arch.entropy_weight=0.0",
    "seq_len=16",
    "global_batch_size=8",
    "max_steps=4",
    "eval_every_steps=2",
    "eval_max_tokens=256",
    "lr=3e-3",
    "lr_warmup_steps=2",
    "device=cpu",
    "seed=0",
)
LM_COMPARED = ("train/loss", "train/ce", "train/grad_norm", "train/w_H", "train/w_L", "eval/ce")


def two_machines(tmp_path: Path, config: Path) -> Path:
    """`hrm train --config CONFIG` under two launchers, one worker each; the run directory."""
    nodes = launch_nodes(tmp_path, ["train", "--config", str(config), "--quiet"])
    try:
        results = nodes.wait(timeout=180)
    finally:
        nodes.kill()
    for node, (code, err) in enumerate(results):
        assert code == 0, f"launcher {node}: {err[-3000:]}"
    return Path(load_config(config).run_dir)


def test_puzzle_model_on_two_machines_matches_one_process(tmp_path: Path) -> None:
    data = write_original_layout(tmp_path / "data", distinct_identifiers=True)
    single = train(tiny_config(data, tmp_path / "single", *PUZZLE_SETTINGS), progress=False)
    config = tmp_path / "config.yaml"
    save_config(tiny_config(data, tmp_path / "run", *PUZZLE_SETTINGS), config)
    expected, got = read_metrics(single), read_metrics(two_machines(tmp_path, config))
    assert [r["step"] for r in expected if "train/lm_loss" in r] == list(range(1, 7))
    assert_same_run(expected, got, PUZZLE_COMPARED, rel=RTOL, abs=1e-9)


def test_lm_head_on_two_machines_matches_one_process(tmp_path: Path) -> None:
    data = text_dataset(tmp_path)

    def config_of(run: str) -> object:
        return load_config(None, [f"data_path={data}", f"run_dir={tmp_path / run}", *LM_SETTINGS])

    single = train(config_of("single"), progress=False)
    config = tmp_path / "config.yaml"
    save_config(config_of("run"), config)
    expected, got = read_metrics(single), read_metrics(two_machines(tmp_path, config))
    assert [r["step"] for r in expected if "train/loss" in r] == list(range(1, 5))
    assert [r["step"] for r in expected if "eval/ce" in r] == [2, 4]
    assert_same_run(expected, got, LM_COMPARED, rel=RTOL, abs=1e-9)
