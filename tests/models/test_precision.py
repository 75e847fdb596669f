"""One precision rule for every registered model (docs/training.md, Precision; issue #32): with forward_dtype=bfloat16
on a CPU each computes in fp32, exactly as with float32, and one warning line says so. The models are built and run as
their family's training does (train/act.py: `build_model`, the ACT call; train/lm.py: `build_lm`, the head under
`autocast_context`), tiny, so that a regression to bf16 on the CPU stays cheap to detect."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from hrm_reason.config import load_config
from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.models.registry import build_lm, build_model, model_spec
from hrm_reason.runtime.device import autocast_context, warn_bf16_on_cpu
from tests.helpers import arch_overrides, output_tensors, puzzle_batch

CPU = torch.device("cpu")
WARNING = "warning: forward_dtype=bfloat16 on a CPU: computing in float32"
# Each registered model is built from the smallest options its module's SPEC declares (`tiny`).
ACT_SIZES = dict(seq_len=16, vocab_size=6, num_puzzle_identifiers=3)


@pytest.fixture(autouse=True)
def rearmed_warning() -> Iterator[None]:
    """The warning is once per process: each test sees its own first time."""
    warn_bf16_on_cpu.cache_clear()
    yield
    warn_bf16_on_cpu.cache_clear()


def test_every_model_declares_tiny_options(model_name: str) -> None:
    """Its SPEC's `tiny` options are a valid config of it (the tests below build every model from them)."""
    tiny = model_spec(model_name).tiny
    assert "name" not in tiny
    config = load_config(None, [f"arch.name={model_name}", "data_path=unused", *arch_overrides(tiny)])
    assert config.model_name == model_name


def outputs_as_trained(name: str, forward_dtype: str) -> tuple[Any, dict[str, torch.Tensor]]:
    """(model, output tensors of two calls) of model `name` built from a run config with `forward_dtype`, as its
    family's training builds and calls it."""
    overrides = [f"arch.name={name}", "data_path=unused", "device=cpu", f"forward_dtype={forward_dtype}"]
    config = load_config(None, overrides + arch_overrides(model_spec(name).tiny))
    if config.family == "act":
        model = build_model(config.arch, PuzzleDatasetMetadata.of_shape(**ACT_SIZES), CPU, config.seed)
        batch = puzzle_batch()
        carry = model.empty_carry(batch)
        outputs = {}
        for step in range(2):
            carry, out = model(carry, batch)
            outputs |= {f"{k}{step}": v for k, v in output_tensors(out).items()}
        return model, outputs
    model = build_lm(config.arch, 50, CPU, config.seed)
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0))
    outputs = {}
    for step in range(2):
        with autocast_context(CPU, config.forward_dtype):
            outputs[f"logits{step}"] = model(ids).logits
    return model, outputs


def test_bfloat16_on_a_cpu_computes_in_fp32_and_warns_once(model_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, fp32 = outputs_as_trained(model_name, "float32")
    assert WARNING not in capsys.readouterr().err
    model, bf16 = outputs_as_trained(model_name, "bfloat16")
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: forward_dtype")]
    assert warnings == [warnings[0]] and warnings[0].startswith(WARNING), warnings
    if hasattr(model.config, "forward_dtype"):  # the resolved config a checkpoint records says what was computed
        assert model.config.forward_dtype == "float32"
    assert bf16.keys() == fp32.keys()
    for key, value in bf16.items():
        if value.is_floating_point():
            assert value.dtype == torch.float32, key
        torch.testing.assert_close(value, fp32[key], rtol=0, atol=0, msg=key)
