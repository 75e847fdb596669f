"""Read and write `transformers` HrmText checkpoint directories (config.json + model.safetensors).

The tensor names, split or in the legacy fused layout that transformers 5.23 writes, are mapped in hrm_text_names.py.
Writing is atomic: a temporary sibling directory is renamed into place, so a reader never sees half a checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError
from safetensors.torch import save_file

from hrm_reason.atomic import atomic_directory
from hrm_reason.errors import UserError
from hrm_reason.models.lm.hrm_text import HRMText, HRMTextConfig
from hrm_reason.models.lm.hrm_text_names import BASE_PREFIX, WEIGHTS_FILE, fuse, our_names
from hrm_reason.readers import read_json, read_safetensors

CONFIG_FILE = "config.json"
# config.json keys that every transformers config carries and that do not change the network.
GENERIC_KEYS = {
    "architectures",
    "model_type",
    "transformers_version",
    "dtype",
    "torch_dtype",
    "_name_or_path",
    "output_hidden_states",
    "return_dict",
    "chunk_size_feed_forward",
    "is_encoder_decoder",
    "id2label",
    "label2id",
    "problem_type",
    "output_attentions",
    "_attn_implementation_autoset",
}


def config_from_hf_dict(raw: dict[str, Any], source: str = CONFIG_FILE) -> HRMTextConfig:
    """HRMTextConfig from a transformers config.json dict; unknown architecture fields are an error."""
    if raw.get("model_type") != "hrm_text":
        raise UserError(f"{source}: model_type must be 'hrm_text', got {raw.get('model_type')!r}")
    raw = {k: v for k, v in raw.items() if k not in GENERIC_KEYS}
    if "rope_theta" in raw:  # pre-rope_parameters configs kept the base at the top level
        theta = raw.pop("rope_theta")
        raw.setdefault("rope_parameters", {"rope_theta": theta, "rope_type": "default"})
    raw.pop("L_bp_steps", None)  # upstream training budget, not read by transformers either
    known = set(HRMTextConfig.model_fields) - {"name"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise UserError(f"{source}: unsupported HrmText config field(s) {', '.join(unknown)}")
    try:
        return HRMTextConfig(**raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "config"
        raise UserError(f"{source}: field {where}: {err['msg']}") from None


def config_to_hf_dict(config: HRMTextConfig, dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    raw = config.model_dump(exclude={"name"})
    raw.update(architectures=["HrmTextForCausalLM"], model_type="hrm_text", dtype=str(dtype).removeprefix("torch."))
    return dict(sorted(raw.items()))


def hf_state_dict_to_ours(
    hf: dict[str, torch.Tensor], model: HRMText, source: str = WEIGHTS_FILE
) -> dict[str, torch.Tensor]:
    """transformers tensor names (split or legacy fused) -> our state_dict, checking names and shapes."""
    renamed = our_names(hf, source)
    expected = model.state_dict()
    if model.config.tie_word_embeddings:
        renamed.pop("lm_head.weight", None)
        expected = {k: v for k, v in expected.items() if k != "lm_head.weight"}

    def names(keys: list[str]) -> str:
        return ", ".join(keys[:5]) + (" ..." if len(keys) > 5 else "")

    missing = sorted(k if k == "lm_head.weight" else BASE_PREFIX + k for k in set(expected) - set(renamed))
    unexpected = sorted({renamed[k][1] for k in set(renamed) - set(expected)})
    if missing:
        raise UserError(f"{source}: missing tensor(s) {names(missing)}")
    if unexpected:
        raise UserError(f"{source}: unexpected tensor(s) {names(unexpected)}")
    for key, (t, origin) in renamed.items():
        if t.shape != expected[key].shape:
            raise UserError(
                f"{source}: tensor {origin} gives {key} the shape {tuple(t.shape)}, the config needs "
                f"{tuple(expected[key].shape)}"
            )
    return {k: t for k, (t, _) in renamed.items()}


def our_state_dict_to_hf(model: HRMText, fused: bool = True) -> dict[str, torch.Tensor]:
    ours = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        ours.pop("lm_head.weight", None)
    hf = {(k if k == "lm_head.weight" else BASE_PREFIX + k): v for k, v in ours.items()}
    return fuse(hf) if fused else hf


def load_hf_hrm_text(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> HRMText:
    """An HRMText with the weights of a transformers HrmText checkpoint directory (fp32 or the stored dtype)."""
    path = Path(path)
    config_path, weights_path = path / CONFIG_FILE, path / WEIGHTS_FILE
    if not config_path.is_file():
        raise UserError(f"{config_path} not found: not a transformers checkpoint directory")
    if not weights_path.is_file():
        raise UserError(f"{weights_path} not found (sharded or .bin checkpoints are not supported)")
    raw = read_json(config_path, None)
    if not isinstance(raw, dict):
        raise UserError(f"{config_path}: expected a JSON object (a transformers config)")
    config = config_from_hf_dict(raw, str(config_path))
    model = HRMText(config)
    state = hf_state_dict_to_ours(read_safetensors(weights_path)[0], model, str(weights_path))
    dtype = state["embed_tokens.weight"].dtype
    model.to(device=map_location, dtype=dtype)
    model.load_state_dict(state, strict=not config.tie_word_embeddings)
    return model


def save_hf_hrm_text(model: HRMText, path: str | os.PathLike, fused: bool = True, overwrite: bool = False) -> None:
    """Write `model` as a transformers HrmText checkpoint directory that HrmTextForCausalLM.from_pretrained loads."""
    if not isinstance(model, HRMText):
        raise UserError(f"only hrm_text models convert to a transformers HrmText directory, not {type(model).__name__}")
    path = Path(path)
    if path.exists() and not overwrite:
        raise UserError(f"{path} already exists (pass overwrite to replace it)")
    tensors = our_state_dict_to_hf(model, fused=fused)
    dtype = next(iter(tensors.values())).dtype
    with atomic_directory(path, overwrite=overwrite) as tmp:
        (tmp / CONFIG_FILE).write_text(json.dumps(config_to_hf_dict(model.config, dtype), indent=2) + "\n")
        save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
