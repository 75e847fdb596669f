"""The `hrm` command line: thin wrappers that parse flags, validate them and call the package."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click
import typer

from hrm_reason.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Build HRM benchmarks, train HRM, evaluate it.")
build_data_app = typer.Typer(no_args_is_help=True, help="Build a benchmark dataset in the original HRM on-disk format.")
app.add_typer(build_data_app, name="build-data")


# --- build-data sudoku ---

# --- end build-data sudoku ---


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
