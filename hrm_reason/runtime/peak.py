"""The machine's matrix-product peak, the FLOP/s that MFU and a run's times are measured against, and what a run
records of the machine it found (run.json: the peak's samples, the load average, the cores) with the warning a run on
a shared machine ends with.

The peak is the best over a few square sizes of the median rate over repetitions at each size: the size at which a
machine's products run fastest differs by machine (on a 2-core AVX2 CPU n=1536 runs near 175 GFLOP/s and n=2048 near
92), and the median at each size keeps a moment when another job paused from standing for the machine. A peak below
the model's own rate is no peak: its measurement met other work on the cores, and no MFU is computed from it
(`mfu_of`); a run's samples below its own rate are set aside the same way (`record_peak`)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from hrm_reason.atomic import atomic_write_text
from hrm_reason.provenance import RUN_RECORD
from hrm_reason.runtime.device import synchronize

# The square sizes the peak is the best of: a few seconds in all on a CPU (the largest dominates).
PEAK_SIZES: dict[str, tuple[int, ...]] = {"cpu": (512, 1024, 1536, 2048), "cuda": (2048, 4096, 8192)}


def products_per_repetition(n: int) -> int:
    """Products timed together at size n: small ones in groups as long as one product of 1024, so that each timing
    is long against the clock's resolution."""
    return max(1, round((1024 / n) ** 3))


def rate_at(n: int, device: torch.device, dtype: torch.dtype, seconds: float) -> float:
    """FLOP/s of an n x n matrix product in `dtype` on `device` now: the median over repetitions for `seconds` (at
    least 3), after one warm-up. The median, not the best: on a machine whose cores another job shares, a best-of
    picks the moments the other job paused."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b  # warm-up: allocation and kernel selection are not the machine's speed
    products = products_per_repetition(n)
    rates: list[float] = []
    start = time.perf_counter()
    while len(rates) < 3 or time.perf_counter() - start < seconds:
        synchronize(device)
        t0 = time.perf_counter()
        for _ in range(products):
            a @ b
        synchronize(device)
        rates.append(products * 2 * n**3 / (time.perf_counter() - t0))
    return statistics.median(rates)


def matmul_peak(
    device: torch.device, dtype: torch.dtype, seconds: float = 1.0, sizes: tuple[int, ...] | None = None
) -> float:
    """FLOP/s of a square matrix product in the model's compute dtype on this device, now: the best over `sizes`
    (PEAK_SIZES of the device's kind by default) of each size's median rate, `seconds` shared among the sizes."""
    sizes = sizes or PEAK_SIZES.get(device.type, PEAK_SIZES["cuda"])
    return max(rate_at(n, device, dtype, seconds / len(sizes)) for n in sizes)


def mfu_of(achieved: float, peak: float) -> float | None:
    """The model's FLOP/s over the peak; None where the model ran above the peak (or no peak was measured): such a
    peak's measurement was disturbed, and a figure over 100% is no measurement."""
    return achieved / peak if 0 < peak and achieved <= peak else None


def disturbed_line(achieved: float, peak: float) -> str:
    """The one line said instead of an MFU when the model ran above the peak measured."""
    return (
        f"matmul peak {peak / 1e9:.1f} GFLOP/s measured now, below the model's own {achieved / 1e9:.1f} GFLOP/s: "
        "the peak's measurement was disturbed (other work on the cores?), so no MFU"
    )


def record_peak(
    run_dir: Path,
    samples: list[float],
    load: float | None = None,
    cpus: int | None = None,
    model_flops_per_s: float | None = None,
) -> None:
    """Add this machine's fp32 matrix-product peak (FLOP/s: the median of the samples taken during the run and at its
    end) to this start's record in run.json, with the samples, the highest load average seen and the cores: the
    figures that scale the run's times to another machine, and say whether it had the machine to itself
    (docs/training.md, "Time to accuracy"). Samples below the run's own rate (`model_flops_per_s`, per process) met
    other work on the cores: they are set aside (`matmul_peak_disturbed`, with the rate), and the peak is the median
    of the rest, none when none is left. A start stopped before any sample records its load alone."""
    path = run_dir / RUN_RECORD
    rate = model_flops_per_s if model_flops_per_s and model_flops_per_s > 0 else None
    disturbed = [s for s in samples if rate is not None and s < rate]
    kept = [s for s in samples if s not in disturbed]
    try:
        loaded = json.loads(path.read_text())
        runs = loaded["runs"]
        if kept:
            runs[-1]["matmul_peak_flops"] = statistics.median(kept)
        runs[-1].update(matmul_peak_samples=samples, load_average_max=load, cpu_count=cpus)
        if disturbed:
            runs[-1].update(matmul_peak_disturbed=disturbed, model_flops_per_s=rate)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError, AttributeError):
        return  # best effort, as the rest of run.json
    atomic_write_text(path, json.dumps({"runs": runs}, indent=2) + "\n")


