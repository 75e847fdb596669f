"""The `hrm` command line: thin wrappers that parse flags, validate them and call the package."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click
import typer

from hrm_reason.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, help="Build HRM benchmarks, train HRM, evaluate it.")
build_data_app = typer.Typer(no_args_is_help=True, help="Build a benchmark dataset in the original HRM on-disk format.")
app.add_typer(build_data_app, name="build-data")


@build_data_app.command("sudoku")
def build_data_sudoku(
    out: Optional[Path] = typer.Option(None, "--out", help="Output directory. Default: data/sudoku-extreme-full (hf), data/sudoku-csv (csv), data/sudoku-gen-NxN (generate)."),
    source: str = typer.Option("auto", "--source", help="auto | hf | csv | generate. auto: --csv-dir if given, else the Hugging Face Hub if reachable within 3 s, else generate (HRM_OFFLINE=1 or HF_HUB_OFFLINE=1 skips the hub)."),
    csv_dir: Optional[Path] = typer.Option(None, "--csv-dir", help="Folder with train.csv and test.csv (columns source,q,a,rating) for --source csv."),
    subsample_size: Optional[int] = typer.Option(None, "--subsample-size", help="Keep this many training puzzles, sampled without replacement (seeded)."),
    num_aug: int = typer.Option(0, "--num-aug", help="Augmented copies per training puzzle (digit relabelling, band/stack and row/column shuffles, transpose); test stays unaugmented."),
    min_difficulty: Optional[int] = typer.Option(None, "--min-difficulty", help="Keep puzzles rated at least this (train and test; also filters generated puzzles)."),
    seed: int = typer.Option(0, "--seed", help="Seed of every random choice: same options and seed give byte-identical files."),
    box: str = typer.Option("3x3", "--box", help="Box rows x box columns: 2x2 (4x4 board), 2x3 (6x6) or 3x3 (9x9). hf/csv are 3x3 only."),
    train_size: Optional[int] = typer.Option(None, "--train-size", help="Training puzzles: generated count (default 1000), or a seeded cap on hf/csv rows."),
    test_size: Optional[int] = typer.Option(None, "--test-size", help="Test puzzles: generated count (default 1000), or a seeded cap on hf/csv rows."),
    workers: int = typer.Option(0, "--workers", help="Generator processes (0 = one per CPU core for large jobs); the output does not depend on it."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --out if it exists."),
) -> None:
    """Build a Sudoku dataset: Sudoku-Extreme (hf or csv) or generated unique-solution puzzles with a strict train/test split."""
    from pydantic import ValidationError

    from datasets_build.sudoku import SudokuBuildOptions, build_sudoku, summary

    fields = dict(out=out, source=source, csv_dir=csv_dir, subsample_size=subsample_size, num_aug=num_aug, min_difficulty=min_difficulty, seed=seed, box=box, train_size=train_size, test_size=test_size, workers=workers, overwrite=overwrite)
    try:
        opts = SudokuBuildOptions(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        flag = "--" + str(err["loc"][0]).replace("_", "-") if err["loc"] else "options"
        raise UserError(f"{flag} {fields.get(str(err['loc'][0]) if err['loc'] else '', '')!s}: {err['msg']}") from None
    typer.echo(summary(build_sudoku(opts)))


DEFAULT_CONFIG = "sudoku_quick.yaml"


def _packaged_config(name: str) -> Path:
    """configs/ beside this file in a checkout; the copy installed as package data otherwise."""
    local = Path(__file__).resolve().parent / "configs" / name
    if local.is_file():
        return local
    from importlib.resources import files

    return Path(str(files("hrm_reason.configs") / name))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(None, "--config", "-c", help=f"YAML config (default: configs/{DEFAULT_CONFIG}; with --resume: the run's config.yaml)."),
    data: Optional[Path] = typer.Option(None, "--data", help="Dataset directory (overrides data_path)."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Run directory (overrides run_dir)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir from its latest checkpoint."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
) -> None:
    """Train a model. Extra arguments are key=value overrides, e.g. arch.hidden_size=256 lr=3e-4."""
    from hrm_reason.config import load_config
    from hrm_reason.train import train as run_training

    overrides = list(ctx.args)
    for item in overrides:
        if item.startswith("-"):
            raise UserError(f"unknown option {item} (overrides are key=value; see hrm train --help)")
    if config is None and resume and run_dir is not None and (run_dir / "config.yaml").is_file():
        config = run_dir / "config.yaml"
    elif config is None:
        config = _packaged_config(DEFAULT_CONFIG)
        typer.echo(f"no --config given: using {config}", err=True)
    if data is not None:
        overrides.append(f"data_path={data}")
    if run_dir is not None:
        overrides.append(f"run_dir={run_dir}")
    cfg = load_config(config, overrides)
    out = run_training(cfg, resume=resume, progress=not quiet)
    typer.echo(f"run directory: {out}")


@app.command("eval")
def eval_cmd(
    mmax: int = typer.Option(16, "--mmax", min=1, help="Segments to run (may exceed the trained halt_max_steps)."),
    run: Optional[Path] = typer.Option(None, "--run", help="Run directory (its latest checkpoint and config)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Checkpoint directory or weights file (ours or an original HRM state_dict)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Config for --checkpoint outside a run (e.g. the original all_config.yaml)."),
    data: Optional[Path] = typer.Option(None, "--data", help="Dataset directory (default: the config's data_path)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the results as JSON to this file."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Examples per batch (default: the config's)."),
    max_examples: Optional[int] = typer.Option(None, "--max-examples", min=1, help="Evaluate the first N test examples only."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Accuracy after every segment m = 1..mmax on the test split, and the ACT (Q-head halting) result."""
    from hrm_reason.evaluate import format_table
    from hrm_reason.inference import evaluate_checkpoint

    if (run is None) == (checkpoint is None):
        raise UserError("give exactly one of --run DIR or --checkpoint PATH")
    if device not in ("auto", "cpu", "cuda"):
        raise UserError(f"--device {device}: expected auto, cpu or cuda")
    result = evaluate_checkpoint(run or checkpoint, config, data, mmax, batch_size, max_examples, device, progress=not quiet)
    typer.echo(format_table(result))
    if json_out is not None:
        import json

        from hrm_reason.atomic import atomic_write_text

        atomic_write_text(json_out, json.dumps(result.to_dict(), indent=2))
        typer.echo(f"wrote {json_out}")


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback."""
    try:
        code = app(standalone_mode=False)
    except UserError as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
