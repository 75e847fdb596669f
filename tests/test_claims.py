"""The papers' claims table (benchmarks/claims.py): each cell's verdict follows the rule docs/results.md states, from
the seeds' values alone."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import claims  # noqa: E402


def final(at_trained: float, per_segment: list[float] | None = None, act: float = 0.0, act_segments: float = 0.0):
    return dict(
        at_trained=at_trained,
        per_segment=per_segment,
        segments=4,
        mmax=len(per_segment or []),
        act=act,
        act_segments=act_segments,
        act_cap=len(per_segment or []),
        steps=100,
    )


def finals(**models: list[float]) -> dict[str, list[dict[str, Any]]]:
    return {m: [final(v) for v in values] for m, values in models.items()}


RUNG = claims.RUNGS[1]


@pytest.mark.parametrize(
    ("hrm", "other", "verdict"),
    [
        ([0.80, 0.82, 0.81], [0.10, 0.12, 0.11], "**held**"),  # far above
        ([0.800, 0.805, 0.810], [0.810, 0.800, 0.805], "**did not hold**"),  # equal: not a point gained
        ([0.80, 0.82, 0.81], [0.90, 0.91, 0.92], "**did not hold**"),  # below
        ([0.70, 0.90, 0.80], [0.70, 0.80, 0.75], "**not decided**"),  # +5 points, but a spread that allows 0
        ([0.80], [0.10], "**not decided** (1 seed)"),  # one seed: no spread to judge by
    ],
)
def test_a_model_claim_is_decided_by_its_difference_and_standard_error(
    hrm: list[float], other: list[float], verdict: str
) -> None:
    cell = claims.beats("hrm", "transformer_direct")(finals(hrm=hrm, transformer_direct=other), ROOT, RUNG)
    assert cell.startswith(verdict + ":"), cell


def test_a_missing_model_is_not_run() -> None:
    assert claims.beats("trm", "hrm")(finals(hrm=[0.8, 0.8]), ROOT, RUNG) == "not run"


def test_more_segments_is_paired_per_seed() -> None:
    # Each seed gains 2 points from 4 to 8 segments, on seeds far apart: the paired difference is decided.
    runs = {"hrm": [final(a, [0, 0, 0, a, 0, 0, 0, a + 0.02]) for a in (0.5, 0.7, 0.9)]}
    cell = claims.more_segments(runs, ROOT, RUNG)
    assert cell.startswith("**held**") and "+2.0 ± 0.0 SE points" in cell, cell


@pytest.mark.parametrize(
    ("act", "segments", "verdict"),
    [
        ((0.80, 0.82, 0.81), 3.0, "**held**"),  # as accurate as the fixed cap, halting earlier
        ((0.80, 0.82, 0.81), 8.0, "**did not hold**"),  # never halts before the cap
        ((0.60, 0.62, 0.61), 3.0, "**did not hold**"),  # halts earlier, but 20 points below
    ],
)
def test_act_saves_segments_only_when_it_halts_before_its_cap_without_losing_accuracy(
    act: tuple[float, ...], segments: float, verdict: str
) -> None:
    fixed = (0.80, 0.82, 0.81)
    runs = {"hrm": [final(f, [f] * 8, a, segments) for f, a in zip(fixed, act)]}
    cell = claims.act_saves(runs, ROOT, RUNG)
    assert cell.startswith(verdict + ":"), cell


def test_the_arc_rung_reads_each_seeds_voted_pass_at_2_and_decides_by_the_same_rule(tmp_path: Path) -> None:
    import json

    arc = next(r for r in claims.RUNGS if r.arc)
    for model, values in {"hrm": (0.10, 0.12, 0.11), "hrm_1seg": (0.01, 0.0, 0.02)}.items():
        for seed, value in enumerate(values):
            run = tmp_path / arc.folder / model / f"seed{seed}"
            run.mkdir(parents=True)
            record = {"extra": {"pass@1": value / 2, "pass@2": value}, "provenance": {"step": 1000 + seed}}
            (run / "eval.json").write_text(json.dumps(record))
    finals = claims._finals(tmp_path, arc)
    assert [f["at_trained"] for f in finals["hrm"]] == [0.10, 0.12, 0.11]  # pass@2, not pass@1
    cell = claims.beats("hrm", "hrm_1seg")(finals, tmp_path, arc)
    assert cell.startswith("**held**: hrm 11.0 ± 1.0%, hrm_1seg 1.0 ± 1.0%") and "1,001 and 1,001 steps" in cell, cell
    assert claims.beats("hrm", "transformer_act")(finals, tmp_path, arc) == "not run"
    assert claims.more_segments(finals, tmp_path, arc) == "not run"  # no per-segment figures on this rung
    assert arc.title in claims.claims(tmp_path)  # its column shows once the study has records
    assert arc.title not in claims.claims(tmp_path / "elsewhere")
