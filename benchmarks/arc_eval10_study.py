"""Tables of the real-ARC study (issue 61; docs/results.md, "Real ARC-AGI-1 tasks at laptop scale"): the 77
ARC-AGI-1 evaluation tasks that fit 10x10 by the paper's protocol, runs made by benchmarks/arc_eval10_study.sh and
kept by benchmarks/keep_records.py under DIR/BUDGET/aug-AUG/MODEL/seedK.

    python benchmarks/arc_eval10_study.py table benchmarks/arc-eval10-runs   # its TABLES: results, tasks

results: one row per budget, augmentation count and model: seeds, training steps, pass@1 and pass@2 by voting over
the augmented variants (mean ± sd over seeds), each seed's pass@2 and tasks solved at 2 attempts.
tasks: every task some run solves (pass@2), and which runs solve it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from arc_rung_study import mean_sd
from table_cli import table_main

MODELS = ("hrm", "transformer_act", "trm", "hrm_1seg")


def runs(root: Path) -> list[tuple[tuple[int, str, str], list[dict]]]:
    """((budget, augmentations, model), the runs' eval.json) in the table's order; augmentations "8", or "8t" where
    the training set's tasks were added to training (benchmarks/arc_eval10_study.sh)."""
    found: dict[tuple[int, str, str], list[dict]] = {}
    for path in sorted(root.glob("*/aug-*/*/seed*/eval.json")):
        model, aug, budget = path.parts[-3], path.parts[-4], path.parts[-5]
        record = json.loads(path.read_text())
        record["seed"] = int(path.parts[-2].removeprefix("seed"))
        found.setdefault((int(budget), aug.removeprefix("aug-"), model), []).append(record)
    order = {m: i for i, m in enumerate(MODELS)}
    return sorted(
        found.items(),
        key=lambda kv: (kv[0][0], kv[0][1].endswith("t"), int(kv[0][1].rstrip("t")), order.get(kv[0][2], len(order))),
    )


def augmentations(aug: str) -> str:
    return f"{aug[:-1]}, training tasks added" if aug.endswith("t") else aug


def solved(record: dict, k: int = 2) -> list[str]:
    """The tasks a run solves with k attempts (every test input of the task answered within its k most-voted)."""
    tasks = record["extra"]["arc_voting"]["tasks"]
    return sorted(t for t, v in tasks.items() if v["solved"][str(k)])


def results(root: Path) -> str:
    rows = [
        "| budget (CPU-s) | augmentations | model | seeds | steps | tasks | pass@1 | pass@2 | pass@2 per seed (%) |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (budget, aug, model), records in runs(root):
        steps = sum(r["provenance"]["step"] for r in records) / len(records)
        per_seed = " / ".join(f"{100 * r['extra']['pass@2']:.1f}" for r in records)
        rows.append(
            f"| {budget:,} | {augmentations(aug)} | {model} | {len(records)} | {steps:,.0f} | "
            f"{records[0]['extra']['arc_voting']['tasks_scored']} | {mean_sd([r['extra']['pass@1'] for r in records])} | "
            f"{mean_sd([r['extra']['pass@2'] for r in records])} | {per_seed} |"
        )
    return "\n".join(rows)


def tasks(root: Path) -> str:
    solvers: dict[str, list[str]] = {}
    for (budget, aug, model), records in runs(root):
        for record in records:
            for task in solved(record):
                solvers.setdefault(task, []).append(
                    f"{model} @{augmentations(aug)} ({budget:,} s) seed {record['seed']}"
                )
    rows = ["| task | solved (pass@2) by |", "|---|---|"]
    rows += [f"| {task} | {', '.join(by)} |" for task, by in sorted(solvers.items())]
    if not solvers:
        rows.append("| (none) | no run solves a task |")
    return "\n".join(rows)


TABLES = {"results": results, "tasks": tasks}

if __name__ == "__main__":
    sys.exit(table_main(TABLES))
