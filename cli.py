"""The `hrm` command line: thin wrappers that parse flags, validate them and call the package.

Each command imports what it calls inside its body: the package needs torch, slow to import, and `hrm --help` or a
mistyped flag should answer at once.
"""

from __future__ import annotations

import functools
import inspect
import json
import operator
import sys
from importlib import import_module
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from rich.markup import escape

from datasets_build.options import ArcBuildOptions, Flag, MazeBuildOptions, SudokuBuildOptions, TextBuildOptions
from hrm_reason.atomic import DISK_ERRORS, atomic_write_text
from hrm_reason.commands.cli_help import ConfigKeysCommand, hide_flag_placeholders
from hrm_reason.errors import UserError, one_line
from hrm_reason.outputs import check_arguments

hide_flag_placeholders()  # flags take no value: no <bool> in the help
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Build HRM benchmarks, train HRM, evaluate it.",
)
build_data_app = typer.Typer(no_args_is_help=True, help="Build a benchmark dataset in the original HRM on-disk format.")
app.add_typer(build_data_app, name="build-data")
DEFAULT_CONFIG = "quickstart.yaml"  # of hrm train without --config

# `hrm build-data TASK`: its flags are the fields of its options model (datasets_build/options.py, _flag), its help
# the model's docstring; it runs datasets_build.TASK.build_TASK and prints the summary (True: with --quiet).
BUILDERS: dict[str, tuple[type[BaseModel], bool]] = {
    "sudoku": (SudokuBuildOptions, False),
    "arc": (ArcBuildOptions, False),
    "maze": (MazeBuildOptions, False),
    "text": (TextBuildOptions, True),
}


def _device_name(value: str) -> str:
    from hrm_reason.runtime.device import check_device_name

    return check_device_name(value)


# Options several commands share, declared once.
Device = Annotated[str, typer.Option("--device", help="auto, cpu or cuda.", callback=_device_name)]
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


# Test-time compute options of hrm eval and hrm solve (docs/training.md, "Test-time compute").
Tta = Annotated[
    int,
    typer.Option(
        "--tta",
        help="Transformed copies per puzzle (Sudoku, maze, ARC symmetries), mapped back and combined; at most the "
        "task's group (a maze has 8), and copies x samples at most 1024.",
    ),
]
Samples = Annotated[int, typer.Option("--samples", help="Trajectories per copy, at most 256; sample 0 has no noise.")]
Noise = Annotated[float, typer.Option("--noise", help="Std of the Gaussian noise added to the carried state.")]
NoiseAt = Annotated[str, typer.Option("--noise-at", help="every (each segment, as PTRM) or initial.")]
Select = Annotated[str, typer.Option("--select", help="Choose the answer by q (halting confidence) or vote.")]
TtaSeed = Annotated[int, typer.Option("--tta-seed", help="Seed of the transforms and the noise.")]
PuzzleId = Annotated[str, typer.Option("--puzzle-id", help="keep, or blank: feed every puzzle identifier 0.")]


def _keyword(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _test_time_flags(command: Any) -> Any:
    """Gives `command` the flags above (after its own); it receives them validated, as one `test_time` argument."""
    flags = {"tta": (Tta, 1), "samples": (Samples, 1), "noise": (Noise, 0.0), "noise_at": (NoiseAt, "every")}
    flags |= {"select": (Select, "q"), "tta_seed": (TtaSeed, 0), "puzzle_id": (PuzzleId, "keep")}
    # eval_str: the command's annotations are strings (from __future__ import annotations); left so, typer would not
    # see their typer.Option (help, callbacks such as --device's check) and would read each as a bare flag
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "test_time"]

    @functools.wraps(command)
    def with_flags(**fields: Any) -> Any:
        from hrm_reason.evaluate.tta import TestTimeOptions

        tta, samples, noise, noise_at, select, seed, puzzle_id = (fields.pop(name) for name in flags)
        if puzzle_id not in ("keep", "blank"):
            raise UserError(f"--puzzle-id {puzzle_id!r}: expected 'keep' or 'blank'")
        options = TestTimeOptions(tta, samples, noise, noise_at, select, seed, puzzle_id == "blank")
        return command(**fields, test_time=options)

    params = own + [_keyword(name, kind, default) for name, (kind, default) in flags.items()]
    with_flags.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return with_flags


