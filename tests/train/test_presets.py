"""The quickstart's baselines (issue #36): "the same experiment with TRM" or with the transformer in HRM's ACT loop is
one command, `hrm train -c configs/quickstart_<model>.yaml`. Each preset is the quickstart with only its `arch`
changed, so a fix to the quickstart's recipe that forgets a baseline fails here, and its model is HRM's size. The ARC
rung's TRM preset (issue #33) is held to configs/arc_rung.yaml the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrm_reason.config import load_config
from hrm_reason.models.registry import build

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
BASELINES = {"quickstart_trm.yaml": "trm", "quickstart_transformer.yaml": "transformer"}


def parameters(config_name: str, sizes: dict[str, int] | None = None) -> int:
    config = load_config(CONFIGS / config_name)
    sizes = sizes or dict(seq_len=36, vocab_size=8, num_puzzle_identifiers=2)  # the quickstart's 6x6 Sudoku
    model = build(config.arch, sizes, "cpu", 0)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("preset", "name"), BASELINES.items())
def test_a_baseline_preset_is_the_quickstart_with_another_arch(preset: str, name: str) -> None:
    quick = load_config(CONFIGS / "quickstart.yaml").model_dump()
    baseline = load_config(CONFIGS / preset).model_dump()
    assert baseline["arch"]["name"] == name
    assert {k: v for k, v in baseline.items() if k != "arch"} == {k: v for k, v in quick.items() if k != "arch"}
    shared = ("hidden_size", "halt_max_steps", "halt_exploration_prob", "loss")
    assert all(baseline["arch"][k] == quick["arch"][k] for k in shared if k != "hidden_size" or name != "trm")
    # HRM's size, within TRM-MLP's 6% (its token mixer grows with the 36 cells + 16 prefix positions).
    assert parameters(preset) == pytest.approx(parameters("quickstart.yaml"), rel=0.07)


def test_the_arc_rung_trm_preset_is_the_hrm_preset_with_another_arch() -> None:
    hrm = load_config(CONFIGS / "arc_rung.yaml").model_dump()
    trm = load_config(CONFIGS / "arc_rung_trm.yaml").model_dump()
    assert trm["arch"]["name"] == "trm"
    assert {k: v for k, v in trm.items() if k != "arch"} == {k: v for k, v in hrm.items() if k != "arch"}
    shared = ("hidden_size", "num_heads", "H_cycles", "L_cycles", "halt_max_steps", "pos_encodings", "loss")
    assert all(trm["arch"][k] == hrm["arch"][k] for k in shared)
    sizes = dict(seq_len=100, vocab_size=12, num_puzzle_identifiers=2)  # the rung's 10x10 canvas
    assert parameters("arc_rung_trm.yaml", sizes) == pytest.approx(parameters("arc_rung.yaml", sizes), rel=0.02)
