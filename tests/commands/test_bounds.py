"""Every count and rate a command takes is bounded (issue 60, item 1): the test walks every option of every `hrm`
command (typer's parameters), every field of `hrm build-data`'s option models and every numeric run-config key, and
fails on one that is neither bounded nor listed in UNBOUNDED with its reason.

Bounded means: a flag declares a bound of hrm_reason/limits.py with itself (commands/cli_options.py `bounded`, checked
as the command line is parsed) or typer's min and max; a builder's field or a run-config key refuses a value far above
and far below in one line naming it. A declared bound is then tried at both ends, just outside: `hrm CMD --flag VALUE`
alone must exit 2 with one line naming the flag, before any other argument is read (`--seeds 0` once trained three
seeds: 0 was read as "not given" after the bound was checked).

A listed entry that turns out bounded fails as stale. The arch sections' keys are walked too, every numeric field of
every registered model's config (models/registry.py `models()`): each refuses far values at load in one line naming
arch.FIELD, or is listed in UNBOUNDED_ARCH with its reason; a bound it declares (a Count or Rate of hrm_reason/limits.py
in its annotation, pydantic's ge/gt/le/lt) is tried just outside, through load_config for every field and through
`hrm train` for one of each model (arch.H_cycles 10^9 once passed every check, arch.H_layers 20000 took minutes to be
refused)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from typer.main import get_command

import cli
from hrm_reason import limits
from hrm_reason.config import DepthStage, TrainConfig, load_config
from hrm_reason.errors import UserError
from hrm_reason.models.registry import models
from tests.helpers import cli_commands, declared, hrm_in_process, refuses

FAR = 2**62  # within int64 (beyond it every int is refused anyway), far past any count

# Options and keys bounded on one side only, or by what the command reads (a split, a task's symmetries), each with why
# that is enough. A bound declared elsewhere makes its entry stale: the test says so.
UNBOUNDED: dict[str, str] = {
    # hrm eval, hrm solve
    "eval --max-examples": "at least 1; a cap: past the test split's size the whole split is evaluated (the smaller "
    "is taken, evaluate/run.py and data/puzzle.py eval_batches)",
    "eval --max-tokens": "at least 1; a cap: past the validation split the whole split is read (the smaller is taken, "
    "evaluate/lm.py)",
    **{
        f"{command} --tta": "1 or more (evaluate/tta.py TestTimeOptions); copies past the task's symmetry group are "
        "capped with a notice and copies x samples past 1,024 refused naming the group (fit_to_group): the bound is "
        "the task's, known once the run is loaded"
        for command in ("eval", "solve")
    },
    **{
        f"{command} --noise": "finite and at least 0 (TestTimeOptions); a standard deviation costs the same whatever "
        "its size"
        for command in ("eval", "solve")
    },
    **{
        f"{command} --tta-seed": "at least 0 (TestTimeOptions); a seed: numpy's SeedSequence takes any, each costs the "
        "same"
        for command in ("eval", "solve")
    },
    # hrm adapt
    "adapt --batch-size": "at least 1; a cap: a batch holds at most every demonstration (the smaller is taken, "
    "commands/adapt.py)",
    # hrm generate
    "generate --temperature": "at least 0 and finite (commands/generate.py check_temperature); any finite "
    "temperature costs the same",
    "generate --top-k": "at least 1; a cap: past the vocabulary every token is sampled from (models/lm/sampling.py)",
    # hrm bench
    "bench --batch-size": "at least 1; checked against the device's memory before anything is built, one line naming "
    "--batch-size (commands/bench.py, train/run_memory.py)",
    # hrm viz
    **{
        f"viz {command} --index": "an example's position: checked against the split once it is read, one line "
        "naming --index (viz/puzzles.py get_example)"
        for command in ("puzzle", "predictions", "html")
    },
}


def numeric(annotation: Any) -> type | None:
    """int or float when the annotation admits one (Optional and Annotated unwrapped), never for a bool."""
    if get_origin(annotation) is Annotated:
        return numeric(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = {numeric(a) for a in get_args(annotation)} - {None}
        return next(iter(kinds)) if len(kinds) == 1 else None
    return annotation if annotation in (int, float) else None


def cli_options() -> dict[str, tuple[tuple[str, ...], Any, type]]:
    """`hrm` command and flag -> (command path, typer's parameter, int or float), for every numeric option (hrm
    build-data's are its option models' fields: BUILD_DATA)."""
    found = {}
    for path, command in cli_commands(get_command(cli.app)):
        for param in command.params if path[0] != "build-data" else ():
            kind = numeric(param.type_descriptor.annotation)
            if kind is not None:
                flag = max(param.opts, key=len)
                found[f"{' '.join(path)} {flag}"] = (path, param, kind)
    return found


CLI = cli_options()
BUILD_DATA = {
    name: (model, field_name, kind)
    for task, (model, _) in cli.BUILDERS.items()
    for field_name, field in model.model_fields.items()
    if (kind := numeric(field.annotation)) is not None
    for name in [f"build-data {task} --{field_name.replace('_', '-')}"]
}


def outside(low: float, high: float, kind: type, limit: Any) -> list[str]:
    """Values just outside [low, high] (a rate: also nan and inf), as typed on a command line."""
    if kind is int:
        return [str(int(low) - 1), str(int(high) + 1)]
    below = "-1.0" if isinstance(limit, limits.Rate) and limit.zero else "0.0" if low == 0 else str(low / 2)
    return [below, str(high * 2), "nan", "inf"]


def test_the_walk_sees_every_command() -> None:
    """The walk reads typer's parameters; a typer that names them otherwise must fail here, not pass vacuously."""
    assert {"compare --seeds", "compare --jobs", "adapt --steps", "eval --mmax", "eval --samples"} <= set(CLI)
    assert {"build-data sudoku --num-aug", "build-data arc --rung-tasks", "build-data text --shard-tokens"} <= set(
        BUILD_DATA
    )
    assert len(CLI) > 40


