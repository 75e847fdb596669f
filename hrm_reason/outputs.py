"""One rule for every output a command writes (issue 43): nothing the command did not create is ever lost.

An output path (`--out`, `--run-dir`, `--json`, `--submission`, `--png`, a viz or compare folder) that already exists
is taken only when the command recognises it as its own earlier output, by the record or marker it writes there (an
`Output`'s `recognise`); a dataset, a run, a user's file or folder is refused in one line naming the path, before any
work. The command then replaces its own output atomically (hrm_reason.atomic) or resumes it as it documents. An empty
folder holds nothing to lose and is taken as new. The folder the output goes in must take a new file: that is tried at
once (atomic.check_writable), so a read-only folder is met before the first puzzle is generated or step trained.

`claim(path, output)` is the one check; the recognisers below are what each command calls its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hrm_reason.atomic import check_writable
from hrm_reason.errors import UserError
from hrm_reason.runtime.lock import LOCK, is_stale_temporary

# What a recogniser says of an existing path: None when it is the command's own output, else what it is instead.
Recognise = Callable[[Path], str | None]

# A JSON file larger than this is no result a command wrote: it is not read to find out.
MAX_OWN_JSON_BYTES = 256 << 20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# The tEXt chunk hrm_reason.viz.canvas.png_bytes writes into every picture: how a later call knows its own PNGs.
PNG_MARKER = b"hrm-reason"
HTML_MARKER = '<meta name="generator" content="hrm-reason">'


@dataclass(frozen=True)
class Output:
    """An output of a command: how the command line names it, the command, and how it knows its own earlier one."""

    flag: str  # "--out", "--json": the start of every refusal
    command: str  # "hrm adapt"
    recognise: Recognise
    folder: bool = False  # a folder (replaced whole, or written into); else a file
    into: bool = False  # a folder the command writes files into (not replaced whole): it must itself take a file


def claim(path: Path | None, output: Output) -> Path | None:
    """`path` checked as `output` before any work: new, empty or the command's own, and its folder writable; else one
    line naming it. Returns `path` (None stays None: the output was not asked for)."""
    if path is None:
        return None
    where = f"{output.flag} {path}"
    if path.is_symlink() and not path.exists():
        raise UserError(f"{where}: a link to nothing; remove it or choose another path")
    if path.exists():
        if output.folder and not path.is_dir():
            raise UserError(f"{where}: is a file, expected a directory; nothing was written (choose another path)")
        if not output.folder and path.is_dir():
            raise UserError(f"{where}: is a directory, expected a file to write; nothing was written")
        why = None if output.folder and not entries(path) else output.recognise(path)
        if why is not None:
            raise UserError(
                f"{where}: exists and is not output of {output.command} ({why}); nothing was written: choose another "
                "path, or remove it yourself"
            )
    check_writable(path, inside=output.into and path.is_dir())
    return path


def entries(folder: Path) -> list[str]:
    """The names in `folder` a command did not leave as bookkeeping: not a run's lock, not a dead writer's temporary."""
    try:
        return sorted(p.name for p in folder.iterdir() if p.name != LOCK and not is_stale_temporary(p))
    except OSError as e:
        raise UserError(f"{folder}: cannot read the folder ({e.strerror})") from None


def listing(names: list[str]) -> str:
    """A few names of a folder, for a refusal: 'it holds a, b, c and 4 more'."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"it holds {shown}"


def read_own_json(path: Path) -> Any:
    """The JSON value of a file a command may have written, or None when it is no JSON of ours (too large, unreadable,
    not UTF-8, not JSON)."""
    try:
        if path.stat().st_size > MAX_OWN_JSON_BYTES:
            return None
        return json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def json_object_with(*key_sets: Collection[str], what: str) -> Recognise:
    """A JSON object holding every key of one of `key_sets` (the top-level keys of the command's record); `what` names
    the record in a refusal."""

    def recognise(path: Path) -> str | None:
        value = read_own_json(path)
        if isinstance(value, dict) and any(all(k in value for k in keys) for keys in key_sets):
            return None
        return f"not {what}"

    return recognise


