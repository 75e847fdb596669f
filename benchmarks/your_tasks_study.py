"""The table of the three example tasks from their kept evaluation JSONs (docs/results.md, "Your own tasks: three
examples"; runs made by benchmarks/your_tasks_study.sh, kept by benchmarks/keep_records.py).

    python benchmarks/your_tasks_study.py table benchmarks/your-tasks-runs   # its TABLES: results

One row per task and model: the seeds, the training steps the CPU-second budget gave, held-out exact accuracy at the
trained 4 segments and at 8, the share of valid answers at 8 (the task's own check.py: an answer other than the
label may be valid), the ACT result (cap 8) and, where the task declares symmetries, exact accuracy at the trained
segments voting over 8 symmetric copies (`--tta 8 --select vote`). Mean ± sd over the seeds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hard_rung_study import _cell, accuracy_at
from table_cli import table_main

TASKS = ("nqueens", "futoshiki", "life")
MODELS = ("hrm", "transformer_direct", "transformer_act", "trm")
TRAINED = 4  # segments the models were trained with (configs/your_task.yaml)


def results(root: Path) -> str:
    rows = [
        "| task | model | seeds | steps | tests | exact @4 | exact @8 | valid @8 | ACT exact (cap 8; segments) | "
        "`--tta 8` vote @4 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for task in TASKS:
        for model in MODELS:
            runs = sorted((root / task / "runs" / model).glob("seed*/eval8.json"))
            if not runs:
                continue
            evals = [json.loads(p.read_text()) for p in runs]
            steps = [e["provenance"]["step"] for e in evals]
            act = f"{_cell([e['act_exact_accuracy'] for e in evals])} ({_mean([e['act_mean_segments'] for e in evals]):.2f})"
            votes = [
                json.loads(p.read_text()) for p in sorted((root / task / "runs" / model).glob("seed*/eval-tta8.json"))
            ]
            vote = _cell([accuracy_at(v, "tta", 8)[0] for v in votes]) if votes else "no symmetry declared"
            if votes and len(votes) != len(evals):  # a run whose vote is not kept yet
                vote += f" ({len(votes)} seed{'s' * (len(votes) > 1)})"
            rows.append(
                f"| {task} | {model} | {len(evals)} | {_mean(steps):,.0f} | {evals[0]['count']:,} | "
                f"{_cell([e['exact_accuracy'][TRAINED - 1] for e in evals])} | {_cell([e['exact_accuracy'][-1] for e in evals])} | "
                f"{_cell([e['extra']['valid_answers'][-1] for e in evals])} | {act} | {vote} |"
            )
    return "\n".join(rows)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


TABLES = {"results": results}


if __name__ == "__main__":
    sys.exit(table_main(TABLES))
