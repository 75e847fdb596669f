"""Reading the files that datasets, runs and checkpoints hold (text, JSON, JSON lines, .npy arrays), with the one-line
errors every reader gives.

Every failure a file on disk can cause is a UserError naming the file (or the flag that gave it): a missing or
unreadable file, bytes that are not UTF-8, bad JSON (with its line), a JSON lines record of the wrong kind, a damaged
or foreign .npy file. A pydantic model's refusal names the field (`hrm_reason.errors.validation_message`). Callers
need not catch OSError, UnicodeDecodeError or ValueError around a read: a new reader gets these lines for free.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from hrm_reason.errors import UserError, validation_message

ModelT = TypeVar("ModelT", bound=BaseModel)

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"


def _name(path: str | os.PathLike, name: str | None) -> str:
    return str(path) if name is None else name


def read_bytes(path: str | os.PathLike, missing: str | None = None, *, name: str | None = None) -> bytes:
    """The file's bytes. `missing` says what was expected there: "<name> not found: <missing>"; without it a missing
    file is "<name>: cannot read it (No such file or directory)", as is any other OSError (a permission); a folder is
    "<name> is a directory: expected a file". `name` is how messages call the file (default: its path; e.g.
    "--file PATH")."""
    label = _name(path, name)
    try:
        return Path(path).read_bytes()
    except (FileNotFoundError, NotADirectoryError) as e:
        if missing is not None:
            raise UserError(f"{label} not found: {missing}") from None
        raise UserError(f"{label}: cannot read it ({e.strerror})") from None
    except IsADirectoryError:
        raise UserError(f"{label} is a directory: expected a file") from None
    except OSError as e:
        raise UserError(f"{label}: cannot read it ({e.strerror or type(e).__name__})") from None


def _not_utf8(label: str, e: UnicodeDecodeError, expected: str | None, offset: int = 0) -> UserError:
    """One line for bytes that are not UTF-8: the first bad byte and its offset in the file."""
    detail = f"invalid byte 0x{e.object[e.start]:02x} at offset {offset + e.start}"
    if expected is None:
        return UserError(f"{label}: not UTF-8 text ({detail})")
    return UserError(f"{label}: not {expected} (not UTF-8 text: {detail})")


def decode_text(data: bytes, label: str, expected: str | None = None) -> str:
    """`data` (read from the file `label`) as UTF-8 text, a leading byte-order mark (as Windows editors write it)
    dropped; "<label>: not UTF-8 text (...)" otherwise."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise _not_utf8(label, e, expected) from None


def read_text(
    path: str | os.PathLike, missing: str | None = None, *, name: str | None = None, expected: str | None = None
) -> str:
    """The file as UTF-8 text; the errors of read_bytes, or "<name>: not UTF-8 text (invalid byte 0x.. at offset N)"
    (with `expected`, e.g. "a checkpoint pointer": "<name>: not <expected> (not UTF-8 text: ...)")."""
    return decode_text(read_bytes(path, missing, name=name), _name(path, name), expected)


