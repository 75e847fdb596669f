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


Family = Literal["act", "lm"]

# What differs per family is a default, never a meaning: keys a config leaves out take these values.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "act": {"data_path": "data/sudoku-extreme-1k-aug-1000", "global_batch_size": 768, "epochs": 100000,
            "eval_interval": 10000, "lr": 1e-4, "lr_min_ratio": 1.0, "lr_warmup_steps": 2000},
    "lm": {"data_path": "data/text-stdlib", "seq_len": 256, "global_batch_size": 16, "max_steps": 1000,
           "eval_every_steps": 250, "eval_max_tokens": 65536, "lr": 1e-3, "lr_min_ratio": 0.1, "lr_warmup_steps": 100,
           "grad_clip": 1.0},
}
# Keys of LM run configs written before the one run config (eval_interval counted steps there), read as today's.
LEGACY_LM_KEYS = {"eval_interval": "eval_every_steps", "eval_batch_size": "eval_global_batch_size"}


def family_of(arch: Any) -> Family:
    """The model family an `arch` section (a mapping or a validated config) names: lm for a language-model head."""
    from hrm_reason.models.lm.registry import is_lm_arch

    name = arch.get("name") if isinstance(arch, dict) else getattr(arch, "name", None)
    return "lm" if is_lm_arch(name) else "act"


def validate_arch(arch: Any, source: str = "config") -> Any:
    """The `arch` section validated by the chosen model's own config: an ArchConfig for the ACT puzzle models, the
    head's mapping (checked against its config with a stand-in vocabulary until the dataset's is known) for LM heads."""
    if isinstance(arch, ArchConfig):
        return arch
    arch = dict(arch or {})
    if family_of(arch) == "lm":
        from hrm_reason.models.lm.registry import lm_config

        lm_config(arch, arch.get("vocab_size", 256), source)
        return arch
    try:
        return ArchConfig.model_validate(arch)
    except ValidationError as e:
        raise UserError(validation_message(e, source, prefix=("arch",))) from None


