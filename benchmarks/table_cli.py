"""`python benchmarks/SCRIPT.py table DIR`: the command line of every benchmark script whose TABLES are framed in the
docs (benchmarks/docs_tables.py regenerates them by calling TABLES directly)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def table_main(tables: dict[str, Callable[[Path], str]], argv: list[str] | None = None) -> int:
    """Print each of a script's TABLES, made from the records in DIR, under its name."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "table":
        print(f"usage: python {sys.argv[0]} table DIR", file=sys.stderr)
        return 2
    for name, make in tables.items():
        print(f"{name}:\n{make(Path(args[1]))}\n")
    return 0
