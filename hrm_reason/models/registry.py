"""The one place that knows every model and family: `arch.name` -> the model's module, a family's name -> the
family's module, each a real import. A model module exports `SPEC` (models/spec.py `ModelSpec`: its config class,
model class, family, FLOP count, checkpoint adapter and the facts the test suite needs); a family module exports
`FAMILY` (`FamilySpec`). The family's training task, evaluator and loader are held by the layers that use them
(train/loop.py `TASKS`, evaluate/run.py `EVALUATORS`, load.py `LOADERS`), so every import points down.

Adding a model is one file (its config, its model, its FLOP count, its `SPEC`) plus one line in `models()`. The
modules are imported on the first call, not with this module: `config.py` imports the registry, and `hrm train --help`
reads the config without torch. A model module imports at its top only what the package requires; an optional package
is imported where it is used (as models/lm/gated_delta.py does for fla), so that without it the model fails in one
line when asked for it, and every other model is unaffected.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from hrm_reason.errors import UserError, validation_message
from hrm_reason.models.spec import Family, FamilySpec, ModelSpec


@functools.cache
def models() -> dict[str, ModuleType]:
    """Every model, `arch.name` -> its module (which exports `SPEC`), in the order error messages list them."""
    from hrm_reason.models import hrm, transformer, trm, unitf
    from hrm_reason.models.lm import ham, hrm_lm, hrm_text, transformer_lm, unitf_lm

    return {
        "hrm": hrm,
        "transformer": transformer,
        "unitf": unitf,
        "trm": trm,
        "hrm_lm": hrm_lm,
        "unitf_lm": unitf_lm,
        "transformer_lm": transformer_lm,
        "hrm_text": hrm_text,
        "ham_lm": ham,
    }


@functools.cache
def families() -> dict[Family, ModuleType]:
    """Every family -> its module (which exports `FAMILY`): the ACT loop's, the language-model heads' base."""
    from hrm_reason.models import act
    from hrm_reason.models.lm import head

    return {"act": act, "lm": head}


# The original HRM code's arch names, accepted so that its all_config.yaml loads.
ORIGINAL_NAMES = {"hrm.hrm_act_v1@HierarchicalReasoningModel_ACTV1": "hrm"}


def canonical_name(name: Any) -> Any:
    return ORIGINAL_NAMES.get(name, name) if isinstance(name, str) else name


def model_spec(name: Any, want: Family | None = None) -> ModelSpec:
    """The spec of model `name` (of family `want` when given); an unknown name is a one-line error listing the
    known ones."""
    name = canonical_name(name)
    module = models().get(name) if isinstance(name, str) else None
    spec: ModelSpec | None = module.SPEC if module is not None else None
    if spec is None or (want is not None and spec.family != want):
        names = [n for n, m in models().items() if want is None or m.SPEC.family == want]
        what = {"lm": "language-model head", "act": "puzzle model", None: "model"}[want]
        raise UserError(f"field 'arch.name': unknown {what} {name!r} (expected one of {', '.join(names)})")
    return spec


def family(name: Any) -> Family | None:
    """ "act" or "lm" for a registered name, None for anything else: the one "is this a language model" test."""
    module = models().get(canonical_name(name)) if isinstance(name, str) else None
    return module.SPEC.family if module is not None else None


def is_lm_arch(name: Any) -> bool:
    return family(name) == "lm"


def family_spec(family: Family) -> FamilySpec:
    """What the code above the models may ask of `family` (segments, generates)."""
    return families()[family].FAMILY


def model_classes(name: Any, want: Family | None = None) -> tuple[type[BaseModel], type]:
    """The config and model classes of `name` (of family `want` when given)."""
    spec = model_spec(name, want)
    return spec.config, spec.model


def head_classes(name: Any) -> tuple[type[BaseModel], type]:
    return model_classes(name, "lm")


def flop_count(config: Any, seq_len: int | None = None) -> Any:
    """The model's FLOP count from its (resolved) config: flops.ACTFlops per example, or flops.LMFlops per token of
    windows of `seq_len` tokens."""
    spec = model_spec(config.name)
    if spec.flops is None:
        raise UserError(f"arch.name {config.name}: the model declares no FLOP count")
    return spec.flops(config) if spec.family == "act" else spec.flops(config, seq_len)


def checkpoint_adapter(name: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The function that renames a foreign checkpoint's tensors (the original HRM and TRM code's, transformers') to
    ours for model `name`; a model without one, or a name the registry does not know, takes HRM's, whose names are
    those of the shared puzzle core."""
    module = models().get(name) if isinstance(name, str) else None
    adapter = module.SPEC.adapter if module is not None else None
    return adapter if adapter is not None else models()["hrm"].SPEC.adapter


def unknown_key_message(name: str, key: str) -> str:
    """'q_target is an option of hrm, transformer, unitf, not trm': which models read the key the user gave."""
    owners = [other for other, module in models().items() if key in module.SPEC.config.model_fields]
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
        model_spec(getattr(arch, "name", None), want)
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
    """Build language-model head `arch["name"]` on `device` (seeded, as `build`). A head that draws its weights from
    a generator of its own (an `arch.seed` field) takes `seed` there too, unless `arch` sets it: so a run's seed
    changes every head's initial weights."""
    config_cls, _ = head_classes(arch.get("name"))
    if "seed" in config_cls.model_fields and "seed" not in arch:
        arch = {**arch, "seed": seed}
    config = lm_config(arch, vocab_size)
    return build(config, {"vocab_size": config.vocab_size}, device, seed)


def flops_or_none(count: Callable[[], float], model_name: str) -> float | None:
    """Training FLOPs per step, or None for a model registered without its FLOP count: it still trains."""
    try:
        return count()
    except UserError as e:
        print(f"warning: {e}: training FLOPs are not logged for arch.name {model_name}", file=sys.stderr)
        return None
