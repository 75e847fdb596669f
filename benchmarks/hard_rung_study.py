"""The hard rung's test-time table from its kept evaluation JSONs (docs/results.md, "The hard rung").

    python benchmarks/hard_rung_study.py table benchmarks/hard-rung-runs/RUNG   # its TABLES: testtime

Each run of benchmarks/hard_rung_study.sh keeps, for HRM and TRM, two `hrm eval --json` outputs at the trained
segments (4): `eval-tta8.json` (--tta 8 --select vote: symmetry copies of each puzzle, majority vote) and
`eval-noise8.json` (--samples 8 --noise 0.1 --select q: noisy trajectories, the most confident halting head). One
evaluation at K = 8 reports every smaller K, since its first copies or samples are exactly a run at that K
(docs/training.md, "Test-time compute"). The table gives exact accuracy at the trained segments, mean ± sd over the
seeds, for K = 1, 2, 4, 8, each beside its compute: segments x copies x samples per puzzle.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from table_cli import table_main

METHODS = {
    "eval-tta8.json": ("tta", "--tta K --select vote"),
    "eval-noise8.json": ("samples", "--samples K --noise 0.1 --select q"),
}
KS = (1, 2, 4, 8)


def _cell(values: list[float]) -> str:
    """Mean ± sample sd over the seeds; one seed's value alone."""
    mean = statistics.fmean(values)
    return f"{mean:.1%} ± {statistics.stdev(values):.1%}" if len(values) > 1 else f"{mean:.1%}"


def accuracy_at(result: dict, axis: str, k: int) -> tuple[float, int]:
    """Exact accuracy at the evaluation's last segment budget with K copies (axis tta) or samples (axis samples)."""
    table = result["extra"]["test_time"]["table"]
    m = max(row["segments"] for row in table)
    other = "samples" if axis == "tta" else "tta"
    (row,) = [r for r in table if r["segments"] == m and r[axis] == k and r[other] == 1]
    return row["exact_accuracy"], row["total_segments"]


def testtime(root: Path) -> str:
    rows = [
        "| model | method | seeds | " + " | ".join(f"K={k}" for k in KS) + " |",
        "|---|---|---:|" + "---:|" * len(KS),
    ]
    for model in sorted(p for p in (root / "runs").iterdir() if p.is_dir()):
        for name, (axis, flags) in METHODS.items():
            found = [json.loads(p.read_text()) for p in sorted(model.glob(f"seed*/{name}"))]
            if not found:
                continue
            cells = []
            for k in KS:
                pairs = [accuracy_at(r, axis, k) for r in found]
                cells.append(f"{_cell([a for a, _ in pairs])} ({pairs[0][1]} seg.)")
            rows.append(f"| {model.name} | `{flags}` | {len(found)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


TABLES = {"testtime": testtime}


if __name__ == "__main__":
    sys.exit(table_main(TABLES))
