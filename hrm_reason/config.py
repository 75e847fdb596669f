"""Run configuration: pydantic models loaded from YAML with `key=value` overrides.

Keys keep the names of the original HRM code (`data_path`, `global_batch_size`, `arch.H_cycles`, ...) so configs
migrate; an `all_config.yaml` written by the original code loads as it is. The resolved config saved in a run
directory is the single truth for reloading that run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator, model_validator

from hrm_reason.atomic import atomic_write_text
from hrm_reason.errors import UserError
from hrm_reason.models import registry
from hrm_reason.models.act import ACTConfig


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TrainConfig(StrictModel):
    arch: SerializeAsAny[ACTConfig] = Field(
        default_factory=lambda: registry.arch_config({"name": "hrm"}),
        description="the puzzle model, validated by the config of the model arch.name picks (hrm_reason/models/)",
    )
    data_path: str = "data/sudoku-extreme-1k-aug-1000"
    run_dir: str | None = Field(None, description="None: runs/<dataset name>-<arch>-seed<seed>")

    global_batch_size: int = Field(768, gt=0)
    epochs: int = Field(100000, gt=0)
    eval_interval: int = Field(10000, gt=0)
    max_steps: int | None = Field(None, gt=0, description="cap on optimizer steps; the LR schedule spans the capped run")

    lr: float = Field(1e-4, gt=0)
    lr_min_ratio: float = Field(1.0, ge=0, le=1)
    lr_warmup_steps: int = Field(2000, ge=0)
    beta1: float = Field(0.9, ge=0, lt=1)
    beta2: float = Field(0.95, ge=0, lt=1)
    weight_decay: float = Field(0.1, ge=0)
    puzzle_emb_lr: float = Field(1e-2, ge=0)
    puzzle_emb_weight_decay: float = Field(0.1, ge=0)

    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    eval_global_batch_size: int | None = Field(None, gt=0, description="None: global_batch_size")
    eval_max_examples: int | None = Field(None, gt=0, description="evaluate on the first N test examples only")
    checkpoint_every_eval: bool = True
    checkpoint_every_steps: int | None = Field(None, gt=0, description="also checkpoint every N steps (long iterations)")
    logger: Literal["none", "wandb", "tensorboard"] = "none"
    compile: bool = Field(False, description="torch.compile the recurrent core (first steps pay the compile time)")
    ema: float | None = Field(
        None, gt=0, lt=1, description="decay of an exponential moving average of the weights, updated after every step; "
        "evaluation and checkpoints use the average (TRM: 0.999); None: off"
    )
    max_seconds: float | None = Field(
        None, gt=0, description="stop after this many seconds of training steps (evaluations not counted), then evaluate "
        "and checkpoint: equal-time comparisons (see budget_clock, schedule_over)"
    )
    budget_clock: Literal["wall", "cpu"] = Field(
        "wall", description="what max_seconds and train_seconds measure: wall-clock time, or this process's CPU time "
        "(a fair budget when runs share a machine with other work; CPU runs only: GPU time is not CPU time)"
    )
    schedule_over: Literal["steps", "seconds"] = Field(
        "steps", description="what the LR schedule spans: the step budget, or (with max_seconds) the time budget, so "
        "that every run of an equal-time comparison completes its decay however fast its steps are"
    )

    # Accepted so that the original code's all_config.yaml loads; not used.
    project_name: str | None = None
    run_name: str | None = None
    checkpoint_path: str | None = None
    eval_save_outputs: list[str] = []

    @field_validator("arch", mode="before")
    @classmethod
    def _model_config(cls, v: Any) -> Any:
        return registry.arch_config(v, want="act")

    @model_validator(mode="after")
    def _intervals(self) -> TrainConfig:
        if self.epochs % self.eval_interval:
            raise ValueError(f"eval_interval {self.eval_interval} must divide epochs {self.epochs}")
        if self.schedule_over == "seconds" and self.max_seconds is None:
            raise ValueError("schedule_over=seconds needs max_seconds")
        return self


def _set_dotted(d: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for key in parents:
        child = d.setdefault(key, {})
        if not isinstance(child, dict):
            raise UserError(f"override '{dotted}': '{key}' is not a section")
        d = child
    d[leaf] = value


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UserError(f"override '{item}': expected key=value, e.g. arch.hidden_size=256")
        try:
            value = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError:
            value = raw
        _set_dotted(out, key.strip(), value)
    return out


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in extra.items():
        merged[k] = _merge(merged[k], v) if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
    return merged


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UserError(f"config file {path} not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of config keys at the top level")
    return data


def validation_message(e: ValidationError, source: str) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
    where = f"field '{loc}'" if loc else "config"
    given = f" (got {err['input']!r})" if err["type"] != "extra_forbidden" and loc and not isinstance(err.get("input"), dict) else ""
    return f"{source}: {where}: {msg}{given}"


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    data = read_yaml(Path(path)) if path is not None else {}
    # Hydra leftovers of original configs are not settings.
    data.pop("defaults", None)
    data.pop("hydra", None)
    data = _merge(data, parse_overrides(overrides or []))
    source = f"{path}" + (" with overrides" if overrides else "") if path is not None else "overrides"
    data["arch"] = registry.arch_config(data.get("arch", {}), source, want="act")
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, source)) from None


def save_config(config: TrainConfig, path: Path) -> None:
    atomic_write_text(path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
