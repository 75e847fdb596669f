"""The one place that knows every model: `arch.name` -> its module, config class, model class, family, FLOP count
and checkpoint adapter, imported on first use.

Importing lazily keeps `hrm --help` fast and lets the registry list a model whose file needs an optional package:
naming it gives a one-line error instead of breaking every other model. Adding a model is one file (its config, its
module, its FLOP count) plus one line in MODELS.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from hrm_reason.errors import UserError, validation_message

Family = Literal["act", "lm"]


@dataclass(frozen=True)
class ModelSpec:
    family: Family  # "act": a puzzle model in the ACT loop (models/act.py); "lm": a language-model head
    module: str
    config: str  # its pydantic config class (extra="forbid"): what `arch` is validated by
    model: str  # its nn.Module class, built from the config
    flops: str  # its FLOP count from the config: per example (act, flops.ACTFlops), per token (lm, flops.LMFlops)
    adapter: str | None = None  # "module:function" from a foreign checkpoint's tensor names to ours


MODELS: dict[str, ModelSpec] = {
    "hrm": ModelSpec(
        "act",
        "hrm_reason.models.hrm",
        "HRMConfig",
        "HRM",
        "hrm_flops",
        adapter="hrm_reason.models.hrm:from_original_weights",
    ),
    "transformer": ModelSpec(
        "act", "hrm_reason.models.baselines", "TransformerConfig", "Transformer", "transformer_flops"
    ),
    "unitf": ModelSpec("act", "hrm_reason.models.baselines", "UniTFConfig", "UniTF", "unitf_flops"),
    "trm": ModelSpec(
        "act",
        "hrm_reason.models.trm",
        "TRMConfig",
        "TRM",
        "trm_flops",
        adapter="hrm_reason.models.trm_original:from_original_weights",
    ),
    "hrm_lm": ModelSpec("lm", "hrm_reason.models.lm.hrm_lm", "HRMLMConfig", "HRMLM", "hrm_lm_flops"),
    "unitf_lm": ModelSpec("lm", "hrm_reason.models.lm.unitf_lm", "UniTFLMConfig", "UniTFLM", "unitf_lm_flops"),
    "hrm_text": ModelSpec(
        "lm",
        "hrm_reason.models.lm.hrm_text",
        "HRMTextConfig",
        "HRMText",
        "hrm_text_flops",
        adapter="hrm_reason.models.lm.hrm_text_convert:rename_hf_weights",
    ),
    "ham_lm": ModelSpec("lm", "hrm_reason.models.lm.ham", "HAMLMConfig", "HAMLM", "ham_lm_flops"),
}


@dataclass(frozen=True)
class FamilySpec:
    """What a model family brings besides its models, each part named "module:attribute" and imported on first use.
    The registry sits below the code it names (training, evaluation, loading): naming by string, as torchtitan's
    train spec does, keeps every import pointing down (docs/architecture.md), and nothing outside the registry
    branches on the family."""

    task: str  # its part of a training run: a TrainTask class (train/loop.py), built (config, device, procs, progress)
    evaluator: str  # (loaded run, options) -> its evaluation result (evaluate/run.py)
    loader: str  # (checkpoint, config, config path, data, device) -> the model with its weights (load.py)
    segments: bool  # runs in ACT segments: --mmax, test-time compute, `hrm solve` and puzzle-sized benches apply
    generates: bool  # a language model: `hrm generate` applies, and text datasets


FAMILIES: dict[Family, FamilySpec] = {
    "act": FamilySpec(
        task="hrm_reason.train.act:ACTTask",
        evaluator="hrm_reason.evaluate.run:evaluate_act_run",
        loader="hrm_reason.load:load_act_model",
        segments=True,
        generates=False,
    ),
    "lm": FamilySpec(
        task="hrm_reason.train.lm:LMTask",
        evaluator="hrm_reason.evaluate.run:evaluate_lm_run",
        loader="hrm_reason.load:load_lm_model",
        segments=False,
        generates=True,
    ),
}
# The original HRM code's arch names, accepted so that its all_config.yaml loads.
ORIGINAL_NAMES = {"hrm.hrm_act_v1@HierarchicalReasoningModel_ACTV1": "hrm"}


def canonical_name(name: Any) -> Any:
    return ORIGINAL_NAMES.get(name, name) if isinstance(name, str) else name


def family(name: Any) -> Family | None:
    """ "act" or "lm" for a registered name, None for anything else: the one "is this a language model" test."""
    spec = MODELS.get(canonical_name(name)) if isinstance(name, str) else None
    return spec.family if spec is not None else None


def is_lm_arch(name: Any) -> bool:
    return family(name) == "lm"


def family_spec(family: Family) -> FamilySpec:
    return FAMILIES[family]


def family_part(family: Family, part: Literal["task", "evaluator", "loader"]) -> Any:
    """The family's training task class, evaluator or loader, imported now."""
    module_name, attribute = getattr(FAMILIES[family], part).split(":")
    return getattr(importlib.import_module(module_name), attribute)


