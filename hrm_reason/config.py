"""Run configuration: pydantic models loaded from YAML with `key=value` overrides.

Keys keep the names of the original HRM code (`data_path`, `global_batch_size`, `arch.H_cycles`, ...) so configs
migrate; an `all_config.yaml` written by the original code loads as it is. The resolved config saved in a run
directory is the single truth for reloading that run.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from hrm_reason.atomic import atomic_write_text
from hrm_reason.errors import UserError, validation_message
from hrm_reason.models import registry, trm_original
from hrm_reason.models.registry import Family

# Counts and budgets that are off when None and positive when set.
Count = Annotated[int, Field(gt=0)]
Amount = Annotated[float, Field(gt=0)]
# The seeds numpy accepts (np.random.seed: 0 .. 2**32 - 1); torch's manual_seed takes every one of them.
SEED_MAX = 2**32 - 1


def _types_of(annotation: Any) -> set[Any]:
    """The plain types an annotation admits: Annotated, Optional and unions unwrapped, a Literal as its values' types."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _types_of(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return set().union(*(_types_of(a) for a in get_args(annotation)))
    if origin is Literal:
        return {type(a) for a in get_args(annotation)}
    return {annotation}


def bool_for_number(value: Any, annotation: Any) -> bool:
    """True for a boolean given to a numeric field: pydantic would read `true` as 1, YAML's `yes`/`on` too, which
    hides a slip (global_batch_size=true trains on batches of one)."""
    admits = _types_of(annotation)
    return isinstance(value, bool) and bool(admits & {int, float}) and not admits & {bool, Any}


INT64_RANGE = f"must be in {-(2**63)} .. {2**63 - 1} (an int64)"


def beyond_int64(value: Any) -> bool:
    """An integer no tensor or array holds: counts become int64 tensors and numpy indices."""
    return isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63


class _PlainNumbers(BaseModel):
    """Refuse a boolean for a numeric field (bool_for_number) and an integer beyond int64, naming the field."""

    @field_validator("*", mode="before")
    @classmethod
    def _plain_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name is not None and bool_for_number(value, cls.model_fields[info.field_name].annotation):
            raise ValueError("expected a number, not a boolean")
        if beyond_int64(value):
            raise ValueError(INT64_RANGE)
        return value


class DepthStage(_PlainNumbers):
    """Until the share `until` of the run is done (of the LR schedule's span: steps, or the time budget with
    schedule_over=seconds), segments run H_cycles x L_cycles; after the last stage, the model's own depth."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    until: float = Field(gt=0, lt=1, description="share of the run at which this stage ends")
    H_cycles: int = Field(ge=1)
    L_cycles: int = Field(ge=1)


def check_stages(stages: Sequence[DepthStage], arch: Any) -> None:
    """Raise ValueError (a config error naming depth_curriculum) for stages a model cannot run."""
    if arch.depth is None:
        raise ValueError(f"arch {arch.name!r} has no H_cycles/L_cycles (only hrm and trm do)")
    ends = [s.until for s in stages]
    if any(b <= a for a, b in zip(ends, ends[1:])):
        raise ValueError(f"stage ends (until) must increase, got {ends}")
    H, L = arch.depth
    deep = next((s for s in stages if s.H_cycles > H or s.L_cycles > L), None)
    if deep is not None:  # a curriculum makes segments shallower; deeper is another model (and 2**62 never ends)
        raise ValueError(
            f"a stage of H_cycles {deep.H_cycles}, L_cycles {deep.L_cycles} is deeper than the model's own "
            f"({H}, {L}): stages run shallower segments"
        )


class StrictModel(_PlainNumbers):
    """Unknown keys, booleans for numbers and non-finite floats (lr=nan, max_seconds=inf) are errors."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


# Keys of LM run configs written before the one run config (eval_interval counted steps there), read as today's.
LEGACY_LM_KEYS = {"eval_interval": "eval_every_steps", "eval_batch_size": "eval_global_batch_size"}


