"""`hrm_reason.load(path)`: the one way from a run directory, a checkpoint or a `transformers` HrmText directory to a
model; `load_run` also gives the run's config and the model family, for evaluation and generation.

- a `transformers` HrmText directory (config.json with model_type "hrm_text" + model.safetensors) -> our HRMText;
- a run directory, checkpoint directory or weights file of an LM head -> that head;
- the same of an ACT puzzle model (or an original HRM checkpoint with its all_config.yaml) -> that model; without its
  dataset on disk, the shapes come from the weights' header.
The model comes back in eval mode. An LM head called with `input_ids` (and optional `token_type_ids`) returns an
output whose `.logits` is (batch, seq, vocab), as a `transformers` causal LM does. Each family's loader is in `LOADERS`
(keyed by the family's name) and has one signature, so `load_run` never branches on the family.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hrm_reason.errors import UserError
from hrm_reason.hub import resolve_checkpoint

# `import hrm_reason` (and so `hrm --help`, through cli.py's `hrm_reason.errors`) imports this module: the imports
# that pull in torch (checkpoint, data, models: ~1 s) or pydantic (config, models.registry: ~0.1 s) stay inside the
# functions, so that `hrm --help` stays at ~0.2 s.
if TYPE_CHECKING:
    from collections.abc import Callable

    from torch import nn

    from hrm_reason.config import Family, TrainConfig


def is_hf_hrm_text(path: Path) -> bool:
    """A `transformers` checkpoint directory of HrmText (its config.json says model_type hrm_text)."""
    cfg = path / "config.json"
    if not (path.is_dir() and cfg.is_file()):
        return False
    try:
        return json.loads(cfg.read_text()).get("model_type") == "hrm_text"
    except (ValueError, RecursionError, AttributeError, OSError):  # bad JSON or UTF-8 (ValueErrors): not HrmText
        return False


def run_config_path(ckpt: Path) -> Path | None:
    """The config of the run a checkpoint belongs to (run/checkpoints/step_N), beside it, or the original code's
    all_config.yaml beside the weights file."""
    base = ckpt if ckpt.is_dir() else ckpt.parent
    for candidate in (
        base.parent.parent / "config.yaml",
        base / "config.yaml",
        base.parent / "config.yaml",
        base / "all_config.yaml",
    ):
        if candidate.is_file():
            return candidate
    return None


def _no_config(ckpt: Path) -> UserError:
    return UserError(f"{ckpt}: no config.yaml or all_config.yaml found beside the checkpoint; pass --config FILE")


def run_config(path: Path, config_path: Path | None = None) -> TrainConfig:
    """The config of the run or checkpoint at `path` (or `config_path`), as a one-line error when there is none."""
    from hrm_reason.checkpoint import find_checkpoint
    from hrm_reason.config import load_config

    ckpt = find_checkpoint(resolve_checkpoint(path))
    cfg_path = config_path or run_config_path(ckpt)
    if cfg_path is None:
        raise _no_config(ckpt)
    return load_config(cfg_path)


@dataclass
class LoadedRun:
    model: nn.Module
    config: TrainConfig | None  # the run's config; None for a transformers directory or a bare LM checkpoint
    checkpoint: Path  # the checkpoint directory or weights file (the directory of a transformers checkpoint)
    family: Family


def load_run(
    path: str | Path, device: Any = "cpu", config_path: Path | None = None, data: Path | None = None
) -> LoadedRun:
    """The model at `path` (or at the Hugging Face repository `owner/name` it names, hrm_reason.hub) on `device`
    (eval mode) with its run config; `config_path` and `data` replace the run's config and dataset (an original HRM
    checkpoint outside a run needs its all_config.yaml)."""
    import torch

    from hrm_reason.checkpoint import find_checkpoint, saved_model_config
    from hrm_reason.config import family_of, load_config

    path, device = resolve_checkpoint(path), torch.device(device)
    if not path.exists():
        raise UserError(f"{path}: no such checkpoint, run directory or transformers directory")
    if is_hf_hrm_text(path):  # the converter's module only when asked for
        from hrm_reason.models.lm.hrm_text_convert import load_hf_hrm_text

        return LoadedRun(load_hf_hrm_text(path).to(device).eval(), None, path, "lm")
    ckpt = find_checkpoint(path)
    cfg_path = config_path or run_config_path(ckpt)
    config = load_config(cfg_path) if cfg_path is not None else None
    # The family: the run config's model, else the one named in the weights' header (an LM checkpoint outside a run).
    family = config.family if config is not None else family_of(saved_model_config(ckpt) or {})
    model = LOADERS[family](ckpt, config, cfg_path, data, device)
    return LoadedRun(model.to(device).eval(), config, ckpt, family)


def puzzle_metadata(data_path: str | Path) -> Any:
    """The train split's metadata of a built puzzle dataset; None when `data_path` holds none."""
    from hrm_reason.data.puzzle import dataset_kind, load_split

    return load_split(data_path, "train").metadata if dataset_kind(data_path) == "puzzle" else None