def parse_json(text: str, label: str, at_line: bool = True) -> Any:
    """`text` parsed as JSON; "<label>: not valid JSON (<why> at line N)" otherwise (without `at_line`: a line of a
    JSON lines file, named by `label`). Nesting too deep and numbers too long, which json raises as other errors,
    included."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{label}: not valid JSON ({e.msg}{f' at line {e.lineno}' if at_line else ''})") from None
    except RecursionError:
        raise UserError(f"{label}: not valid JSON (nested too deeply)") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise UserError(f"{label}: not valid JSON ({str(e).splitlines()[0][:80]})") from None


def read_json(path: str | os.PathLike, missing: str | None, *, name: str | None = None) -> Any:
    """The parsed file; UserError "<path> not found: <missing>" or "<path>: not valid JSON (... at line N)"."""
    label = _name(path, name)
    return parse_json(read_text(path, missing, name=name, expected="valid JSON"), label)


def read_json_model(path: str | os.PathLike, model: type[ModelT], missing: str | None) -> ModelT:
    """The file validated as `model`; the errors of read_json, or the first invalid field."""
    raw = read_json(path, missing)
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise UserError(validation_message(e, str(path))) from None


def read_jsonl(
    path: str | os.PathLike,
    missing: str | None = None,
    *,
    name: str | None = None,
    int_key: str | None = None,
    skip_damaged: bool = False,
) -> list[dict[str, Any]]:
    """The JSON objects of a JSON lines file (metrics.jsonl), blank lines skipped. A last line without its newline
    that is not valid JSON is one being written (or cut by a crash): dropped. Any other line that is not UTF-8, not JSON,
    not an object, or (with `int_key`) without an integer under that key is "<name> line N: ..." - or, with
    `skip_damaged`, skipped (for readers that must not stop a training over its log)."""
    label = _name(path, name)
    data = read_bytes(path, missing, name=name)
    lines = data.split(b"\n")
    records: list[dict[str, Any]] = []
    offset = 0
    for number, raw in enumerate(lines, 1):
        start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        cut = number == len(lines)  # the file does not end with a newline: its last line may be incomplete
        where = f"{label} line {number}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:  # never a cut line: the writers write ASCII (json.dumps escapes the rest)
            if skip_damaged:
                continue
            raise _not_utf8(where, e, None, start) from None
        try:
            record = parse_json(text, where, at_line=False)
        except UserError:
            if cut or skip_damaged:
                continue
            raise
        if not isinstance(record, dict) or (
            int_key is not None and (type(record.get(int_key)) is not int)  # bool is an int to isinstance
        ):
            if skip_damaged:
                continue
            want = f" with an integer '{int_key}'" if int_key is not None else ""
            raise UserError(f"{where}: expected a JSON object{want}")
        records.append(record)
    return records


def read_npy(
    path: str | os.PathLike, missing: str | None = None, *, mmap: bool = False, name: str | None = None
) -> np.ndarray:
    """A .npy array (memory-mapped with `mmap`), never unpickled. A damaged, truncated or foreign file (an .npz
    archive, pickled objects, random bytes) is "<name>: not a readable .npy array, the file is damaged (why)"."""
    label = _name(path, name)
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
    except FileNotFoundError as e:
        if missing is not None:
            raise UserError(f"{label} not found: {missing}") from None
        raise UserError(f"{label}: cannot read it ({e.strerror})") from None
    except IsADirectoryError:
        raise UserError(f"{label} is a directory: expected a .npy file") from None
    except OSError as e:
        raise UserError(f"{label}: cannot read it ({e.strerror or type(e).__name__})") from None

    def damaged(detail: str) -> UserError:
        return UserError(f"{label}: not a readable .npy array, the file is damaged ({detail})")

    if magic.startswith(ZIP_MAGIC[: len(magic)]) and len(magic) >= len(ZIP_MAGIC):
        raise damaged("it is an .npz archive, expected one .npy array")
    if magic != NPY_MAGIC:
        raise damaged("no .npy header" if magic else "the file is empty")
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except Exception as e:  # numpy raises ValueError, EOFError, SyntaxError, tokenize errors... for a bad header
        raise damaged(str(e).splitlines()[0][:120] if str(e) else type(e).__name__) from None
    if not isinstance(array, np.ndarray):  # pragma: no cover - the header check above already refuses archives
        raise damaged(f"expected an array, found {type(array).__name__}")
    return array


def read_safetensors(
    path: str | os.PathLike, missing: str | None = None, *, name: str | None = None, what: str = "safetensors file"
) -> tuple[dict[str, Any], dict[str, str]]:
    """The tensors (torch, on the CPU) and the header's metadata of a safetensors file: the one reader of adapted rows,
    checkpoints and transformers directories. A missing file has read_bytes' errors; a truncated, damaged or foreign
    one (random bytes, a pickle) is "<name>: not a readable <what> (why)"."""
    from safetensors import SafetensorError, safe_open

    label = _name(path, name)
    if not Path(path).is_file():
        read_bytes(path, missing, name=name)  # its one-line error for a missing file, a folder, a permission
    try:
        with safe_open(os.fspath(path), "pt") as f:
            metadata = dict(f.metadata() or {})
            tensors = {key: f.get_tensor(key) for key in f.keys()}  # noqa: SIM118 - safe_open is no mapping
    except OSError as e:
        raise UserError(f"{label}: cannot read it ({e.strerror or type(e).__name__})") from None
    except (SafetensorError, ValueError, RuntimeError, TypeError, RecursionError) as e:
        detail = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        raise UserError(f"{label}: not a readable {what} ({detail})") from None
    return tensors, metadata
