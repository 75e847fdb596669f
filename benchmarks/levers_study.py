"""Issue 46's lever study on both rungs, from kept records: each arm's final exact accuracy and its training FLOPs to
the rung's target, as a multiple of the original recipe's (docs/results.md, "Fastest to accuracy").

    python benchmarks/levers_study.py table benchmarks   # its TABLES: levers

The arms (benchmarks/levers.sh on the quickstart rung, `benchmarks/hard_rung_study.sh RUNG --levers` on the hard
rung): the original code's optimizer recipe, the project's best recipe (the quickstart's; on the hard rung also the
study's own HRM runs, from another sitting), and the best with one lever each. FLOPs are the model's counted training
FLOPs (`train_flops` in metrics.jsonl), the same on any machine, interpolated to where the exact accuracy first
crossed the target; a Muon arm's also count its Newton-Schulz iterations (`muon.newton_schulz_flops` a step, from the run's config), which the
model's count leaves out. CPU-seconds to the target are given beside them: they depend on the machine and its load.

An arm **earns** the `fast` preset on a rung when every seed reached the target, its mean FLOPs to the target are at
most half the original's, and its final accuracy is not below the original's (their difference plus two standard
errors, Welch's, is at least 0; fewer than 2 seeds on a side decide nothing). An original that never reached the
target needed more FLOPs than its whole runs: the ratio is then at most the arm's over those ("< x").
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from claims import welch_se
from table_cli import table_main

from hrm_reason.commands.compare import read_runs
from hrm_reason.commands.compare_tables import final_evaluation, mean_std, num, pct, reach, with_usable_eval
from hrm_reason.config import load_config
from hrm_reason.models import registry
from hrm_reason.train.muon import newton_schulz_flops

METRIC = "exact_accuracy"
HARD = "sudoku6x6-min"
LEVERS = f"hard-rung-levers/{HARD}/runs"
ARMS = (  # (row label, the glob of its runs under the records' root on the quickstart rung, on the hard rung; None: no row)
    ("original recipe", "levers-runs/original-seed?", f"{LEVERS}/original/seed?"),
    ("best (no lever)", "levers-runs/next-segment-ema0.99-wd1-seed?", f"{LEVERS}/best/seed?"),
    ("best (no lever), the hard rung study's runs (another sitting)", None, f"hard-rung-runs/{HARD}/runs/hrm/seed?"),
    ("best + Muon (muon_lr 0.02)", "levers-runs/best-muon-seed?", f"{LEVERS}/muon/seed?"),
    ("best + Muon (muon_lr 5e-3)", "levers-runs/best-muon-lr5e-3-seed?", f"{LEVERS}/muon-lr5e-3/seed?"),
    ("best + CGAR (depth curriculum, segment weights 0.7)", "levers-runs/best-cgar-seed?", f"{LEVERS}/cgar/seed?"),
    ("best + half the batch (32)", "levers-runs/best-batch32-seed?", f"{LEVERS}/batch32/seed?"),
    (
        "best + Muon (muon_lr 5e-3) + half the batch (32)",
        "levers-runs/best-muon-lr5e-3-batch32-seed?",
        f"{LEVERS}/muon-lr5e-3-batch32/seed?",
    ),
)


@dataclass(frozen=True)
class Rung:
    title: str
    target: float
    runs: dict[str, str]  # arm label -> the glob of its run directories under the records' root


RUNGS = (
    Rung("quickstart (easy 6x6 Sudoku, 992 steps)", 0.8, {label: q for label, q, _ in ARMS if q}),
    Rung(f"{HARD}, the hard rung (1,800 CPU-s)", 0.5, {label: h for label, _, h in ARMS if h}),
)


@dataclass(frozen=True)
class Arm:
    """One arm's seeds on one rung: final exact accuracy, training FLOPs and CPU-seconds to the target (None: never
    reached), and each run's training FLOPs in all."""

    finals: list[float]
    flops: list[float | None]
    cpu_seconds: list[float | None] = field(default_factory=list)  # shown beside the FLOPs; no part of the rule
    budget_flops: list[float] = field(default_factory=list)