def load(path: str | Path, device: Any = "cpu") -> Any:
    """Load the model stored at `path` onto `device` (eval mode)."""
    return load_run(path, device).model


def load_lm_model(
    ckpt: Path, config: TrainConfig | None, config_path: Path | None, data: Path | None, device: Any
) -> nn.Module:
    """A language-model head, named by its weights' header or else its run config (which must agree); `data` is
    not needed, the vocabulary is in the head's config."""
    from hrm_reason.checkpoint import load_weights, read_weights
    from hrm_reason.config import family_of
    from hrm_reason.models.registry import build_lm, family_spec

    weights, saved = read_weights(ckpt)
    arch = saved if saved is not None else (config.arch if config is not None else None)
    if arch is None or not family_spec(family_of(arch)).generates:
        raise UserError(f"{ckpt}: not a language-model checkpoint (no LM head named in its weights or config.yaml)")
    if config is not None and config.model_name != arch.get("name"):
        raise UserError(f"{ckpt}: weights are of {arch.get('name')} but {config_path} names {config.model_name}")
    model = build_lm(arch, None, device, 0)
    load_weights(model, weights, ckpt)
    return model


def load_act_model(
    ckpt: Path, config: TrainConfig | None, config_path: Path | None, data: Path | None, device: Any
) -> nn.Module:
    """An ACT puzzle model, shaped by its dataset's metadata, or (dataset not on disk, none given) by the weights'
    header (seq_len, vocab_size, num_puzzle_identifiers are fields of every puzzle model's config). It needs its run
    config: the weights' header alone does not say how the model was trained."""
    from hrm_reason.checkpoint import load_checkpoint, saved_model_config
    from hrm_reason.data.puzzle import PuzzleDatasetMetadata, dataset_kind, load_split
    from hrm_reason.models.registry import build_model

    if config is None:
        raise _no_config(ckpt)
    if data is not None or dataset_kind(config.data_path) == "puzzle":
        meta = load_split(data if data is not None else config.data_path, "test").metadata
    else:
        saved = saved_model_config(ckpt)
        if saved is None or not all(k in saved for k in ("seq_len", "vocab_size", "num_puzzle_identifiers")):
            raise UserError(
                f"{ckpt}: its dataset {config.data_path} is not on disk and the weights do not record the model's shapes"
            )
        meta = PuzzleDatasetMetadata.of_shape(saved["seq_len"], saved["vocab_size"], saved["num_puzzle_identifiers"])
    model = build_model(config.arch, meta, device, config.seed)
    load_checkpoint(model, ckpt)
    return model


# Each family's loader, one signature: (checkpoint, run config, its path, dataset, device) -> the model with its weights.
LOADERS: dict[Family, Callable[..., nn.Module]] = {"act": load_act_model, "lm": load_lm_model}
