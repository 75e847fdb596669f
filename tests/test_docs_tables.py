"""The tables README.md and docs/ publish from kept records equal what `hrm compare --runs` (or a benchmark
script's `table`) makes of those records today (benchmarks/docs_tables.py): a number edited in the docs, or a record changed, is a red CI. Cheap: nothing
trains or evaluates."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "benchmarks" / "docs_tables.py")
docs_tables = sys.modules.setdefault("docs_tables", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(docs_tables)


def test_every_table_from_records_equals_its_records() -> None:
    tables = docs_tables.find_tables(docs_tables.doc_paths())
    # The studies whose records are kept are framed (a table that lost its frame would go unchecked).
    commands = {records_of(t.command) for t in tables}
    kept = {
        "benchmarks",  # the papers' claims, from both rungs' records (benchmarks/claims.py)
        "benchmarks/arc-rung-runs",
        "benchmarks/hard-rung-runs/sudoku6x6-min",
        "benchmarks/pilot-runs",
        "benchmarks/cpu-bench/fusion",
        "benchmarks/levers-runs/*-seed?",
        "benchmarks/levers-runs/maze6x6/*-seed?",
        "benchmarks/quickstart-runs/sudoku-6x6-easy-*-seed?",  # the README's baselines beside HRM
        "benchmarks/quickstart-runs/sudoku-6x6-easy-hrm-seed?",
        "benchmarks/study-runs/maze6x6",
    }
    assert kept <= commands
    for path in docs_tables.doc_paths():
        _, stale = docs_tables.sync(path)
        assert [f"{t.path.name}: {t.name} of {t.command}" for t in stale] == []


def records_of(command: str) -> str:
    """The records a framed table is made from: hrm compare's --runs, or a benchmark script's folder."""
    script = docs_tables.SCRIPT.fullmatch(command)
    if script:
        return script[2].strip()
    return command.split(" --")[1].removeprefix("runs ")


def test_an_edited_number_is_caught(tmp_path: Path) -> None:
    doc = docs_tables.find_tables(docs_tables.doc_paths())[0]
    text = doc.path.read_text()
    cells = doc.text.split(" | ")
    digit = next(i for i, cell in enumerate(cells) if cell[:1].isdigit())  # a number, not a label like 6x6
    changed = str((int(cells[digit][0]) + 1) % 10) + cells[digit][1:]  # its first digit, one up
    edited = " | ".join([*cells[:digit], changed, *cells[digit + 1 :]])
    assert edited != doc.text
    copy = tmp_path / "edited.md"
    copy.write_text(text.replace(doc.text, edited, 1))
    fixed, stale = docs_tables.sync(copy)
    assert [t.name for t in stale] == [doc.name] and doc.text in fixed and edited not in fixed
