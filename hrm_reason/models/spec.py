"""What a model module and a family module declare for the registry (models/registry.py), as objects: the module
exports `SPEC` (a `ModelSpec`; a family's module, `FAMILY`, a `FamilySpec`), and the registry maps a name to that
module and nothing more. No string names code: a reader jumps from the spec to the class, and the import graph
(tests/test_layers.py) sees every edge.

This module imports neither torch nor pydantic, so that the registry (which imports it) stays cheap to import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

Family = Literal["act", "lm"]  # "act": a puzzle model in the ACT loop (models/act.py); "lm": a language-model head


@dataclass(frozen=True)
class FamilySpec:
    """What the code above the models may ask of a family (docs/architecture.md). The family's training task,
    evaluator and loader are held by the layers that use them: `TASKS` in train/loop.py, `EVALUATORS` in
    evaluate/run.py, `LOADERS` in load.py, each keyed by the family's name."""

    segments: bool  # runs in ACT segments: --mmax, test-time compute, `hrm solve` and puzzle-sized benches apply
    generates: bool  # a language model: `hrm generate` applies, and text datasets


@dataclass(frozen=True)
class ModelSpec:
    """One model, as its module declares it in `SPEC`."""

    family: Family
    config: type[BaseModel]  # its pydantic config class (extra="forbid"), with `name: Literal["<its name>"]`
    model: type  # its nn.Module class, built from the config
    # What the test suite needs of every model (tests/models: the tests taking `model_name` run for each):
    tiny: dict[str, Any]  # its smallest options (besides `name`): what the model-generic tests build and run
    foreign_option: str  # "key=value" of an option another registered model reads and this one does not
    # Its FLOP count: (config) -> flops.ACTFlops per example (act), (config, seq_len) -> flops.LMFlops per token (lm).
    # None: the model trains, without FLOPs in its metrics, and `hrm bench` refuses it.
    flops: Callable[..., Any] | None = None
    adapter: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # a foreign checkpoint's tensor names to ours
