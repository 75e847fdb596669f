"""`hrm bench`: the FLOPs it counts from the shapes agree with PyTorch's own operator-level count, and the JSON has the
documented keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from hrm_reason.bench import hrm_flops
from hrm_reason.losses import act_loss
from tests.test_model import batch, small_model

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("q_target", ["extra_forward", "next_segment"])
def test_counted_flops_match_pytorch_flop_counter(q_target: str) -> None:
    model = small_model(H_cycles=2, L_cycles=3, H_layers=2, L_layers=1, q_target=q_target)
    model.train()
    b = batch(n=4)
    carry = model.initial_carry(b)
    carry, _ = model(carry, b)  # the second step has rows that go on (next_segment's Q-head term)
    # The math attention backend is made of matrix products that the counter sees (the fused CPU kernel is not counted).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        carry, out = model(carry, b)
        loss, _ = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, "softmax_cross_entropy")
        loss.backward()
    train_flops, segment_flops = hrm_flops(model, 4)
    # The counter also sees the Q head (hidden x 2 per sequence), which the count from the shapes leaves out.
    assert counter.get_total_flops() == pytest.approx(train_flops, rel=0.01)

    model.eval()
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(model.initial_carry(b), b)
    assert counter.get_total_flops() == pytest.approx(segment_flops, rel=0.01)


def test_bench_command_writes_the_documented_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    args = ["bench", "--config", str(REPO / "configs" / "sudoku_quick.yaml"), "--json", str(out), "--batch-size", "4",
            "--steps", "1", "--warmup", "1", "data_path=/nonexistent", "arch.hidden_size=32", "arch.num_heads=2", "device=cpu"]
    proc = subprocess.run([sys.executable, "-c", "import cli; cli.main()", *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    for key in ("train_examples_per_s", "eval_examples_per_s", "train_flops_per_step", "matmul_peak_flops", "mfu", "peak_memory_bytes"):
        assert figures[key] > 0, key
    assert figures["mfu"] == pytest.approx(figures["train_flops_per_step"] * figures["train_examples_per_s"] / 4 / figures["matmul_peak_flops"])