def optimizer_flops_per_step(run_dir: Path) -> float:
    """FLOPs a training step spends in the optimizer beyond the model's count: Muon's Newton-Schulz iterations."""
    config = load_config(run_dir / "config.yaml")
    if config.optimizer != "muon":
        return 0.0
    sizes = {"seq_len": 1, "vocab_size": 1, "num_puzzle_identifiers": 1}  # the block matrices do not depend on them
    return newton_schulz_flops(registry.build(config.arch.model_dump(), sizes))


def read_arm(root: Path, pattern: str, target: float) -> Arm | None:
    dirs = sorted(root.glob(pattern))
    if not dirs:
        return None
    records = read_runs(dirs)
    finals = [final_evaluation(with_usable_eval(r, METRIC), METRIC)["at_trained"] for r in records]
    hits = [reach(r["curve"], target, METRIC) for r in records]
    per_step = [optimizer_flops_per_step(d) for d in dirs]
    flops = [None if h is None else h["train_flops"] + h["step"] * s for h, s in zip(hits, per_step, strict=True)]
    ends = [r["curve"][-1] for r in records]
    budget = [e["train_flops"] + e["step"] * s for e, s in zip(ends, per_step, strict=True)]
    return Arm(finals, flops, [None if h is None else h["train_cpu_seconds"] for h in hits], budget)


def ratio_and_verdict(arm: Arm, original: Arm | None) -> tuple[str, str]:
    """The arm's mean FLOPs to the target over the original's (seeds that reached it), and whether it earns the
    preset (the module's rule). Where no seed of the original reached the target, its FLOPs to it are more than it
    trained: the ratio is then a bound, "< x", the arm's over the original's whole runs, and the rule reads it as x."""
    reached = [f for f in arm.flops if f is not None]
    if original is None:
        return "-", "no original to compare"
    if not reached:
        return "-", "target not reached"
    base = [f for f in original.flops if f is not None]
    ratio = statistics.fmean(reached) / statistics.fmean(base or original.budget_flops)
    shown = f"{ratio:.2f}" if base else f"< {ratio:.2f}"
    se = welch_se(arm.finals, original.finals)
    if se is None:
        return shown, "not decided (1 seed)"
    gap = statistics.fmean(arm.finals) - statistics.fmean(original.finals)
    why = [
        reason
        for reason, failed in (
            (f"{len(reached)}/{len(arm.flops)} seeds reached the target", len(reached) < len(arm.flops)),
            ("more than half the original's FLOPs", ratio > 0.5),
            ("final accuracy below the original's", gap + 2 * se < 0),
        )
        if failed
    ]
    return shown, "no: " + "; ".join(why) if why else "**earns the preset**"


def levers(root: Path) -> str:
    """A row per rung and arm: seeds, final exact accuracy, FLOPs to the target, their ratio to the original's."""
    rows = [
        "| rung | arm | seeds | exact accuracy (mean ± sd) | target | reached | training TFLOP to target | "
        "x original | training CPU-s to target | fast preset |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for rung in RUNGS:
        arms = {label: read_arm(root, pattern, rung.target) for label, pattern in rung.runs.items()}
        original = arms[ARMS[0][0]]
        for label, arm in arms.items():
            if arm is None:
                rows.append(f"| {rung.title} | {label} | 0 | not run | {rung.target:.0%} | - | - | - | - | - |")
                continue
            reached = [f for f in arm.flops if f is not None]
            seconds = [s for s in arm.cpu_seconds if s is not None]
            ratio, verdict = ("1.00", "-") if arm is original else ratio_and_verdict(arm, original)
            rows.append(
                f"| {rung.title} | {label} | {len(arm.finals)} | {pct(mean_std(arm.finals))} | {rung.target:.0%} | "
                f"{len(reached)}/{len(arm.flops)} | {num(mean_std(reached) if reached else None, 1, 1e12)} | {ratio} | "
                f"{num(mean_std(seconds) if seconds else None, 0)} | {verdict} |"
            )
    return "\n".join(rows)


TABLES = {"levers": levers}


if __name__ == "__main__":
    sys.exit(table_main(TABLES))
