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
from hrm_reason.models.registry import MODELS, build_lm, build_model
from hrm_reason.runtime.device import autocast_context, warn_bf16_on_cpu
from tests.helpers import TINY_HAM, TINY_HRM, TINY_HRM_TEXT, arch_overrides, output_tensors, puzzle_batch

CPU = torch.device("cpu")
WARNING = "warning: forward_dtype=bfloat16 on a CPU: computing in float32"
# The smallest options of each registered model (every entry of MODELS must have one: test_every_model_is_covered).
TINY: dict[str, dict[str, Any]] = {
    "hrm": TINY_HRM,
    "transformer": {"hidden_size": 32, "num_heads": 2, "num_layers": 2},
    "unitf": {"hidden_size": 32, "num_heads": 2, "unitf_steps": 2},
    "trm": {"hidden_size": 32, "num_heads": 2, "L_layers": 1, "H_cycles": 2, "L_cycles": 2},
    "hrm_lm": {"hidden_size": 32, "num_heads": 2, "N": 2, "T": 2, "K": 2, "max_seq_len": 64},
    "unitf_lm": {"hidden_size": 32, "num_heads": 2, "M": 3, "K": 2, "max_seq_len": 64},
    "hrm_text": {**TINY_HRM_TEXT, "max_position_embeddings": 64},
    "ham_lm": {**TINY_HAM, "num_layers": 1, "chunk_size": 8},
}
ACT_SIZES = dict(seq_len=16, vocab_size=6, num_puzzle_identifiers=3)


@pytest.fixture(autouse=True)
def rearmed_warning() -> Iterator[None]:
    """The warning is once per process: each test sees its own first time."""
    warn_bf16_on_cpu.cache_clear()
    yield
    warn_bf16_on_cpu.cache_clear()


def test_every_model_is_covered() -> None:
    assert set(TINY) == set(MODELS)


def outputs_as_trained(name: str, forward_dtype: str) -> tuple[Any, dict[str, torch.Tensor]]:
    """(model, output tensors of two calls) of model `name` built from a run config with `forward_dtype`, as its
    family's training builds and calls it."""
    overrides = [f"arch.name={name}", "data_path=unused", "device=cpu", f"forward_dtype={forward_dtype}"]
    config = load_config(None, overrides + arch_overrides(TINY[name]))
    if config.family == "act":
        model = build_model(config.arch, PuzzleDatasetMetadata.of_shape(**ACT_SIZES), CPU, config.seed)
        batch = puzzle_batch()
        carry = model.initial_carry(batch)
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


@pytest.mark.parametrize("name", list(MODELS))
def test_bfloat16_on_a_cpu_computes_in_fp32_and_warns_once(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, fp32 = outputs_as_trained(name, "float32")
    assert WARNING not in capsys.readouterr().err
    model, bf16 = outputs_as_trained(name, "bfloat16")
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: forward_dtype")]
    assert warnings == [warnings[0]] and warnings[0].startswith(WARNING), warnings
    if hasattr(model.config, "forward_dtype"):  # the resolved config a checkpoint records says what was computed
        assert model.config.forward_dtype == "float32"
    assert bf16.keys() == fp32.keys()
    for key, value in bf16.items():
        if value.is_floating_point():
            assert value.dtype == torch.float32, key
        torch.testing.assert_close(value, fp32[key], rtol=0, atol=0, msg=key)
