"""`./run quickstart [key=value ...]`: the README's quickstart (build the data, train, evaluate), the overrides passed
to `hrm train`. The shell script asks this module where the run's data and run directory are with those overrides
(`python -m hrm_reason.commands.quickstart paths KEY=VALUE...`), so that `seed=1`, `arch.name=trm` or `run_dir=...`
resumes and evaluates the run it trains, and a bad override stops before anything is built, in one line."""

from __future__ import annotations

import sys
from pathlib import Path

from hrm_reason.config import load_config, packaged_config
from hrm_reason.errors import UserError, one_line

QUICKSTART_CONFIG = "quickstart.yaml"  # what `hrm train` trains without --config (cli.DEFAULT_CONFIG)
QUICKSTART_DATA = Path("data/sudoku-6x6-easy")  # the only dataset ./run quickstart builds when it is missing
EVAL_MMAX = 8  # segments of the final evaluation: twice the trained 4


def check_overrides(overrides: list[str]) -> None:
    """Each argument is a key=value override of hrm train; a flag or a bare word is a one-line error naming it."""
    for item in overrides:
        if item.startswith("-") or "=" not in item:
            raise UserError(
                f"./run quickstart {item}: expected key=value overrides of hrm train, e.g. max_steps=200 "
                "(hrm train --help lists the keys)"
            )


def quickstart_paths(overrides: list[str]) -> tuple[Path, Path]:
    """(data directory, run directory) of the quickstart's config with `overrides`, as hrm train will use them."""
    from hrm_reason.train.loop import default_run_dir

    check_overrides(overrides)
    config = load_config(packaged_config(QUICKSTART_CONFIG), overrides)
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)
    return Path(config.data_path), run_dir


def main(argv: list[str]) -> int:
    """`paths KEY=VALUE...`: prints the data directory and the run directory, one a line; exit 2 with one line on a bad
    override."""
    if not argv or argv[0] != "paths":
        print("usage: python -m hrm_reason.commands.quickstart paths [KEY=VALUE ...]", file=sys.stderr)
        return 2
    try:
        data, run_dir = quickstart_paths(argv[1:])
    except UserError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return 2
    print(f"{data}\n{run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
