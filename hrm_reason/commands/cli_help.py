"""What `hrm ... --help` shows beyond typer's own rendering: `hrm train --help` lists every run-config key with its
default and its one-line meaning, read from `TrainConfig` itself (the one source of truth, so the help cannot drift
from the config), and boolean flags lose the `<bool>` placeholder typer's rich help gives them (they take no value).

Both are applied lazily: the config module is imported only when the help of `hrm train` is asked for, so that
`hrm --help` and a mistyped flag stay fast."""

from __future__ import annotations

from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from rich.markup import escape
from typer.core import TyperCommand, TyperOption

CONFIG_KEYS_HEAD = (
    "Config keys, given as key=value after the flags, each with its default where the config file leaves it out "
    "(then the LM heads' where theirs differs); arch.KEY sets the model's own options (docs/models.md):"
)


def _value(value: Any) -> str:
    """A default as a user types it: None, true/false, numbers as Python prints them, lists compactly."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_default(name: str, field: FieldInfo, puzzle: dict[str, Any], lm: dict[str, Any]) -> str:
    """The default of one key: the field's own, else the model families' (FAMILY_RULES: ACT puzzle models first,
    then the LM heads' where theirs differs)."""
    if name == "arch":
        return "arch.name=hrm"
    own = field.default if field.default is not PydanticUndefined and field.default_factory is None else None
    base = _value(puzzle[name]) if name in puzzle else _value(own) if not field.is_required() else "required"
    if name in lm and lm[name] != puzzle.get(name, own):
        return f"{base}; LM heads: {_value(lm[name])}"
    return base


def config_keys_help() -> str:
    """One line per key of the run config (TrainConfig), in its order: `key (default): meaning`, as rich markup."""
    from hrm_reason.config import FAMILY_RULES, TrainConfig

    puzzle, lm = FAMILY_RULES["act"].defaults, FAMILY_RULES["lm"].defaults
    lines = [escape(CONFIG_KEYS_HEAD)]
    for name, field in TrainConfig.model_fields.items():
        meaning = " ".join((field.description or "").split())
        # escape: rich would read "[...]" in a meaning as markup; the key is bold on a terminal
        lines.append(f"[bold]{name}[/bold] ({escape(field_default(name, field, puzzle, lm))}): {escape(meaning)}")
    return "\n".join(lines)


class ConfigKeysCommand(TyperCommand):
    """A command whose help ends with the run config's keys (`config_keys_help`), computed when the help is shown."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.epilog = config_keys_help()
        super().format_help(ctx, formatter)


def hide_flag_placeholders() -> None:
    """Boolean flags (--quiet, --resume, --help) show no `<bool>` type column: they take no value. Typer's rich help
    asks every option for its type display; a flag answers None, which the help leaves blank."""
    if getattr(TyperOption.display_type_rich, "_hrm_flags_hidden", False):
        return
    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag and not self.count else shown(self, ctx)

    display_type_rich._hrm_flags_hidden = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
