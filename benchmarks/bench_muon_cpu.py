"""What `optimizer: muon` costs a CPU training step: torch.optim.Muon (Newton-Schulz in bf16) against the project's
`Muon` (the same step, Newton-Schulz in fp32 on a CPU; hrm_reason/train/muon.py), in CPU-seconds per optimizer step
on one thread.

Prints numbers (not a test). Run: python benchmarks/bench_muon_cpu.py [--config configs/levers_base.yaml] [--steps 5]
The model is the config's (the quickstart's by default); the gradients are random, since Muon's cost depends on the
matrices' shapes, not on the batch or the gradients' values.
"""

from __future__ import annotations

import argparse
import time

import torch

from hrm_reason.config import load_config
from hrm_reason.errors import UserError
from hrm_reason.models import registry
from hrm_reason.train.muon import Muon, muon_split


def cpu_seconds_per_step(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter], steps: int) -> float:
    generator = torch.Generator().manual_seed(0)
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator)
    optimizer.step()  # the momentum buffers are made on the first step
    start = time.process_time()
    for _ in range(steps):
        optimizer.step()
    return (time.process_time() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/levers_base.yaml")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    try:
        config = load_config(args.config, [])
    except UserError as e:
        raise SystemExit(f"error: --config: {e}") from None
    sizes = {"seq_len": 36, "vocab_size": 8, "num_puzzle_identifiers": 1}  # a 6x6 Sudoku: 36 cells, digits, pad
    model = registry.build(config.arch.model_dump(), sizes)
    matrices, _ = muon_split(model)
    shapes = sorted({tuple(p.shape) for p in matrices})
    print(f"{args.config}: {len(matrices)} Muon matrices, shapes {shapes}; one thread, {torch.__version__}")
    for name, cls in (
        ("torch.optim.Muon (bf16 Newton-Schulz)", torch.optim.Muon),
        ("hrm_reason Muon (fp32 on CPU)", Muon),
    ):
        seconds = cpu_seconds_per_step(cls(matrices, lr=0.02, weight_decay=0.01), matrices, args.steps)
        print(f"{name:40s} {seconds:8.3f} CPU-s per step")


if __name__ == "__main__":
    main()
