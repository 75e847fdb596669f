"""Reading the JSON files that datasets, runs and checkpoints hold, with the one-line errors every reader gives.

A missing file names what was expected there; bad JSON names the line; a pydantic model's refusal names the field
(`hrm_reason.errors.validation_message`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hrm_reason.errors import UserError, validation_message

ModelT = TypeVar("ModelT", bound=BaseModel)


def read_json(path: Path, missing: str) -> Any:
    """The parsed file; UserError "<path> not found: <missing>" or "<path>: not valid JSON (... at line N)"."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise UserError(f"{path} not found: {missing}") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not valid JSON (not UTF-8 text)") from None


def read_json_model(path: Path, model: type[ModelT], missing: str) -> ModelT:
    """The file validated as `model`; the errors of read_json, or the first invalid field."""
    raw = read_json(path, missing)
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise UserError(validation_message(e, str(path))) from None
