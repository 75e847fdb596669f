"""Adding a model is one file plus one line (docs/architecture.md, docs/models.md "Adding a model"): a toy model
written to a temporary module and registered with one line runs every model-generic test (the tests of tests/models
that take `model_name`, tests/models/conftest.py) with no other edit, and passes them."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from hrm_reason.models import registry

HERE = Path(__file__).resolve().parent

# The whole model: its config, its core (one block per segment), its model class, its FLOP count and its SPEC.
TOY_MODEL = """
from typing import Literal

from hrm_reason.models.act import ACTModel, Batch, PrefixConfig, QTarget
from hrm_reason.models.core import CoreOutput, LatentCarry, PuzzleCore
from hrm_reason.models.flops import ACTFlops, block_flops, head_flops
from hrm_reason.models.hrm import HRMBlock
from hrm_reason.models.spec import ModelSpec


class ToyConfig(PrefixConfig):
    name: Literal["toy"] = "toy"
    q_target: QTarget = "extra_forward"


class ToyCore(PuzzleCore):
    def __init__(self, config: ToyConfig) -> None:
        super().__init__(config, LatentCarry, output_state="z")
        self.register_initial_states()
        self.block = HRMBlock(config)

    def forward(self, carry: LatentCarry, batch: Batch) -> CoreOutput:
        x = self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])
        return self.segment_result(z=self.block(carry.z + x, self.cos_sin()))


class Toy(ACTModel):
    inner_class = ToyCore


def toy_flops(config: ToyConfig) -> ACTFlops:
    segment = block_flops(config, config.seq_len + config.prefix_len) + head_flops(config)
    return ACTFlops.of(config, segment=segment, backward=2 * segment)


SPEC = ModelSpec(
    family="act",
    config=ToyConfig,
    model=Toy,
    flops=toy_flops,
    tiny={"hidden_size": 32, "num_heads": 2},
    foreign_option="mlp_t=true",
)
"""


def model_generic_tests() -> dict[Path, set[str]]:
    """The test functions of tests/models that take `model_name`, by file."""
    found: dict[Path, set[str]] = {}
    for path in sorted(HERE.glob("test_*.py")):
        names = {
            node.name
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.FunctionDef)
            and node.name.startswith("test_")
            and any(arg.arg == "model_name" for arg in node.args.args)
        }
        if names:
            found[path] = names
    return found


class Reports:
    """The reports of a pytest session run in this process."""

    def __init__(self) -> None:
        self.reports: list[pytest.TestReport] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.append(report)


def test_a_toy_model_in_one_file_plus_one_registry_line_runs_every_model_generic_test(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "toy_model.py"
    path.write_text(TOY_MODEL)
    spec = importlib.util.spec_from_file_location("toy_model", path)
    assert spec is not None and spec.loader is not None
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)

    monkeypatch.setitem(registry.models(), "toy", toy)  # the one line: in models/registry.py `models()`

    generic = model_generic_tests()
    expected = set().union(*generic.values())
    assert "test_bfloat16_on_a_cpu_computes_in_fp32_and_warns_once" in expected
    assert "test_an_option_of_another_model_is_a_one_line_error" in expected
    # The toy's cases only, in this process (the registry holds the toy); tests/conftest.py (the device guard, already
    # installed here) stays out of the inner session, whose temporary directories are this test's.
    reports = Reports()
    args = ["-q", "-p", "no:cacheprovider", f"--confcutdir={HERE}", f"--basetemp={tmp_path / 'inner'}", "-k", "toy"]
    exit_code = pytest.main([*args, *map(str, generic)], plugins=[reports])
    calls = [r for r in reports.reports if r.when == "call"]
    ran = {r.nodeid.rpartition("::")[2].removesuffix("[toy]") for r in calls if r.nodeid.endswith("[toy]")}
    assert ran == expected
    assert exit_code == 0 and all(r.passed for r in reports.reports), [r.nodeid for r in reports.reports if r.failed]
