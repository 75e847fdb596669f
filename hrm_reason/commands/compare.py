"""`hrm compare`: train several configs for several seeds, evaluate every run with the same segment budget, and
summarise them side by side (mean ± std over seeds): results.json, results.md and plots.

Layout of the output directory:
    runs/<label>/seed<k>/   an ordinary run directory of `hrm train`, plus compare.json (its evaluation) once done
    results.json            every run, and per config: exact accuracy, accuracy per segment, ACT, time, parameters,
                            and the time (wall, CPU), steps and training FLOPs to reach each --targets accuracy
    results.md              the same as tables
    plots/*.png             when matplotlib is installed
<label> is the config file's name without .yaml. Runs are trained one after the other (or `jobs` at a time); a rerun
skips the runs that have their compare.json, resumes those with a checkpoint and starts the others again, so an
interrupted study continues where it stopped. Overrides (key=value) apply to every config: `max_seconds=600
budget_clock=cpu schedule_over=seconds` gives every run the same CPU-time budget and a full LR schedule within it.

`hrm compare --runs DIR...` trains nothing: it reads run directories already made (or whole study directories) and
writes the same files from their metrics.jsonl (time to accuracy) and compare.json where they have one.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
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
from hrm_reason.evaluate.act import evaluate
from hrm_reason.evaluate.run import load_model_for_eval
from hrm_reason.models.registry import family_spec
from hrm_reason.provenance import matmul_peak_of
from hrm_reason.runtime.logs import read_records
from hrm_reason.tasks import task_metrics
from hrm_reason.train.loop import train

RUN_RESULT = "compare.json"
RESERVED_KEYS = ("seed", "run_dir")  # set by hrm compare for every run
DEFAULT_TARGETS = (0.5, 0.8)
# What it took to reach an accuracy: the run's totals at each evaluation (hrm train logs them, runtime/clock.py).
PROGRESS_KEYS = ("train_wall_seconds", "train_cpu_seconds", "step", "examples_seen", "train_flops")


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
            if not family_spec(config.family).segments:
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
        **run_progress(run_dir),
    }
    atomic_write_text(run_dir / RUN_RESULT, json.dumps(record, indent=2))
    return record


def eval_curve(run_dir: Path) -> list[dict[str, Any]]:
    """The evaluations of metrics.jsonl in step order: their eval/* numbers and the run's progress at each (time,
    examples, training FLOPs; None in logs from before hrm train recorded them)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{path} not found: {run_dir} is not a run directory written by hrm train")
    latest: dict[int, dict[str, Any]] = {}
    for line in read_records(path):
        record = json.loads(line)
        if any(k.startswith("eval/") for k in record):
            latest[record["step"]] = record  # a resumed run's repeated evaluation: the last one
    return [
        {
            **{k: latest[s].get(k) for k in PROGRESS_KEYS},
            "step": s,
            **{k: v for k, v in latest[s].items() if k.startswith("eval/") and isinstance(v, (int, float))},
        }
        for s in sorted(latest)
    ]


def run_progress(run_dir: Path) -> dict[str, Any]:
    """A run's learning curve and the matrix-product peak its machine recorded: what time to accuracy needs."""
    return {"curve": eval_curve(run_dir), "matmul_peak_flops": matmul_peak_of(run_dir)}


def reach(curve: list[dict[str, Any]], target: float, metric: str = "exact_accuracy") -> dict[str, Any] | None:
    """The run's progress (PROGRESS_KEYS) when eval/`metric` first reached `target`, linearly interpolated between the
    evaluation below it and the one at or above it; the first evaluation's own when that one already reached it (the
    curve before it is unknown); None if never reached."""
    key, below = f"eval/{metric}", None
    for point in curve:
        value = point.get(key)
        if value is None:
            continue
        if value >= target:
            if below is None:
                return {k: point[k] for k in PROGRESS_KEYS}
            t = (target - below[key]) / (value - below[key])
            return {
                k: None if below[k] is None or point[k] is None else below[k] + t * (point[k] - below[k])
                for k in PROGRESS_KEYS
            }
        below = point
    return None


def target_name(target: float) -> str:
    return f"{target:g}"


def time_to_accuracy(records: list[dict[str, Any]], targets: list[float], metric: str) -> dict[str, Any]:
    """Per run and per config (mean ± std over the seeds that reached it, and how many did) the progress at which
    each target accuracy was first reached."""
    runs = [
        {
            "label": r["label"],
            "seed": r["seed"],
            "matmul_peak_flops": r.get("matmul_peak_flops"),
            "reached": {target_name(t): reach(r["curve"], t, metric) for t in targets},
        }
        for r in records
    ]
    per_config: dict[str, Any] = {}
    for label in dict.fromkeys(r["label"] for r in runs):
        mine = [r for r in runs if r["label"] == label]
        peaks = [r["matmul_peak_flops"] for r in mine if r["matmul_peak_flops"]]
        entry: dict[str, Any] = {"runs": len(mine), "matmul_peak_flops": mean_std(peaks) if peaks else None}
        for t in targets:
            hits = [r["reached"][target_name(t)] for r in mine if r["reached"][target_name(t)] is not None]
            entry[target_name(t)] = {
                "reached": len(hits),
                **{
                    k: mean_std(values) if (values := [h[k] for h in hits if h[k] is not None]) else None
                    for k in PROGRESS_KEYS
                },
            }
        per_config[label] = entry
    return {"metric": metric, "targets": targets, "per_config": per_config, "per_run": runs}


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
        for name in dict.fromkeys(n for e in entries.values() for n in e["extra"] if _segment_metric(e, n)):
            lines += [
                "",
                f"{name} (mean ± sd over seeds) at N_sup, at mmax, with ACT, and after m segments (mean):",
                "",
                "| config | @ N_sup | @ mmax | ACT | " + " | ".join(str(m) for m in range(1, width + 1)) + " |",
                "|---|---:|---:|---:|" + "---:|" * width,
            ]
            for label, e in entries.items():
                seg, act = _segment_metric(e, name), e["extra"].get(f"act_{name}")
                if seg is None:
                    continue
                cells = [f"{100 * v:.1f}" for v in seg["mean"]] + [""] * (width - e["mmax"])
                at = [_pct({"mean": seg["mean"][i], "std": seg["std"][i]}) for i in (_trained(e) - 1, e["mmax"] - 1)]
                lines.append(
                    f"| {label} | {at[0]} | {at[1]} | {_pct(act) if act else '-'} | " + " | ".join(cells) + " |"
                )
        lines.append("")
    return "\n".join(lines)


def _trained(entry: dict[str, Any]) -> int:
    return min(entry["halt_max_steps"], entry["mmax"])


def _segment_metric(entry: dict[str, Any], name: str) -> dict[str, list[float | None]] | None:
    """The per-segment summary of an evaluation's extra metric (e.g. a maze's optimal_path_accuracy), or None."""
    value = entry["extra"].get(name)
    return value if isinstance(value, dict) and isinstance(value.get("mean"), list) else None


def _series(entry: dict[str, Any], metric: str) -> tuple[str, dict[str, list[float | None]], dict[str, Any]]:
    """What the plots draw for an entry: `metric` where its evaluation has it per segment, else exact accuracy."""
    seg = _segment_metric(entry, metric)
    if seg is not None and f"act_{metric}" in entry["extra"]:
        return metric, seg, entry["extra"][f"act_{metric}"]
    return "exact_accuracy", entry["exact_accuracy_per_segment"], entry["act_exact_accuracy"]


def _sig(stat: dict[str, Any] | None, scale: float = 1.0) -> str:
    if stat is None:
        return "-"
    std = "" if stat["std"] is None else f" ± {stat['std'] / scale:.2g}"
    return f"{stat['mean'] / scale:.3g}{std}"


def time_markdown(tta: dict[str, Any]) -> str:
    metric = tta["metric"]
    lines = [
        f"## Time to {metric}",
        "",
        f"When eval/{metric} first reached each target: training time (evaluations and checkpoint writes excluded, "
        "summed over resumes), steps and training FLOPs, linearly interpolated between evaluations (the first "
        "evaluation's figures when it already reached the target). Mean ± sample standard deviation over the seeds "
        "that reached it; reached: seeds that did, of all. Peak: the fp32 matrix-product peak the runs' machine "
        "measured (runs of 30 s or more); wall seconds x peak / 180 GFLOP/s gives the time on a 180 GFLOP/s machine.",
        "",
        "| config | target | reached | train wall s | train CPU s | steps | training TFLOP | peak GFLOP/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, entry in tta["per_config"].items():
        for t in tta["targets"]:
            e = entry[target_name(t)]
            lines.append(
                f"| {label} | {100 * t:g}% | {e['reached']}/{entry['runs']} | {_sig(e['train_wall_seconds'])} | "
                f"{_sig(e['train_cpu_seconds'])} | {_sig(e['step'])} | {_sig(e['train_flops'], 1e12)} | "
                f"{_sig(entry['matmul_peak_flops'], 1e9)} |"
            )
    return "\n".join([*lines, ""])


def plot_time_to_accuracy(records: list[dict[str, Any]], tta: dict[str, Any], out_dir: Path) -> list[Path]:
    """eval/<metric> against training wall seconds, CPU seconds and FLOPs: one line per run, one colour per config,
    the targets dotted. Nothing without matplotlib."""
    try:
        from hrm_reason.viz.canvas import new_figure, save_png
    except ImportError:
        return []
    key = f"eval/{tta['metric']}"
    labels = list(dict.fromkeys(r["label"] for r in records))
    colours = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    fig = new_figure(15, 4.6)
    panels = (
        ("train_wall_seconds", "training wall seconds"),
        ("train_cpu_seconds", "training CPU seconds"),
        ("train_flops", "training FLOPs"),
    )
    for i, (x_key, x_name) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        named: set[str] = set()
        for r in records:
            points = [(p[x_key], p[key]) for p in r["curve"] if p.get(x_key) is not None and p.get(key) is not None]
            if not points:
                continue
            xs, ys = zip(*points)
            label = None if r["label"] in named else r["label"]
            named.add(r["label"])
            ax.plot(xs, [100 * y for y in ys], marker="o", ms=2.5, lw=1.1, color=colours[r["label"]], label=label)
        for t in tta["targets"]:
            ax.axhline(100 * t, color="#555555", ls=":", lw=0.8)
        ax.set_xlim(left=0)
        ax.set_ylim(-2, 102)
        ax.set_xlabel(x_name + (" (one line per run)" if i == 0 else ""))
        ax.set_ylabel(f"{tta['metric'].replace('_', ' ')} (%)")
        ax.grid(alpha=0.3)
        if named:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="#888888")
    fig.tight_layout()
    return [save_png(fig, out_dir / "accuracy_vs_time.png")]


def _metric_name(entries: dict[str, dict[str, Any]], metric: str) -> str:
    names = {_series(e, metric)[0] for e in entries.values()}
    return (names.pop() if len(names) == 1 else "accuracy").replace("_", " ")


def _bars(ax: Any, entries: dict[str, dict[str, Any]], metric: str, colours: dict[str, str]) -> None:
    """Accuracy at the trained segments, mean ± std over seeds, one bar per config."""
    labels = list(entries)
    at = [(_series(entries[k], metric)[1], _trained(entries[k]) - 1) for k in labels]
    means = [100 * seg["mean"][i] for seg, i in at]
    stds = [100 * (seg["std"][i] or 0.0) for seg, i in at]
    ax.bar(range(len(labels)), means, yerr=stds, capsize=4, color=[colours[k] for k in labels])
    ax.set_xticks(
        range(len(labels)),
        [f"{k} ({entries[k]['num_params'] / 1e6:.2f}M)" for k in labels],
        fontsize=7,
        rotation=20,
        ha="right",
    )
    ax.set_ylabel(f"{_metric_name(entries, metric)} at N_sup segments (%)")


def _curves(ax: Any, entries: dict[str, dict[str, Any]], metric: str, colours: dict[str, str]) -> None:
    """Accuracy against the segments run, mean ± std over seeds; dotted: the trained N_sup."""
    for label, e in entries.items():
        seg = _series(e, metric)[1]
        m = range(1, e["mmax"] + 1)
        mean = [100 * v for v in seg["mean"]]
        ax.plot(m, mean, marker="o", ms=3, color=colours[label], label=label)
        if seg["std"][0] is not None:
            low = [a - 100 * s for a, s in zip(mean, seg["std"])]
            ax.fill_between(m, low, [a + 100 * s for a, s in zip(mean, seg["std"])], color=colours[label], alpha=0.15)
        ax.axvline(e["halt_max_steps"], color=colours[label], ls=":", lw=0.8)
    ax.set_xlabel("segments m (dotted: trained N_sup)")
    ax.set_ylabel(f"{_metric_name(entries, metric)} (%)")
    ax.legend(fontsize=7)


def _act(ax: Any, entries: dict[str, dict[str, Any]], metric: str, colours: dict[str, str]) -> None:
    """ACT (star: its mean segments and accuracy) against fixed segment budgets (line)."""
    for label, e in entries.items():
        _, per_m, acc = _series(e, metric)
        m = range(1, e["mmax"] + 1)
        ax.plot(m, [100 * v for v in per_m["mean"]], color=colours[label], lw=1, alpha=0.6)
        seg = e["act_mean_segments"]
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
    ax.set_ylabel(f"{_metric_name(entries, metric)} (%)")
    ax.legend(fontsize=7)


def plot(summary: dict[str, dict[str, Any]], out_dir: Path, metric: str = "exact_accuracy") -> list[Path]:
    """Accuracy per config (mean ± std), accuracy against segments, ACT segments against fixed segments: one panel
    per dataset. The accuracy is `metric` where the evaluations give it per segment (a maze's optimal paths), else
    exact accuracy. Nothing without matplotlib."""
    try:
        from hrm_reason.viz.canvas import new_figure, save_png
    except ImportError:
        return []
    datasets = list(dict.fromkeys(e["data_path"] for e in summary.values()))
    colours = {label: f"C{i % 10}" for i, label in enumerate(summary)}
    written = []
    for name, draw in (
        ("exact_accuracy.png", _bars),
        ("accuracy_vs_segments.png", _curves),
        ("act_vs_fixed_segments.png", _act),
    ):
        fig = new_figure(max(5.5, 1.1 * len(summary)) * len(datasets), 4.6)
        for i, data_path in enumerate(datasets):
            ax = fig.add_subplot(1, len(datasets), i + 1)
            draw(ax, {k: e for k, e in summary.items() if e["data_path"] == data_path}, metric, colours)
            ax.set_title(Path(data_path).name, fontsize=10)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        written.append(save_png(fig, out_dir / name))
    return written


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def split_arguments(items: list[str]) -> tuple[list[Path], list[str]]:
    """`hrm compare CONFIG... KEY=VALUE...`: the config files, and the overrides (an argument with "=" is a config
    when it names a file)."""
    configs = [Path(i) for i in items if "=" not in i or Path(i).is_file()]
    return configs, [i for i in items if "=" in i and not Path(i).is_file()]


def parse_targets(text: str) -> list[float]:
    """--targets "0.5,0.8": accuracies in (0, 1]."""
    try:
        targets = [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        targets = []
    if not targets or not all(0 < t <= 1 for t in targets):
        raise UserError(f"--targets {text}: expected accuracies in (0, 1] separated by commas, e.g. 0.5,0.8")
    return sorted(set(targets))


def write_results(
    records: list[dict[str, Any]], out: Path, command: str, targets: list[float], metric: str, header: dict[str, Any]
) -> dict[str, Any]:
    """results.json, results.md and the plots: the final-checkpoint summary of the runs with a compare.json, and time
    to accuracy of every run."""
    key = f"eval/{metric}"
    logged = [p for r in records for p in r["curve"]]
    if logged and not any(key in p for p in logged):
        known = sorted({k.removeprefix("eval/") for p in logged for k in p if k.startswith("eval/")})
        raise UserError(f"--metric {metric}: no evaluation of these runs logs {key} (they log: {', '.join(known)})")
    summary = summarise([r for r in records if "eval" in r])
    tta = time_to_accuracy(records, targets, metric)
    results = {"command": command, **header, "summary": summary, "time_to_accuracy": tta, "runs": records}
    atomic_write_text(out / "results.json", json.dumps(results, indent=2))
    head = markdown(summary, command) if summary else f"# hrm compare\n\nCommand: `{command}`\n"
    atomic_write_text(out / "results.md", head + "\n" + time_markdown(tta))
    plots = plot(summary, out / "plots", metric) if summary else []
    results["plots"] = [str(p) for p in [*plots, *plot_time_to_accuracy(records, tta, out / "plots")]]
    return results


def compare(
    configs: list[Path],
    seeds: int,
    out: Path,
    mmax: int | None = None,
    overrides: list[str] | None = None,
    progress: bool = True,
    command: str = "hrm compare",
    jobs: int = 1,
    targets: list[float] | None = None,
    metric: str = "exact_accuracy",
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
        record = run_and_evaluate(spec, mmax, progress)
        records.append(record if "curve" in record else {**record, **run_progress(spec.run_dir)})  # an older study
    header = {"seeds": seeds, "mmax": mmax, "overrides": overrides or []}
    return write_results(records, out, command, list(targets or DEFAULT_TARGETS), metric, header)


def find_runs(dirs: list[Path]) -> list[Path]:
    """Run directories (with metrics.jsonl) as given, and the runs/<label>/seed<k>/ of study directories."""

    def order(path: Path) -> tuple[str, int]:
        return path.parent.name, int(path.name.removeprefix("seed"))

    found: list[Path] = []
    for d in map(Path, dirs):
        if (d / "metrics.jsonl").is_file():
            found.append(d)
            continue
        runs = [p.parent for p in (d / "runs").glob("*/seed*/metrics.jsonl") if re.fullmatch(r"seed\d+", p.parent.name)]
        if not runs:
            raise UserError(
                f"{d}: neither a run directory (no metrics.jsonl) nor a study of hrm compare (no runs/*/seed*/)"
            )
        found += sorted(runs, key=order)
    return list({p.resolve(): p for p in found}.values())


