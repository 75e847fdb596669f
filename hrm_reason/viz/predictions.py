"""`hrm viz predictions`: the model's decoded answer after every segment 1..mmax (the HRM paper's Figure 7).

Each segment panel shades the cells that changed since the previous segment (for segment 1: since the puzzle as
given), frames the cells that differ from the answer and marks the cells that break the puzzle's rules; a strip below
plots the Q head's two logits per segment (titles give sigmoid(q_halt), the model's belief that the answer is right).
ACT at inference halts at the first segment where q_halt > q_continue, which is the panel marked "halt"; the logits
are plotted rather than their sigmoids because a confident Q head saturates both sigmoids at 1.00.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure
from torch import nn

from hrm_reason.evaluate.act import check_mmax
from hrm_reason.evaluate.run import load_model_for_eval
from hrm_reason.limits import VIZ_COUNT
from hrm_reason.viz.canvas import panel_figure
from hrm_reason.viz.grids import (
    GridSpec,
    content_window,
    draw_grid,
    given_cells,
    grid_spec,
    rule_violations,
    wrong_cells,
)
from hrm_reason.viz.puzzles import Example, example_title, get_examples, read_identifiers

SOLVED_COLOUR, UNSOLVED_COLOUR = "#1a7f37", "#c0392b"


@dataclass
class SegmentTrace:
    example: Example
    preds: np.ndarray  # [mmax, seq_len]: argmax tokens after segment m+1
    q_halt_logits: np.ndarray  # [mmax]
    q_continue_logits: np.ndarray  # [mmax]

    @property
    def mmax(self) -> int:
        return self.preds.shape[0]

    @property
    def q_halt(self) -> np.ndarray:
        """sigmoid(q_halt_logits): the Q head's estimate that the current answer is right."""
        return 1 / (1 + np.exp(-self.q_halt_logits.astype(np.float64)))

    @property
    def act_halt(self) -> int:
        """1-based segment at which ACT halts: the first with q_halt > q_continue, else the last."""
        halts = np.flatnonzero(self.q_halt_logits > self.q_continue_logits)
        return int(halts[0]) + 1 if halts.size else self.mmax


@torch.no_grad()
def trace_segments(model: nn.Module, examples: list[Example], mmax: int, device: torch.device) -> list[SegmentTrace]:
    """Run `mmax` segments on a batch of examples and keep every segment's argmax and Q values."""
    batch = {
        "inputs": torch.from_numpy(np.stack([e.inputs for e in examples]).astype(np.int32)).to(device),
        "labels": torch.from_numpy(np.stack([e.labels for e in examples]).astype(np.int32)).to(device),
        "puzzle_identifiers": torch.tensor([e.puzzle_identifier for e in examples], dtype=torch.int32, device=device),
    }
    was_training = model.training
    model.eval()
    carry = model.empty_carry(batch)
    preds, q_halt, q_continue = [], [], []
    for _ in range(mmax):
        carry, out = model(carry, batch, halt_max_steps=mmax)
        preds.append(out.logits.argmax(-1).cpu())
        q_halt.append(out.q_halt_logits.float().cpu())
        q_continue.append(out.q_continue_logits.float().cpu())
    model.train(was_training)
    p, qh, qc = torch.stack(preds, 1).numpy(), torch.stack(q_halt, 1).numpy(), torch.stack(q_continue, 1).numpy()
    return [SegmentTrace(e, p[i], qh[i], qc[i]) for i, e in enumerate(examples)]


