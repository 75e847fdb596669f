"""The `hrm` command line: each command declares its flags, calls one function of hrm_reason/commands/ and prints what
it returns (the flags several commands share, and the test-time ones, are declared in commands/cli_options.py).

Each command imports what it calls inside its body: the package needs torch, slow to import, and `hrm --help` or a
mistyped flag should answer at once.
"""

from __future__ import annotations

import functools
import os
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel

from datasets_build.options import (
    ArcBuildOptions,
    FileBuildOptions,
    Flag,
    MazeBuildOptions,
    SudokuBuildOptions,
    TextBuildOptions,
)
from hrm_reason.atomic import DISK_ERRORS
from hrm_reason.commands.cli_help import ConfigKeysCommand, hide_flag_placeholders
from hrm_reason.commands.cli_options import (
    CheckpointPath,
    ConfigFile,
    Device,
    Quiet,
    RunDir,
    VersionFlag,
    bounded,
    device_name,
    echo_lines,
    options_command,
    test_time_flags,
)
from hrm_reason.commands.viz_cli import viz_app
from hrm_reason.errors import UserError, one_line
from hrm_reason.limits import (
    ADAPT_LR,
    ADAPT_LR_WHOLE,
    ADAPT_SEED,
    ADAPT_STEPS,
    BENCH_SEQ_LEN,
    BENCH_STEPS,
    BENCH_VOCAB,
    BENCH_WARMUP,
    COMPARE_JOBS,
    COMPARE_SEEDS,
    EVAL_BATCH,
    EVAL_SEQ_LEN,
    GENERATE_TOKENS,
    MMAX,
    NUM_AUG,
)
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
app.add_typer(viz_app, name="viz")
DEFAULT_CONFIG = "quickstart.yaml"  # of hrm train without --config

# `hrm build-data TASK`: its flags are the fields of its options model (datasets_build/options.py; made into typer's
# by commands/cli_options.py options_command), its help the model's docstring; it runs datasets_build.TASK.build_TASK
# and prints the summary (True: with --quiet).
BUILDERS: dict[str, tuple[type[BaseModel], bool]] = {
    "sudoku": (SudokuBuildOptions, False),
    "arc": (ArcBuildOptions, False),
    "maze": (MazeBuildOptions, False),
    "text": (TextBuildOptions, True),
    "file": (FileBuildOptions, False),
}


def _build(task: str, options: BaseModel, progress: bool | None) -> str:
    """Runs datasets_build.TASK.build_TASK (with its progress bars where it has them) and returns its summary."""
    module = import_module(f"datasets_build.{task}")
    built = getattr(module, f"build_{task}")(options, **({} if progress is None else {"progress": progress}))
    return module.summary(built)


for task, (options, quiet) in BUILDERS.items():
    build_data_app.command(task)(options_command(options, Flag, quiet, functools.partial(_build, task)))


@app.callback()
def _options(version: VersionFlag = False) -> None:
    """The options of `hrm` itself, before any command (eager: --version answers without one, torch never imported)."""


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
    from hrm_reason.commands.train import train_command

    typer.echo(train_command(ctx.args, config, data, run_dir, resume, DEFAULT_CONFIG, progress=not quiet))


