"""The one exception type that reaches users as a single line (the CLI prints it and exits non-zero), and the one
way a pydantic validation error becomes such a line."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


# The most characters of an error line: a value echoed back (a YAML file of nested aliases once gave a line of 3.8 MB)
# is cut, the start, which names the culprit, kept.
MAX_LINE = 500


class UserError(Exception):
    """Bad input from the user: a flag, a config field, a file. The message names it and says what was expected."""


def one_line(message: str, limit: int = MAX_LINE) -> str:
    """`message` as one readable line: line breaks as spaces, cut to `limit` characters with the count left out."""
    text = " ".join(message.split("\n")).replace("\r", " ")
    if len(text) <= limit:
        return text
    return f"{text[: limit - 40]} ... ({len(text) - limit + 40:,} more characters)"


def validation_message(e: ValidationError, source: str, prefix: tuple[str, ...] = ()) -> str:
    """The first error as one line naming the field (`prefix` places a nested section's fields, e.g. arch)."""
    err = e.errors()[0]
    loc = ".".join(str(p) for p in (*prefix, *err["loc"]))
    msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
    where = f"field '{loc}'" if loc else "config"
    given = (
        f" (got {err['input']!r})"
        if err["type"] != "extra_forbidden" and loc and not isinstance(err.get("input"), dict)
        else ""
    )
    return f"{source}: {where}: {msg}{given}"
