"""The flags of the `hrm` commands that are declared once for several of them, and the plumbing typer needs beyond a
plain signature: the test-time flags that `hrm eval` and `hrm solve` share (`test_time_flags`), and `hrm build-data
TASK`'s command made from its options model (`options_command`, one flag per field). Also what several commands do
with their arguments and outputs: the model given as --run or --checkpoint (`one_of`), the key=value overrides
(`overrides`), a JSON output written and said (`write_json`).

Only typer, pydantic and rich are imported here: cli.py reads this module for `hrm --help`, which must answer at once.
"""

from __future__ import annotations

import functools
import inspect
import json
import operator
from collections.abc import Callable, Iterable
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from rich.markup import escape

from hrm_reason.atomic import atomic_write_text
from hrm_reason.errors import UserError
from hrm_reason.limits import SAMPLES, Count, Rate


def bounded(limit: Count | Rate, flag: str | None = None) -> Callable[[Any], Any]:
    """A flag's callback that checks its value against `limit` (hrm_reason.limits) while the command line is parsed,
    before any other argument is read: the bound is declared with the flag, so that no default filled in later skips
    it (`--seeds 0` once trained 3 seeds, 0 read as "not given"). `flag`: another flag giving the same count (hrm eval's
    --adapt STEPS). tests/commands/test_bounds.py reads `limit` here."""

    def check(value: Any) -> Any:
        return limit.check(value, flag)

    check.limit = limit  # type: ignore[attr-defined]
    return check


def echo_lines(lines: Iterable[Any]) -> None:
    """Print each line a command's package function gives, as the work goes."""
    for line in lines:
        typer.echo(line)


def device_name(value: str) -> str:
    from hrm_reason.runtime.device import check_device_name

    return check_device_name(value)


# `hrm --version`, an option of the app itself.
def print_version(value: bool) -> None:
    """--version's callback: eager, so it runs before typer looks for a command (`hrm --version` alone is valid)."""
    if value:
        from hrm_reason.version import version_line

        typer.echo(version_line())
        raise typer.Exit()


VersionFlag = Annotated[
    bool,
    typer.Option(
        "--version",
        is_eager=True,
        callback=print_version,
        help="Print the version (and the git commit of a checkout) and exit.",
    ),
]


# Options several commands share.
Device = Annotated[str, typer.Option("--device", help="auto, cpu or cuda.", callback=device_name)]
Quiet = Annotated[bool, typer.Option("--quiet", help="No progress bars.")]


# The model of hrm eval, solve and viz predictions: a run, or a checkpoint and its config (hrm_reason.load).
RunDir = Annotated[Path | None, typer.Option("--run", help="Run directory (its latest checkpoint and config).")]
CheckpointPath = Annotated[
    Path | None,
    typer.Option(
        "--checkpoint",
        help="Checkpoint directory or weights file (ours, or an original HRM or TRM one), or a Hugging Face repository "
        "owner/name of a released checkpoint (downloaded to the Hugging Face cache; the cache only when offline).",
    ),
]
ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Config for --checkpoint outside a run (e.g. the original all_config.yaml)."),
]


# The eval results of hrm viz run and html.
EvalJsons = Annotated[
    list[Path] | None, typer.Option("--eval", help="Results of hrm eval --json (default: such JSON files in RUN_DIR).")
]


def one_of(run: Path | None, checkpoint: Path | None) -> Path:
    """The model given as --run or --checkpoint: exactly one of them, a run being a local folder."""
    if (run is None) == (checkpoint is None):
        raise UserError("give exactly one of --run DIR or --checkpoint PATH")
    if run is not None and not run.is_dir():  # a run is a local folder, never a hub repository
        raise UserError(f"--run {run}: no such run directory")
    return run or checkpoint  # type: ignore[return-value]


def write_json(path: Path, value: object, indent: int | None = 2) -> str:
    """`value` written atomically as JSON to `path` (claimed before the work); the line that says so."""
    atomic_write_text(path, json.dumps(value, indent=indent))
    return f"wrote {path}"


def written(paths: Iterable[Path]) -> list[str]:
    """The lines that say where each file went."""
    return [f"wrote {path}" for path in paths]


def overrides(args: list[str], command: str) -> list[str]:
    """The key=value arguments after the flags (typer's ctx.args); anything else that looks like a flag is an error."""
    for item in args:
        if item.startswith("-"):
            raise UserError(f"unknown option {item} (overrides are key=value; see hrm {command} --help)")
    return list(args)


