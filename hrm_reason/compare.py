"""`hrm compare`: train several configs for several seeds, evaluate every run with the same segment budget, and
summarise them side by side (mean ± std over seeds): results.json, results.md and plots.

Layout of the output directory:
    runs/<label>/seed<k>/   an ordinary run directory of `hrm train`, plus compare.json (its evaluation) once done
    results.json            every run, and per config: exact accuracy, accuracy per segment, ACT, time, parameters
    results.md              the same as tables
    plots/*.png             when matplotlib is installed
<label> is the config file's name without .yaml. Runs are trained one after the other (or `jobs` at a time); a rerun
skips the runs that have their compare.json, resumes those with a checkpoint and starts the others again, so an
interrupted study continues where it stopped. Overrides (key=value) apply to every config: `max_seconds=600
budget_clock=cpu schedule_over=seconds` gives every run the same CPU-time budget and a full LR schedule within it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import typer

from hrm_reason.atomic import atomic_write_text
from hrm_reason.checkpoint import STATE, find_checkpoint
from hrm_reason.config import TrainConfig, load_config
from hrm_reason.errors import UserError
from hrm_reason.evaluate import evaluate
from hrm_reason.inference import load_model_for_eval
from hrm_reason.tasks import task_metrics
from hrm_reason.train import train

RUN_RESULT = "compare.json"
RESERVED_KEYS = ("seed", "run_dir")  # set by hrm compare for every run


@dataclass
class RunSpec:
    label: str
    config_path: Path
    seed: int
    config: TrainConfig

    @property
    def run_dir(self) -> Path:
        return Path(self.config.run_dir)  # type: ignore[arg-type]


def plan_runs(configs: list[Path], seeds: int, out: Path, overrides: list[str]) -> list[RunSpec]:
    """Every (config, seed) run, with all configs validated before anything trains."""
    if not configs:
        raise UserError("give at least one CONFIG file")
    if seeds < 1:
        raise UserError(f"--seeds {seeds}: expected 1 or more")
    for item in overrides:
        if item.partition("=")[0].strip() in RESERVED_KEYS:
            raise UserError(f"override '{item}': hrm compare sets seed (0..--seeds-1) and run_dir (under --out) itself")
    labels = [Path(c).name.removesuffix(".yaml").removesuffix(".yml") for c in configs]
    for label in labels:
        if labels.count(label) > 1:
            raise UserError(f"two configs are named {label}: the file names label the results, so they must differ")
    specs = []
    for path, label in zip(configs, labels):
        for seed in range(seeds):
            run_dir = out / "runs" / label / f"seed{seed}"
            config = load_config(path, [*overrides, f"seed={seed}", f"run_dir={run_dir}"])
            if config.family != "act":
                raise UserError(
                    f"{path}: arch.name={config.model_name}: hrm compare studies the ACT puzzle models only"
                )
            specs.append(RunSpec(label, Path(path), seed, config))
    return specs


def run_and_evaluate(spec: RunSpec, mmax: int | None, progress: bool) -> dict[str, Any]:
    """Train (or resume) one run, evaluate its final checkpoint, write its compare.json; returns that record."""
    run_dir = spec.run_dir
    if (run_dir / RUN_RESULT).is_file():
        return json.loads((run_dir / RUN_RESULT).read_text())
    resume = (run_dir / "checkpoints" / "latest").is_file()
    if run_dir.exists() and not resume:
        shutil.rmtree(run_dir)  # died before its first checkpoint: nothing to keep
    train(spec.config, resume=resume, progress=progress)

    model, config, split, device = load_model_for_eval(run_dir, None, None, spec.config.device)
    m = mmax or 2 * config.arch.halt_max_steps
    result = evaluate(
        model,
        split,
        m,
        config.eval_global_batch_size or config.global_batch_size,
        device,
        config.arch.loss.loss_type,
        config.eval_max_examples,
        progress=progress,
        metrics=task_metrics(split, m),
    )
    result.extra.pop("arc_submission", None)
    state = torch.load(find_checkpoint(run_dir) / STATE, map_location="cpu", weights_only=False)
    record = {
        "label": spec.label,
        "config": str(spec.config_path),
        "arch": config.arch.name,
        "data_path": config.data_path,
        "seed": spec.seed,
        "num_params": sum(p.numel() for p in model.parameters()),
        "halt_max_steps": config.arch.halt_max_steps,
        "steps": state["step"],
        "train_seconds": state.get("train_seconds"),
        "eval": result.to_dict(),
    }
    atomic_write_text(run_dir / RUN_RESULT, json.dumps(record, indent=2))
    return record


def mean_std(values: list[float]) -> dict[str, float | None]:
    """Mean and sample standard deviation (None with one seed)."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None}


