"""`hrm viz html`: one self-contained HTML page for a run (pictures embedded as data URIs: no server, no network)."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from hrm_reason.outputs import HTML_MARKER
from hrm_reason.readers import read_text
from hrm_reason.viz.canvas import png_bytes
from hrm_reason.viz.curves import (
    find_eval_jsons,
    read_eval_json,
    read_metrics,
    run_figures,
)
from hrm_reason.viz.predictions import prediction_figures

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1400px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
img { max-width: 100%; height: auto; display: block; margin: 0.8em 0; border: 1px solid #eee; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { padding: 0.2em 0.7em; text-align: right; border-bottom: 1px solid #eee; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; } .note { color: #666; }
"""


def _img(figure: Figure, alt: str) -> str:
    data = base64.b64encode(png_bytes(figure)).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _eval_table(name: str, result: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{m + 1}</td><td>{e:.1%}</td><td>{t:.1%}</td></tr>"
        for m, (e, t) in enumerate(zip(result["exact_accuracy"], result["token_accuracy"]))
    )
    act = ""
    if isinstance(result.get("act_exact_accuracy"), (int, float)) and isinstance(
        result.get("act_mean_segments"), (int, float)
    ):
        act = (
            f"<p>ACT halting (cap {result.get('mmax', '?')} segments): exact {result['act_exact_accuracy']:.1%} with "
            f"{result['act_mean_segments']:.2f} segments on average.</p>"
        )
    return (
        f"<h3>{html.escape(name)} ({result.get('count', '?')} examples)</h3>{act}"
        f"<table><tr><th>segments</th><th>exact</th><th>token</th></tr>{rows}</table>"
    )


def run_page(
    run_dir: Path, eval_jsons: list[Path], data: Path | None, start: int, count: int, mmax: int | None, device_name: str
) -> str:
    run_dir = Path(run_dir)
    records = read_metrics(run_dir)  # a run without metrics is a one-line error, as in `hrm viz run`
    figures = dict(run_figures(run_dir, eval_jsons))
    parts = [f"<h1>{html.escape(run_dir.name)}</h1>"]
    last_eval = next((r for r in reversed(records) if "eval/exact_accuracy" in r), None)
    if last_eval is not None:
        parts.append(
            f"<p>Last evaluation at step {last_eval['step']}: exact accuracy {last_eval['eval/exact_accuracy']:.1%} "
            f"at the trained number of segments.</p>"
        )
    parts += ["<h2>Training and evaluation curves</h2>", _img(figures["curves.png"], "training curves")]
    if "segments.png" in figures:
        parts += ["<h2>Accuracy against segments</h2>", _img(figures["segments.png"], "accuracy against segments")]
        for path in eval_jsons or find_eval_jsons(run_dir):
            parts.append(_eval_table(path.stem, read_eval_json(path, "--eval" if eval_jsons else None)))
    if count > 0:
        parts += [
            "<h2>Predictions after each segment</h2>",
            '<p class="note">Every panel is the argmax after that segment; see the legend under each strip.</p>',
        ]
        parts += [
            _img(fig, name) for name, fig in prediction_figures(run_dir, None, data, start, count, mmax, device_name)
        ]
    config = run_dir / "config.yaml"
    if config.is_file():
        parts.append(
            f"<h2>Config</h2><details><summary>config.yaml</summary><pre>{html.escape(read_text(config))}</pre></details>"
        )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{HTML_MARKER}<title>{html.escape(run_dir.name)} - hrm-reason</title>'
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