def _read_as(annotation: Any) -> Any:
    """The type typer reads for a field of this type: a Literal is read as str, and the model checks the choice."""
    if get_origin(annotation) in (Union, UnionType):
        return functools.reduce(operator.or_, map(_read_as, get_args(annotation)))
    return str if get_origin(annotation) is Literal else annotation


def _flag(name: str, field: FieldInfo, help_words: dict[str, str]) -> inspect.Parameter:
    """A build option as typer's parameter: --name-with-dashes, the field's type, default (None where the model makes
    one) and description (its {words} filled in) as help; a `Flag` in the field's metadata says the rest."""
    flag = next((m for m in field.metadata if isinstance(m, Flag)), Flag())
    default = inspect.Parameter.empty if field.is_required() else None if field.default_factory else field.default
    kind = flag.parse or _read_as(field.annotation)
    text = (field.description or "").format_map(help_words)
    names = [] if flag.argument else ["--" + name.replace("_", "-"), *([flag.short] if flag.short else [])]
    declare = typer.Argument if flag.argument else typer.Option
    # escape: rich would read "[text]" in a description as markup and drop it
    declared = declare(*names, help=escape(text), metavar=flag.metavar, hidden=flag.hidden)
    return _keyword(name, Annotated[kind | None if default is None else kind, declared], default)


