"""The language-model heads' comparison from its kept records (docs/results.md, "The language-model heads").

    python benchmarks/lm_study.py table benchmarks/lm-study-runs   # its TABLES: lm, lmclaims

Each run of benchmarks/lm_study.sh keeps `config.yaml`, `run.json` and of `metrics.jsonl` its header (parameters,
FLOPs per step) and its evaluation lines (benchmarks/keep_records.py). A head's figure is its runs' last evaluation:
validation cross-entropy in nats per token (a token is a byte here), over the same validation tokens for every run.
The claims are decided by benchmarks/claims.py's rule with the effect in nats (the control's CE less HRM-LM's) and
the smallest gain that counts 0.01 nats, the seed-to-seed spread the HRM-LM paper reports at its scale: for HRM-LM
as its paper initialises it, and for the arm `hrm_lm-wc`, whose recurrent blocks start at the controls'
width-corrected scale (benchmarks/lm_study.sh).
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from claims import verdict, welch_se
from table_cli import table_main

from hrm_reason.commands.compare_tables import mean_std, num
from hrm_reason.readers import read_jsonl

HEADS = {
    "hrm_lm": "HRM-LM",
    "unitf_lm": "UniTF-LM",
    "transformer_lm": "Transformer-LM (T-L4)",
    "hrm_lm-wc": "HRM-LM, width-corrected init",
}
MIN_GAIN_NATS = 0.01
BEATS_UNITF = "a lower validation CE than flat shared-weight iteration, UniTF-LM (HRM-LM paper)"
BEATS_TL4 = (
    "a lower validation CE than a transformer of its size, T-L4 (HRM-LM paper, at equal steps; here at equal time)"
)
CLAIMS = (  # (arm, control, what the arm is claimed to reach)
    ("hrm_lm", "unitf_lm", f"HRM-LM reaches {BEATS_UNITF}"),
    ("hrm_lm", "transformer_lm", f"HRM-LM reaches {BEATS_TL4}"),
    ("hrm_lm-wc", "unitf_lm", f"HRM-LM with the controls' width-corrected init reaches {BEATS_UNITF}"),
    ("hrm_lm-wc", "transformer_lm", f"HRM-LM with the controls' width-corrected init reaches {BEATS_TL4}"),
)


@dataclass(frozen=True)
class Run:
    seed: int
    params: int
    ce: float  # the last evaluation's validation CE, nats per token
    steps: int
    cpu_seconds: float
    flops: float


def read_run(path: Path) -> Run:
    """A kept run's header and last evaluation; a run with no evaluation is an error naming it."""
    lines = read_jsonl(path / "metrics.jsonl")
    evals = [r for r in lines if "eval/ce" in r]
    if not evals:
        raise SystemExit(f"error: {path}/metrics.jsonl: no evaluation (eval/ce): the run did not finish")
    last = evals[-1]
    return Run(
        seed=int(path.name.removeprefix("seed")),
        params=int(lines[0]["num_params"]),
        ce=float(last["eval/ce"]),
        steps=int(last["step"]),
        cpu_seconds=float(last["train_cpu_seconds"]),
        flops=float(last["train_flops"]),
    )


def read_heads(root: Path) -> dict[str, list[Run]]:
    """Every head with kept runs, in HEADS' order, its runs by seed."""
    found = {}
    for head in HEADS:
        seeds = sorted((root / "runs" / head).glob("seed*/metrics.jsonl"), key=lambda p: int(p.parent.name[4:]))
        if seeds:
            found[head] = [read_run(p.parent) for p in seeds]
    return found


def _ce(values: list[float]) -> str:
    return num(mean_std(values), 3)


def lm(root: Path) -> str:
    rows = [
        "| head | params | seeds | steps | CPU-s per step | training TFLOP | val CE per seed (nats) | mean ± sd | "
        "bits per byte |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for head, runs in read_heads(root).items():
        ces = [r.ce for r in runs]
        per_step = mean_std([r.cpu_seconds / r.steps for r in runs])
        rows.append(
            f"| {HEADS[head]} | {runs[0].params:,} | {len(runs)} | {num(mean_std([r.steps for r in runs]))} | "
            f"{num(per_step, 3)} | {num(mean_std([r.flops for r in runs]), 1, 1e12)} | "
            f"{' / '.join(f'{c:.3f}' for c in ces)} | {_ce(ces)} | {num(mean_std([c / math.log(2) for c in ces]), 3)} |"
        )
    return "\n".join(rows)


def lmclaims(root: Path) -> str:
    heads = read_heads(root)
    rows = ["| claim (source) | Python standard library, bytes (val CE, 600 CPU-s) |", "|---|---|"]
    for arm, control, claim in CLAIMS:
        if arm not in heads or control not in heads:
            rows.append(f"| {claim} | not run |")
            continue
        x, y = [r.ce for r in heads[control]], [r.ce for r in heads[arm]]
        effect, se = statistics.fmean(x) - statistics.fmean(y), welch_se(x, y)
        spread = "" if se is None else f" ± {se:.3f} SE"
        seeds = (
            f"{len(y)} and {len(x)} seeds"
            if len(x) != len(y)
            else "1 seed each"
            if len(y) == 1
            else f"{len(y)} seeds each"
        )
        rows.append(
            f"| {claim} | {verdict(effect, se, MIN_GAIN_NATS)}: {HEADS[arm]} {_ce(y)}, {HEADS[control]} {_ce(x)} nats "
            f"({effect:+.3f}{spread} nats; {seeds}) |"
        )
    return "\n".join(rows)


TABLES = {"lm": lm, "lmclaims": lmclaims}


if __name__ == "__main__":
    sys.exit(table_main(TABLES))
