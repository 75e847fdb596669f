"""`hrm viz run`: a run's training and evaluation curves from metrics.jsonl, and accuracy against segments from the
JSON files of `hrm eval --json` (inference-time scaling: accuracy after m = 1..mmax segments, and the ACT result)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hrm_reason.errors import UserError
from hrm_reason.readers import read_json, read_jsonl, read_text
from hrm_reason.viz.canvas import new_figure

TRAIN_COLOUR, EVAL_COLOUR, ACT_COLOUR = "#1f77b4", "#d62728", "#2ca02c"
# eval/* keys with a panel of their own; any other eval/ key with values in [0, 1] joins the exact-accuracy panel.
KNOWN_EVAL = {
    "eval/count",
    "eval/exact_accuracy",
    "eval/accuracy",
    "eval/lm_loss",
    "eval/q_halt_accuracy",
    "eval/act_exact_accuracy",
    "eval/steps",
}


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records of metrics.jsonl in step order; a resumed run's repeated steps keep their last record."""
    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist")
    if not path.is_file():
        raise UserError(
            f"{path} not found: {run_dir} is not a run directory written by hrm train (or it has not logged yet)"
        )
    records = read_jsonl(path, int_key="step")  # a last line being written by a running training is left out
    latest: dict[tuple[int, bool], dict[str, Any]] = {}
    for record in records:
        latest[(record["step"], any(k.startswith("eval/") for k in record))] = record
    ordered = [latest[key] for key in sorted(latest)]
    if not any(k.startswith(("train/", "eval/")) for r in ordered for k in r):
        raise UserError(f"{path}: no training or evaluation records yet")
    return ordered