def run_label(run_dir: Path) -> str:
    """A study's runs/<label>/seed<k> is <label>; hrm train's <data>-<model>-seed<k> is <data>-<model>: the seeds of
    one config share a label."""
    if re.fullmatch(r"seed\d+", run_dir.name):
        return run_dir.parent.name
    return re.sub(r"-seed\d+$", "", run_dir.name)


def run_record(run_dir: Path) -> dict[str, Any]:
    """compare.json where the run has one (a study's run), else what config.yaml says; with the run's curve."""
    if (run_dir / RUN_RESULT).is_file():
        record = json.loads((run_dir / RUN_RESULT).read_text())
        return record if "curve" in record else {**record, **run_progress(run_dir)}
    config = load_config(run_dir / "config.yaml")
    return {
        "label": run_label(run_dir),
        "config": str(run_dir / "config.yaml"),
        "arch": config.model_name,
        "data_path": config.data_path,
        "seed": config.seed,
        "run_dir": str(run_dir),
        **run_progress(run_dir),
    }


def compare_runs(
    dirs: list[Path],
    out: Path,
    targets: list[float] | None = None,
    metric: str = "exact_accuracy",
    command: str = "hrm compare --runs",
) -> dict[str, Any]:
    """The study's files for runs already made (`hrm compare --runs`): nothing trains or evaluates."""
    if not dirs:
        raise UserError("--runs: give at least one run or study directory")
    records = [run_record(d) for d in find_runs(dirs)]
    return write_results(records, out, command, list(targets or DEFAULT_TARGETS), metric, {"from_runs": True})