def _spec(name: Any, want: Family | None = None) -> ModelSpec:
    name = canonical_name(name)
    spec = MODELS.get(name) if isinstance(name, str) else None
    if spec is None or (want is not None and spec.family != want):
        names = [n for n, s in MODELS.items() if want is None or s.family == want]
        what = {"lm": "language-model head", "act": "puzzle model", None: "model"}[want]
        raise UserError(f"field 'arch.name': unknown {what} {name!r} (expected one of {', '.join(names)})")
    return spec


def _load(name: str, module_name: str, attribute: str) -> Any:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name == module_name:
            raise UserError(
                f"arch.name {name}: the model's module {module_name} is not available in this installation"
            ) from None
        raise UserError(f"arch.name {name}: its module needs the package '{e.name}', which is not installed") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise UserError(f"arch.name {name}: {module_name} does not define {attribute}") from None


def model_classes(name: Any, want: Family | None = None) -> tuple[type[BaseModel], type]:
    """The config and model classes of `name` (of family `want` when given)."""
    spec = _spec(name, want)
    name = canonical_name(name)
    return _load(name, spec.module, spec.config), _load(name, spec.module, spec.model)


def head_classes(name: Any) -> tuple[type[BaseModel], type]:
    return model_classes(name, "lm")


def flop_count(config: Any, seq_len: int | None = None) -> Any:
    """The model's FLOP count from its (resolved) config: flops.ACTFlops per example, or flops.LMFlops per token of
    windows of `seq_len` tokens."""
    spec = _spec(config.name)
    count = _load(config.name, spec.module, spec.flops)
    return count(config) if spec.family == "act" else count(config, seq_len)


def checkpoint_adapter(name: str) -> Any:
    """The function that renames a foreign checkpoint's tensors (the original HRM and TRM code's, transformers') to
    ours."""
    spec = _spec(name)
    if spec.adapter is None:
        raise UserError(f"arch.name {name}: no foreign checkpoint layout is known for this model")
    module_name, function = spec.adapter.split(":")
    return _load(name, module_name, function)


def unknown_key_message(name: str, key: str) -> str:
    """'q_target is an option of hrm, transformer, unitf, not trm': which models read the key the user gave."""
    owners = []
    for other, spec in MODELS.items():
        try:
            if key in _load(other, spec.module, spec.config).model_fields:
                owners.append(other)
        except UserError:  # a model whose module is not installed
            continue
    if not owners:
        return f"unknown key (not an option of {name})"
    return f"{key} is an option of {', '.join(owners)}, not {name}"


def validation_error(e: ValidationError, name: str, source: str) -> UserError:
    """One line naming the `arch.` key and, for a key of another model, the model."""
    err = e.errors()[0]
    if err["type"] == "extra_forbidden" and err["loc"]:
        key = ".".join(str(p) for p in err["loc"])
        return UserError(f"{source}: field 'arch.{key}': {unknown_key_message(name, key)}")
    return UserError(validation_message(e, source).replace("field '", "field 'arch.", 1))


def arch_config(arch: Any, source: str = "config", want: Family | None = None) -> BaseModel:
    """`arch` (a mapping, or a model config already) validated by the config of the model that arch.name picks (of
    family `want` when given); an option that model does not read is an error naming the key and the model."""
    if isinstance(arch, BaseModel):
        _spec(getattr(arch, "name", None), want)
        return arch
    if not isinstance(arch, dict):
        raise UserError(f"{source}: field 'arch': expected a mapping of model options")
    fields = dict(arch)
    name = canonical_name(fields.get("name", "hrm"))
    fields["name"] = name
    config_cls, _ = model_classes(name, want)
    if family(name) == "act":
        fields = _from_flat_arch(fields)
    try:
        return config_cls.model_validate(fields)
    except ValidationError as e:
        raise validation_error(e, name, source) from None