def family_of(arch: Any) -> Family:
    """The model family an `arch` section (a mapping or a validated config) names: lm for a language-model head."""
    name = arch.get("name", "hrm") if isinstance(arch, dict) else getattr(arch, "name", None)
    return "lm" if registry.is_lm_arch(name) else "act"


def validate_arch(arch: Any, source: str = "config") -> Any:
    """The `arch` section validated by the chosen model's own config (registry.arch_config), as its family reads it
    (FAMILY_RULES)."""
    if isinstance(arch, BaseModel):
        return registry.arch_config(arch, source)
    if arch is not None and not isinstance(arch, dict):
        raise UserError(
            f"{source}: field 'arch': expected a mapping of model options (e.g. arch.hidden_size=256), got {arch!r}"
        )
    arch = dict(arch or {})
    _refuse_booleans(arch, _arch_class(arch), "arch.", source)
    return FAMILY_RULES[family_of(arch)].arch(arch, source)


def _arch_class(arch: dict[str, Any]) -> type[BaseModel] | None:
    """The config class of the model `arch` names; None for a name the registry does not know (it says so)."""
    try:
        return registry.model_classes(arch.get("name", "hrm"))[0]
    except UserError:
        return None


def _refuse_booleans(section: dict[str, Any], cls: type[BaseModel] | None, prefix: str, source: str) -> None:
    """A boolean given to a numeric key of a model's config (bool_for_number) or a float that is not finite, nested
    sections (arch.loss) included: the models' configs are read in pydantic's lax mode, which takes `true` for 1 and
    `.inf` for a float."""
    if cls is None:
        return
    for key, value in section.items():
        field = cls.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        nested = [t for t in _types_of(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
        if isinstance(value, dict) and nested:
            _refuse_booleans(value, nested[0], f"{prefix}{key}.", source)
        elif bool_for_number(value, field.annotation):
            raise UserError(f"{source}: field '{prefix}{key}': expected a number, not a boolean (got {value!r})")
        elif beyond_int64(value):
            raise UserError(f"{source}: field '{prefix}{key}': {INT64_RANGE} (got {value})")
        elif float in _types_of(field.annotation) and _not_finite(value):
            raise UserError(f"{source}: field '{prefix}{key}': expected a finite number (got {value!r})")


def _not_finite(value: Any) -> bool:
    """nan or an infinity, also as the text pydantic would read as one ('nan', 'inf': YAML reads them as text)."""
    if isinstance(value, bool) or not isinstance(value, float | int | str):
        return False
    try:
        return not math.isfinite(float(value))
    except (ValueError, OverflowError):
        return False


def _act_arch(arch: dict[str, Any], source: str) -> Any:
    return registry.arch_config(arch, source, want="act")


def _lm_arch(arch: dict[str, Any], source: str) -> Any:
    """The mapping itself, checked against the head's config with a stand-in vocabulary until the dataset's is
    known."""
    registry.lm_config(arch, arch.get("vocab_size", 256), source)
    return arch


def _act_forward_dtype(data: dict[str, Any]) -> None:
    """arch.forward_dtype (the puzzle models' name before) is the run's forward_dtype; the model follows it."""
    arch = data.get("arch")
    arch = arch.model_dump(exclude_unset=True) if isinstance(arch, BaseModel) else dict(arch or {})
    given = arch.pop("forward_dtype", None)
    if given is not None and data.setdefault("forward_dtype", given) != given:
        raise ValueError(
            f"arch.forward_dtype {given} and forward_dtype {data['forward_dtype']} differ: give forward_dtype only"
        )
    data["arch"] = {**arch, "forward_dtype": data.get("forward_dtype", "auto")}


def _lm_legacy_keys(data: dict[str, Any]) -> None:
    """The keys of LM run configs written before the one run config, under today's names (LEGACY_LM_KEYS)."""
    for old, new in LEGACY_LM_KEYS.items():
        if old in data and data[old] is None:
            del data[old]
        elif old in data:
            if data.get(new) is not None:
                raise ValueError(f"{old} (an LM key before the one run config) and {new} are both given: keep {new}")
            data[new] = data.pop(old)


def _act_checks(config: TrainConfig) -> None:
    if config.epochs is None or config.eval_interval is None:
        raise ValueError("ACT puzzle models need epochs and eval_interval")
    if config.epochs % config.eval_interval:
        raise ValueError(f"eval_interval {config.eval_interval} must divide epochs {config.epochs}")
    if config.depth_curriculum:
        try:
            check_stages(config.depth_curriculum, config.arch)
        except ValueError as e:
            raise ValueError(f"depth_curriculum: {e}") from None


def _lm_checks(config: TrainConfig) -> None:
    if config.epochs is not None:
        raise ValueError("epochs counts passes over a puzzle dataset for the ACT models; LM heads count max_steps")
    if config.max_steps is None:
        raise ValueError("LM heads need max_steps")
    if config.lr_warmup_steps > config.max_steps:
        raise ValueError(f"lr_warmup_steps {config.lr_warmup_steps} exceeds max_steps {config.max_steps}")
    for key, off in (("augment", "none"), ("depth_curriculum", None), ("segment_loss_decay", None)):
        if getattr(config, key) != off:
            raise ValueError(f"{key} is an option of the ACT puzzle models, not of {config.model_name}")


@dataclass(frozen=True)
class FamilyRules:
    """How a run config of one model family is read, completed and checked. What differs per family is a default,
    never a meaning."""

    defaults: dict[str, Any]  # the values of the keys a config leaves out
    arch: Callable[[dict[str, Any], str], Any]  # the `arch` mapping validated (errors name `source`)
    migrate: Callable[[dict[str, Any]], None]  # keys that configs written before mean today's, rewritten in place
    check: Callable[[TrainConfig], None]  # the budgets the family needs, the options it refuses (ValueError)


FAMILY_RULES: dict[Family, FamilyRules] = {
    "act": FamilyRules(
        defaults={
            "data_path": "data/sudoku-extreme-1k-aug-1000",
            "global_batch_size": 768,
            "epochs": 100000,
            "eval_interval": 10000,
            "lr": 1e-4,
            "lr_min_ratio": 1.0,
            "lr_warmup_steps": 2000,
        },
        arch=_act_arch,
        migrate=_act_forward_dtype,
        check=_act_checks,
    ),
    "lm": FamilyRules(
        defaults={
            "data_path": "data/text-stdlib",
            "seq_len": 256,
            "global_batch_size": 16,
            "max_steps": 1000,
            "eval_every_steps": 250,
            "eval_max_tokens": 65536,
            "lr": 1e-3,
            "lr_min_ratio": 0.1,
            "lr_warmup_steps": 100,
            "grad_clip": 1.0,
        },
        arch=_lm_arch,
        migrate=_lm_legacy_keys,
        check=_lm_checks,
    ),
}


class TrainConfig(StrictModel):
    """The one run config of every model family: run, data, optimizer and schedule fields; `arch` is the model's own
    section. Every key means the same for every family; a default may differ (FAMILY_RULES)."""

    arch: Any = Field(
        default_factory=lambda: registry.arch_config({"name": "hrm"}),
        description="the model's config; arch.name picks the model",
    )
    data_path: str = Field(
        description="a puzzle dataset (hrm build-data sudoku/maze/arc) or a text dataset (hrm "
        "build-data text); LM heads on a puzzle dataset train PrefixLM on puzzles (data/prefix_lm.py)"
    )
    run_dir: str | None = Field(None, description="None: runs/<dataset name>-<arch>-seed<seed>")

    global_batch_size: int = Field(gt=0, description="examples (LM: windows) per optimizer step, over all processes")
    epochs: Count | None = Field(None, description="ACT puzzle models: passes over the training groups")
    eval_interval: Count | None = Field(None, description="ACT puzzle models: evaluate (and checkpoint) every N epochs")
    eval_every_steps: Count | None = Field(
        None, description="evaluate (and checkpoint) every N optimizer steps, and at the end of the run"
    )
    max_steps: Count | None = Field(
        None, description="optimizer steps (a cap on those the epochs give); the LR schedule spans the run"
    )
    seq_len: Count | None = Field(
        None,
        description="text datasets: tokens predicted per training window (windows "
        "hold seq_len + 1); puzzle datasets fix their own",
    )

    optimizer: Literal["adam_atan2", "adamw", "muon"] = Field(
        "adam_atan2",
        description="adam_atan2 (HRM's); adamw (the HRM-LM paper's); muon: Muon on the weight matrices of the blocks "
        "(muon_lr, muon_weight_decay), adam_atan2 on the rest (lr, weight_decay) (docs/training.md, Muon)",
    )
    lr: float = Field(gt=0, description="peak learning rate of the network (after the warmup; the schedule scales it)")
    lr_min_ratio: float = Field(
        ge=0,
        le=1,
        description="where the schedule ends, as a share of lr (1.0: constant after the warmup, the original's)",
    )
    lr_warmup_steps: int = Field(ge=0, description="optimizer steps of linear warmup from 0 to lr")
    beta1: float = Field(0.9, ge=0, lt=1, description="decay of the first-moment average (adam_atan2, adamw)")
    beta2: float = Field(0.95, ge=0, lt=1, description="decay of the second-moment average (adam_atan2, adamw)")
    weight_decay: float = Field(0.1, ge=0, description="decoupled weight decay of the network")
    grad_clip: Amount | None = Field(None, description="LM heads: max global gradient norm; None: no clipping")
    muon_lr: float = Field(
        0.02,
        gt=0,
        description="optimizer muon: peak lr of the blocks' weight matrices (Muon); the schedule scales it by the "
        "factor it scales lr by",
    )
    muon_weight_decay: float = Field(
        0.01, ge=0, description="optimizer muon: decoupled weight decay of the blocks' weight matrices (Muon)"
    )
    puzzle_emb_lr: float = Field(
        1e-2, ge=0, description="ACT puzzle models: SignSGD learning rate of the puzzle-embedding table"
    )
    puzzle_emb_weight_decay: float = Field(
        0.1, ge=0, description="ACT puzzle models: weight decay of the puzzle-embedding table"
    )

    seed: int = Field(0, description=f"seeds the weights, the batches and the exploration: 0 .. {SEED_MAX}")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="auto (CUDA when present, else the CPU), cpu or cuda"
    )
    forward_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="the one precision policy: auto/bfloat16 compute in bf16 on CUDA (fp32 master weights); a "
        "CPU always computes in fp32 (bfloat16 there: one warning line; docs/training.md, Precision)",
    )
    eval_global_batch_size: Count | None = Field(None, description="None: global_batch_size")
    eval_max_examples: Count | None = Field(
        None, description="puzzle datasets: evaluate on the first N test examples (per set)"
    )
    eval_max_tokens: Count | None = Field(
        None, description="text datasets: validation tokens per evaluation; None: all"
    )
    checkpoint_every_eval: bool = Field(True, description="write a checkpoint after each evaluation")
    checkpoint_every_steps: Count | None = Field(None, description="also checkpoint every N steps (long iterations)")
    keep_checkpoints: Count | None = Field(
        None, description="keep only the last N checkpoints (older ones are removed after each save); None: all"
    )
    keep_best_checkpoint: bool = Field(
        False,
        description="with keep_checkpoints: also keep the checkpoint with the best evaluation (highest exact "
        "accuracy, or lowest eval CE where there is none)",
    )
    logger: Literal["none", "wandb", "tensorboard"] = Field(
        "none", description="none, wandb or tensorboard (when installed): where metrics go besides metrics.jsonl"
    )
    compile: bool = Field(False, description="torch.compile the recurrent core (first steps pay the compile time)")
    ema: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="decay of an exponential moving average of the weights, updated after every step; "
        "evaluation and checkpoints use the average (TRM: 0.999); None: off",
    )
    ema_warmup: bool = Field(
        False,
        description="with ema: update t uses decay min(ema, (1 + t) / (10 + t)), so that a short run's average "
        "forgets the initial weights (off: TRM's constant decay)",
    )
    lr_schedule: Literal["cosine", "linear", "constant"] = Field(
        "cosine",
        description="after the linear warmup: cosine or linear decay to lr_min_ratio * lr, or constant lr (the "
        "original's; also cosine with lr_min_ratio 1, the puzzle default)",
    )
    augment: Literal["none", "symmetry"] = Field(
        "none",
        description="ACT puzzle models: symmetry applies a fresh random symmetry of the task (sudoku, maze) to every "
        "training example drawn, on top of the dataset's materialised copies (hrm_reason/tasks/augment.py)",
    )
    depth_curriculum: list[DepthStage] | None = Field(
        None,
        description="hrm, trm: [{until, H_cycles, L_cycles}, ...]: shallower segments until each share of the run, "
        "the model's own depth after the last (CGAR; hrm_reason/train/curriculum.py); None: off",
    )
    segment_loss_decay: Amount | None = Field(
        None,
        le=1,
        description="ACT puzzle models: weight the loss of supervision segment t by decay^(t-1), normalised to mean "
        "1 over halt_max_steps, in (0, 1]: later segments weigh less (CGAR: 0.7), 1 all alike; None: off",
    )
    max_seconds: Amount | None = Field(
        None,
        description="stop after this many seconds of training steps (evaluations not counted), then evaluate "
        "and checkpoint: equal-time comparisons (see budget_clock, schedule_over)",
    )
    budget_clock: Literal["wall", "cpu"] = Field(
        "wall",
        description="what max_seconds and train_seconds measure: wall-clock time, or this process's CPU time "
        "(a fair budget when runs share a machine with other work; CPU runs only: GPU time is not CPU time)",
    )
    schedule_over: Literal["steps", "seconds"] = Field(
        "steps",
        description="what the LR schedule spans: the step budget, or (with max_seconds) the time budget, so "
        "that every run of an equal-time comparison completes its decay however fast its steps are",
    )

    project_name: str | None = Field(None, description="the logger's project; None: hrm-reason")
    run_name: str | None = Field(None, description="the logger's run name; None: the run directory's name")

    @model_validator(mode="before")
    @classmethod
    def _family_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        family = family_of(data.get("arch"))
        FAMILY_RULES[family].migrate(data)
        for key, value in FAMILY_RULES[family].defaults.items():
            data.setdefault(key, value)
        return data

    @field_validator("arch", mode="before")
    @classmethod
    def _arch(cls, v: Any) -> Any:
        return validate_arch(v)

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= SEED_MAX:
            raise ValueError(f"must be in 0 .. {SEED_MAX} (2**32 - 1, the seeds numpy accepts)")
        return v

    @property
    def family(self) -> Family:
        return family_of(self.arch)

    @property
    def model_name(self) -> str:
        return self.arch["name"] if isinstance(self.arch, dict) else self.arch.name

    @model_validator(mode="after")
    def _budgets(self) -> TrainConfig:
        FAMILY_RULES[self.family].check(self)
        if self.schedule_over == "seconds" and self.max_seconds is None:
            raise ValueError("schedule_over=seconds needs max_seconds")
        if self.ema_warmup and self.ema is None:
            raise ValueError("ema_warmup needs ema (the decay it warms up to)")
        return self