class TrainConfig(StrictModel):
    """The one run config of every model family: run, data, optimizer and schedule fields; `arch` is the model's own
    section. Every key means the same for every family; a default may differ (FAMILY_DEFAULTS)."""

    arch: Any = Field(default_factory=ArchConfig, description="the model's config; arch.name picks the model")
    data_path: str = Field(description="a puzzle dataset (hrm build-data sudoku/maze/arc) or a text dataset (hrm "
                           "build-data text); LM heads on a puzzle dataset train PrefixLM on puzzles (lm_puzzle.py)")
    run_dir: str | None = Field(None, description="None: runs/<dataset name>-<arch>-seed<seed>")

    global_batch_size: int = Field(gt=0, description="examples (LM: windows) per optimizer step, over all processes")
    epochs: int | None = Field(None, gt=0, description="ACT puzzle models: passes over the training groups")
    eval_interval: int | None = Field(None, gt=0, description="ACT puzzle models: evaluate (and checkpoint) every N epochs")
    eval_every_steps: int | None = Field(None, gt=0, description="evaluate (and checkpoint) every N optimizer steps, and "
                                         "at the end of the run")
    max_steps: int | None = Field(None, gt=0, description="optimizer steps (a cap on those the epochs give); the LR "
                                  "schedule spans the run")
    seq_len: int | None = Field(None, gt=0, description="text datasets: tokens predicted per training window (windows "
                                "hold seq_len + 1); puzzle datasets fix their own")

    optimizer: Literal["adam_atan2", "adamw"] = Field("adam_atan2", description="adam_atan2 (HRM's); adamw (the HRM-LM paper's)")
    lr: float = Field(gt=0)
    lr_min_ratio: float = Field(ge=0, le=1)
    lr_warmup_steps: int = Field(ge=0)
    beta1: float = Field(0.9, ge=0, lt=1)
    beta2: float = Field(0.95, ge=0, lt=1)
    weight_decay: float = Field(0.1, ge=0)
    grad_clip: float | None = Field(None, gt=0, description="LM heads: max global gradient norm; None: no clipping")
    puzzle_emb_lr: float = Field(1e-2, ge=0)
    puzzle_emb_weight_decay: float = Field(0.1, ge=0)

    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    forward_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="the one precision policy: auto/bfloat16 compute in bf16 on CUDA (fp32 master weights); a "
        "CPU always computes in fp32"
    )
    eval_global_batch_size: int | None = Field(None, gt=0, description="None: global_batch_size")
    eval_max_examples: int | None = Field(None, gt=0, description="puzzle datasets: evaluate on the first N test examples (per set)")
    eval_max_tokens: int | None = Field(None, gt=0, description="text datasets: validation tokens per evaluation; None: all")
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

    project_name: str | None = None
    run_name: str | None = None
    # Accepted so that the original code's all_config.yaml loads; not used.
    checkpoint_path: str | None = None
    eval_save_outputs: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _family_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        family = family_of(data.get("arch"))
        if family == "lm":
            for old, new in LEGACY_LM_KEYS.items():
                if old in data and data[old] is None:
                    del data[old]
                elif old in data:
                    if data.get(new) is not None:
                        raise ValueError(f"{old} (an LM key before the one run config) and {new} are both given: keep {new}")
                    data[new] = data.pop(old)
        else:  # arch.forward_dtype (the puzzle models' name before) is the run's forward_dtype; the model follows it
            arch = data.get("arch")
            arch = arch.model_dump(exclude_unset=True) if isinstance(arch, ArchConfig) else dict(arch or {})
            given = arch.pop("forward_dtype", None)
            if given is not None and data.setdefault("forward_dtype", given) != given:
                raise ValueError(f"arch.forward_dtype {given} and forward_dtype {data['forward_dtype']} differ: give forward_dtype only")
            data["arch"] = {**arch, "forward_dtype": data.get("forward_dtype", "auto")}
        for key, value in FAMILY_DEFAULTS[family].items():
            data.setdefault(key, value)
        return data

    @field_validator("arch", mode="before")
    @classmethod
    def _arch(cls, v: Any) -> Any:
        return validate_arch(v)

    @property
    def family(self) -> Family:
        return family_of(self.arch)

    @property
    def model_name(self) -> str:
        return self.arch["name"] if isinstance(self.arch, dict) else self.arch.name

    @model_validator(mode="after")
    def _budgets(self) -> TrainConfig:
        if self.family == "act":
            if self.epochs is None or self.eval_interval is None:
                raise ValueError("ACT puzzle models need epochs and eval_interval")
            if self.epochs % self.eval_interval:
                raise ValueError(f"eval_interval {self.eval_interval} must divide epochs {self.epochs}")
        else:
            if self.epochs is not None:
                raise ValueError("epochs counts passes over a puzzle dataset for the ACT models; LM heads count max_steps")
            if self.max_steps is None:
                raise ValueError("LM heads need max_steps")
            if self.lr_warmup_steps > self.max_steps:
                raise ValueError(f"lr_warmup_steps {self.lr_warmup_steps} exceeds max_steps {self.max_steps}")
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


def validation_message(e: ValidationError, source: str, prefix: tuple[str, ...] = ()) -> str:
    """The first error as one line naming the field (`prefix` places a nested section's fields, e.g. arch)."""
    err = e.errors()[0]
    loc = ".".join(str(p) for p in (*prefix, *err["loc"]))
    msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
    where = f"field '{loc}'" if loc else "config"
    given = f" (got {err['input']!r})" if err["type"] != "extra_forbidden" and loc and not isinstance(err.get("input"), dict) else ""
    return f"{source}: {where}: {msg}{given}"


def read_config(path: str | Path | None, overrides: list[str] | None = None) -> dict[str, Any]:
    """The config file (if any) with `key=value` overrides applied, before validation."""
    data = read_yaml(Path(path)) if path is not None else {}
    # Hydra leftovers of original configs are not settings.
    data.pop("defaults", None)
    data.pop("hydra", None)
    return _merge(data, parse_overrides(overrides or []))


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Load and validate a run config of any model family (the original HRM all_config.yaml and the config.yaml of
    every run directory included); errors are one line naming the file and the field."""
    data = read_config(path, overrides)
    source = f"{path}" + (" with overrides" if overrides else "") if path is not None else "overrides"
    if "arch" in data:
        validate_arch(data["arch"], source)  # the model's own errors, naming the file
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, source)) from None


def save_config(config: TrainConfig, path: Path) -> None:
    atomic_write_text(path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
