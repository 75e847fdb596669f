"""Keep the tables of README.md and docs/*.md equal to what their kept records give.

A table that comes from records is framed in the markdown by two comments; the first holds the `hrm compare --runs`
command that regenerates it (run from the repository root; globs are expanded as a shell would) and the name of the
table in its results (`final`, `segments` or `time`: hrm_reason/commands/compare_tables.py), or a benchmark script's
`python benchmarks/SCRIPT.py table DIR` and the name of one of its `TABLES` (the ARC rung study's `results` or
`curve`, the CPU fusion bench's `fusion`):

    <!-- table time: hrm compare --runs benchmarks/levers-runs/*-seed? --targets 0.5,0.8 -->
    | config | target | ...
    <!-- /table -->

    python benchmarks/docs_tables.py            # check: lists every table that differs from its records, exit 1
    python benchmarks/docs_tables.py --write    # rewrite those tables from the records

tests/test_docs_tables.py runs the check, so the docs cannot drift from their records without a red CI.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from hrm_reason.commands.compare import parse_targets, runs_tables
from hrm_reason.commands.compare_tables import TABLES

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(
    r"<!-- table (\w+): ((?:hrm compare --runs|python benchmarks/\w+\.py table) [^>]*?) -->\n(.*?)"
    r"<!-- /table -->",
    re.S,
)
SCRIPT = re.compile(r"python benchmarks/(\w+)\.py table (.+)")


@dataclass
class Table:
    path: Path
    name: str
    command: str
    text: str  # as the docs have it, without the framing comments


def find_tables(paths: list[Path]) -> list[Table]:
    return [Table(p, m[1], m[2], m[3]) for p in paths for m in BLOCK.finditer(p.read_text())]


def doc_paths(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def regenerate(table: Table, root: Path = ROOT) -> str:
    """The table as `table.command` makes it from the records today (with a trailing newline, as framed)."""
    if SCRIPT.fullmatch(table.command):
        return script_table(table, root)
    if table.name not in TABLES:
        raise SystemExit(f"{table.path}: table {table.name!r}: expected one of {', '.join(TABLES)}")
    words = shlex.split(table.command)[3:]
    options = {"--targets": "0.5,0.8", "--metric": "exact_accuracy"}
    dirs: list[Path] = []
    while words:
        word = words.pop(0)
        if word in options:
            options[word] = words.pop(0)
        else:
            matches = sorted(glob.glob(word, root_dir=root)) if glob.has_magic(word) else [word]
            if not matches:
                raise SystemExit(f"{table.path}: {table.command}: {word} matches nothing")
            dirs += [root / m for m in matches]
    made = runs_tables(dirs, parse_targets(options["--targets"]), options["--metric"])
    if table.name not in made:
        raise SystemExit(f"{table.path}: {table.command} makes no {table.name!r} table")
    return made[table.name] + "\n"


def script_table(table: Table, root: Path) -> str:
    """A table of a benchmark script (its TABLES: name -> function of the records' folder)."""
    script, folder = SCRIPT.fullmatch(table.command).groups()  # type: ignore[union-attr]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    made = importlib.import_module(script).TABLES
    if table.name not in made:
        raise SystemExit(f"{table.path}: table {table.name!r}: expected one of {', '.join(made)}")
    return made[table.name](root / folder.strip()) + "\n"


def sync(path: Path, root: Path = ROOT) -> tuple[str, list[Table]]:
    """The file's text with every table regenerated, and the tables that differed."""
    text, parts, stale, end = path.read_text(), [], [], 0
    for match in BLOCK.finditer(text):
        table = Table(path, match[1], match[2], match[3])
        fresh = regenerate(table, root)
        stale += [table] if fresh != table.text else []
        parts += [text[end : match.start(3)], fresh]
        end = match.end(3)
    return "".join([*parts, text[end:]]), stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the tables that differ from their records")
    args = parser.parse_args(argv)
    count = 0
    for path in doc_paths():
        text, stale = sync(path)
        for table in stale:
            print(f"{path.relative_to(ROOT)}: table {table.name} of `{table.command}` differs from its records")
        count += len(stale)
        if args.write and stale:
            path.write_text(text)
    if count and not args.write:
        print(f"{count} table(s) differ: python benchmarks/docs_tables.py --write regenerates them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
