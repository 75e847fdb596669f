"""Copy what `hrm compare --runs` reads of runs into the repository, checkpoints left out: a figure's records.

    python benchmarks/keep_records.py runs/study-maze6x6 benchmarks/study-runs/maze6x6
    python benchmarks/keep_records.py runs/quick-seed0 runs/quick-seed1 benchmarks/quickstart-runs

Each run keeps `config.yaml` and `run.json` as the run wrote them, `compare.json` where it has one (a study's final
evaluation at every segment budget), `submission.json` where it has one (ARC: the two attempts per test input), any
`hrm eval --json` output inside it (`eval*.json`), and of `metrics.jsonl` its header and its evaluation lines (with
the training time, steps and FLOPs at each). A study directory keeps its
`runs/<label>/seed<k>/` layout; a run directory given alone is kept under its own name. Files are written
atomically, so an interrupted copy leaves whole files only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hrm_reason.atomic import atomic_write_text
from hrm_reason.commands.compare import find_runs

KEPT = ("config.yaml", "run.json", "compare.json", "submission.json")


def kept_metrics(path: Path) -> str:
    lines = path.read_text().splitlines()
    keep = [line for i, line in enumerate(lines) if i == 0 or '"eval/' in line]
    return "\n".join(keep) + "\n"


def keep(run: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        if (run / name).is_file():
            atomic_write_text(dest / name, (run / name).read_text())
    for extra in sorted(run.glob("eval*.json")):
        text = extra.read_text()
        json.loads(text)  # an evaluation output, not a stray file
        atomic_write_text(dest / extra.name, text)
    atomic_write_text(dest / "metrics.jsonl", kept_metrics(run / "metrics.jsonl"))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    sources, out = [Path(a) for a in argv[:-1]], Path(argv[-1])
    for source in sources:
        for run in find_runs([source]):
            inside = run.relative_to(source) if run != source else Path(run.name)
            keep(run, out / inside)
            print(f"kept {run} -> {out / inside}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
