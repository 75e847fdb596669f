"""The table of the three example tasks from their kept evaluation JSONs (docs/results.md, "Your own tasks: three
examples"; runs made by benchmarks/your_tasks_study.sh, kept by benchmarks/keep_records.py).

    python benchmarks/your_tasks_study.py table benchmarks/your-tasks-runs   # its TABLES: results

One row per task and model: the seeds, the training steps the CPU-second budget gave, held-out exact accuracy at the
segments the model was trained with (4; the one-pass transformer 1) and at 8, the share of valid answers at 8 (the
task's own check.py: an answer other than the label may be valid), the ACT result (cap 8) and, where the task
declares symmetries, exact accuracy at the trained segments voting over 8 symmetric copies (`--tta 8 --select
vote`). Mean ± sd over the seeds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from hard_rung_study import _cell
from table_cli import table_main

TASKS = ("nqueens", "futoshiki", "life")
MODELS = ("hrm", "transformer_direct", "transformer_act", "trm")


def results(root: Path) -> str:
    rows = [
        "| task | model | seeds | steps | tests | trained segments | exact @trained | exact @8 | valid @8 | "
        "ACT exact (cap 8; segments) | `--tta 8` vote @trained |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for task in TASKS:
        for model in MODELS:
            runs = sorted((root / task / "runs" / model).glob("seed*/eval8.json"))
            if not runs:
                continue
            evals = [json.loads(p.read_text()) for p in runs]
            trained = {trained_segments(p.parent) for p in runs}
            if len(trained) != 1:
                raise SystemExit(f"{task} {model}: seeds trained with different segments {sorted(trained)}")
            (segments,) = trained
            steps = [e["provenance"]["step"] for e in evals]
            act = f"{_cell([e['act_exact_accuracy'] for e in evals])} ({_mean([e['act_mean_segments'] for e in evals]):.2f})"
            votes = [
                json.loads(p.read_text()) for p in sorted((root / task / "runs" / model).glob("seed*/eval-tta8.json"))
            ]
            symmetric = any((root / task / "runs").glob("*/seed*/eval-tta8.json"))  # the study votes where declared
            vote = _cell([vote_at(v, 8, segments) for v in votes]) if votes else "not run yet"
            if not symmetric:
                vote = "no symmetry declared"
            if votes and len(votes) != len(evals):  # a run whose vote is not kept yet
                vote += f" ({len(votes)} seed{'s' * (len(votes) > 1)})"
            rows.append(
                f"| {task} | {model} | {len(evals)} | {_mean(steps):,.0f} | {evals[0]['count']:,} | {segments} | "
                f"{_cell([e['exact_accuracy'][segments - 1] for e in evals])} | {_cell([e['exact_accuracy'][-1] for e in evals])} | "
                f"{_cell([e['extra']['valid_answers'][-1] for e in evals])} | {act} | {vote} |"
            )
    return "\n".join(rows)


def trained_segments(run: Path) -> int:
    """The segments a kept run was trained with: arch.halt_max_steps of its config.yaml."""
    return int(yaml.safe_load((run / "config.yaml").read_text())["arch"]["halt_max_steps"])


def vote_at(result: dict, k: int, segments: int) -> float:
    """Exact accuracy voting over K symmetric copies at `segments` (an `hrm eval --tta K` JSON's test-time table)."""
    table = result["extra"]["test_time"]["table"]
    (row,) = [r for r in table if r["segments"] == segments and r["tta"] == k and r["samples"] == 1]
    return row["exact_accuracy"]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


TABLES = {"results": results}


if __name__ == "__main__":
    sys.exit(table_main(TABLES))
