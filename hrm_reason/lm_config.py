"""Run configuration of the language-model heads: a pydantic model loaded from YAML with `key=value` overrides.

It parallels `hrm_reason.config.TrainConfig` (same loader helpers, same key names where the meaning is the same) but
counts optimizer steps instead of epochs, as LM training does. `arch` is the head's own config (validated by the
head's pydantic class once the dataset's vocabulary is known; `arch.name` picks the head). A config is an LM config
when its `arch.name` is a registered LM head; `hrm train` and `hrm eval` dispatch on that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from hrm_reason.atomic import atomic_write_text
from hrm_reason.config import StrictModel, TrainConfig, _merge, load_config, parse_overrides, read_yaml, validation_message
from hrm_reason.errors import UserError
from hrm_reason.models.registry import MODELS, is_lm_arch, lm_config


class LMTrainConfig(StrictModel):
    arch: dict[str, Any] = Field(description="the head's config: name (hrm_lm, unitf_lm, hrm_text, ham_lm) and its fields")
    data_path: str = Field("data/text-stdlib", description="a text dataset (hrm build-data text), or a puzzle dataset "
                           "(hrm build-data sudoku/maze/arc: PrefixLM on puzzles, see lm_puzzle.py)")
    run_dir: str | None = Field(None, description="None: runs/<dataset name>-<arch>-seed<seed>")

    seq_len: int = Field(256, gt=0, description="tokens predicted per training window (windows hold seq_len + 1); "
                         "not used with a puzzle dataset, whose sequences are 2 * its seq_len + 1 long")
    global_batch_size: int = Field(16, gt=0, description="windows per optimizer step")
    max_steps: int = Field(1000, gt=0, description="optimizer steps; the LR schedule spans them")
    eval_interval: int = Field(250, gt=0, description="validate (and checkpoint) every N steps and at the end")
    eval_max_tokens: int | None = Field(65536, gt=0, description="validation tokens per periodic evaluation; None: the whole val split")
    eval_batch_size: int | None = Field(None, gt=0, description="None: global_batch_size")
    eval_max_examples: int | None = Field(None, gt=0, description="puzzle datasets: test examples (per set) per periodic evaluation; None: all")

    optimizer: Literal["adam_atan2", "adamw"] = Field("adam_atan2", description="adam_atan2 (HRM's); adamw (the HRM-LM paper's)")
    lr: float = Field(1e-3, gt=0)
    lr_min_ratio: float = Field(0.1, ge=0, le=1)
    lr_warmup_steps: int = Field(100, ge=0)
    beta1: float = Field(0.9, ge=0, lt=1)
    beta2: float = Field(0.95, ge=0, lt=1)
    weight_decay: float = Field(0.1, ge=0)
    grad_clip: float | None = Field(1.0, gt=0, description="max global gradient norm; None: no clipping")

    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    forward_dtype: Literal["auto", "float32", "bfloat16"] = Field("auto", description="auto/bfloat16: bf16 autocast on CUDA; a CPU always computes in fp32")
    checkpoint_every_steps: int | None = Field(None, gt=0, description="also checkpoint every N steps")
    max_seconds: float | None = Field(None, gt=0, description="stop after this many seconds of training steps, then validate and checkpoint")
    logger: Literal["none", "wandb", "tensorboard"] = "none"
    project_name: str | None = None
    run_name: str | None = None

    @field_validator("arch")
    @classmethod
    def _known_head(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not is_lm_arch(v.get("name")):
            raise ValueError(f"arch.name {v.get('name')!r} is not a language-model head (expected one of {', '.join(n for n in MODELS if is_lm_arch(n))})")
        return v

    @model_validator(mode="after")
    def _warmup_fits(self) -> LMTrainConfig:
        if self.lr_warmup_steps > self.max_steps:
            raise ValueError(f"lr_warmup_steps {self.lr_warmup_steps} exceeds max_steps {self.max_steps}")
        return self


def _read(path: str | Path | None, overrides: list[str] | None) -> dict[str, Any]:
    data = read_yaml(Path(path)) if path is not None else {}
    return _merge(data, parse_overrides(overrides or []))


def is_lm_config(path: str | Path | None, overrides: list[str] | None = None) -> bool:
    """True when the config (with overrides) names a language-model head in `arch.name`."""
    arch = _read(path, overrides).get("arch")
    return isinstance(arch, dict) and is_lm_arch(arch.get("name"))


def load_lm_config(path: str | Path | None, overrides: list[str] | None = None, vocab_size: int | None = None) -> LMTrainConfig:
    """Load and validate; the head's own fields are checked too (with `vocab_size`, or the config's, or a stand-in)."""
    data = _read(path, overrides)
    source = f"{path}" + (" with overrides" if overrides else "") if path is not None else "overrides"
    try:
        config = LMTrainConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, source)) from None
    lm_config(config.arch, vocab_size if vocab_size is not None else config.arch.get("vocab_size", 256), source)
    return config


def load_any_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig | LMTrainConfig:
    """A puzzle TrainConfig or an LMTrainConfig, whichever the file's `arch.name` asks for."""
    return load_lm_config(path, overrides) if is_lm_config(path, overrides) else load_config(path, overrides)


def save_lm_config(config: LMTrainConfig, path: Path) -> None:
    atomic_write_text(path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