def _options(options_cls: type[BaseModel], **fields: object) -> BaseModel:
    """Validated build options; a validation error becomes the one-line message naming the flag and its value."""
    try:
        return options_cls(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        flag = "--" + name.replace("_", "-") if name else "options"
        raise UserError(f"{flag} {fields.get(name, '')!s}: {err['msg'].removeprefix('Value error, ')}") from None


def _add_builder(task: str) -> None:
    """Registers `hrm build-data TASK`: parse the flags, validate them as its options model, build, print."""
    options, quiet = BUILDERS[task]
    params = [_flag(name, field, getattr(options, "help_words", {})) for name, field in options.model_fields.items()]
    params += [_keyword("quiet", Quiet, False)] if quiet else []

    def command(**fields: Any) -> None:
        module = import_module(f"datasets_build.{task}")
        progress = {"progress": not fields.pop("quiet")} if quiet else {}
        built = getattr(module, f"build_{task}")(_options(options, **fields), **progress)
        typer.echo(module.summary(built))

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = options.__doc__
    build_data_app.command(task)(command)


for task in BUILDERS:
    _add_builder(task)


def _overrides(ctx: typer.Context, command: str) -> list[str]:
    """The key=value arguments after the flags; anything else that looks like a flag is an error."""
    for item in ctx.args:
        if item.startswith("-"):
            raise UserError(f"unknown option {item} (overrides are key=value; see hrm {command} --help)")
    return list(ctx.args)


def _one_of(run: Path | None, checkpoint: Path | None) -> Path:
    if (run is None) == (checkpoint is None):
        raise UserError("give exactly one of --run DIR or --checkpoint PATH")
    if run is not None and not run.is_dir():  # a run is a local folder, never a hub repository
        raise UserError(f"--run {run}: no such run directory")
    return run or checkpoint


def _write_json(path: Path, value: object, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(value, indent=indent))
    typer.echo(f"wrote {path}")


@app.command(cls=ConfigKeysCommand, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help=f"YAML config (default: configs/{DEFAULT_CONFIG}; with --resume: the run's config.yaml).",
    ),
    data: Path | None = typer.Option(None, "--data", help="Dataset directory (overrides data_path)."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Run directory (overrides run_dir)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir from its latest checkpoint."),
    quiet: Quiet = False,
) -> None:
    """Train a model of any family. Extra arguments are key=value overrides, e.g. arch.hidden_size=256 lr=3e-4."""
    from hrm_reason.config import resume_config
    from hrm_reason.train.loop import train as run_training

    overrides = _overrides(ctx, "train")
    overrides += [f"data_path={data}"] * (data is not None) + [f"run_dir={run_dir}"] * (run_dir is not None)
    out = run_training(resume_config(run_dir, config, resume, overrides, DEFAULT_CONFIG), resume, progress=not quiet)
    typer.echo(f"run directory: {out}")


@app.command("eval")
@_test_time_flags
def eval_cmd(
    mmax: int | None = typer.Option(
        None,
        "--mmax",
        min=1,
        help="ACT puzzle models: segments to run (default 16, with --adapt halt_max_steps; may exceed halt_max_steps; "
        "at most 1024).",
    ),
    run: RunDir = None,
    checkpoint: CheckpointPath = None,
    config: ConfigFile = None,
    data: Path | None = typer.Option(None, "--data", help="Dataset directory (default: the config's data_path)."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the results as JSON to this file."),
    batch_size: int | None = typer.Option(
        None,
        "--batch-size",
        min=1,
        help="Examples per batch (default: the config's eval batch, else as many as fit, up to 1024; docs/commands.md).",
    ),
    max_examples: int | None = typer.Option(
        None, "--max-examples", min=1, help="Puzzle datasets: evaluate the first N test examples only."
    ),
    device: Device = "auto",
    quiet: Quiet = False,
    submission: Path | None = typer.Option(
        None,
        "--submission",
        help="ARC: write the Kaggle submission.json (top-2 voted answers per test input) to this file.",
    ),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", min=1, help="LM heads: validate on the first N tokens of the val split (default: all)."
    ),
    seq_len: int | None = typer.Option(
        None,
        "--seq-len",
        min=1,
        help="LM heads: tokens predicted per window (default: the run's seq_len, 256 without a run config).",
    ),
    adapt_steps: int | None = typer.Option(
        None,
        "--adapt",
        metavar="STEPS",
        help="ARC: the test split's tasks as new tasks: adapt new puzzle-embedding rows to their demonstrations for "
        "this many steps, then vote, as hrm adapt does on the build's test_tasks/ folder (docs/commands.md).",
    ),
    test_time: Any = None,
) -> None:
    """Accuracy after every segment m = 1..mmax on the test split, and the ACT (Q-head halting) result.

    --tta/--samples add a table of exact accuracy for each segment budget, number of copies and samples, against the
    total segments run per puzzle (docs/training.md, "Test-time compute"; plot it with hrm viz test-time).
    On ARC datasets also the voting over augmentations: pass@1, 2, 10, 100, 1000 (per-task results in --json); --adapt
    STEPS treats the test split's tasks as new ones (hrm adapt on the build's test_tasks/). For a language-model head
    (or a transformers HrmText directory): cross-entropy, perplexity and tokens/s on the text dataset's val split; on a
    puzzle dataset (PrefixLM on puzzles) the exact and token accuracy of greedy decoding on the test split."""
    from hrm_reason.commands.adapt import eval_adapted
    from hrm_reason.evaluate.run import evaluate_run

    if adapt_steps is not None:
        others = {"--checkpoint": checkpoint, "--config": config, "--batch-size": batch_size}
        others |= {"--max-examples": max_examples, "--max-tokens": max_tokens, "--seq-len": seq_len}
        text = eval_adapted(run, data, adapt_steps, mmax, json_out, submission, device, not quiet, others, test_time)
        typer.echo(text)
        return
    _claim_eval_outputs(json_out, submission)
    result = evaluate_run(
        _one_of(run, checkpoint),
        config,
        data,
        mmax,
        batch_size,
        max_examples,
        device,
        progress=not quiet,
        max_tokens=max_tokens,
        seq_len=seq_len,
        arc_submission=submission is not None,
        test_time=test_time,
    )
    _echo_eval(result, json_out, submission)


def _claim_eval_outputs(json_out: Path | None, submission: Path | None) -> None:
    """hrm eval's --json and --submission: new or its own, checked before the evaluation (hrm_reason.outputs)."""
    from hrm_reason.outputs import EVAL_JSON, SUBMISSION_OUT, claim

    claim(submission, SUBMISSION_OUT)
    claim(json_out, EVAL_JSON)


def _echo_eval(result: Any, json_out: Path | None, submission: Path | None) -> None:
    from hrm_reason.evaluate.run import format_result

    arc_submission = getattr(result, "extra", {}).pop("arc_submission", None)
    typer.echo(format_result(result))
    if submission is not None and arc_submission is not None:
        _write_json(submission, arc_submission, indent=None)
    if json_out is not None:
        _write_json(json_out, result.to_dict())


@app.command("solve")
@_test_time_flags
def solve_cmd(
    puzzle: str | None = typer.Argument(
        None,
        metavar="[PUZZLE]",
        help="The puzzle as text (a Sudoku line, a maze, an ARC task JSON), or - to read stdin.",
    ),
    run: RunDir = None,
    checkpoint: CheckpointPath = None,
    config: ConfigFile = None,
    file: Path | None = typer.Option(
        None,
        "--file",
        help="Read the puzzles from this file: Sudoku one per line (or n rows), mazes separated by a blank line, "
        "or an ARC task JSON (its test inputs; the file name is the task id).",
    ),
    mmax: int | None = typer.Option(
        None,
        "--mmax",
        min=1,
        help="Segments at most (default: the trained halt_max_steps; at most 1024); ACT halts earlier.",
    ),
    allow_unsolvable: bool = typer.Option(
        False,
        "--allow-unsolvable",
        help="Run the model on a puzzle with no solution (a repeated given, a cell without a candidate, a maze without "
        "a path) instead of refusing it; the problem is shown as a note.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the answers as JSON instead of text."),
    png: Path | None = typer.Option(
        None, "--png", help="Write a picture of each puzzle and its answer to this folder."
    ),
    adapt_steps: int | None = typer.Option(
        None,
        "--adapt",
        help="ARC tasks the model never saw: first adapt a new puzzle-embedding row to the --file task's "
        "demonstrations for this many steps, then answer by voting, as hrm adapt does (its other options at their "
        "defaults).",
    ),
    device: Device = "auto",
    quiet: Quiet = False,
    test_time: Any = None,
) -> None:
    """Solve your own puzzles with a trained model: prints each answer, whether it is valid (Sudoku rules and givens;
    a maze path from S to G, and whether it is shortest), the segments used and the confidence (sigmoid of q_halt).

    Examples: hrm solve --run runs/sudoku "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79";
    hrm solve --run runs/maze --file maze.txt --png out/

    --tta/--samples choose each answer over transformed copies and noisy trajectories, as hrm eval's.
    --adapt STEPS solves one ARC task the model never trained on: hrm solve --run runs/arc-rung --file task.json --adapt
    200"""
    from hrm_reason.commands.adapt import refuse_unused, solve_adapted
    from hrm_reason.commands.solve import answers_json, format_answers, load_solver, read_puzzles, solve, write_pngs
    from hrm_reason.outputs import SOLVE_PNG, claim

    if adapt_steps is not None:
        others = {"--checkpoint": checkpoint, "--config": config, "--png": png, "PUZZLE": puzzle}
        refuse_unused(
            others | {"--allow-unsolvable": allow_unsolvable}, test_time, "it adapts a run's rows, then votes"
        )
        typer.echo(solve_adapted(run, file, adapt_steps, mmax, json_out, device, not quiet))
        return
    claim(png, SOLVE_PNG)
    solver = load_solver(_one_of(run, checkpoint), config, device)
    puzzles = read_puzzles(solver.task, puzzle, file, sys.stdin)
    budget = mmax or solver.halt_max_steps
    answers = solve(solver, puzzles, budget, test_time, progress=not quiet, allow_unsolvable=allow_unsolvable)
    pngs = write_pngs(solver, answers, png) if png is not None else []
    if json_out:
        typer.echo(answers_json(solver, answers, budget, pngs or None))
        return
    typer.echo(format_answers(answers))
    _echo_written(pngs)


@app.command("adapt")
def adapt_cmd(
    run: Path = typer.Argument(..., help="Run directory of an ACT puzzle model trained on an ARC dataset."),
    tasks: list[Path] = typer.Argument(..., metavar="TASK...", help="ARC task JSON files, or folders of them."),
    steps: int = typer.Option(200, "--steps", help="Adaptation steps (one ACT segment each), at most 100,000."),
    seed: int = typer.Option(0, "--seed", help="Seed of the batches, the translations and the halting exploration."),
    num_aug: int | None = typer.Option(None, "--num-aug", help="Augmented variants (default: the dataset's)."),
    whole: bool = typer.Option(False, "--whole", help="Train the network too (default: the new rows alone)."),
    lr: float | None = typer.Option(None, "--lr", help="SignSGD rate of the rows (default: the run's puzzle_emb_lr)."),
    lr_whole: float | None = typer.Option(
        None, "--lr-whole", help="Learning rate of the network under --whole (default 1e-4; only with --whole)."
    ),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Default: the run's global batch."),
    mmax: int | None = typer.Option(None, "--mmax", min=1, help="Segments of the answer (default: halt_max_steps)."),
    init: str = typer.Option(
        "mean",
        "--init",
        help="New rows start at the mean of the trained rows, or the blank row ('--steps 0 --init "
        "blank' answers as --puzzle-id blank).",
    ),
    curve: str | None = typer.Option(
        None, "--curve", metavar="K,K,...", help="Also answer after these step counts: pass@k per count in --json."
    ),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: RUN/adapt/<task id>)."),
    json_out: Path | None = typer.Option(
        None, "--json", help="Also write pass@k, the curve, CPU-seconds and the attempts as JSON to this file."
    ),
    device: str = typer.Option("cpu", "--device", help="cpu (default), cuda or auto.", callback=_device_name),
    quiet: Quiet = False,
) -> None:
    """Adapt new puzzle-embedding rows to ARC tasks the model never saw, on their demonstrations only, then answer
    their test inputs by voting: two attempts per test input, OUT/submission.json and the rows in
    OUT/adapted.safetensors. A second call with the same tasks and options loads the rows.

    Example: hrm adapt runs/arc-rung task.json --steps 200"""
    from hrm_reason.commands.adapt import AdaptOptions, adapt_command

    counts = _step_counts(curve) if curve else ()
    options = AdaptOptions(steps, seed, num_aug, whole, lr, lr_whole, batch_size, mmax, init, counts)
    typer.echo(adapt_command(run, tasks, options, out, json_out, device, progress=not quiet))