def series(records: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    pairs = [(r["step"], float(r[key])) for r in records if isinstance(r.get(key), (int, float))]
    if not pairs:
        return np.zeros(0), np.zeros(0)
    steps, values = zip(*pairs)
    return np.asarray(steps), np.asarray(values)


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over `window` points (train metrics are over the few examples that halted in one step)."""
    if window <= 1 or values.size == 0:
        return values
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, values.size + 1), window)
    starts = np.arange(1, values.size + 1) - counts
    return (cumsum[1:] - cumsum[starts]) / counts


def curves_figure(records: list[dict[str, Any]], title: str) -> Figure:
    fig = new_figure(13.5, 7.2)
    grid = fig.add_gridspec(2, 3, left=0.06, right=0.98, top=0.9, bottom=0.08, hspace=0.38, wspace=0.25)
    fig.suptitle(title, fontsize=12, fontweight="bold")
    panels = [
        ("loss (lm, halted sequences)", "train/lm_loss", "eval/lm_loss", True),
        ("exact accuracy (whole grid right)", "train/exact_accuracy", "eval/exact_accuracy", False),
        ("token accuracy", "train/accuracy", "eval/accuracy", False),
        ("mean segments used (ACT)", "train/steps", "eval/steps", False),
        ("Q halt accuracy", "train/q_halt_accuracy", "eval/q_halt_accuracy", False),
        ("learning rate", "train/lr", None, False),
    ]
    n_train = len(series(records, "train/lm_loss")[0])
    window = max(1, n_train // 60)
    for i, (name, train_key, eval_key, log_scale) in enumerate(panels):
        ax = fig.add_subplot(grid[i // 3, i % 3])
        _plot_train(ax, records, train_key, window, raw=train_key != "train/lr")
        if eval_key is not None:
            _plot_eval(ax, records, eval_key, "eval", EVAL_COLOUR)
        if eval_key == "eval/exact_accuracy":
            _plot_eval(ax, records, "eval/act_exact_accuracy", "eval, ACT halting (cap: trained segments)", ACT_COLOUR)
            extra = sorted({k for r in records for k in r if k.startswith("eval/") and k not in KNOWN_EVAL})
            for key in extra:
                _, values = series(records, key)
                if values.size and values.min() >= 0 and values.max() <= 1:
                    _plot_eval(ax, records, key, key, None)
        if log_scale and all(v > 0 for line in ax.get_lines() for v in np.asarray(line.get_ydata(), dtype=float)):
            ax.set_yscale("log")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=7, frameon=False)
        else:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="#888888")
    return fig


def _plot_train(ax: Axes, records: list[dict[str, Any]], key: str, window: int, raw: bool) -> None:
    steps, values = series(records, key)
    if not steps.size:
        return
    if raw and window > 1:
        ax.plot(steps, values, color=TRAIN_COLOUR, alpha=0.2, lw=0.6)
    label = f"train (mean of {window} steps)" if raw and window > 1 else "train"
    ax.plot(steps, smooth(values, window) if raw else values, color=TRAIN_COLOUR, lw=1.4, label=label)


def _plot_eval(ax: Axes, records: list[dict[str, Any]], key: str, label: str, colour: str | None) -> None:
    steps, values = series(records, key)
    if steps.size:
        ax.plot(steps, values, color=colour, marker="o", ms=3.5, lw=1.2, label=label)


def read_eval_json(path: Path, flag: str | None = None) -> dict[str, Any]:
    """A file written by `hrm eval --json`; the fields drawn here are checked so that a wrong file is one line.
    `flag` (e.g. "--eval") names the option that gave the file in those lines."""
    name = f"{flag} {path}" if flag else str(path)
    result = read_json(path, None, name=name)
    if not is_eval_result(result):
        raise UserError(
            f"{name}: not a result of hrm eval --json (expected mmax and per-segment exact_accuracy, token_accuracy)"
        )
    return result


def is_eval_result(result: Any) -> bool:
    """The fields the figures and tables read: mmax >= 1 and a number per segment budget in each accuracy list."""
    if not isinstance(result, dict) or type(result.get("mmax")) is not int or result["mmax"] < 1:
        return False
    return all(
        isinstance(result.get(k), list) and len(result[k]) == result["mmax"] and all(_is_number(v) for v in result[k])
        for k in ("exact_accuracy", "token_accuracy")
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def find_eval_jsons(run_dir: Path) -> list[Path]:
    """JSON files in the run directory that are `hrm eval --json` results (config and other JSON files are skipped)."""
    found = []
    for path in sorted(Path(run_dir).glob("*.json")):
        try:
            if is_eval_result(read_json(path, None)):
                found.append(path)
        except UserError:  # not ours to judge: only the results among the run's JSON files are drawn
            continue
    return found


def trained_segments(run_dir: Path) -> int | None:
    """arch.halt_max_steps from the run's config.yaml, if it can be read."""
    try:
        config = yaml.safe_load(read_text(Path(run_dir) / "config.yaml"))
        return int(config["arch"]["halt_max_steps"])
    except (UserError, yaml.YAMLError, KeyError, TypeError, ValueError, OverflowError):
        return None


def segments_figure(results: dict[str, dict[str, Any]], title: str, trained: int | None) -> Figure:
    """Exact and token accuracy after m segments, with the ACT result as a star at its mean number of segments."""
    fig = new_figure(11, 4.4)
    grid = fig.add_gridspec(1, 2, left=0.07, right=0.98, top=0.85, bottom=0.14, wspace=0.22)
    fig.suptitle(title, fontsize=12, fontweight="bold")
    ax_exact, ax_token = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
    mmax = max(r["mmax"] for r in results.values())
    colours = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
    for i, (name, r) in enumerate(results.items()):
        colour = colours[i % len(colours)]
        x = np.arange(1, r["mmax"] + 1)
        label = name if len(results) > 1 else "after m segments"
        ax_exact.plot(x, r["exact_accuracy"], marker="o", ms=4, color=colour, label=label)
        ax_token.plot(x, r["token_accuracy"], marker="o", ms=4, color=colour, label=label)
        if isinstance(r.get("act_exact_accuracy"), (int, float)) and isinstance(
            r.get("act_mean_segments"), (int, float)
        ):
            ax_exact.scatter(
                [r["act_mean_segments"]],
                [r["act_exact_accuracy"]],
                marker="*",
                s=180,
                color=ACT_COLOUR,
                zorder=5,
                edgecolor="black",
                linewidth=0.5,
                label=f"ACT halting (cap {r.get('mmax', '?')}): {r['act_exact_accuracy']:.1%} at "
                f"{r['act_mean_segments']:.1f} segments",
            )
        for j, (key, values) in enumerate(sorted((r.get("extra") or {}).items())):
            if (
                isinstance(values, list)
                and len(values) == r["mmax"]
                and all(isinstance(v, (int, float)) for v in values)
            ):
                ax_exact.plot(
                    x,
                    values,
                    ls="--",
                    marker=".",
                    color=colour,
                    alpha=0.8 - 0.15 * j,
                    label=f"{key}" + (f" ({name})" if len(results) > 1 else ""),
                )
    for ax, what in ((ax_exact, "exact accuracy"), (ax_token, "token accuracy")):
        if trained is not None:
            ax.axvline(trained, color="#555555", ls=":", lw=1)
            ax.text(
                trained,
                0.03,
                f" trained with {trained}",
                transform=ax.get_xaxis_transform(),
                fontsize=8,
                color="#555555",
                va="bottom",
            )
        ax.set_xlim(0.5, mmax + 0.5)
        ax.set_xticks(np.arange(1, mmax + 1))
        ax.set_xlabel("segments m (inference-time budget)", fontsize=9)
        ax.set_title(what, fontsize=10)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    ax_exact.set_ylim(-0.02, 1.02)
    return fig


def run_figures(run_dir: Path, eval_jsons: list[Path]) -> list[tuple[str, Figure]]:
    """curves.png from metrics.jsonl; segments.png from the given eval JSONs, else from those found in the run."""
    run_dir = Path(run_dir)
    records = read_metrics(run_dir)
    params = next((r["num_params"] for r in records if "num_params" in r), None)
    title = f"{run_dir.name}" + (f"  ({params / 1e6:.2f}M parameters)" if params else "")
    figures = [("curves.png", curves_figure(records, title))]
    paths = eval_jsons or find_eval_jsons(run_dir)
    if paths:
        results = {p.stem: read_eval_json(p, "--eval" if eval_jsons else None) for p in paths}
        count = next(iter(results.values())).get("count")
        subtitle = f"{run_dir.name}: accuracy against segments" + (f" ({count} test examples)" if count else "")
        figures.append(("segments.png", segments_figure(results, subtitle, trained_segments(run_dir))))
    return figures


def _test_time_table(result: dict[str, Any], source: str) -> dict[str, Any]:
    """The test_time table of an eval result with the fields compute_figure reads checked: a file edited or written
    by another tool is one line naming it, not a KeyError."""
    table = result.get("extra", {}).get("test_time") if isinstance(result.get("extra"), dict) else None
    if not isinstance(table, dict) or not isinstance(table.get("table"), list):
        raise UserError(f"{source}: no test_time table (run hrm eval with --tta or --samples and --json)")
    fields = {"table": ("tta", "samples", "total_segments", "exact_accuracy")}
    fields["act"] = ("tta", "samples", "mean_total_segments", "exact_accuracy")
    for part, keys in fields.items():
        rows = table.get(part, [])
        if not isinstance(rows, list) or not all(
            isinstance(r, dict) and all(_is_number(r.get(k)) for k in keys) for r in rows
        ):
            raise UserError(
                f"{source}: extra.test_time.{part}: expected a list of objects with numbers {', '.join(keys)}"
            )
    if not table["table"]:
        raise UserError(f"{source}: extra.test_time.table is empty")
    if not isinstance(table.get("options", {}), dict):
        raise UserError(f"{source}: extra.test_time.options: expected an object")
    return table


def compute_figure(result: dict[str, Any], title: str, source: str | None = None) -> Figure:
    """Exact accuracy against total segments run per puzzle (m x tta x samples), one line per (tta, samples) family
    through its segment budgets m = 1..mmax; the ACT result of each family as a star at its mean total. `source`
    names the file in errors (default: the title)."""
    table = _test_time_table(result, source or title)
    families: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for row in table["table"]:
        families.setdefault((row["tta"], row["samples"]), []).append((row["total_segments"], row["exact_accuracy"]))
    act = {(r["tta"], r["samples"]): r for r in table.get("act", [])}
    options = table.get("options", {})
    fig = new_figure(8, 5)
    ax = fig.add_subplot(1, 1, 1)
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]
    for i, ((a, s), points) in enumerate(sorted(families.items())):
        colour = colours[i % len(colours)]
        x, y = zip(*sorted(points))
        ax.plot(x, y, marker="o", ms=3.5, lw=1.3, color=colour, label=f"tta {a}, samples {s}")
        if (a, s) in act:
            r = act[(a, s)]
            ax.scatter([r["mean_total_segments"]], [r["exact_accuracy"]], marker="*", s=120, color=colour, zorder=5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("total segments per puzzle (m x tta x samples; stars: ACT halting)", fontsize=9)
    ax.set_ylabel("exact accuracy", fontsize=9)
    noise = f", noise {options.get('noise')} ({options.get('noise_at')})" if options.get("noise") else ""
    ax.set_title(f"{title}: select {options.get('select', 'q')}{noise}", fontsize=10)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return fig
