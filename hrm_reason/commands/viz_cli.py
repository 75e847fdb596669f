"""`hrm viz`: its commands and flags (typer); the pictures themselves are drawn by commands/viz.py, imported only
when a command runs (matplotlib is optional)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hrm_reason.commands.cli_options import (
    CheckpointPath,
    ConfigFile,
    Device,
    EvalJsons,
    RunDir,
    bounded,
    echo_lines,
)
from hrm_reason.limits import MMAX, VIZ_COUNT, VIZ_STRIPS

viz_app = typer.Typer(
    no_args_is_help=True,
    help='Pictures (PNG): puzzles, the prediction after every segment, training curves, an ARC task as answered. Needs matplotlib: pip install "hrm-reason\\[viz]".',
)


@viz_app.command("puzzle")
def viz_puzzle(
    data: Path = typer.Option(..., "--data", help="Dataset directory."),
    split: str = typer.Option("test", "--split", help="train or test."),
    index: int = typer.Option(0, "--index", help="First example (in the order hrm eval walks the split)."),
    count: int = typer.Option(
        1, "--count", callback=bounded(VIZ_COUNT), help="Number of examples from --index on, one PNG each."
    ),
    out: Path = typer.Option(Path("viz"), "--out", help="Output directory."),
) -> None:
    """Puzzles beside their solutions: Sudoku (givens bold, box lines), maze (walls, S, G, path), ARC (the ten colours)."""
    from hrm_reason.commands.viz import puzzle_pictures

    echo_lines(puzzle_pictures(data, split, index, count, out))


@viz_app.command("predictions")
def viz_predictions(
    run: RunDir = None,
    checkpoint: CheckpointPath = None,
    config: ConfigFile = None,
    data: Path | None = typer.Option(None, "--data", help="Dataset directory (default: the config's data_path)."),
    index: int = typer.Option(0, "--index", help="First test example."),
    count: int = typer.Option(
        1, "--count", callback=bounded(VIZ_COUNT), help="Number of test examples from --index on, one PNG each."
    ),
    mmax: int | None = typer.Option(
        None, "--mmax", callback=bounded(MMAX), help="Segments to run (default: the trained halt_max_steps)."
    ),
    device: Device = "auto",
    out: Path | None = typer.Option(
        None, "--out", help="Output directory (default: RUN/viz, or viz with --checkpoint)."
    ),
) -> None:
    """The decoded prediction after every segment 1..mmax, with changed cells shaded, errors marked and q_halt plotted."""
    from hrm_reason.commands.viz import prediction_pictures

    echo_lines(prediction_pictures(run, checkpoint, config, data, index, count, mmax, device, out))


@viz_app.command("run")
def viz_run(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (with metrics.jsonl).")],
    eval_json: EvalJsons = None,
    out: Path | None = typer.Option(None, "--out", help="Output directory (default: RUN_DIR/viz)."),
) -> None:
    """Training and evaluation curves from metrics.jsonl, and accuracy against segments from eval JSON files."""
    from hrm_reason.commands.viz import run_pictures

    echo_lines(run_pictures(run_dir, eval_json or [], out))


@viz_app.command("test-time")
def viz_test_time(
    eval_json: Path = typer.Argument(..., help="Result of hrm eval --json with --tta or --samples."),
    out: Path = typer.Option(Path("viz"), "--out", help="Output directory."),
) -> None:
    """Exact accuracy against total segments run per puzzle (m x tta x samples), one line per (tta, samples)."""
    from hrm_reason.commands.viz import test_time_picture

    echo_lines(test_time_picture(eval_json, out))


@viz_app.command("html")
def viz_html(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (with metrics.jsonl and checkpoints).")],
    eval_json: EvalJsons = None,
    out: Path | None = typer.Option(None, "--out", help="HTML file (default: RUN_DIR/viz/index.html)."),
    device: Device = "auto",
    data: Path | None = typer.Option(None, "--data", help="Dataset directory (default: the config's data_path)."),
    index: int = typer.Option(0, "--index", help="First test example of the prediction strips."),
    count: int = typer.Option(
        3,
        "--count",
        callback=bounded(VIZ_STRIPS),
        help="Prediction strips to include (0: none, no checkpoint needed).",
    ),
    mmax: int | None = typer.Option(
        None,
        "--mmax",
        callback=bounded(MMAX),
        help="Segments of the prediction strips (default: the trained halt_max_steps).",
    ),
) -> None:
    """One self-contained HTML page for a run: curves, accuracy against segments, prediction strips, config."""
    from hrm_reason.commands.viz import run_page_file

    typer.echo(run_page_file(run_dir, eval_json or [], out, device, data, index, count, mmax))


@viz_app.command("arc-task")
def viz_arc_task(
    data: Path = typer.Option(..., "--data", help="ARC dataset built by hrm build-data arc."),
    submission: Path = typer.Option(..., "--submission", help="The submission.json of hrm eval --submission."),
    task: str = typer.Option(..., "--task", help="Task id (its name in the dataset and the submission)."),
    eval_json: Path | None = typer.Option(
        None, "--eval", help="Result of hrm eval --json: pass@1, pass@2 and the votes in the title."
    ),
    out: Path | None = typer.Option(None, "--out", help="PNG file (default: viz/arc_task_TASK.png)."),
) -> None:
    """One ARC task as the model answered it: demonstrations, test inputs, the two attempts (right or wrong), answer."""
    from hrm_reason.commands.viz import arc_task_picture

    echo_lines(arc_task_picture(data, submission, task, eval_json, out))
