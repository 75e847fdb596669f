"""What `hrm compare` reports of a set of runs: per config (seeds averaged) the final evaluation, accuracy after each
number of segments, and the time, steps and FLOPs to each target accuracy, as numbers people read and as named
markdown tables that docs/ embeds verbatim (tests/commands/test_docs_tables.py regenerates them from the kept
records under benchmarks/).

A run is a record: `label` and `seed`, its `config` fingerprint, `curve` (the evaluations of metrics.jsonl with the
training time, steps and FLOPs at each) and, where there is one, `eval`: the final checkpoint evaluated at every
segment budget up to mmax and with ACT (a study's compare.json, or an `hrm eval --json` output kept in a plain run's
directory). Without one, the final evaluation is the last evaluation the run logged, at the trained segments and
with ACT capped there.

The ACT figure has one definition (ACT_DEFINITION), and its cap is printed beside it wherever it is."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from hrm_reason.errors import UserError
from hrm_reason.readers import read_jsonl
from hrm_reason.runtime.peak import matmul_peak_of

# What every ACT figure means; `act_cell` prints one with its cap.
ACT_DEFINITION = (
    "ACT: each example halts at the first segment where q_halt > q_continue (TRM: q_halt > 0) and answers there, at "
    "most `cap` segments (an example that has not halted by then answers at the cap); the figure is its accuracy, "
    "with the mean segments it ran"
)

# What it took to reach an accuracy: the run's totals at each evaluation (hrm train logs them, runtime/clock.py).
PROGRESS_KEYS = ("train_wall_seconds", "train_cpu_seconds", "step", "examples_seen", "train_flops")
TABLES = ("final", "segments", "time")


def eval_curve(run_dir: Path) -> list[dict[str, Any]]:
    """The evaluations of metrics.jsonl in step order: their eval/* numbers and the run's progress at each (time,
    examples, training FLOPs; None in logs from before hrm train recorded them)."""
    path = Path(run_dir) / "metrics.jsonl"
    missing = f"{run_dir} is not a run directory written by hrm train"
    latest: dict[int, dict[str, Any]] = {}
    for record in read_jsonl(path, missing, int_key="step"):  # a last line cut by a crash is left out
        if any(k.startswith("eval/") for k in record):
            latest[record["step"]] = record  # a resumed run's repeated evaluation: the last one
    return [
        {
            **{k: _number(latest[s].get(k)) for k in PROGRESS_KEYS},
            "step": s,
            **{k: v for k, v in latest[s].items() if k.startswith("eval/") and isinstance(v, (int, float))},
        }
        for s in sorted(latest)
    ]


def _number(value: Any) -> float | int | None:
    """A progress figure, or None when the log has none (or something else than a number) there."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


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


def mean_std(values: list[float]) -> dict[str, float | None]:
    """Mean and sample standard deviation (None with one seed)."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None}


def per_segment(rows: list[list[float]]) -> dict[str, list[float | None]]:
    columns = [mean_std(list(col)) for col in zip(*rows)]
    return {"mean": [c["mean"] for c in columns], "std": [c["std"] for c in columns]}


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


def final_evaluation(record: dict[str, Any], metric: str) -> dict[str, Any]:
    """One run's end: `metric` and exact accuracy at the trained segments (N, or mmax when it was evaluated with
    fewer), at mmax, after each m (runs with an `eval`), with ACT, its mean segments and its cap; the steps, training
    CPU seconds and test examples. Read from the run's `eval` where it has one, else from the last evaluation of
    metrics.jsonl."""
    last = record["curve"][-1] if record["curve"] else {}
    cpu, steps = last.get("train_cpu_seconds"), record.get("steps", last.get("step"))
    ev = record.get("eval")
    if ev is None:
        return {
            "segments": record["halt_max_steps"],
            "mmax": None,
            "at_trained": last.get(f"eval/{metric}"),
            "exact_at_trained": last.get("eval/exact_accuracy"),
            "per_segment": None,
            "act": last.get(f"eval/act_{metric}"),
            "act_segments": last.get("eval/steps"),
            "act_cap": record["halt_max_steps"],  # hrm train evaluates the trained segments (train/act.py)
            "steps": steps,
            "cpu_seconds": cpu,
            "count": last.get("eval/count"),
        }
    n = min(record["halt_max_steps"], ev["mmax"])
    curve = ev["exact_accuracy"] if metric == "exact_accuracy" else ev["extra"].get(metric)
    act = ev["act_exact_accuracy"] if metric == "exact_accuracy" else ev["extra"].get(f"act_{metric}")
    if not isinstance(curve, list):
        raise UserError(f"--metric {metric}: the evaluation of {record['label']} seed {record['seed']} has no {metric}")
    return {
        "segments": n,
        "mmax": ev["mmax"],
        "at_trained": curve[n - 1],
        "exact_at_trained": ev["exact_accuracy"][n - 1],
        "per_segment": curve,
        "act": act,
        "act_segments": ev["act_mean_segments"],
        "act_cap": ev["mmax"],
        "steps": steps,
        "cpu_seconds": cpu,
        "count": ev["count"],
    }


def with_usable_eval(record: dict[str, Any], metric: str) -> dict[str, Any]:
    """The record, less an `hrm eval --json` output that has no per-segment `metric` (ARC's pass@k are voted once, not
    per segment): its final evaluation is then the last one the run logged, as without the output."""
    ev = record.get("eval")
    if (
        ev is None
        or "eval_json" not in record
        or metric == "exact_accuracy"
        or isinstance(ev["extra"].get(metric), list)
    ):
        return record
    return {k: v for k, v in record.items() if k not in ("eval", "eval_json")}


def _stat(values: list[float | None]) -> dict[str, float | None] | None:
    return mean_std(values) if values and all(v is not None for v in values) else None


def summarise(records: list[dict[str, Any]], metric: str = "exact_accuracy") -> dict[str, dict[str, Any]]:
    """Per label (config), over its seeds: the final evaluation (`final_evaluation`) as mean ± std, with every seed's
    value at the trained segments; for studies also the per-segment curves of exact and token accuracy and of the
    evaluation's extra metrics (the plots read them)."""
    records = [with_usable_eval(r, metric) for r in records]
    summary: dict[str, dict[str, Any]] = {}
    for label in dict.fromkeys(r["label"] for r in records):
        runs = [r for r in records if r["label"] == label]
        first, finals = runs[0], [final_evaluation(r, metric) for r in runs]
        segments = {f["segments"] for f in finals}
        if len(segments) > 1:
            raise UserError(f"{label}: its seeds were evaluated at different segment budgets {sorted(segments)}")
        per_step = [f["cpu_seconds"] / f["steps"] for f in finals if f["cpu_seconds"] and f["steps"]]
        entry: dict[str, Any] = {
            "arch": first["arch"],
            "config": first["config"],
            "data_path": first["data_path"],
            "seeds": [r["seed"] for r in runs],
            "num_params": first.get("num_params"),
            "halt_max_steps": first["halt_max_steps"],
            "metric": metric,
            "segments": segments.pop(),
            "counts": [f["count"] for f in finals],
            "act_caps": sorted({f["act_cap"] for f in finals}),
            "per_seed": [f["at_trained"] for f in finals],
            "at_trained": _stat([f["at_trained"] for f in finals]),
            "exact_at_trained": _stat([f["exact_at_trained"] for f in finals]),
            "act": _stat([f["act"] for f in finals]),
            "act_segments": _stat([f["act_segments"] for f in finals]),
            "steps": _stat([f["steps"] for f in finals]),
            "cpu_seconds_per_step": mean_std(per_step) if len(per_step) == len(finals) else None,
        }
        if all("eval" in r for r in runs):
            evals = [r["eval"] for r in runs]
            entry.update(
                mmax=evals[0]["mmax"],
                at_mmax=mean_std([f["per_segment"][-1] for f in finals]),
                per_segment=per_segment([f["per_segment"] for f in finals]),
                exact_accuracy_per_segment=per_segment([e["exact_accuracy"] for e in evals]),
                token_accuracy_per_segment=per_segment([e["token_accuracy"] for e in evals]),
                act_exact_accuracy=mean_std([e["act_exact_accuracy"] for e in evals]),
                act_mean_segments=mean_std([e["act_mean_segments"] for e in evals]),
                extra=_extra(evals),
            )
        summary[label] = entry
    return summary


def _extra(evals: list[dict[str, Any]]) -> dict[str, Any]:
    """An evaluation's extra metrics over seeds: numbers as mean ± std, per-segment lists as per_segment."""
    out: dict[str, Any] = {}
    for name, value in evals[0]["extra"].items():
        if isinstance(value, (int, float)):
            out[name] = mean_std([e["extra"][name] for e in evals])
        elif isinstance(value, list) and len(value) == evals[0]["mmax"]:
            out[name] = per_segment([e["extra"][name] for e in evals])
    return out


# Numbers for people: percentages with one decimal, counts and seconds with thousands separators.
def pct(stat: dict[str, Any] | None) -> str:
    if stat is None:
        return "-"
    std = "" if stat["std"] is None else f" ± {100 * stat['std']:.1f}"
    return f"{100 * stat['mean']:.1f}{std}%"


def num(stat: dict[str, Any] | None, decimals: int = 0, scale: float = 1.0) -> str:
    if stat is None:
        return "-"
    std = "" if stat["std"] is None else f" ± {stat['std'] / scale:,.{decimals}f}"
    return f"{stat['mean'] / scale:,.{decimals}f}{std}"


def _name(metric: str) -> str:
    return metric.replace("_", " ")


def final_table(summary: dict[str, dict[str, Any]]) -> str:
    """One row per config: the test examples, the metric at the trained segments (each seed, then mean ± sd), at
    mmax, and with ACT (its cap and mean segments)."""
    multi = len({e["data_path"] for e in summary.values()}) > 1
    metric = next(iter(summary.values()))["metric"]
    exact = metric != "exact_accuracy"
    head = ["config", *(["data"] if multi else []), "arch", "params", "seeds", "steps", "CPU-s per step", "tests"]
    head += [f"{_name(metric)} @ N (seeds)", "mean ± sd", "@ mmax", "ACT (cap; mean segments)"]
    head += ["exact @ N"] if exact else []
    lines = [
        "| " + " | ".join(head) + " |",
        "|---|" + ("---|" if multi else "") + "---|" + "---:|" * (len(head) - 2 - multi),
    ]
    for label, e in summary.items():
        seeds = " / ".join("-" if v is None else f"{100 * v:.1f}" for v in e["per_seed"])
        params = "-" if e["num_params"] is None else f"{e['num_params']:,}"
        at_mmax = f"{pct(e['at_mmax'])} (@{e['mmax']})" if "at_mmax" in e else "-"
        act = "-" if e["act"] is None else act_cell(e["act"], e["act_caps"], e["act_segments"])
        cells = [label, *([e["data_path"]] if multi else []), e["arch"], params, str(len(e["seeds"]))]
        cells += [num(e["steps"]), num(e["cpu_seconds_per_step"], 3), counts_cell(e["counts"])]
        cells += [f"{seeds}% (@{e['segments']})"]
        cells += [pct(e["at_trained"]), at_mmax, act] + ([pct(e["exact_at_trained"])] if exact else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def act_cell(act: dict[str, Any], caps: list[int], segments: dict[str, Any] | None) -> str:
    """An ACT figure as every table prints it (ACT_DEFINITION): accuracy, then its cap and mean segments."""
    return f"{pct(act)} (cap {'/'.join(map(str, caps))}; {num(segments, 2)})"


def counts_cell(counts: list[int | None]) -> str:
    """The test examples a row's evaluations ran on: one number when the seeds agree."""
    shown = list(dict.fromkeys("-" if c is None else f"{c:,}" for c in counts))
    return " / ".join(shown)


def segments_table(summary: dict[str, dict[str, Any]]) -> str | None:
    """The metric after m segments (mean over seeds), for the configs evaluated at every budget (studies)."""
    entries = {k: e for k, e in summary.items() if "per_segment" in e}
    if not entries:
        return None
    width = max(e["mmax"] for e in entries.values())
    lines = ["| config | " + " | ".join(str(m) for m in range(1, width + 1)) + " |", "|---|" + "---:|" * width]
    for label, e in entries.items():
        cells = [f"{100 * v:.1f}" for v in e["per_segment"]["mean"]] + [""] * (width - e["mmax"])
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def time_table(tta: dict[str, Any]) -> str:
    """Per config and target: seeds that reached it, then training CPU-seconds, steps, TFLOP and wall seconds to it
    (mean ± sd over those seeds), and the matrix-product peak the runs recorded."""
    lines = [
        "| config | target | reached | train CPU-s | steps | training TFLOP | train wall s | peak GFLOP/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, entry in tta["per_config"].items():
        for t in tta["targets"]:
            e = entry[target_name(t)]
            cells = [num(e["train_cpu_seconds"]), num(e["step"]), num(e["train_flops"], 1, 1e12)]
            cells += [num(e["train_wall_seconds"]), num(entry["matmul_peak_flops"], 0, 1e9)]
            lines.append(f"| {label} | {100 * t:g}% | {e['reached']}/{entry['runs']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tables(summary: dict[str, dict[str, Any]], tta: dict[str, Any]) -> dict[str, str]:
    """The named tables (TABLES) of a comparison: what results.md shows and what docs/ embeds."""
    out = {"final": final_table(summary)}
    if (segments := segments_table(summary)) is not None:
        out["segments"] = segments
    out["time"] = time_table(tta)
    return out


def markdown(summary: dict[str, dict[str, Any]], tta: dict[str, Any], named: dict[str, str], command: str) -> str:
    """results.md: the named tables (`tables`) with their headings and what their columns mean."""
    metric = _name(tta["metric"])
    parts = [
        "# hrm compare",
        "",
        f"Command: `{command}`",
        "",
        "Mean ± sample standard deviation over seeds. tests: the test examples each row's evaluations ran on. N: the "
        "segments the runs were trained with (halt_max_steps), or mmax when they were evaluated with fewer; @ mmax: "
        "after the largest budget evaluated (hrm compare's own runs, or the `hrm eval --json` output kept in a plain "
        f"run's directory); {ACT_DEFINITION}. Plain hrm train runs without such an output are read from their last "
        "logged evaluation, ACT capped at the trained segments.",
        "",
        f"## Final evaluation ({metric})",
        "",
        named["final"],
        "",
    ]
    if "segments" in named:
        parts += [f"## {metric.capitalize()} after m segments (mean over seeds)", "", named["segments"], ""]
    parts += [
        f"## Time to {metric}",
        "",
        "When the evaluation first reached each target: training CPU-seconds, steps, FLOPs and wall seconds "
        "(evaluations and checkpoint writes excluded, summed over resumes), linearly interpolated between "
        "evaluations (the first evaluation's figures when it already reached the target); mean ± sample standard "
        "deviation over the seeds that reached it. Peak: the fp32 matrix-product peak the runs' machine recorded; "
        "CPU-seconds and FLOPs compare across machines, wall seconds only at equal peaks.",
        "",
        named["time"],
        "",
    ]
    return "\n".join(parts)