def predictions_figure(spec: GridSpec, trace: SegmentTrace, title: str, trained_segments: int | None = None) -> Figure:
    ex, mmax = trace.example, trace.mmax
    rows = -(-(mmax + 2) // 9)  # at most 9 panels a row, rows filled evenly
    ncols = -(-(mmax + 2) // rows)
    fig, axes, strip_top = panel_figure(
        mmax + 2, ncols, spec.look.panel_inches[1], header=title, footer=spec.legend, extra_h=1.6
    )
    window = content_window(spec, ex.inputs, ex.labels)
    givens = given_cells(spec, ex.inputs)
    solved = []

    draw_grid(axes[0], spec, ex.inputs, givens=givens, window=window)
    axes[0].set_title("puzzle", fontsize=9)
    previous = ex.inputs
    for m in range(mmax):
        pred = trace.preds[m]
        wrong = wrong_cells(spec, pred, ex.labels)
        solved.append(not wrong.any())
        draw_grid(
            axes[m + 1],
            spec,
            pred,
            givens=givens,
            changed=pred != previous,
            wrong=wrong,
            violations=rule_violations(spec, pred, ex.inputs),
            window=window,
        )
        halt = m + 1 == trace.act_halt
        status = "solved" if solved[-1] else f"{int(wrong.sum())} wrong"
        axes[m + 1].set_title(
            f"segment {m + 1}{' (halt)' if halt else ''}\nq_halt {trace.q_halt[m]:.2f} · {status}",
            fontsize=8,
            pad=8,
            color=SOLVED_COLOUR if solved[-1] else UNSOLVED_COLOUR,
            fontweight="bold" if halt else "normal",
        )
        if halt:
            axes[m + 1].add_patch(_axes_frame(axes[m + 1]))
        previous = pred
    draw_grid(axes[-1], spec, ex.labels, givens=givens, window=window)
    axes[-1].set_title("answer", fontsize=9)
    _q_strip(fig, strip_top, trace, solved, trained_segments)
    return fig


def _axes_frame(ax):
    from matplotlib.patches import Rectangle

    return Rectangle(
        (-0.03, -0.03), 1.06, 1.06, transform=ax.transAxes, fill=False, edgecolor="#333333", lw=2.5, clip_on=False
    )


def _q_strip(fig: Figure, top: float, trace: SegmentTrace, solved: list[bool], trained_segments: int | None) -> None:
    """q_halt and q_continue logits per segment; the markers say whether that segment's answer is exact."""
    height_in = fig.get_figheight()
    width_in = fig.get_figwidth()
    ax = fig.add_axes((0.7 / width_in, 0.42 / height_in, 1 - 2.6 / width_in, top - 0.62 / height_in))
    x = np.arange(1, trace.mmax + 1)
    ax.plot(x, trace.q_continue_logits, color="#888888", ls="--", lw=1.2, label="q_continue")
    ax.plot(x, trace.q_halt_logits, color="#333333", lw=1.5, label="q_halt", zorder=2)
    ax.scatter(x, trace.q_halt_logits, c=[SOLVED_COLOUR if s else UNSOLVED_COLOUR for s in solved], s=28, zorder=3)
    ax.axhline(0, color="#bbbbbb", lw=0.8)
    ax.axvline(trace.act_halt, color="#333333", lw=0.8, ls=":")
    if trained_segments is not None and trained_segments < trace.mmax:
        ax.axvspan(trained_segments + 0.5, trace.mmax + 0.5, color="#f0f0f0", zorder=0, label="beyond training")
    ax.set_xlim(0.5, trace.mmax + 0.5)
    ax.margins(y=0.25)
    ax.set_xticks(x)
    ax.set_xlabel(
        "segment (green: exact answer, red: not; dotted: ACT halts, the first q_halt > q_continue)", fontsize=8
    )
    ax.set_ylabel("Q logit", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)


def prediction_figures(
    path: Path,
    config_path: Path | None,
    data: Path | None,
    start: int,
    count: int,
    mmax: int | None,
    device_name: str,
) -> list[tuple[str, Figure]]:
    """Test examples start..start+count-1 through a checkpoint (mmax default: the trained halt_max_steps)."""
    VIZ_COUNT.check(count)
    if mmax is not None:
        check_mmax(mmax)
    model, config, split, device = load_model_for_eval(path, config_path, data, device_name)
    spec = grid_spec(split.metadata, str(split.path / "dataset.json"))
    identifiers = read_identifiers(split.path.parent)
    examples = get_examples(split, start, count, "test", identifiers)
    mmax = mmax or config.arch.halt_max_steps
    traces = trace_segments(model, examples, mmax, device)
    trained = config.arch.halt_max_steps
    return [
        (
            f"predictions_test_{t.example.index:06d}.png",
            predictions_figure(spec, t, f"{example_title('test', t.example)}: prediction after each segment", trained),
        )
        for t in traces
    ]