def matmul_peak_of(run_dir: Path) -> float | None:
    """The last fp32 matrix-product peak recorded in run_dir/run.json, if any (a start whose samples were all
    disturbed records none)."""
    try:
        runs = json.loads((Path(run_dir) / RUN_RECORD).read_text())["runs"]
        peaks = [r["matmul_peak_flops"] for r in runs if isinstance(r, dict) and r.get("matmul_peak_flops")]
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        return None
    return float(peaks[-1]) if peaks else None


SHARED_LOAD_MARGIN = 0.5  # a load average above the cores by more than this: other work ran beside the run


def _starts(numbers: list[int], total: int) -> str:
    """' in start 2 of 3 (run.json)', or '' for a run of one start."""
    if total == 1:
        return ""
    names = [str(n) for n in numbers]
    joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f" in start{'s' * (len(names) > 1)} {joined} of {total} (run.json)"


def shared_machine_warning(run_dir: Path) -> str | None:
    """The one-line warning a run ends with when any of its starts (run.json: the first and every resume, as
    record_peak wrote them) found the machine shared, naming the starts when there were several, or measured a peak
    below the run's own rate (its measurement disturbed); None when none did, or none recorded its load (starts
    shorter than the peak's measurement, or written before loads were recorded)."""
    try:
        runs = json.loads((Path(run_dir) / RUN_RECORD).read_text())["runs"]
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        return None
    if not isinstance(runs, list):
        return None
    starts: list[dict[str, Any]] = [s if isinstance(s, dict) else {} for s in runs]
    shared = []
    disturbed: list[tuple[int, int, bool]] = []  # (start, samples set aside, whether a peak was left)
    for number, start in enumerate(starts, 1):
        load, cpus = start.get("load_average_max"), start.get("cpu_count")
        if isinstance(load, (int, float)) and isinstance(cpus, int) and load > cpus + SHARED_LOAD_MARGIN:
            shared.append((number, float(load), cpus))
        if isinstance(start.get("matmul_peak_disturbed"), list) and start["matmul_peak_disturbed"]:
            disturbed.append((number, len(start["matmul_peak_disturbed"]), "matmul_peak_flops" in start))
    parts = []
    if shared:
        load, cpus = max(shared, key=lambda s: s[1])[1:]
        parts.append(
            f"the machine was shared during this run (load average up to {load:.1f} on {cpus} cores"
            f"{_starts([n for n, _, _ in shared], len(runs))}): its wall times and recorded matrix-product peak are "
            "those of a loaded machine"
        )
    if disturbed:
        left = (
            "the median of the rest is recorded"
            if all(k for _, _, k in disturbed)
            else "a start with none left records no peak"
        )
        parts.append(
            f"{sum(c for _, c, _ in disturbed)} matrix-product peak sample(s)"
            f"{_starts([n for n, _, _ in disturbed], len(runs))} fell below the run's own rate: their measurement "
            f"was disturbed (other work on the cores), so they are set aside and {left}"
        )
    if not parts:
        return None
    return "warning: " + "; ".join(parts) + "; compare runs by CPU-seconds and FLOPs"