@pytest.mark.parametrize("name", sorted(CLI))
def test_every_numeric_flag_is_bounded_or_listed(name: str) -> None:
    path, param, kind = CLI[name]
    low, high, limit = declared(param)
    if low is not None and high is not None:
        assert name not in UNBOUNDED, f"hrm {name} is bounded: remove its UNBOUNDED entry"
        if limit is not None:
            assert any(limit is value for value in vars(limits).values()), f"hrm {name}: a bound not of limits.py"
        return
    assert name in UNBOUNDED, (
        f"hrm {name}: neither bounded through hrm_reason/limits.py (commands/cli_options.py bounded) or typer's "
        "min and max, nor listed in UNBOUNDED with its reason"
    )


@pytest.mark.parametrize("name", sorted(n for n, (_, p, _) in CLI.items() if None not in declared(p)[:2]))
def test_a_declared_bound_refuses_just_outside_it_before_anything_else(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, param, kind = CLI[name]
    low, high, limit = declared(param)
    flag = name.rpartition(" ")[2]
    for value in outside(low, high, kind, limit):
        code, err = hrm_in_process(capsys, monkeypatch, *path, flag, value)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (value, err)
        assert flag in lines[0], (value, lines[0])


@pytest.mark.parametrize("name", sorted(BUILD_DATA))
def test_every_numeric_build_option_is_bounded_or_listed(name: str) -> None:
    model, field, kind = BUILD_DATA[name]
    far = FAR if kind is int else 1e300
    bounded = refuses(model, field, far) and refuses(model, field, -far)
    if bounded:
        assert name not in UNBOUNDED_BUILD, f"hrm {name} is bounded: remove its entry"
        return
    assert name in UNBOUNDED_BUILD, (
        f"hrm {name}: its options model takes {far:g} or {-far:g}; bound it (hrm_reason/limits.py through "
        "datasets_build/options.py bounded, or the field's ge/le) or list it in UNBOUNDED_BUILD with its reason"
    )


UNBOUNDED_BUILD: dict[str, str] = {
    **{
        f"build-data {task} --seed": "at least 0; a seed: numpy's SeedSequence takes any, each costs the same"
        for task in ("sudoku", "maze", "arc", "text", "file")
    },
    "build-data arc --train-tasks": "a cap: a seeded sample only when fewer than the tasks given (datasets_build/arc.py)",
    "build-data arc --eval-tasks": "a cap: a seeded sample only when fewer than the tasks given (datasets_build/arc.py)",
    "build-data sudoku --min-difficulty": "a filter: when generated puzzles fail it, one line says how few reached "
    "the rating (datasets_build/sudoku.py)",
    "build-data sudoku --max-difficulty": "a filter: below --min-difficulty, or passed by no puzzle, one line says "
    "so (datasets_build/sudoku.py)",
    "build-data sudoku --min-givens": "at most the board's cells, checked in one line (datasets_build/sudoku.py)",
    "build-data maze --min-path": "a filter: when no random layout holds two cells that far apart, one line says so "
    "(datasets_build/maze.py)",
    **{
        f"build-data {task} --subsample-size": "at most --train-size, checked in one line (datasets_build/sources.py)"
        for task in ("sudoku", "maze")
    },
    "build-data text --max-bytes": "a cap: past the corpus every byte is read",
    "build-data text --shard-tokens": "a cap: past the corpus one shard holds every token (datasets_build/text.py "
    "ShardWriter allocates what it is given, not the shard's size)",
}
# Known gaps, each still open (its test is an expected failure, strict: bounding it makes the entry stale). The
# builders' options (datasets_build/options.py) were being reworked for issue 57 when these were found.


def config_refuses(key: str, value: Any) -> bool:
    """Whether a run config with `key`=`value` is refused in a line naming the key."""
    try:
        if key.startswith("depth_curriculum."):
            stage = {"until": 0.5, "H_cycles": 1, "L_cycles": 1, key.rpartition(".")[2]: value}
            load_config(None, ["arch.name=hrm", f"depth_curriculum=[{stage}]".replace("'", "")])
        else:
            load_config(None, [f"{key}={value}"])
    except UserError as e:  # a stage's own field, or the stages checked against the model's depth, which bounds them
        field, _, name = key.partition("depth_curriculum.")
        return (
            f"field '{key}'" in str(e)
            if not name
            else f"depth_curriculum.0.{name}" in str(e)
            or ("depth_curriculum" in str(e) and f"{name} {value}" in str(e))
        )
    return False


RUN_CONFIG = {
    **{name: kind for name, f in TrainConfig.model_fields.items() if (kind := numeric(f.annotation)) is not None},
    **{
        f"depth_curriculum.{name}": kind
        for name, f in DepthStage.model_fields.items()
        if (kind := numeric(f.annotation)) is not None
    },
}
FITS = "checked against the device's memory with the model and the data before anything is built, one line naming it "
"(train/run_memory.py check_run_memory)"
UNBOUNDED_CONFIG: dict[str, str] = {
    "global_batch_size": f"above 0; {FITS}",
    "eval_global_batch_size": f"above 0; {FITS}",
    "seq_len": f"above 0 (text datasets); {FITS}",
    "eval_interval": f"above 0 and a divisor of epochs; the sampler's plan of a round is {FITS}",
    **{
        key: "above 0; the run's length: asked for, trained step by step with its progress shown, stopped with a "
        "checkpoint by Ctrl-C or SIGTERM and resumed; nothing is allocated or repeated at once by its size"
        for key in ("epochs", "max_steps", "max_seconds")
    },
    **{
        key: "above 0; a period: past the run's length it never fires, and nothing is allocated by its size"
        for key in ("eval_every_steps", "checkpoint_every_steps")
    },
    "lr_warmup_steps": "at least 0; a span of the schedule: past the run's steps the rate stays in its warmup (LM "
    "heads refuse more than max_steps); nothing is allocated by its size",
    **{
        key: "above 0; a cap: past what the split holds all of it is read"
        for key in ("eval_max_examples", "eval_max_tokens")
    },
    "keep_checkpoints": "above 0; a cap: past the run's checkpoints all are kept",
    **{
        key: "finite and above 0; a rate or a norm costs the same whatever its size (too large diverges, which the "
        "logged loss shows)"
        for key in ("lr", "muon_lr", "puzzle_emb_lr", "grad_clip")
    },
    **{
        key: "finite and at least 0; a decay costs the same whatever its size"
        for key in ("weight_decay", "muon_weight_decay", "puzzle_emb_weight_decay")
    },
}


@pytest.mark.parametrize("key", sorted(RUN_CONFIG))
def test_every_numeric_run_config_key_is_bounded_or_listed(key: str) -> None:
    far = FAR if RUN_CONFIG[key] is int else 1e300
    if config_refuses(key, far) and config_refuses(key, -far):
        assert key not in UNBOUNDED_CONFIG, f"run-config key {key} is bounded: remove its entry"
        return
    assert key in UNBOUNDED_CONFIG, (
        f"run-config key {key}: a config takes {far:g} or {-far:g}; bound it (its Field's ge/le) or list it in "
        "UNBOUNDED_CONFIG with its reason"
    )


# --- the model configs' keys: every numeric field of every registered model's config (arch.name=MODEL arch.FIELD=V)
ARCH = {
    f"{model}.{field}": (model, info, kind)
    for model, module in models().items()
    for field, info in module.SPEC.config.model_fields.items()
    if (kind := numeric(info.annotation)) is not None
}
UNBOUNDED_ARCH: dict[str, str] = {
    "ham_lm.tau_init": "finite; a threshold on a routing score in [0, s]: a learnable one lies in (0, s), checked in one "
    "line; a fixed one past either end keeps every token or none, at the same cost (models/lm/ham.py)",
    "ham_lm.threshold_freeze_steps": "at least 0; a span of training steps, as lr_warmup_steps: past the run's length "
    "tau never moves; nothing is allocated or repeated by its size",
    **{
        f"hrm_text.{key}": "read by nothing: transformers' HrmTextConfig field, kept so that a converted config "
        "round-trips; no size, loop or table depends on it"
        for key in ("bos_token_id", "eos_token_id")
    },
}


def arch_error(model: str, field: str, value: Any) -> str | None:
    """The error line of a run config with arch.name=`model`, arch.`field`=`value`; None when it loads."""
    try:
        load_config(None, [f"arch.name={model}", f"arch.{field}={value}"])
    except UserError as e:
        return str(e)
    return None


def names_the_key(message: str | None, field: str) -> bool:
    return message is not None and "\n" not in message and f"arch.{field}" in message


def constraints(annotation: Any) -> list[Any]:
    """The metadata of an annotation's Annotated parts, Optional and unions unwrapped."""
    if get_origin(annotation) is Annotated:
        return [*get_args(annotation)[1:], *constraints(get_args(annotation)[0])]
    if get_origin(annotation) in (Union, types.UnionType):
        return [c for a in get_args(annotation) for c in constraints(a)]
    return []


def arch_bounds(info: Any) -> tuple[tuple[float, bool] | None, tuple[float, bool] | None, list[Any]]:
    """(low, high, the limits.py bounds) a field declares: each side as (value, open), the tightest of its limits.py
    Count or Rate and pydantic's ge/gt/le/lt; None for a side it leaves open."""
    found = [*info.metadata, *constraints(info.annotation)]
    lows: list[tuple[float, bool]] = []
    highs: list[tuple[float, bool]] = []
    for c in found:
        if isinstance(c, limits.Count):
            lows.append((c.low, False))
            highs.append((c.high, False))
        elif isinstance(c, limits.Rate):
            lows.append((0.0, not c.zero))
            highs.append((c.high, False))
        for attr, side, is_open in (("ge", lows, False), ("gt", lows, True), ("le", highs, False), ("lt", highs, True)):
            if not isinstance(c, limits.Count | limits.Rate) and getattr(c, attr, None) is not None:
                side.append((getattr(c, attr), is_open))
    low = max(lows, key=lambda b: (b[0], b[1])) if lows else None
    high = min(highs, key=lambda b: (b[0], not b[1])) if highs else None
    return low, high, [c for c in found if isinstance(c, limits.Count | limits.Rate)]


def arch_outside(kind: type, low: tuple[float, bool], high: tuple[float, bool]) -> list[str]:
    """Values just outside a field's declared bounds (a float: also nan and inf), as an override writes them."""
    (lo, lo_open), (hi, hi_open) = low, high
    if kind is int:
        return [str(int(lo) if lo_open else int(lo) - 1), str(int(hi) if hi_open else int(hi) + 1)]
    below = lo if lo_open else lo - max(abs(lo), 1.0) / 2
    above = hi if hi_open else hi * 2 if hi > 0 else hi + 1
    return [repr(float(below)), repr(float(above)), "nan", "inf"]


def test_the_walk_sees_every_model() -> None:
    """The walk reads the registry; a model or a field it misses must fail here, not pass vacuously."""
    assert {name.partition(".")[0] for name in ARCH} == set(models())
    assert {"hrm.H_cycles", "trm.L_cycles", "unitf.unitf_steps", "hrm_lm.N", "hrm_lm.K", "ham_lm.chunk_size"} <= set(
        ARCH
    )
    assert len(ARCH) > 100


@pytest.mark.parametrize("name", sorted(ARCH))
def test_every_numeric_arch_key_is_bounded_or_listed(name: str) -> None:
    model, info, kind = ARCH[name]
    field = name.partition(".")[2]
    far = FAR if kind is int else 1e300
    for limit in arch_bounds(info)[2]:
        assert any(limit is value for value in vars(limits).values()), (
            f"arch.{field} of {model}: a bound not of limits.py"
        )
    if names_the_key(arch_error(model, field, far), field) and names_the_key(arch_error(model, field, -far), field):
        assert name not in UNBOUNDED_ARCH, f"arch.{field} of {model} is bounded: remove its UNBOUNDED_ARCH entry"
        return
    assert name in UNBOUNDED_ARCH, (
        f"arch.{field} of {model}: a config takes {far:g} or {-far:g} (or refuses it without one line naming "
        f"arch.{field}); bound it where it is declared (a Count or Rate of hrm_reason/limits.py in its annotation) or "
        "list it in UNBOUNDED_ARCH with its reason"
    )


DECLARED_ARCH = sorted(n for n, (_, info, _) in ARCH.items() if None not in arch_bounds(info)[:2])


@pytest.mark.parametrize("name", DECLARED_ARCH)
def test_a_declared_arch_bound_refuses_just_outside_it_in_one_line(name: str) -> None:
    model, info, kind = ARCH[name]
    field = name.partition(".")[2]
    low, high, _ = arch_bounds(info)
    for value in arch_outside(kind, low, high):  # type: ignore[arg-type]
        message = arch_error(model, field, value)
        assert names_the_key(message, field), (model, field, value, message)


def first_declared(model: str) -> str:
    return next(n for n in DECLARED_ARCH if n.partition(".")[0] == model and ARCH[n][2] is int)


@pytest.mark.parametrize("model", list(models()))
def test_hrm_train_refuses_an_arch_key_just_outside_its_bound_with_exit_2(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One of each model through the CLI: one line naming the key, exit 2, before any run directory is made."""
    name = first_declared(model)
    field = name.partition(".")[2]
    config = tmp_path / "config.yaml"
    config.write_text(f"data_path: {tmp_path / 'data'}\narch:\n  name: {model}\n")
    low, high, _ = arch_bounds(ARCH[name][1])
    for value in arch_outside(int, low, high):  # type: ignore[arg-type]
        args = ("train", "--config", str(config), "--run-dir", str(tmp_path / "run"), f"arch.{field}={value}")
        code, err = hrm_in_process(capsys, monkeypatch, *args)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (value, err)
        assert f"arch.{field}" in lines[0], (value, lines[0])
        assert not (tmp_path / "run").exists()


def test_every_listed_name_is_a_real_option() -> None:
    assert not set(UNBOUNDED) - set(CLI)
    assert not set(UNBOUNDED_BUILD) - set(BUILD_DATA)
    assert not set(UNBOUNDED_CONFIG) - set(RUN_CONFIG)
    assert not set(UNBOUNDED_ARCH) - set(ARCH)