def submission_json(path: Path) -> str | None:
    """A Kaggle ARC submission: task id -> a list of {"attempt_1": grid, "attempt_2": grid}."""
    value = read_own_json(path)
    attempts = {"attempt_1", "attempt_2"}
    if isinstance(value, dict) and all(
        isinstance(v, list) and all(isinstance(a, dict) and set(a) == attempts for a in v) for v in value.values()
    ):
        return None
    return "not an ARC submission.json"


def folder_of(names: Collection[str], what: str, record: Recognise | None = None) -> Recognise:
    """A folder holding nothing but `names` (what the command writes there), whose `record` (if given) is the
    command's; `what` names the folder in a refusal."""

    def recognise(path: Path) -> str | None:
        inside = entries(path)
        foreign = [n for n in inside if n not in names]
        if foreign:
            return f"{listing(foreign)}, which {what} does not"
        return record(path) if record is not None else None

    return recognise


# The names hrm viz and hrm solve --png give their pictures: a picture so named, written before the marker was, is
# taken as theirs too (a run's viz/ folder made earlier stays usable).
PICTURE_NAMES = re.compile(
    r"(puzzle_(train|test)_\d{6}|predictions_test_\d{6}|curves|segments|test_time|solve_\d{4})\.png"
)


def marked_picture(path: Path) -> bool:
    """A PNG file with our marker, or an HTML page with ours: a picture or page hrm viz (or solve --png) wrote; or a
    PNG named as they name theirs, from before the marker."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head.startswith(PNG_MAGIC):
        return PNG_MARKER in head or PICTURE_NAMES.fullmatch(path.name) is not None
    return HTML_MARKER.encode() in head or (path.name == "index.html" and b" - hrm-reason</title>" in head)


def picture_folder(path: Path) -> str | None:
    """A folder of hrm viz's pictures and pages, and nothing else."""
    foreign = [n for n in entries(path) if not (path / n).is_file() or not marked_picture(path / n)]
    return f"{listing(foreign)}, which are no pictures of hrm viz" if foreign else None


def picture_file(path: Path) -> str | None:
    return None if marked_picture(path) else "not a picture or page written by hrm viz"


# --- the outputs of the commands that write a file of one kind (the folders are declared beside their writers)
EVAL_JSON = Output(
    "--json",
    "hrm eval",
    json_object_with(
        ("count", "provenance"), ("ce", "provenance"), ("record", "tests", "provenance"), what="a result of hrm eval"
    ),
)
SUBMISSION_OUT = Output("--submission", "hrm eval", submission_json)
BENCH_JSON = Output(
    "--json", "hrm bench", json_object_with(("model", "mfu", "provenance"), what="a result of hrm bench")
)
VIZ_FOLDER = Output("--out", "hrm viz", picture_folder, folder=True, into=True)
VIZ_PAGE = Output("--out", "hrm viz html", picture_file)
VIZ_PICTURE = Output("--out", "hrm viz arc-task", picture_file)
SOLVE_PNG = Output("--png", "hrm solve", picture_folder, folder=True, into=True)


def checked_text(value: str, name: str) -> str:
    """`value` (a flag's text, a file name) when it is valid UTF-8; else one line naming it. The command line gives
    bytes that are not UTF-8 as lone surrogates (Python's surrogateescape)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        byte = ord(value[e.start]) - 0xDC00 if 0xDC80 <= ord(value[e.start]) <= 0xDCFF else None
        detail = f"byte 0x{byte:02x}" if byte is not None else "a lone surrogate"
        try:  # the bytes as given, the bad ones as \xNN
            shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate that stands for no byte
            shown = value.encode("utf-8", "backslashreplace").decode("ascii")
        raise UserError(f"{name} {shown[:120]}: not valid UTF-8 ({detail} at position {e.start})") from None
    return value


def check_arguments(argv: list[str]) -> None:
    """Every command-line argument valid UTF-8, before any command runs: a file name or text that is not (a task file,
    --prompt) is refused in one line naming its flag, or the argument's position."""
    for i, arg in enumerate(argv):
        flag = argv[i - 1] if i > 0 and re.fullmatch(r"--?[A-Za-z][\w-]*", argv[i - 1]) else f"argument {i + 1}"
        checked_text(arg, flag)