# Test-time compute options of hrm eval and hrm solve (docs/training.md, "Test-time compute").
Tta = Annotated[
    int,
    typer.Option(
        "--tta",
        help="Transformed copies per puzzle (Sudoku, maze, ARC symmetries), mapped back and combined; at most the "
        "task's group (a maze has 8), and copies x samples at most 1024.",
    ),
]
Samples = Annotated[
    int,
    typer.Option(
        "--samples", help="Trajectories per copy, at most 256; sample 0 has no noise.", callback=bounded(SAMPLES)
    ),
]
Noise = Annotated[float, typer.Option("--noise", help="Std of the Gaussian noise added to the carried state.")]
NoiseAt = Annotated[str, typer.Option("--noise-at", help="every (each segment, as PTRM) or initial.")]
Select = Annotated[str, typer.Option("--select", help="Choose the answer by q (halting confidence) or vote.")]
TtaSeed = Annotated[int, typer.Option("--tta-seed", help="Seed of the transforms and the noise.")]
PuzzleId = Annotated[str, typer.Option("--puzzle-id", help="keep, or blank: feed every puzzle identifier 0.")]
TEST_TIME_FLAGS: dict[str, tuple[Any, Any]] = {
    "tta": (Tta, 1),
    "samples": (Samples, 1),
    "noise": (Noise, 0.0),
    "noise_at": (NoiseAt, "every"),
    "select": (Select, "q"),
    "tta_seed": (TtaSeed, 0),
    "puzzle_id": (PuzzleId, "keep"),
}


def keyword(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def test_time_options(fields: dict[str, Any]) -> Any:
    """The test-time flags popped from a command's arguments, validated as one TestTimeOptions."""
    from hrm_reason.evaluate.tta import TestTimeOptions

    tta, samples, noise, noise_at, select, seed, puzzle_id = (fields.pop(name) for name in TEST_TIME_FLAGS)
    if puzzle_id not in ("keep", "blank"):
        raise UserError(f"--puzzle-id {puzzle_id!r}: expected 'keep' or 'blank'")
    return TestTimeOptions(tta, samples, noise, noise_at, select, seed, puzzle_id == "blank")


def test_time_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """Gives `command` the flags above (after its own); it receives them validated, as one `test_time` argument."""
    # eval_str: the command's annotations are strings (from __future__ import annotations); left so, typer would not
    # see their typer.Option (help, callbacks such as --device's check) and would read each as a bare flag
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "test_time"]

    @functools.wraps(command)
    def with_flags(**fields: Any) -> Any:
        test_time = test_time_options(fields)  # popped from fields first
        return command(**fields, test_time=test_time)

    params = own + [keyword(name, kind, default) for name, (kind, default) in TEST_TIME_FLAGS.items()]
    with_flags.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return with_flags


# ------------------------------------------------------------------------------------------ hrm build-data TASK


def _read_as(annotation: Any) -> Any:
    """The type typer reads for a field of this type: a Literal is read as str, and the model checks the choice."""
    if get_origin(annotation) in (Union, UnionType):
        return functools.reduce(operator.or_, map(_read_as, get_args(annotation)))
    return str if get_origin(annotation) is Literal else annotation


def _flag(name: str, field: FieldInfo, marker: type, help_words: dict[str, str]) -> inspect.Parameter:
    """A build option as typer's parameter: --name-with-dashes, the field's type, default (None where the model makes
    one) and description (its {words} filled in) as help; a `marker` (datasets_build.options.Flag) in the field's
    metadata says the rest."""
    flag = next((m for m in field.metadata if isinstance(m, marker)), marker())
    default = inspect.Parameter.empty if field.is_required() else None if field.default_factory else field.default
    kind = flag.parse or _read_as(field.annotation)
    text = (field.description or "").format_map(help_words)
    names = [] if flag.argument else ["--" + name.replace("_", "-"), *([flag.short] if flag.short else [])]
    declare = typer.Argument if flag.argument else typer.Option
    # escape: rich would read "[text]" in a description as markup and drop it
    declared = declare(*names, help=escape(text), metavar=flag.metavar, hidden=flag.hidden)
    return keyword(name, Annotated[kind | None if default is None else kind, declared], default)


def validated(options_cls: type[BaseModel], **fields: object) -> BaseModel:
    """Validated build options; a validation error becomes the one-line message naming the flag and its value."""
    try:
        return options_cls(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        flag = "--" + name.replace("_", "-") if name else "options"
        raise UserError(f"{flag} {fields.get(name, '')!s}: {err['msg'].removeprefix('Value error, ')}") from None


def options_command(
    options_cls: type[BaseModel], marker: type, quiet: bool, build: Callable[[BaseModel, bool | None], str]
) -> Callable[..., None]:
    """`hrm build-data TASK` as a typer command: one flag per field of `options_cls` (its docstring the help), with
    --quiet where `quiet`; it prints what `build(options, progress)` returns (progress None: the builder has no bars)."""
    help_words = getattr(options_cls, "help_words", {})
    params = [_flag(name, field, marker, help_words) for name, field in options_cls.model_fields.items()]
    params += [keyword("quiet", Quiet, False)] if quiet else []

    def command(**fields: Any) -> None:
        progress = not fields.pop("quiet") if quiet else None
        typer.echo(build(validated(options_cls, **fields), progress))

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = options_cls.__doc__
    return command
