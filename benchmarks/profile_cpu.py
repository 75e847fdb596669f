"""Where a training step's time goes (issue 34, "the CPU ceiling"; issue 47 on CUDA): `hrm bench`'s step under
torch.profiler, its time by kernel class, and the matrix products' own rate against the machine's peak.

    python benchmarks/profile_cpu.py -c configs/sudoku.yaml --batch-size 32 data_path=/nonexistent device=cpu
    python benchmarks/profile_cpu.py -c configs/sudoku.yaml --steps 10 --warmup 3 data_path=/nonexistent \
        device=cuda compile=true

On the CPU the classes are operators' own (wall) time on the calling thread. On CUDA they are the kernels' own GPU
time, set against the step's wall time: what is left is the GPU idle, waiting on the host (launches, the ACT loop's
host syncs). MFU is (the matrix products' share of the step) x (their rate / the peak) x (their share of the FLOPs
counted): a model is held under a target by whichever of the two first factors is low. Run it on an idle machine, as
hrm bench.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from hrm_reason.commands.bench import _bench_act, bench_sizes
from hrm_reason.config import load_config
from hrm_reason.runtime.device import resolve_device, synchronize
from hrm_reason.runtime.peak import matmul_peak, mfu_of

MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation", "aten::linear"}
CLASSES = ("matrix products", "attention", "norms and activations", "optimizer and copies", "other")
# CUDA kernels: what torch.compile fused into Triton kernels is a class of its own (its name lists the fused ops, but
# one kernel does several classes' work), and the time no kernel ran is the GPU waiting on the host.
CUDA_CLASSES = (
    "matrix products",
    "attention",
    "fused by compile",
    "norms and activations",
    "optimizer and copies",
    "other",
)
IDLE = "GPU idle (waiting on host)"


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


def cuda_kernel_class(name: str) -> str:
    """The class of a CUDA kernel by its name: cuBLAS/CUTLASS products (gemm, nvjet, xmma), flash and memory-efficient
    attention, Inductor's Triton kernels (triton_poi/red/per_fused_*; its matmul templates triton_tem_*mm*), eager
    ATen kernels by the functor their name carries."""
    n = name.lower()
    if any(k in n for k in ("flash", "fmha", "attention", "sdpa", "softmax")):
        return "attention"
    if any(k in n for k in ("gemm", "cutlass", "xmma", "nvjet", "cublas", "wgmma")) or (
        n.startswith("triton_tem") and "mm" in n
    ):
        return "matrix products"
    if n.startswith("triton_"):
        return "fused by compile"
    if any(k in n for k in ("memcpy", "memset", "copy", "fill", "atan2", "multi_tensor", "foreach", "lerp", "addcmul")):
        return "optimizer and copies"
    if any(k in n for k in ("norm", "silu", "gelu", "sigmoid", "rsqrt", "pow", "mean", "mul", "add", "neg", "cat")):
        return "norms and activations"
    return "other"


def cuda_seconds(events: Iterable[Any], steps: int) -> dict[str, float]:
    """GPU seconds per step of each class, from the profiler's averaged events: the kernels only (device_type CUDA),
    so that an operator and the kernels it launched are not counted twice."""
    seconds: dict[str, float] = defaultdict(float)
    for event in events:
        if event.device_type == DeviceType.CUDA:
            seconds[cuda_kernel_class(event.key)] += event.self_device_time_total / 1e6 / steps
    return seconds


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
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (compile=true compiles in these)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON to this file")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    config = load_config(args.config, args.overrides)
    device = resolve_device(config.device)
    sizes = bench_sizes(config, args.seq_len, args.vocab_size)
    batch = args.batch_size or config.global_batch_size
    model, _, _, dtype, train_step, _, flops, _, _ = _bench_act(config, sizes, device, batch)
    peak_before = matmul_peak(device, dtype)
    for _ in range(args.warmup):
        train_step()
    synchronize(device)
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with profile(activities=activities, record_shapes=True) as prof:
        start = time.perf_counter()
        for _ in range(args.steps):
            train_step()
        synchronize(device)
        step_seconds = (time.perf_counter() - start) / args.steps
    averages = prof.key_averages(group_by_input_shape=True)
    seconds: dict[str, float] = defaultdict(float)
    mm_flops = 0.0
    for event in averages:
        if not cuda:
            seconds[kernel_class(event.key)] += event.self_cpu_time_total / 1e6 / args.steps
        mm_flops += matmul_flops(event.key, event.input_shapes) * event.count / args.steps
    if cuda:
        seconds = cuda_seconds(averages, args.steps)
        seconds[IDLE] = max(step_seconds - sum(seconds.values()), 0.0)
    classes = (*CUDA_CLASSES, IDLE) if cuda else CLASSES
    total = sum(seconds.values())
    peak = max(peak_before, matmul_peak(device, dtype))  # before and after the profiled steps: the larger
    counted = flops.train_step * batch
    threads = torch.get_num_threads()
    rate = mm_flops / max(seconds["matrix products"], 1e-12)  # the profiler's times are wall times
    where = torch.cuda.get_device_name(device) if cuda else f"{threads} threads"
    print(f"{model.config.name}, batch {batch}, seq {sizes['seq_len']}, {where}, compile {config.compile}")
    if cuda:
        print(f"step {1000 * step_seconds:.1f} ms wall under the profiler; GPU time of its kernels by class:")
        print(f"{'class':<30}{'ms/step':>10}{'share':>8}")
        for name in classes:
            print(f"{name:<30}{1000 * seconds[name]:>10.2f}{100 * seconds[name] / total:>7.1f}%")
    else:
        print(f"{'class':<24}{'s/step':>12}{'share':>8}")
        for name in classes:
            print(f"{name:<24}{seconds[name]:>12.3f}{100 * seconds[name] / total:>7.1f}%")
    over = f"on {where}" if cuda else f"over {threads} threads"
    share = mfu_of(rate, peak)  # None: the products ran above the peak, whose measurement was disturbed
    of_peak = (
        f"{100 * share:.0f}% of the {peak / 1e9:.0f} GFLOP/s peak"
        if share is not None
        else f"above the {peak / 1e9:.0f} GFLOP/s peak measured: its measurement was disturbed (other work?)"
    )
    print(
        f"matrix products: {mm_flops / 1e9:.0f} GFLOP/step ({100 * mm_flops / counted:.0f}% of the "
        f"{counted / 1e9:.0f} counted), {rate / 1e9:.0f} GFLOP/s {over} = {of_peak}"
    )
    sort = "self_device_time_total" if cuda else "self_cpu_time_total"
    print(f"top {'kernels by own GPU' if cuda else 'operators by own CPU'} time:")
    print(prof.key_averages().table(sort_by=sort, row_limit=12, max_name_column_width=40))
    if args.json is not None:
        record = {
            "model": model.config.name,
            "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if cuda else None,
            "threads": threads,
            "dtype": str(dtype).removeprefix("torch."),
            "batch_size": batch,
            "seq_len": sizes["seq_len"],
            "compile": config.compile,
            "steps": args.steps,
            "step_seconds": step_seconds,
            "basis": "GPU kernel time; idle = wall - kernels" if cuda else "operators' own CPU time",
            "seconds_per_step": {name: seconds[name] for name in classes},
            "share": {name: seconds[name] / total for name in classes},
            "matmul_flops_per_step": mm_flops,
            "counted_flops_per_step": counted,
            "matmul_flops_per_s": rate,
            "matmul_peak_flops": peak,
            "matmul_share_of_peak": share,  # None: above the peak, whose measurement was disturbed
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