def _step_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(sorted({int(k) for k in text.split(",") if k.strip()}))
    except ValueError:
        counts = ()
    if not counts:
        raise UserError(f"--curve {text!r}: expected comma-separated step counts, e.g. 0,50,100")
    return counts


@app.command("generate")
def generate_cmd(
    run: Path = typer.Option(
        ..., "--run", help="Run directory, checkpoint, or transformers HrmText directory of a language-model head."
    ),
    prompt: str = typer.Option("", "--prompt", help="Text to continue (empty: start a new document)."),
    max_new_tokens: int = typer.Option(
        200, "--max-new-tokens", min=1, help="Tokens to generate at most (stops at the end-of-document token)."
    ),
    temperature: float = typer.Option(
        0.8,
        "--temperature",
        min=0.0,
        help="Sampling temperature: 0 is greedy decoding, else finite and at least 1e-06.",
    ),
    top_k: int | None = typer.Option(None, "--top-k", min=1, help="Sample among the k most likely tokens only."),
    seed: int = typer.Option(
        0, "--seed", min=0, max=2**63 - 1, help="Seed of the sampling generator: same seed, same text."
    ),
    prefix: bool = typer.Option(
        False, "--prefix", help="The prompt is a bidirectional prefix (token_type_ids 1; hrm_text PrefixLM)."
    ),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Recompute the whole sequence for every token instead of using the head's KV cache."
    ),
    data: Path | None = typer.Option(
        None, "--data", help="Text dataset whose tokenizer to use (default: the one saved with the run)."
    ),
    device: Device = "auto",
) -> None:
    """Continue --prompt with a trained language-model head (KV cache when the head has one)."""
    from hrm_reason.commands.generate import check_temperature, generate_text, load_for_generation
    from hrm_reason.runtime.device import resolve_device

    check_temperature(temperature)  # before the model loads
    dev = resolve_device(device)
    model, tokenizer = load_for_generation(run, data, dev)
    cache = False if no_cache else None  # None: the head's KV cache where it has one
    text = generate_text(
        model, tokenizer, prompt, max_new_tokens, temperature, top_k, seed, use_cache=cache, prefix=prefix, device=dev
    )
    typer.echo(prompt + text)