@app.command("eval")
@test_time_flags
def eval_cmd(
    mmax: int | None = typer.Option(
        None,
        "--mmax",
        callback=bounded(MMAX),
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
        callback=bounded(EVAL_BATCH),
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
        callback=bounded(EVAL_SEQ_LEN),
        help="LM heads: tokens predicted per window (default: the run's seq_len, 256 without a run config).",
    ),
    adapt_steps: int | None = typer.Option(
        None,
        "--adapt",
        metavar="STEPS",
        callback=bounded(ADAPT_STEPS, "--adapt"),
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
    from hrm_reason.commands.eval import eval_command

    echo_lines(eval_command(
        run, checkpoint, config, data, mmax, batch_size, max_examples, max_tokens, seq_len, adapt_steps, json_out,
        submission, device, not quiet, test_time,
    ))  # fmt: skip


@app.command("solve")
@test_time_flags
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
        callback=bounded(MMAX),
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
        callback=bounded(ADAPT_STEPS, "--adapt"),
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
    from hrm_reason.commands.solve import solve_command

    echo_lines(solve_command(
        puzzle, run, checkpoint, config, file, sys.stdin, mmax, allow_unsolvable, json_out, png, adapt_steps, device,
        not quiet, test_time,
    ))  # fmt: skip


@app.command("adapt")
def adapt_cmd(
    run: Path = typer.Argument(..., help="Run directory of an ACT puzzle model trained on an ARC dataset."),
    tasks: list[Path] = typer.Argument(..., metavar="TASK...", help="ARC task JSON files, or folders of them."),
    steps: int = typer.Option(
        200, "--steps", callback=bounded(ADAPT_STEPS), help="Adaptation steps (one ACT segment each), at most 100,000."
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        callback=bounded(ADAPT_SEED),
        help="Seed of the batches, the translations and the halting exploration.",
    ),
    num_aug: int | None = typer.Option(
        None, "--num-aug", callback=bounded(NUM_AUG), help="Augmented variants (default: the dataset's)."
    ),
    whole: bool = typer.Option(False, "--whole", help="Train the network too (default: the new rows alone)."),
    lr: float | None = typer.Option(
        None, "--lr", callback=bounded(ADAPT_LR), help="SignSGD rate of the rows (default: the run's puzzle_emb_lr)."
    ),
    lr_whole: float | None = typer.Option(
        None,
        "--lr-whole",
        callback=bounded(ADAPT_LR_WHOLE),
        help="Learning rate of the network under --whole (default 1e-4; only with --whole).",
    ),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Default: the run's global batch."),
    mmax: int | None = typer.Option(
        None, "--mmax", callback=bounded(MMAX), help="Segments of the answer (default: halt_max_steps)."
    ),
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
    device: str = typer.Option("cpu", "--device", help="cpu (default), cuda or auto.", callback=device_name),
    quiet: Quiet = False,
) -> None:
    """Adapt new puzzle-embedding rows to ARC tasks the model never saw, on their demonstrations only, then answer
    their test inputs by voting: two attempts per test input, OUT/submission.json and the rows in
    OUT/adapted.safetensors. A second call with the same tasks and options loads the rows.

    Example: hrm adapt runs/arc-rung task.json --steps 200"""
    from hrm_reason.commands.adapt import AdaptOptions, adapt_command, step_counts

    options = AdaptOptions(steps, seed, num_aug, whole, lr, lr_whole, batch_size, mmax, init, step_counts(curve))
    typer.echo(adapt_command(run, tasks, options, out, json_out, device, progress=not quiet))


@app.command("generate")
def generate_cmd(
    run: Path = typer.Option(
        ..., "--run", help="Run directory, checkpoint, or transformers HrmText directory of a language-model head."
    ),
    prompt: str = typer.Option("", "--prompt", help="Text to continue (empty: start a new document)."),
    max_new_tokens: int = typer.Option(
        200,
        "--max-new-tokens",
        callback=bounded(GENERATE_TOKENS),
        help="Tokens to generate at most (stops at the end-of-document token), at most 100,000.",
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
    from hrm_reason.commands.generate import generate_command

    typer.echo(generate_command(run, data, prompt, max_new_tokens, temperature, top_k, seed, prefix, no_cache, device))


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
        callback=bounded(BENCH_SEQ_LEN),
        help="Puzzle models whose dataset is not built: sequence length (default 81: 9x9 Sudoku); LM heads: seq_len=N.",
    ),
    vocab_size: int | None = typer.Option(
        None,
        "--vocab-size",
        callback=bounded(BENCH_VOCAB),
        help="Vocabulary when the config's dataset is not built, and of LM heads (default 11).",
    ),
    steps: int = typer.Option(
        5, "--steps", callback=bounded(BENCH_STEPS), help="Timed training steps (and evaluation segments), 1 to 10,000."
    ),
    warmup: int = typer.Option(
        2,
        "--warmup",
        callback=bounded(BENCH_WARMUP),
        help="Untimed steps first (they absorb torch.compile time), 1 to 1,000.",
    ),
) -> None:
    """Training and evaluation examples/s, model FLOPs, measured matmul peak, MFU and peak memory of a config.
    Extra arguments are key=value overrides, e.g. arch.q_target=next_segment compile=true device=cpu."""
    from hrm_reason.commands.bench import bench_command

    echo_lines(bench_command(config, ctx.args, json_out, batch_size, seq_len, vocab_size, steps, warmup))


@app.command("compare")
def compare_cmd(
    items: list[str] | None = typer.Argument(
        None,
        metavar="CONFIG... [KEY=VALUE...]",
        help="Config files, then key=value overrides applied to every one (e.g. max_steps=500 max_seconds=600); "
        "with --runs: run or study directories.",
    ),
    seeds: int | None = typer.Option(
        None, "--seeds", callback=bounded(COMPARE_SEEDS), help="Train each config with seeds 0..N-1 [default: 3]."
    ),
    out: Path = typer.Option(
        ..., "--out", help="Study directory: runs/<config>/seed<k>/, results.json, results.md, plots/."
    ),
    mmax: int | None = typer.Option(
        None,
        "--mmax",
        callback=bounded(MMAX),
        help="Segments at evaluation (default: twice each config's halt_max_steps).",
    ),
    quiet: Quiet = False,
    jobs: int | None = typer.Option(
        None,
        "--jobs",
        callback=bounded(COMPARE_JOBS),
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
    from hrm_reason.commands.compare import compare_command

    command = "hrm " + " ".join(sys.argv[1:])
    echo_lines(compare_command(items or [], runs, seeds, out, mmax, jobs, targets, metric, not quiet, command))


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback. A process of torchrun
    ends without the interpreter's teardown (runtime/distributed.py exit_without_teardown)."""
    if "LOCAL_RANK" in os.environ:
        from hrm_reason.runtime.distributed import exit_without_teardown

        exit_without_teardown(run_command)
    run_command()


def run_command() -> None:
    """Run the command line's command; exit with its code."""
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
