"""Reading a user's examples file (docs/tasks.md, "The file format"): JSON Lines, CSV with named columns, or .npz.

Each example is read as it stands in the file, with the place it came from ("train.jsonl line 3"), so that every
error names the file, the line and the field before any work starts. What the values mean (symbols, shapes, layout) is
the declared task's (hrm_reason/tasks/declared.py); this module only reads and checks the shape of each value.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hrm_reason.errors import UserError
from hrm_reason.readers import read_text
from hrm_reason.tasks.base import text_lines

FIELDS = ("input", "output", "group", "id")  # the keys of a JSON Lines example
SUFFIXES = (".jsonl", ".json", ".csv", ".npz")


@dataclass(frozen=True)
class RawExample:
    """One example as the file holds it."""

    where: str  # "train.jsonl line 3": what errors name
    input: Any  # a str, or a list of rows
    output: Any = None  # None only where an output is optional (hrm solve's inputs)
    group: str | int | None = None  # examples of one group never sit on both sides of a split (compared as text)
    ident: str | int | None = None  # as the file writes it


def read_examples(
    path: Path,
    flag: str,
    input_col: str | None = None,
    output_col: str | None = None,
    need_output: bool = True,
    column_flags: tuple[str, str] = ("--input-col", "--output-col"),
) -> list[RawExample]:
    """Every example of `path` (by its suffix: .jsonl/.json, .csv, .npz); a file that is missing, empty or malformed
    is a one-line UserError naming `flag`, the file and, where there is one, the line and the field. Without
    `need_output` (inputs to answer) the outputs may be absent: a CSV without the output column, an .npz without
    labels, a JSON Lines example without "output"."""
    if not path.is_file():
        raise UserError(
            f"{flag} {path}: " + ("a directory, not a file of examples" if path.is_dir() else "no such file")
        )
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UserError(f"{flag} {path}: expected a .jsonl, .csv or .npz file of examples (docs/tasks.md)")
    if suffix != ".csv" and (input_col is not None or output_col is not None):
        raise UserError(f"--input-col/--output-col: {path} is not a CSV file")
    if suffix == ".npz":
        examples = _read_npz(path, flag, need_output)
    else:
        text = read_text(path, name=f"{flag} {path}")
        if suffix == ".csv":
            examples = _read_csv(path, text, input_col, output_col, need_output, column_flags)
        else:
            examples = _read_jsonl(path, text, need_output)
    if not examples:
        raise UserError(f"{flag} {path}: holds no example")
    return examples


def _json_lines(text: str, source: object) -> Iterator[tuple[str, Any]]:
    """(where, value) of each non-empty line of JSON Lines; a line that is not JSON is a UserError naming it."""
    for i, line in enumerate(text_lines(text), 1):
        if not line.strip():
            continue
        where = f"{source} line {i}"
        try:
            yield where, json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{where}: not JSON ({e.msg}, column {e.colno}); one example a line") from None


def _read_jsonl(path: Path, text: str, need_output: bool = True) -> list[RawExample]:
    return [_example(where, obj, need_output) for where, obj in _json_lines(text, path)]


def _example(where: str, obj: Any, need_output: bool) -> RawExample:
    """One JSON Lines example, its fields checked."""
    if not isinstance(obj, dict):
        raise UserError(f'{where}: expected an object {{"input": ..., "output": ...}}, got {type(obj).__name__}')
    unknown = next((k for k in obj if k not in FIELDS), None)
    if unknown is not None:
        raise UserError(f"{where}: unknown field {unknown!r} (an example has {', '.join(FIELDS)})")
    for name in ("input", "output") if need_output else ("input",):
        if name not in obj:
            raise UserError(f"{where}: no field {name!r}")
    group, ident = obj.get("group"), obj.get("id")
    for name, v in (("group", group), ("id", ident)):
        if v is not None and (not isinstance(v, (str, int)) or isinstance(v, bool)):
            raise UserError(f"{where}: field {name!r}: expected a string or an integer, got {json.dumps(v)[:40]}")
    return RawExample(where, obj["input"], obj.get("output"), group, ident)


def _read_csv(
    path: Path,
    text: str,
    input_col: str | None,
    output_col: str | None,
    need_output: bool = True,
    column_flags: tuple[str, str] = ("--input-col", "--output-col"),
) -> list[RawExample]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        return []
    columns: list[int | None] = []
    for flag, name, default in zip(column_flags, (input_col, output_col), ("input", "output")):
        chosen = name or default
        if chosen not in header and not (default == "output" and not need_output):
            given = f"{flag} {chosen}" if name else f"no {flag}, and no column {default!r}"
            raise UserError(f"{path}: {given}: the columns are {', '.join(repr(h) for h in header)}")
        columns.append(header.index(chosen) if chosen in header else None)
    examples = []
    x, y = columns
    assert x is not None
    for i, row in enumerate(reader, 2):
        if not row:
            continue
        if len(row) != len(header):
            raise UserError(f"{path} line {i}: {len(row)} fields, where the header has {len(header)}")
        examples.append(RawExample(f"{path} line {i}", row[x], None if y is None else row[y]))
    return examples


NPZ_ARRAYS = ("inputs", "labels", "groups")


def _read_npz(path: Path, flag: str, need_output: bool = True) -> list[RawExample]:
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {name: f[name] for name in f.files}
    except Exception as e:
        raise UserError(f"{flag} {path}: not a readable .npz file ({type(e).__name__}: {e})") from None
    stray = next((name for name in arrays if name not in NPZ_ARRAYS), None)
    if stray is not None:
        raise UserError(f"{path}: unknown array {stray!r} (an .npz of examples holds {', '.join(NPZ_ARRAYS)})")
    for name in ("inputs", "labels") if need_output or "labels" in arrays else ("inputs",):
        if name not in arrays:
            raise UserError(
                f"{path}: no array {name!r} (it has {', '.join(arrays) or 'none'}); expected inputs and labels"
            )
        a = arrays[name]
        if not np.issubdtype(a.dtype, np.integer) or a.ndim not in (2, 3):
            raise UserError(
                f"{path}: array {name!r} is {a.dtype} of shape {a.shape}; expected integers [N, L] or [N, H, W]"
            )
    x, y = arrays["inputs"], arrays.get("labels")
    if y is not None and x.shape[0] != y.shape[0]:
        raise UserError(f"{path}: inputs has {x.shape[0]} examples, labels {y.shape[0]}")
    groups = arrays.get("groups")
    if groups is not None and (
        groups.shape != (x.shape[0],) or not (np.issubdtype(groups.dtype, np.integer) or groups.dtype.kind == "U")
    ):
        raise UserError(
            f"{path}: array 'groups' is {groups.dtype} of shape {groups.shape}; expected integers or strings "
            f"({x.shape[0]},)"
        )

    def rows(a: np.ndarray) -> list[list[int]]:
        return a.tolist() if a.ndim == 2 else [a.tolist()]

    return [
        RawExample(
            f"{path} row {i}",
            rows(x[i]),
            None if y is None else rows(y[i]),
            None if groups is None else groups[i].item(),
        )
        for i in range(x.shape[0])
    ]


# ------------------------------------------------------------------------------------------------ the values


def split_text(text: str, separator: str | None) -> list[str]:
    """The symbols of a string: one a character, or separated by `separator` (" ": any whitespace); an empty string
    holds none."""
    if separator is None or not text:
        return list(text)
    return text.split() if separator == " " else text.split(separator)


def form_of(value: Any, where: str, grid: tuple[int, int] | None) -> str:
    """How a value is written: "grid" (a 2-D list), "flat" (a string read into the --grid shape), "text"."""
    if isinstance(value, list):
        return "grid"
    if isinstance(value, str):
        return "flat" if grid is not None else "text"
    raise UserError(f"{where}: expected a string or a 2-D list (a list of rows), got {json.dumps(value)[:40]}")


def check_value(value: Any, where: str, form: str, grid: tuple[int, int] | None, separator: str | None = None) -> None:
    """A value of its form: a grid's rows are lists of equal length of integers or one-character strings; a flat
    string holds exactly the --grid's cells."""
    if form == "grid":
        if not isinstance(value, list) or not value:
            raise UserError(f"{where}: expected a grid (a non-empty list of rows), got {json.dumps(value)[:40]}")
        width = None
        for r, row in enumerate(value, 1):
            if not isinstance(row, list) or not row:
                flat = " (a 1-D list: write a sequence as a string, a grid as a list of rows)" if r == 1 else ""
                raise UserError(f"{where}: row {r} is not a non-empty list of cells{flat}")
            if width is not None and len(row) != width:
                raise UserError(f"{where}: ragged grid: row {r} has {len(row)} cells, row 1 has {width}")
            width = len(row)
            for c, cell in enumerate(row, 1):
                if isinstance(cell, bool) or not (isinstance(cell, int) or (isinstance(cell, str) and len(cell) == 1)):
                    raise UserError(
                        f"{where}: row {r}, cell {c} is {json.dumps(cell)[:20]}; a cell is an integer or one character"
                    )
        return
    if not isinstance(value, str):
        raise UserError(f"{where}: expected a string, got {json.dumps(value)[:40]}")
    if form == "flat":
        assert grid is not None
        n = len(split_text(value, separator))
        if n != grid[0] * grid[1]:
            raise UserError(f"{where}: {n} symbols, where --grid {grid[0]}x{grid[1]} holds {grid[0] * grid[1]}")


def parse_json_values(text: str, source: str, grids: bool) -> list[RawExample] | None:
    """The inputs (with their outputs and ids where given) of a text written as JSON: JSON Lines of examples, fields
    checked as the builder checks them, or, for a task of grid inputs (`grids`), one JSON value (a grid, or a list of
    grids); None when the text does not start like JSON (plain text: a sequence task's "[[]]" is its symbols)."""
    stripped = text.lstrip()
    if stripped[:1] == "[" and stripped[1:].lstrip()[:1] == "{":
        raise UserError(f"{source}: a JSON array of examples; write them as JSON Lines, one example a line")
    if not stripped or stripped[0] not in ('{["' if grids else "{"):
        return None
    if stripped[0] == "{":
        return [_example(where, obj, need_output=False) for where, obj in _json_lines(text, source)]
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{source}: not JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
    if isinstance(value, list) and value and all(isinstance(v, list) and v and isinstance(v[0], list) for v in value):
        return [RawExample(f"{source} grid {k}", v) for k, v in enumerate(value)]
    return [RawExample(source, value)]
