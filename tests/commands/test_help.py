"""What `--help` tells a new user (issue 44, items 3 and 8): `hrm train --help` lists every run-config key with its
default and meaning, generated from TrainConfig (so a new key cannot be left out), and a boolean flag shows no value
placeholder, in the help of every command."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
import typer
from typer.main import get_command

import cli
from hrm_reason.commands.cli_help import config_keys_help
from hrm_reason.config import FAMILY_RULES, TrainConfig


def help_text(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *words: str) -> str:
    """The stdout of `hrm WORDS --help`, whitespace and panel borders collapsed (rich wraps the lines at the
    terminal's width)."""
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["hrm", *words, "--help"])
    with pytest.raises(SystemExit) as stop:
        cli.main()
    assert stop.value.code == 0
    out = capsys.readouterr().out
    return " ".join(out.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def command_paths(group: typer.core.TyperGroup, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    ctx = typer._click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, typer.core.TyperGroup):
            yield from command_paths(command, (*prefix, name))
        else:
            yield (*prefix, name)


def test_every_config_key_is_in_train_help_with_its_default_and_meaning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = help_text(capsys, monkeypatch, "train")
    assert "Config keys, given as key=value" in text
    for name, field in TrainConfig.model_fields.items():
        assert field.description, f"TrainConfig.{name} has no description: hrm train --help would show none"
        meaning = " ".join(field.description.split())
        assert f"{name} (" in text, name
        assert meaning[:40] in text, name
    # The defaults: the field's own, the families' (FAMILY_RULES), with the LM heads' where they differ.
    assert "beta2 (0.95):" in text and "max_seconds (None):" in text and "compile (false):" in text
    lm = FAMILY_RULES["lm"].defaults
    assert f"max_steps (None; LM heads: {lm['max_steps']}):" in text
    assert f"global_batch_size ({FAMILY_RULES['act'].defaults['global_batch_size']}; LM heads: " in text
    assert "budget_clock (wall): " in text and "eval_max_examples (None): " in text


def test_the_key_list_follows_the_model_order_one_entry_per_key() -> None:
    entries = [line for line in config_keys_help().splitlines()[1:]]
    assert [e.removeprefix("[bold]").partition("[/bold]")[0] for e in entries] == list(TrainConfig.model_fields)


def test_no_command_shows_a_value_placeholder_for_a_boolean_flag(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = list(command_paths(get_command(cli.app)))
    assert ("train",) in paths and ("build-data", "sudoku") in paths and ("viz", "run") in paths
    for path in paths:
        text = help_text(capsys, monkeypatch, *path)
        assert "<bool>" not in text, path
        assert "--help Show this message and exit." in text, path  # the flag stays listed, with nothing after it
    assert "--quiet No progress bars." in help_text(capsys, monkeypatch, "train")
    assert "--overwrite " in help_text(capsys, monkeypatch, "build-data", "sudoku")
    # Options that take a value keep their placeholder.
    assert "--run-dir <path>" in help_text(capsys, monkeypatch, "train")