@app.command("convert")
def convert_cmd(
    src: Path = typer.Option(
        ...,
        "--from",
        help="A transformers HrmText directory (config.json + model.safetensors), or an hrm_text run/checkpoint.",
    ),
    dst: Path = typer.Option(
        ...,
        "--to",
        help="Output directory: our checkpoint (from transformers), or a transformers HrmText directory (from ours).",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the output if it exists."),
) -> None:
    """Convert HRM-Text checkpoints between transformers (HrmTextForCausalLM) and hrm-reason; logits are unchanged."""
    from hrm_reason.commands.convert import convert_hrm_text

    typer.echo(f"wrote {convert_hrm_text(src, dst, overwrite)}")


viz_app = typer.Typer(
    no_args_is_help=True,
    help='Pictures (PNG): puzzles, the prediction after every segment, training curves. Needs matplotlib: pip install "hrm-reason\\[viz]".',
)
app.add_typer(viz_app, name="viz")


def _viz_out(out: Path) -> Path:
    """A folder of hrm viz's pictures (new, empty or its own), checked before any figure is drawn."""
    from hrm_reason.outputs import VIZ_FOLDER, claim

    return claim(out, VIZ_FOLDER) or out


def _echo_written(paths: list[Path]) -> None:
    for path in paths:
        typer.echo(f"wrote {path}")


@viz_app.command("puzzle")
def viz_puzzle(
    data: Path = typer.Option(..., "--data", help="Dataset directory."),
    split: str = typer.Option("test", "--split", help="train or test."),
    index: int = typer.Option(0, "--index", help="First example (in the order hrm eval walks the split)."),
    count: int = typer.Option(1, "--count", help="Number of examples from --index on, one PNG each."),
    out: Path = typer.Option(Path("viz"), "--out", help="Output directory."),
) -> None:
    """Puzzles beside their solutions: Sudoku (givens bold, box lines), maze (walls, S, G, path), ARC (the ten colours)."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.puzzles import puzzle_figures

    _echo_written(save_figures(puzzle_figures(data, split, index, count), _viz_out(out)))


@viz_app.command("predictions")
def viz_predictions(
    run: RunDir = None,
    checkpoint: CheckpointPath = None,
    config: ConfigFile = None,
    data: Path | None = typer.Option(None, "--data", help="Dataset directory (default: the config's data_path)."),
    index: int = typer.Option(0, "--index", help="First test example."),
    count: int = typer.Option(1, "--count", help="Number of test examples from --index on, one PNG each."),
    mmax: int | None = typer.Option(None, "--mmax", help="Segments to run (default: the trained halt_max_steps)."),
    device: Device = "auto",
    out: Path | None = typer.Option(
        None, "--out", help="Output directory (default: RUN/viz, or viz with --checkpoint)."
    ),
) -> None:
    """The decoded prediction after every segment 1..mmax, with changed cells shaded, errors marked and q_halt plotted."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.predictions import prediction_figures

    out = _viz_out(out or (run / "viz" if run is not None else Path("viz")))
    _echo_written(
        save_figures(prediction_figures(_one_of(run, checkpoint), config, data, index, count, mmax, device), out)
    )


EvalJsons = Annotated[
    list[Path] | None, typer.Option("--eval", help="Results of hrm eval --json (default: such JSON files in RUN_DIR).")
]


@viz_app.command("run")
def viz_run(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (with metrics.jsonl).")],
    eval_json: EvalJsons = None,
    out: Path | None = typer.Option(None, "--out", help="Output directory (default: RUN_DIR/viz)."),
) -> None:
    """Training and evaluation curves from metrics.jsonl, and accuracy against segments from eval JSON files."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.curves import run_figures

    out = _viz_out(out or run_dir / "viz")
    _echo_written(save_figures(run_figures(run_dir, eval_json or []), out))


@viz_app.command("test-time")
def viz_test_time(
    eval_json: Path = typer.Argument(..., help="Result of hrm eval --json with --tta or --samples."),
    out: Path = typer.Option(Path("viz"), "--out", help="Output directory."),
) -> None:
    """Exact accuracy against total segments run per puzzle (m x tta x samples), one line per (tta, samples)."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.curves import compute_figure, read_eval_json

    out = _viz_out(out)
    figure = compute_figure(read_eval_json(eval_json), eval_json.stem, str(eval_json))
    _echo_written(save_figures([("test_time.png", figure)], out))


@viz_app.command("html")
def viz_html(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (with metrics.jsonl and checkpoints).")],
    eval_json: EvalJsons = None,
    out: Path | None = typer.Option(None, "--out", help="HTML file (default: RUN_DIR/viz/index.html)."),
    device: Device = "auto",
    data: Path | None = typer.Option(None, "--data", help="Dataset directory (default: the config's data_path)."),
    index: int = typer.Option(0, "--index", help="First test example of the prediction strips."),
    count: int = typer.Option(3, "--count", help="Prediction strips to include (0: none, no checkpoint needed)."),
    mmax: int | None = typer.Option(
        None, "--mmax", help="Segments of the prediction strips (default: the trained halt_max_steps)."
    ),
) -> None:
    """One self-contained HTML page for a run: curves, accuracy against segments, prediction strips, config."""
    from hrm_reason.limits import VIZ_STRIPS
    from hrm_reason.outputs import VIZ_PAGE, claim
    from hrm_reason.viz.html import run_page

    VIZ_STRIPS.check(count)
    path = out or run_dir / "viz" / "index.html"
    claim(path, VIZ_PAGE)
    atomic_write_text(path, run_page(run_dir, eval_json or [], data, index, count, mmax, device))
    typer.echo(f"wrote {path}")


@app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench_cmd(
    ctx: typer.Context,
    config: Path = typer.Option(
        ..., "--config", "-c", help="YAML config to measure (its dataset's shape when data_path exists)."
    ),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the figures as JSON to this file."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Examples per step (default: the config's global_batch_size)."
    ),
    seq_len: int | None = typer.Option(
        None,
        "--seq-len",
        help="Puzzle models whose dataset is not built: sequence length (default 81: 9x9 Sudoku); LM heads: seq_len=N.",
    ),
    vocab_size: int | None = typer.Option(
        None, "--vocab-size", help="Vocabulary when the config's dataset is not built, and of LM heads (default 11)."
    ),
    steps: int = typer.Option(5, "--steps", help="Timed training steps (and evaluation segments), 1 to 10,000."),
    warmup: int = typer.Option(2, "--warmup", help="Untimed steps first (they absorb torch.compile time), 1 to 1,000."),
) -> None:
    """Training and evaluation examples/s, model FLOPs, measured matmul peak, MFU and peak memory of a config.
    Extra arguments are key=value overrides, e.g. arch.q_target=next_segment compile=true device=cpu."""
    from hrm_reason.commands.bench import bench, format_result
    from hrm_reason.config import load_config
    from hrm_reason.outputs import BENCH_JSON, claim

    claim(json_out, BENCH_JSON)
    result = bench(load_config(config, _overrides(ctx, "bench")), batch_size, seq_len, vocab_size, steps, warmup)
    typer.echo(format_result(result))
    if json_out is not None:
        _write_json(json_out, result.to_dict())


