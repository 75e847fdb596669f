"""Where a training step's time goes on the CPU (issue 34, "the CPU ceiling"): `hrm bench`'s step under torch.profiler,
the (wall) time of its operators by kernel class, and the matrix products' own rate against the machine's peak.

    python benchmarks/profile_cpu.py -c configs/sudoku.yaml --batch-size 32 data_path=/nonexistent device=cpu

MFU is (the matrix products' share of the step) x (their rate / the peak) x (their share of the FLOPs counted): a model
is held under a target by whichever of the two first factors is low. Run it on an idle machine, as hrm bench.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from hrm_reason.commands.bench import _bench_act, bench_sizes
from hrm_reason.config import load_config
from hrm_reason.runtime.device import matmul_peak, resolve_device

MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation", "aten::linear"}
CLASSES = ("matrix products", "attention", "norms and activations", "optimizer and copies", "other")


def kernel_class(name: str) -> str:
    if name in MATMUL:
        return "matrix products"
    if "attention" in name or "flash" in name or "softmax" in name:
        return "attention"
    if any(k in name for k in ("norm", "silu", "gelu", "sigmoid", "rsqrt", "pow", "mean", "mul", "add", "cat", "neg")):
        return "norms and activations"
    if any(k in name for k in ("atan2", "copy", "clone", "zero", "fill", "sign", "lerp", "addcmul", "to")):
        return "optimizer and copies"
    return "other"


def matmul_flops(name: str, shapes: list) -> float:
    """2 M K N of a matrix product from the profiler's input shapes (the profiler's own FLOP counting, with_flops, slows
    every other operator several times and so distorts the shares it is meant to show)."""
    dims = [s for s in shapes if isinstance(s, list) and len(s) >= 2]
    if name in ("aten::mm", "aten::addmm", "aten::_addmm_activation") and len(dims) >= 2:
        (m, k), (_, n) = dims[-2][-2:], dims[-1][-2:]
        return 2.0 * m * k * n
    if name in ("aten::bmm", "aten::baddbmm") and len(dims) >= 2:
        (b, m, k), n = dims[-2][-3:], dims[-1][-1]
        return 2.0 * b * m * k * n
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", required=True)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--seq-len", type=int, default=81)
    parser.add_argument("--vocab-size", type=int, default=11)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    config = load_config(args.config, args.overrides)
    device = resolve_device(config.device)
    sizes = bench_sizes(config, args.seq_len, args.vocab_size)
    batch = args.batch_size or config.global_batch_size
    model, _, _, dtype, train_step, _, flops, _, _ = _bench_act(config, sizes, device, batch)
    for _ in range(2):
        train_step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(args.steps):
            train_step()
    seconds: dict[str, float] = defaultdict(float)
    mm_flops = 0.0
    for event in prof.key_averages(group_by_input_shape=True):
        seconds[kernel_class(event.key)] += event.self_cpu_time_total / 1e6 / args.steps
        mm_flops += matmul_flops(event.key, event.input_shapes) * event.count / args.steps
    total = sum(seconds.values())
    peak = matmul_peak(device, dtype)
    counted = flops.train_step * batch
    print(f"{model.config.name}, batch {batch}, seq {sizes['seq_len']}, {torch.get_num_threads()} threads")
    print(f"{'class':<24}{'s/step':>12}{'share':>8}")
    for name in CLASSES:
        print(f"{name:<24}{seconds[name]:>12.3f}{100 * seconds[name] / total:>7.1f}%")
    threads = torch.get_num_threads()
    rate = mm_flops / max(
        seconds["matrix products"], 1e-12
    )  # the profiler's times are wall times of the calling thread
    print(
        f"matrix products: {mm_flops / 1e9:.0f} GFLOP/step ({100 * mm_flops / counted:.0f}% of the "
        f"{counted / 1e9:.0f} counted), {rate / 1e9:.0f} GFLOP/s over {threads} threads = "
        f"{100 * rate / peak:.0f}% of the {peak / 1e9:.0f} GFLOP/s peak"
    )
    print("top operators by own CPU time:")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=40))
    return 0


if __name__ == "__main__":
    sys.exit(main())
