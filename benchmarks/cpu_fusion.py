"""Eager against compiled (`compile=true`, torch.compile's fused loops) on this CPU, for every registered puzzle model
at its paper size (issue 34; docs/performance.md, "The CPU ceiling of each puzzle model").

    python benchmarks/cpu_fusion.py run benchmarks/cpu-bench/fusion     # hrm bench twice per model, alone, ~25 min
    python benchmarks/cpu_fusion.py table benchmarks/cpu-bench/fusion   # the table, from the kept JSON

Each model is measured eager then compiled, one after the other in one sitting, so the two share the machine's state;
`hrm bench` measures the matrix-product peak in the same process, and MFU is against it. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

BASE = ["--batch-size", "32", "data_path=/nonexistent", "device=cpu"]
PAPER_ATTENTION = ["arch.hidden_size=512", "arch.num_heads=8", "arch.halt_max_steps=16"]
# name -> (what the table calls it, config, overrides): the five of "The CPU ceiling of each puzzle model"
MODELS = {
    "hrm": ("HRM", "configs/sudoku.yaml", []),
    "trm_mlp": ("TRM-MLP", "configs/trm_sudoku.yaml", []),
    "trm_att": ("TRM-Att", "configs/trm_maze.yaml", []),
    "transformer": ("transformer", "configs/transformer_quick.yaml", PAPER_ATTENTION + ["arch.num_layers=8"]),
    "unitf": ("UniTF", "configs/unitf_quick.yaml", PAPER_ATTENTION),
}
MODES = {"eager": [], "compiled": ["compile=true"]}


def run(out: Path, hrm: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, (_, config, overrides) in MODELS.items():
        for mode, extra in MODES.items():
            path = out / f"{name}-{mode}.json"
            if path.is_file():
                continue
            command = [hrm, "bench", "-c", config, *BASE, *overrides, *extra, "--json", str(path)]
            print(" ".join(command), flush=True)
            subprocess.run(command, check=True)


def mfu_cell(mfu: float | None) -> str:
    """An MFU as a percentage; none (null in the JSON) where the model ran above a disturbed peak measurement."""
    return "disturbed peak" if mfu is None else f"{100 * mfu:.1f}%"


def table(root: Path) -> str:
    """Train examples/s and MFU of each model, eager and compiled, with the speed-up."""
    lines = [
        "| model | eager examples/s | eager MFU | compiled examples/s | compiled MFU | speed-up | peak GFLOP/s (eager / compiled) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (label, _, _) in MODELS.items():
        eager, compiled = (json.loads((root / f"{name}-{mode}.json").read_text()) for mode in MODES)
        peaks = f"{eager['matmul_peak_flops'] / 1e9:.1f} / {compiled['matmul_peak_flops'] / 1e9:.1f}"
        speedup = compiled["train_examples_per_s"] / eager["train_examples_per_s"]
        lines.append(
            f"| {label} | {eager['train_examples_per_s']:.2f} | {mfu_cell(eager['mfu'])} "
            f"| {compiled['train_examples_per_s']:.2f} | {mfu_cell(compiled['mfu'])} | {speedup:.2f}x | {peaks} |"
        )
    return "\n".join(lines)


TABLES = {"fusion": table}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run").add_argument("out", type=Path)
    sub.add_parser("table").add_argument("root", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "run":
        run(args.out, os.environ.get("HRM", ".venv/bin/hrm"))
    else:
        print(table(args.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
