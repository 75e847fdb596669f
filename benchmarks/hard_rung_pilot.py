"""The hard-rung pilot's table from its kept records (docs/results.md, "Choosing the hard rung").

    python benchmarks/hard_rung_pilot.py table benchmarks/pilot-runs

Each candidate's folder is the `hrm compare` study that benchmarks/hard_rung_pilot.sh ran on it (kept by
benchmarks/keep_records.py): HRM with the rung's recipe and the one-pass transformer (`transformer_direct_quick`),
one seed, 600 CPU-seconds each. The table gives, per candidate, the rung's metric for HRM at its trained segments and
after the most segments evaluated (mmax) and with ACT, for the one-pass transformer, its ratio to HRM's best
of those, the token accuracy of each (HRM at its trained segments), and the steps each bought with its budget.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from table_cli import table_main

ONE_PASS = "transformer_direct_quick"


def _final(run: Path) -> dict:
    return json.loads((run / "compare.json").read_text())


def _metric(record: dict) -> tuple[str, list[float], float]:
    """(metric name, accuracy after 1..mmax segments, ACT accuracy): optimal paths where the task has them."""
    ev = record["eval"]
    extra = ev.get("extra", {})
    if "optimal_path_accuracy" in extra:
        return "optimal path", extra["optimal_path_accuracy"], extra["act_optimal_path_accuracy"]
    return "exact", ev["exact_accuracy"], ev["act_exact_accuracy"]


def table(root: Path) -> str:
    head = (
        "| candidate | metric | test | HRM @ trained | HRM @ mmax | HRM ACT | one-pass | one-pass / HRM "
        "| tokens: HRM @ trained, one-pass | HRM steps | one-pass steps |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = [head]
    for study in sorted(p for p in root.iterdir() if (p / "runs").is_dir()):
        runs = {p.parent.name: p for p in (study / "runs").glob("*/seed0") if (p / "compare.json").is_file()}
        hrm_label = next((k for k in runs if k != ONE_PASS), None)
        if hrm_label is None or ONE_PASS not in runs:
            continue
        hrm, one = _final(runs[hrm_label]), _final(runs[ONE_PASS])
        name, curve, h_act = _metric(hrm)
        trained, h = hrm["halt_max_steps"], max(*curve, h_act)
        o = _metric(one)[1][0]
        ratio = f"{o / h:.2f}" if h > 0 else "-"
        rows.append(
            f"| {study.name} | {name} | {hrm['eval']['count']:,} | {curve[trained - 1]:.1%} (@{trained}) "
            f"| {curve[-1]:.1%} (@{len(curve)}) | {h_act:.1%} | {o:.1%} | {ratio} "
            f"| {hrm['eval']['token_accuracy'][trained - 1]:.1%}, {one['eval']['token_accuracy'][0]:.1%} "
            f"| {hrm['steps']:,} | {one['steps']:,} |"
        )
    return "\n".join(rows)


TABLES = {"pilot": table}


if __name__ == "__main__":
    sys.exit(table_main(TABLES))
