"""Numerics do not move: from the same weights and batch every model gives the logits, losses, metrics and gradients
saved from the code before the one-spine refactor (tests/golden/make_golden.py wrote them).

The tolerance is relative to each tensor's largest value: fp32 matrix products round differently on CPUs with other
vector units (the golden outputs were saved on one; on an AVX-512 Xeon the same code drifts by up to 1.1e-4 of a
tensor's scale after TRM-MLP's 4 recursive segments, 1e-5 elsewhere), while a change to the math moves outputs by far
more: `test_a_small_change_is_caught` shows that 1% on one weight matrix fails."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.golden.cases import CASES, run_case

GOLDEN = torch.load(Path(__file__).parent / "golden" / "golden.pt", weights_only=True)
SCALE_TOLERANCE = 5e-4  # of a tensor's largest absolute value; 4.5x the largest drift measured across CPUs


def assert_same(name: str, result: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert sorted(result) == sorted(expected)
    for key, value in expected.items():
        floating = torch.is_tensor(value) and value.is_floating_point() and value.numel() > 0
        scale = float(value.abs().max()) if floating else 0.0
        torch.testing.assert_close(
            result[key],
            value,
            rtol=1e-5,
            atol=max(1e-6, SCALE_TOLERANCE * scale),
            msg=lambda m, k=key: f"{name} {k}: {m}",
        )


def test_every_case_has_golden_outputs() -> None:
    assert sorted(GOLDEN) == sorted(CASES)


@pytest.mark.parametrize("name", CASES)
def test_same_outputs_as_before_the_refactor(name: str) -> None:
    saved = GOLDEN[name]
    model, result = run_case(name, state_dict=saved["state_dict"])
    assert set(model.state_dict()) == set(saved["state_dict"]), "weight names changed"
    assert_same(name, result, {k: v for k, v in saved.items() if k != "state_dict"})


@pytest.mark.parametrize("name", ["hrm", "trm_mlp"])
def test_a_small_change_is_caught(name: str) -> None:
    """The tolerance still sees a 1% change of one weight matrix."""
    saved = GOLDEN[name]
    weights = dict(saved["state_dict"])
    key = next(k for k, v in weights.items() if v.dim() == 2 and "emb" not in k)
    weights[key] = weights[key] * 1.01
    _, result = run_case(name, state_dict=weights)
    with pytest.raises(AssertionError):
        assert_same(name, result, {k: v for k, v in saved.items() if k != "state_dict"})