@app.command("compare")
def compare_cmd(
    items: list[str] | None = typer.Argument(
        None,
        metavar="CONFIG... [KEY=VALUE...]",
        help="Config files, then key=value overrides applied to every one (e.g. max_steps=500 max_seconds=600); "
        "with --runs: run or study directories.",
    ),
    seeds: int | None = typer.Option(None, "--seeds", help="Train each config with seeds 0..N-1 [default: 3]."),
    out: Path = typer.Option(
        ..., "--out", help="Study directory: runs/<config>/seed<k>/, results.json, results.md, plots/."
    ),
    mmax: int | None = typer.Option(
        None, "--mmax", min=1, help="Segments at evaluation (default: twice each config's halt_max_steps)."
    ),
    quiet: Quiet = False,
    jobs: int | None = typer.Option(
        None,
        "--jobs",
        help="Runs trained at once, each in its own process with cpu_count/N threads (no progress bars) [default: 1].",
    ),
    runs: bool = typer.Option(
        False,
        "--runs",
        help="The arguments are run directories of hrm train or hrm compare, or study directories: summarise them "
        "(final evaluation, time to accuracy) without training or evaluating.",
    ),
    targets: str = typer.Option(
        "0.5,0.8", "--targets", help="Accuracies whose time, steps and training FLOPs to reach are reported."
    ),
    metric: str = typer.Option(
        "exact_accuracy", "--metric", help="The eval/ metric of the targets (e.g. optimal_path_accuracy for mazes)."
    ),
) -> None:
    """Train several configs (architectures) for several seeds on their data and compare them: accuracy mean ± std
    over seeds at the trained segments, after each m and with ACT, parameters, steps, and the CPU time, steps and
    FLOPs each run took to reach --targets. A rerun skips finished runs and resumes interrupted ones."""
    from hrm_reason.commands.compare import compare, compare_runs, parse_targets, split_arguments

    items, command, wanted = items or [], "hrm " + " ".join(sys.argv[1:]), parse_targets(targets)
    if runs:
        if given := [f for f, v in (("--seeds", seeds), ("--mmax", mmax), ("--jobs", jobs)) if v is not None]:
            raise UserError(f"{', '.join(given)}: --runs reads finished runs; it trains and evaluates nothing")
        results = compare_runs([Path(i) for i in items], out, wanted, metric, command)
    else:
        configs, overrides = split_arguments(items)
        results = compare(
            configs, seeds or 3, out, mmax, overrides, not quiet, command, jobs=jobs or 1, targets=wanted, metric=metric
        )
    typer.echo((out / "results.md").read_text())
    _echo_written([out / "results.json", out / "results.md", *map(Path, results["plots"])])


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback."""
    try:
        check_arguments(sys.argv[1:])
        code = app(standalone_mode=False, prog_name="hrm")
    except UserError as e:
        typer.echo(f"error: {one_line(str(e))}", err=True)
        sys.exit(2)
    except typer.TyperException as e:  # usage errors (unknown flag, bad value), from the click that typer ships
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        ctx = getattr(e, "ctx", None)
        hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        typer.echo(f"error: {one_line(message)}{hint}", err=True)
        sys.exit(getattr(e, "exit_code", 2))
    except OSError as e:  # a full disk or a read-only folder met outside the atomic writers (which name their output)
        if e.errno not in DISK_ERRORS:
            raise
        typer.echo(f"error: {DISK_ERRORS[e.errno]}" + (f": {e.filename}" if e.filename else ""), err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
