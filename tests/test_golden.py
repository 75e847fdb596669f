"""Numerics do not move: from the same weights and batch every model gives the logits, losses, metrics and gradients
saved from the code before the one-spine refactor (tests/golden/make_golden.py wrote them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.golden.cases import CASES, run_case

GOLDEN = torch.load(Path(__file__).parent / "golden" / "golden.pt", weights_only=True)


def test_every_case_has_golden_outputs() -> None:
    assert sorted(GOLDEN) == sorted(CASES)


@pytest.mark.parametrize("name", CASES)
def test_same_outputs_as_before_the_refactor(name: str) -> None:
    saved = GOLDEN[name]
    model, result = run_case(name, state_dict=saved["state_dict"])
    assert set(model.state_dict()) == set(saved["state_dict"]), "weight names changed"
    expected = {k: v for k, v in saved.items() if k != "state_dict"}
    assert sorted(result) == sorted(expected)
    for key, value in expected.items():
        torch.testing.assert_close(result[key], value, rtol=1e-5, atol=1e-6, msg=lambda m, k=key: f"{name} {k}: {m}")