def per_segment(rows: list[list[float]]) -> dict[str, list[float | None]]:
    columns = [mean_std(list(col)) for col in zip(*rows)]
    return {"mean": [c["mean"] for c in columns], "std": [c["std"] for c in columns]}


def summarise(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per label (config), over its seeds."""
    summary: dict[str, dict[str, Any]] = {}
    for label in dict.fromkeys(r["label"] for r in records):
        runs = [r for r in records if r["label"] == label]
        first, evals = runs[0], [r["eval"] for r in runs]
        trained = min(first["halt_max_steps"], first["eval"]["mmax"])
        entry: dict[str, Any] = {
            "arch": first["arch"],
            "config": first["config"],
            "data_path": first["data_path"],
            "seeds": [r["seed"] for r in runs],
            "num_params": first["num_params"],
            "halt_max_steps": first["halt_max_steps"],
            "mmax": first["eval"]["mmax"],
            "count": first["eval"]["count"],
            "exact_accuracy": mean_std([e["exact_accuracy"][trained - 1] for e in evals]),
            "exact_accuracy_at_mmax": mean_std([e["exact_accuracy"][-1] for e in evals]),
            "exact_accuracy_per_segment": per_segment([e["exact_accuracy"] for e in evals]),
            "token_accuracy_per_segment": per_segment([e["token_accuracy"] for e in evals]),
            "act_exact_accuracy": mean_std([e["act_exact_accuracy"] for e in evals]),
            "act_mean_segments": mean_std([e["act_mean_segments"] for e in evals]),
            "steps": mean_std([r["steps"] for r in runs]),
            "train_seconds": mean_std([r["train_seconds"] or 0.0 for r in runs]),
        }
        extra = {}
        for name, value in first["eval"]["extra"].items():
            if isinstance(value, (int, float)):
                extra[name] = mean_std([e["extra"][name] for e in evals])
            elif isinstance(value, list) and len(value) == entry["mmax"]:
                extra[name] = per_segment([e["extra"][name] for e in evals])
        entry["extra"] = extra
        summary[label] = entry
    return summary


def _pct(stat: dict[str, Any]) -> str:
    std = "" if stat["std"] is None else f" ± {100 * stat['std']:.1f}"
    return f"{100 * stat['mean']:.1f}{std}%"


def _num(stat: dict[str, Any], digits: int) -> str:
    std = "" if stat["std"] is None else f" ± {stat['std']:.{digits}f}"
    return f"{stat['mean']:.{digits}f}{std}"


def markdown(summary: dict[str, dict[str, Any]], command: str) -> str:
    lines = [
        "# hrm compare",
        "",
        f"Command: `{command}`",
        "",
        "Mean ± sample standard deviation over seeds. Exact accuracy: the whole grid right, on the test split; "
        "N_sup: the segments trained with (halt_max_steps); ACT: each example halts at the first segment with "
        "q_halt > q_continue (TRM: q_halt > 0), at most mmax.",
        "",
    ]
    for data_path in dict.fromkeys(e["data_path"] for e in summary.values()):
        entries = {k: e for k, e in summary.items() if e["data_path"] == data_path}
        lines += [
            f"## {data_path} ({next(iter(entries.values()))['count']} test examples)",
            "",
            "| config | arch | params | seeds | steps | train s | exact @ N_sup | exact @ mmax | ACT exact | ACT segments |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for label, e in entries.items():
            lines.append(
                f"| {label} | {e['arch']} | {e['num_params']:,} | {len(e['seeds'])} | {e['steps']['mean']:.0f} | "
                f"{e['train_seconds']['mean']:.0f} | {_pct(e['exact_accuracy'])} ({e['halt_max_steps']}) | "
                f"{_pct(e['exact_accuracy_at_mmax'])} ({e['mmax']}) | {_pct(e['act_exact_accuracy'])} | {_num(e['act_mean_segments'], 2)} |"
            )
        width = max(e["mmax"] for e in entries.values())
        lines += [
            "",
            "Exact accuracy after m segments (mean over seeds):",
            "",
            "| config | " + " | ".join(str(m) for m in range(1, width + 1)) + " |",
            "|---|" + "---:|" * width,
        ]
        for label, e in entries.items():
            cells = [f"{100 * v:.1f}" for v in e["exact_accuracy_per_segment"]["mean"]] + [""] * (width - e["mmax"])
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(summary: dict[str, dict[str, Any]], out_dir: Path) -> list[Path]:
    """Exact accuracy per config (mean ± std), accuracy against segments, ACT segments against fixed segments: one
    panel per dataset. Nothing without matplotlib."""
    try:
        from hrm_reason.viz.canvas import new_figure, save_png
    except ImportError:
        return []
    datasets = list(dict.fromkeys(e["data_path"] for e in summary.values()))
    colours = {label: f"C{i % 10}" for i, label in enumerate(summary)}
    written = []

    def figure(name: str, draw: Any) -> None:
        fig = new_figure(max(5.5, 1.1 * len(summary)) * len(datasets), 4.6)
        for i, data_path in enumerate(datasets):
            ax = fig.add_subplot(1, len(datasets), i + 1)
            draw(ax, {k: e for k, e in summary.items() if e["data_path"] == data_path})
            ax.set_title(Path(data_path).name, fontsize=10)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        written.append(save_png(fig, out_dir / name))

    def bars(ax: Any, entries: dict[str, dict[str, Any]]) -> None:
        labels = list(entries)
        means = [100 * entries[k]["exact_accuracy"]["mean"] for k in labels]
        stds = [100 * (entries[k]["exact_accuracy"]["std"] or 0.0) for k in labels]
        ax.bar(range(len(labels)), means, yerr=stds, capsize=4, color=[colours[k] for k in labels])
        ax.set_xticks(
            range(len(labels)),
            [f"{k} ({entries[k]['num_params'] / 1e6:.2f}M)" for k in labels],
            fontsize=7,
            rotation=20,
            ha="right",
        )
        ax.set_ylabel("exact accuracy at N_sup segments (%)")

    def curves(ax: Any, entries: dict[str, dict[str, Any]]) -> None:
        for label, e in entries.items():
            seg = e["exact_accuracy_per_segment"]
            m = range(1, e["mmax"] + 1)
            mean = [100 * v for v in seg["mean"]]
            ax.plot(m, mean, marker="o", ms=3, color=colours[label], label=label)
            if seg["std"][0] is not None:
                ax.fill_between(
                    m,
                    [a - 100 * s for a, s in zip(mean, seg["std"])],
                    [a + 100 * s for a, s in zip(mean, seg["std"])],
                    color=colours[label],
                    alpha=0.15,
                )
            ax.axvline(e["halt_max_steps"], color=colours[label], ls=":", lw=0.8)
        ax.set_xlabel("segments m (dotted: trained N_sup)")
        ax.set_ylabel("exact accuracy (%)")
        ax.legend(fontsize=7)

    def act(ax: Any, entries: dict[str, dict[str, Any]]) -> None:
        for label, e in entries.items():
            m = range(1, e["mmax"] + 1)
            ax.plot(
                m, [100 * v for v in e["exact_accuracy_per_segment"]["mean"]], color=colours[label], lw=1, alpha=0.6
            )
            seg, acc = e["act_mean_segments"], e["act_exact_accuracy"]
            ax.errorbar(
                seg["mean"],
                100 * acc["mean"],
                xerr=seg["std"] or 0,
                yerr=100 * (acc["std"] or 0),
                fmt="*",
                ms=10,
                color=colours[label],
                label=f"{label} ACT",
            )
        ax.set_xlabel("segments (line: fixed m; star: ACT mean)")
        ax.set_ylabel("exact accuracy (%)")
        ax.legend(fontsize=7)

    figure("exact_accuracy.png", bars)
    figure("accuracy_vs_segments.png", curves)
    figure("act_vs_fixed_segments.png", act)
    return written


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def compare(
    configs: list[Path],
    seeds: int,
    out: Path,
    mmax: int | None = None,
    overrides: list[str] | None = None,
    progress: bool = True,
    command: str = "hrm compare",
    jobs: int = 1,
) -> dict[str, Any]:
    """Run the study (skipping finished runs) and write results.json, results.md and plots under `out`.

    jobs > 1 trains that many runs at once, each in its own process with cpu_count // jobs threads (no progress bars):
    small models use a core each better than two threads of one run do."""
    specs = plan_runs(configs, seeds, out, overrides or [])
    if jobs > 1:
        pool = ProcessPoolExecutor(
            jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(max(1, (os.cpu_count() or 1) // jobs),),
        )
        with pool:
            futures = [pool.submit(run_and_evaluate, spec, mmax, False) for spec in specs]
            for i, (spec, future) in enumerate(zip(specs, futures), 1):
                future.result()
                typer.echo(f"[{i}/{len(specs)}] {spec.label} seed {spec.seed}: done", err=True)
    records = []
    for i, spec in enumerate(specs, 1):
        done = (spec.run_dir / RUN_RESULT).is_file()
        if jobs == 1:
            typer.echo(
                f"[{i}/{len(specs)}] {spec.label} seed {spec.seed}: {'done, skipped' if done else 'training'}", err=True
            )
        records.append(run_and_evaluate(spec, mmax, progress))
    summary = summarise(records)
    results = {
        "command": command,
        "seeds": seeds,
        "mmax": mmax,
        "overrides": overrides or [],
        "summary": summary,
        "runs": records,
    }
    atomic_write_text(out / "results.json", json.dumps(results, indent=2))
    atomic_write_text(out / "results.md", markdown(summary, command))
    results["plots"] = [str(p) for p in plot(summary, out / "plots")]
    return results
