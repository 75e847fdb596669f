"""The language-model heads by name: `arch.name` -> (module, config class, model class), imported on first use.

Importing lazily keeps `hrm --help` fast and lets the registry list a head whose file is not there yet (or that needs
an optional package): naming it gives a one-line error instead of breaking every other head.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from pydantic import BaseModel, ValidationError
from torch import nn

from hrm_reason.config import validation_message
from hrm_reason.errors import UserError

LM_HEADS: dict[str, tuple[str, str, str]] = {
    "hrm_lm": ("hrm_reason.models.lm.hrm_lm", "HRMLMConfig", "HRMLM"),
    "unitf_lm": ("hrm_reason.models.lm.unitf_lm", "UniTFLMConfig", "UniTFLM"),
    "hrm_text": ("hrm_reason.models.lm.hrm_text", "HRMTextConfig", "HRMText"),
    "ham_lm": ("hrm_reason.models.lm.ham", "HAMLMConfig", "HAMLM"),
}


def is_lm_arch(name: Any) -> bool:
    return isinstance(name, str) and name in LM_HEADS


def head_classes(name: str) -> tuple[type[BaseModel], type[nn.Module]]:
    """The config and model classes of head `name`."""
    if not is_lm_arch(name):
        raise UserError(f"field 'arch.name': unknown language-model head {name!r} (expected one of {', '.join(LM_HEADS)})")
    module_name, config_name, model_name = LM_HEADS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name == module_name:
            raise UserError(f"arch.name {name}: the head's module {module_name} is not available in this installation") from None
        raise UserError(f"arch.name {name}: its module needs the package '{e.name}', which is not installed") from None
    try:
        return getattr(module, config_name), getattr(module, model_name)
    except AttributeError as e:
        raise UserError(f"arch.name {name}: {module_name} does not define {e.name}") from None


def lm_config(arch: dict[str, Any], vocab_size: int | None, source: str = "config") -> BaseModel:
    """The head's validated config from an `arch` mapping; `vocab_size` comes from the dataset (a different value
    already in `arch` is an error, it would not fit the data)."""
    fields = dict(arch)
    if vocab_size is not None:
        given = fields.get("vocab_size")
        if given is not None and given != vocab_size:
            raise UserError(f"{source}: field 'arch.vocab_size' is {given} but the dataset's vocabulary has {vocab_size} ids")
        fields["vocab_size"] = vocab_size
    config_cls, _ = head_classes(fields.get("name"))
    try:
        return config_cls.model_validate(fields)
    except ValidationError as e:
        msg = validation_message(e, source)
        raise UserError(msg.replace("field '", "field 'arch.", 1)) from None


def build_lm(arch: dict[str, Any], vocab_size: int | None, device: torch.device | str = "cpu", seed: int = 0) -> nn.Module:
    """Build head `arch["name"]` on `device` with a seeded init that leaves the global RNG as it was."""
    config = lm_config(arch, vocab_size)
    _, model_cls = head_classes(arch["name"])
    device = torch.device(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        with device:
            return model_cls(config)
