"""Every count and rate a command takes is bounded (issue 60, item 1): the test walks every option of every `hrm`
command (typer's parameters), every field of `hrm build-data`'s option models and every numeric run-config key, and
fails on one that is neither bounded nor listed in UNBOUNDED with its reason.

Bounded means: a flag declares a bound of hrm_reason/limits.py with itself (commands/cli_options.py `bounded`, checked
as the command line is parsed) or typer's min and max; a builder's field or a run-config key refuses a value far above
and far below in one line naming it. A declared bound is then tried at both ends, just outside: `hrm CMD --flag VALUE`
alone must exit 2 with one line naming the flag, before any other argument is read (`--seeds 0` once trained three
seeds: 0 was read as "not given" after the bound was checked).

A listed entry that turns out bounded fails as stale. The arch sections' keys (arch.H_cycles, arch.H_layers, ...) are
not walked yet: arch.H_cycles 10^9 passes every check and arch.H_layers 20000 takes minutes to be refused."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
import typer
from pydantic import BaseModel, ValidationError
from typer.main import get_command

import cli
from hrm_reason import limits
from hrm_reason.config import DepthStage, TrainConfig, load_config
from hrm_reason.errors import UserError
from tests.helpers import hrm_in_process

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
    "--batch-size (commands/bench.py, train/fits.py)",
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


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, typer.core.TyperGroup):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def cli_options() -> dict[str, tuple[tuple[str, ...], Any, type]]:
    """`hrm` command and flag -> (command path, typer's parameter, int or float), for every numeric option (hrm
    build-data's are its option models' fields: BUILD_DATA)."""
    found = {}
    for path, command in commands(get_command(cli.app)):
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


def declared(param: Any) -> tuple[float | None, float | None, Any]:
    """(low, high, the limits.py bound or None) a flag declares: its `bounded` callback's, else typer's min and max."""
    limit = getattr(param.callback, "limit", None)
    if isinstance(limit, limits.Count):
        return limit.low, limit.high, limit
    if isinstance(limit, limits.Rate):
        return 0.0, limit.high, limit
    return param.min, param.max, None


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


def refuses(model: type[BaseModel], field: str, value: Any) -> bool:
    """Whether the options model refuses `value` for `field` in an error located at that field."""
    fields = {name: ["x"] if "list" in str(f.annotation) else Path("x") for name, f in model.model_fields.items()}
    fields = {name: value for name, value in fields.items() if model.model_fields[name].is_required()}
    try:
        model(**{**fields, field: value})
    except ValidationError as e:
        return any(err["loc"][:1] == (field,) for err in e.errors())
    return False


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
"(train/fits.py check_run_memory)"
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


def test_every_listed_name_is_a_real_option() -> None:
    assert not set(UNBOUNDED) - set(CLI)
    assert not set(UNBOUNDED_BUILD) - set(BUILD_DATA)
    assert not set(UNBOUNDED_CONFIG) - set(RUN_CONFIG)
