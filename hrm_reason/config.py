"""Run configuration: pydantic models loaded from YAML with `key=value` overrides.

Keys keep the names of the original HRM code (`data_path`, `global_batch_size`, `arch.H_cycles`, ...) so configs
migrate; an `all_config.yaml` written by the original code loads as it is. The resolved config saved in a run
directory is the single truth for reloading that run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hrm_reason.atomic import atomic_write_text
from hrm_reason.errors import UserError

ORIGINAL_ARCH_NAMES = {"hrm.hrm_act_v1@HierarchicalReasoningModel_ACTV1": "hrm"}


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LossConfig(StrictModel):
    name: Literal["ACTLossHead", "losses@ACTLossHead"] = "ACTLossHead"
    loss_type: Literal["stablemax_cross_entropy", "softmax_cross_entropy"] = "stablemax_cross_entropy"


class ArchConfig(StrictModel):
    """One flat section for every model; each field says which models read it (the others ignore it)."""

    name: Literal["hrm", "transformer", "unitf", "trm"] = Field(
        "hrm", description="hrm; transformer (HRM's blocks stacked, one pass per segment); unitf (one block applied "
        "unitf_steps times); trm (the Tiny Recursive Model). See hrm_reason/models/"
    )
    hidden_size: int = Field(512, gt=0)
    num_heads: int = Field(8, gt=0)
    expansion: float = Field(4.0, gt=0)
    H_cycles: int = Field(2, ge=1, description="hrm: H updates per segment; trm: recursions T (all but the last without gradient)")
    L_cycles: int = Field(2, ge=1, description="hrm: L updates per H update; trm: z updates n per recursion")
    H_layers: int = Field(4, ge=1, description="hrm: blocks of the H module")
    L_layers: int = Field(4, ge=1, description="hrm: blocks of the L module; trm: blocks of its one network")
    num_layers: int | None = Field(None, ge=1, description="transformer: blocks stacked; None: H_layers + L_layers (HRM's blocks)")
    unitf_steps: int = Field(8, ge=1, description="unitf: applications of its one shared block per segment (the HRM-LM paper's M)")
    unitf_grad_steps: int | None = Field(
        None, ge=1, description="unitf: only the last K applications carry gradient (the HRM-LM paper's K-step window); None: all"
    )
    mlp_t: bool = Field(False, description="trm: a SwiGLU across positions in place of attention (TRM-MLP, fixed-size grids)")
    puzzle_emb_len: int | None = Field(
        None, ge=0, description="transformer/unitf/trm: prefix positions; the puzzle embedding fills the first, the others "
        "are zero 'registers' (TRM: 16); None: ceil(puzzle_emb_ndim / hidden_size), as hrm"
    )
    pos_encodings: Literal["rope", "learned", "none"] = Field("rope", description="none: not for hrm")
    puzzle_emb_ndim: int | None = Field(None, ge=0, description="None: hidden_size")
    rms_norm_eps: float = Field(1e-5, gt=0)
    rope_theta: float = Field(10000.0, gt=0)
    halt_max_steps: int = Field(16, ge=1)
    halt_exploration_prob: float = Field(0.1, ge=0, le=1)
    q_target: Literal["extra_forward", "next_segment"] = Field(
        "extra_forward",
        description="extra_forward: the original's extra no-grad segment for the Q-continue target; next_segment: the "
        "target comes one step later from the next segment's own forward (about a third less compute per step)",
    )
    forward_dtype: Literal["auto", "float32", "bfloat16"] = Field("auto", description="auto: bf16 on CUDA, fp32 on CPU")
    loss: LossConfig = LossConfig()

    @field_validator("name", mode="before")
    @classmethod
    def _original_name(cls, v: Any) -> Any:
        return ORIGINAL_ARCH_NAMES.get(v, v)

    @model_validator(mode="after")
    def _heads_divide(self) -> ArchConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} must be divisible by num_heads {self.num_heads}")
        return self

    @model_validator(mode="after")
    def _options_of_the_model(self) -> ArchConfig:
        """Options that would be silently ignored by the chosen model are errors."""
        if self.name == "hrm" and (self.pos_encodings == "none" or self.puzzle_emb_len is not None):
            raise ValueError("pos_encodings=none and puzzle_emb_len are options of transformer, unitf and trm, not hrm")
        if self.mlp_t and self.name != "trm":
            raise ValueError(f"mlp_t is an option of trm, not {self.name}")
        if self.mlp_t and self.pos_encodings == "rope":
            raise ValueError("mlp_t has no attention for rope to act on: use pos_encodings none (as TRM-MLP) or learned")
        if self.unitf_grad_steps is not None and self.unitf_grad_steps > self.unitf_steps:
            raise ValueError(f"unitf_grad_steps {self.unitf_grad_steps} exceeds unitf_steps {self.unitf_steps}")
        ndim = self.hidden_size if self.puzzle_emb_ndim is None else self.puzzle_emb_ndim
        if self.puzzle_emb_len is not None and self.puzzle_emb_len * self.hidden_size < ndim:
            raise ValueError(f"puzzle_emb_len {self.puzzle_emb_len} positions of hidden_size {self.hidden_size} cannot hold puzzle_emb_ndim {ndim}")
        return self


class TrainConfig(StrictModel):
    arch: ArchConfig = ArchConfig()
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
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, source)) from None


def save_config(config: TrainConfig, path: Path) -> None:
    atomic_write_text(path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