def _set_dotted(d: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for key in parents:
        child = d.setdefault(key, {})
        if not isinstance(child, dict):
            raise UserError(f"override '{dotted}': '{key}' is not a section")
        d = child
    d[leaf] = value


# Keys whose value is a mapping of their own keys: an override sets one of those (arch.hidden_size=256), never the whole.
SECTIONS = ("arch",)


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """`key=value` items as a nested mapping, each value read as YAML, except that a text field's value stays the text
    given (run_name=2024 names the run "2024") and a section (SECTIONS) takes no value of its own."""
    out: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"override '{item}': expected key=value, e.g. arch.hidden_size=256")
        try:
            value = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError:
            value = raw
        if key in SECTIONS and not isinstance(value, dict):
            raise UserError(
                f"override '{item}': '{key}' is a section, not a value: set one of its keys, e.g. {key}.hidden_size=256"
            )
        field = TrainConfig.model_fields.get(key)
        text = field is not None and _types_of(field.annotation) <= {str, type(None)}
        if text and value is not None and not isinstance(value, str | dict | list):  # 2024, 1e3, true, 2024-01-01
            value = raw
        _set_dotted(out, key, value)
    return out


def dotted_keys(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"arch": {"hidden_size": 8}} as {"arch.hidden_size": 8}: a config's keys as overrides name them (the inverse
    of `parse_overrides`)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(dotted_keys(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in extra.items():
        merged[k] = _merge(merged[k], v) if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
    return merged


# Values a config file may hold once its aliases (*name) are expanded: a config has a few hundred; nested aliases (a
# "billion laughs") once expanded to 9^9 values, hung the validation and gave a 3.8 MB error line.
MAX_YAML_VALUES = 100_000


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """The nodes of `node` with every alias expanded, counted without expanding them (each node's size once)."""
    if id(node) not in sizes:
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        sizes[id(node)] = 1 + sum(_expanded_size(child, sizes) for child in children)
    return sizes[id(node)]


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently), and a document
    that its aliases expand beyond MAX_YAML_VALUES values."""

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None and (size := _expanded_size(node, {})) > MAX_YAML_VALUES:
            raise _TooManyValues(
                f"its aliases (*name) expand to {size:,} values, more than a config holds ({MAX_YAML_VALUES:,} at most)"
            )
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` keys are overridden on purpose
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise _DuplicateKey(f"duplicate key '{key}' at line {line} (first at line {seen[key]})")
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    pass


class _TooManyValues(Exception):
    pass


def read_yaml(path: Path) -> dict[str, Any]:
    """A config file's top-level mapping; UserError naming the file for a missing, unreadable, non-YAML, empty or
    ambiguous (duplicate key) file."""
    if not path.is_file():
        raise UserError(f"config file {path} not found")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a YAML config (not UTF-8 text)") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the config file ({e.strerror})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except (_DuplicateKey, _TooManyValues) as e:
        raise UserError(f"{path}: {e}") from None
    except RecursionError:
        raise UserError(f"{path}: not valid YAML (nested too deeply)") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if data is None:
        raise UserError(f"{path}: the config file is empty (give at least data_path or arch, or leave out --config)")
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of config keys at the top level")
    return data


# Keys that no code reads, dropped from a config file: the original HRM code's all_config.yaml holds them, and so does
# every run's config.yaml saved while TrainConfig still accepted them. Given as an override they are unknown keys (an
# error): accepting a setting that changes nothing would be silent (docs/models.md, "Configs").
UNREAD_FILE_KEYS = ("checkpoint_path", "eval_save_outputs")


def _merge_base(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """`child` over its `base`: mappings merged key by key, the child's value winning, except that an `arch` naming
    another model than the base's replaces the base's `arch` whole (one model's options mean nothing to another)."""
    arch, base_arch = child.get("arch"), base.get("arch")
    if isinstance(arch, dict) and isinstance(base_arch, dict) and "name" in arch:
        if arch["name"] != base_arch.get("name", "hrm"):
            base = {k: v for k, v in base.items() if k != "arch"}
    return _merge(base, child)


def read_preset(path: Path, chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A config file's mapping with the file its `base` key names (relative to the file's folder; a chain of them)
    merged under it (`_merge_base`), the `base` key dropped. A missing base or a cycle is a UserError naming the file
    and its `base` key."""
    data = read_yaml(path)
    if "base" not in data:
        return data
    ref = data.pop("base")
    if not isinstance(ref, str) or not ref.strip():
        raise UserError(
            f"{path}: field 'base': expected the path of another config file, relative to this file's folder "
            f"(got {ref!r})"
        )
    base_path = path.parent / ref
    seen = (*chain, path.resolve())
    if base_path.resolve() in seen:
        cycle = " -> ".join(str(p) for p in (*seen, base_path.resolve()))
        raise UserError(f"{path}: field 'base': {ref} makes a cycle of bases ({cycle})")
    if not base_path.is_file():
        raise UserError(f"{path}: field 'base': {base_path} not found (a base is relative to this file's folder)")
    return _merge_base(read_preset(base_path, seen), data)


def read_config(path: str | Path | None, overrides: list[str] | None = None) -> dict[str, Any]:
    """The config file (if any), its bases merged under it (`read_preset`), with `key=value` overrides applied, before
    validation."""
    data = read_preset(config_file(Path(path))) if path is not None else {}
    # Hydra leftovers of original configs are not settings.
    data.pop("defaults", None)
    data.pop("hydra", None)
    for key in UNREAD_FILE_KEYS:
        data.pop(key, None)
    data = _merge(data, parse_overrides(overrides or []))
    if trm_original.is_original_config(data):  # the original TRM code's all_config.yaml
        data = trm_original.translate_config(data, str(path) if path is not None else "overrides")
    return data


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


def config_file(path: Path) -> Path:
    """The config file `path`; where it is not there and names a packaged config as the README writes them
    (configs/NAME.yaml, NAME.yaml or NAME), the installed copy, so that the README's commands run from any folder."""
    if path.is_file() or path.parent not in (Path("."), Path("configs")):
        return path
    name = path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml"
    packaged = packaged_config(name)
    if packaged.is_file():
        return packaged
    raise UserError(f"config file {path} not found, nor is {name} one of the packaged configs ({packaged.parent})")


def packaged_config(name: str) -> Path:
    """configs/NAME of the checkout; the copy installed as package data otherwise."""
    local = Path(__file__).resolve().parents[1] / "configs" / name
    if local.is_file():
        return local
    try:
        return Path(str(files("hrm_reason.configs") / name))
    except ModuleNotFoundError:  # a checkout installed in place: its configs/ is the only copy
        return local


def resume_config(
    run_dir: Path | None, config: Path | None, resume: bool, overrides: list[str], default: str
) -> TrainConfig:
    """The config `hrm train` starts from, with `overrides`: `config`, else the run's own config.yaml when resuming the
    run in `run_dir`, else the packaged config `default` (`hrm train` says so once the run's checks have passed:
    default_config_notice). A resume without its run directory or that directory's config.yaml is an error naming them:
    the default config would name its own dataset instead."""
    if run_dir is not None and run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--run-dir {run_dir}: is a file; expected a run directory (new or to --resume)")
    if resume and config is None:
        if run_dir is None:
            raise UserError("--resume needs --run-dir DIR: the run directory to continue")
        if not run_dir.is_dir():
            raise UserError(f"{run_dir}: no such run directory to resume (--run-dir)")
        if not (run_dir / "config.yaml").is_file():
            raise UserError(
                f"{run_dir / 'config.yaml'} not found: --resume reads the run's config (give --config FILE to "
                "resume with another)"
            )
        config = run_dir / "config.yaml"
    elif resume and run_dir is not None and not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run directory to resume (--run-dir)")
    elif config is None:
        config = packaged_config(default)
    return load_config(config, overrides)


def default_config_notice(config: Path | None, resume: bool, default: str) -> str | None:
    """The line `hrm train` says when resume_config takes the packaged config `default`; None when it does not."""
    return f"no --config given: using {packaged_config(default)}" if config is None and not resume else None


def save_config(config: TrainConfig, path: Path) -> None:
    atomic_write_text(path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