# Every field of the flat ArchConfig that the code before per-model configs wrote into run directories' config.yaml.
FLAT_ARCH_FIELDS = {
    "name",
    "hidden_size",
    "num_heads",
    "expansion",
    "H_cycles",
    "L_cycles",
    "H_layers",
    "L_layers",
    "num_layers",
    "unitf_steps",
    "unitf_grad_steps",
    "mlp_t",
    "puzzle_emb_len",
    "pos_encodings",
    "puzzle_emb_ndim",
    "rms_norm_eps",
    "rope_theta",
    "halt_max_steps",
    "halt_exploration_prob",
    "q_target",
    "forward_dtype",
    "loss",
}


def _from_flat_arch(fields: dict[str, Any]) -> dict[str, Any]:
    """A run directory's config.yaml from before per-model configs holds every flat field, most of which its model
    ignored: keep the chosen model's (a transformer's num_layers None meant H_layers + L_layers)."""
    if set(fields) != FLAT_ARCH_FIELDS:
        return fields
    if fields["name"] == "transformer" and fields["num_layers"] is None:
        fields["num_layers"] = fields["H_layers"] + fields["L_layers"]
    config_cls, _ = model_classes(fields["name"])
    return {k: v for k, v in fields.items() if k in config_cls.model_fields and v is not None}


def build(arch: Any, sizes: dict[str, int], device: Any = "cpu", seed: int = 0) -> Any:
    """Build model `arch.name` on `device` with a seeded init that leaves the global RNG as it was. `sizes` are the
    dataset's: seq_len, vocab_size, num_puzzle_identifiers (act) or vocab_size (lm)."""
    import torch

    if isinstance(arch, dict) and family(arch.get("name")) == "lm":
        config = lm_config(arch, sizes.get("vocab_size"))
    else:
        config = arch_config(arch)
    device = torch.device(device)
    if family(config.name) == "act":
        config = config.resolved(sizes, device)
    _, model_cls = model_classes(config.name)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        with device:
            return model_cls(config)


def build_model(arch: Any, metadata: Any, device: Any, seed: int) -> Any:
    """A puzzle model for a dataset's metadata (data.PuzzleDatasetMetadata)."""
    sizes = dict(
        seq_len=metadata.seq_len, vocab_size=metadata.vocab_size, num_puzzle_identifiers=metadata.num_puzzle_identifiers
    )
    return build(arch, sizes, device, seed)


def lm_config(arch: dict[str, Any], vocab_size: int | None, source: str = "config") -> BaseModel:
    """A language-model head's validated config from an `arch` mapping; `vocab_size` comes from the dataset (a
    different value already in `arch` is an error, it would not fit the data)."""
    fields = dict(arch)
    if vocab_size is not None:
        given = fields.get("vocab_size")
        if given is not None and given != vocab_size:
            raise UserError(
                f"{source}: field 'arch.vocab_size' is {given} but the dataset's vocabulary has {vocab_size} ids"
            )
        fields["vocab_size"] = vocab_size
    config_cls, _ = head_classes(fields.get("name"))
    try:
        return config_cls.model_validate(fields)
    except ValidationError as e:
        raise validation_error(e, fields["name"], source) from None


def build_lm(arch: dict[str, Any], vocab_size: int | None, device: Any = "cpu", seed: int = 0) -> Any:
    """Build language-model head `arch["name"]` on `device` (seeded, as `build`)."""
    config = lm_config(arch, vocab_size)
    return build(config, {"vocab_size": config.vocab_size}, device, seed)


def flops_or_none(count: Callable[[], float], model_name: str) -> float | None:
    """Training FLOPs per step, or None for a model registered without its FLOP count: it still trains."""
    try:
        return count()
    except UserError as e:
        print(f"warning: {e}: training FLOPs are not logged for arch.name {model_name}", file=sys.stderr)
        return None
