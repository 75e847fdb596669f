"""The pictures of `hrm compare` (commands/compare_tables.py summarises the runs): accuracy per config, accuracy
against the segments run, ACT against fixed segment budgets, and accuracy against training time, CPU time and FLOPs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hrm_reason.viz.canvas import new_figure, save_png


def plot_time_to_accuracy(records: list[dict[str, Any]], tta: dict[str, Any], out_dir: Path) -> list[Path]:
    """eval/<metric> against training wall seconds, CPU seconds and FLOPs: one line per run, one colour per config,
    the targets dotted."""
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


def _bars(ax: Any, entries: dict[str, dict[str, Any]], metric: str, colours: dict[str, str]) -> None:
    """Accuracy at the trained segments, mean ± std over seeds, one bar per config."""
    labels = list(entries)
    at = [(entries[k]["per_segment"], entries[k]["segments"] - 1) for k in labels]
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
    ax.set_ylabel(f"{metric.replace('_', ' ')} at the trained segments (%)")


def _curves(ax: Any, entries: dict[str, dict[str, Any]], metric: str, colours: dict[str, str]) -> None:
    """Accuracy against the segments run, mean ± std over seeds; dotted: the trained N_sup."""
    for label, e in entries.items():
        seg = e["per_segment"]
        m = range(1, e["mmax"] + 1)
        mean = [100 * v for v in seg["mean"]]
        ax.plot(m, mean, marker="o", ms=3, color=colours[label], label=label)
        if seg["std"][0] is not None:
            low = [a - 100 * s for a, s in zip(mean, seg["std"])]
            ax.fill_between(m, low, [a + 100 * s for a, s in zip(mean, seg["std"])], color=colours[label], alpha=0.15)
        ax.axvline(e["halt_max_steps"], color=colours[label], ls=":", lw=0.8)
    ax.set_xlabel("segments m (dotted: trained N_sup)")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (%)")
    ax.legend(fontsize=7)


def _act(ax: Any, entries: dict[str, dict[str, Any]], metric: str, colours: dict[str, str]) -> None:
    """ACT (star: its mean segments and accuracy) against fixed segment budgets (line)."""
    for label, e in entries.items():
        per_m, acc = e["per_segment"], e["act"]
        m = range(1, e["mmax"] + 1)
        ax.plot(m, [100 * v for v in per_m["mean"]], color=colours[label], lw=1, alpha=0.6)
        seg = e["act_segments"]
        ax.errorbar(
            seg["mean"],
            100 * acc["mean"],
            xerr=seg["std"] or 0,
            yerr=100 * (acc["std"] or 0),
            fmt="*",
            ms=10,
            color=colours[label],
            label=f"{label} ACT (cap {'/'.join(map(str, e.get('act_caps', [e['mmax']])))})",
        )
    ax.set_xlabel("segments (line: fixed m; star: ACT mean)")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (%)")
    ax.legend(fontsize=7)


def plot(summary: dict[str, dict[str, Any]], out_dir: Path, metric: str = "exact_accuracy") -> list[Path]:
    """`metric` per config (mean ± std), against segments, and ACT against fixed segments: one panel per dataset,
    for the configs evaluated at every segment budget (a study's runs); nothing when there are none."""
    summary = {k: e for k, e in summary.items() if "per_segment" in e}
    if not summary:
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
