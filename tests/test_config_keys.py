"""Config keys that nothing reads are not settings (docs/models.md, "Configs"; issue #32): `checkpoint_path` and
`eval_save_outputs` are unknown keys as overrides, and dropped from config files that hold them (the original HRM
code's all_config.yaml, and run configs saved while they were accepted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrm_reason.config import TrainConfig, load_config, save_config
from hrm_reason.errors import UserError
from tests.helpers import REPO, tiny_config


@pytest.mark.parametrize("override", ["checkpoint_path=checkpoints/x", "eval_save_outputs=[logits]"])
def test_an_unread_key_given_as_an_override_is_an_unknown_key(override: str) -> None:
    key = override.partition("=")[0]
    with pytest.raises(UserError, match=rf"field '{key}': .*(unknown|extra|not permitted)") as e:
        load_config(None, ["data_path=d", override])
    assert "\n" not in str(e.value)
    assert key not in TrainConfig.model_fields


def test_a_saved_run_config_holding_the_unread_keys_still_loads(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "data", tmp_path / "run")
    path = tmp_path / "config.yaml"
    save_config(config, path)
    path.write_text(path.read_text() + "checkpoint_path: null\neval_save_outputs: []\n")  # as saved before
    assert load_config(path) == config
    # Run configs kept in the repository were saved with them.
    kept = [p for p in sorted((REPO / "benchmarks").rglob("config.yaml")) if "eval_save_outputs" in p.read_text()]
    assert kept
    for p in kept:
        load_config(p)


# --- overrides read against each field's type (issue 35): one line naming the key and what it takes, never a trace


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("arch=5", ["override 'arch=5'", "'arch' is a section", "arch.hidden_size=256"]),
        ("arch=null", ["'arch' is a section"]),
        ("seed=-1", ["field 'seed'", "0 .. 4294967295"]),
        ("seed=4294967296", ["field 'seed'", "0 .. 4294967295"]),
        ("seed=99999999999999999999999", ["field 'seed'", "0 .. 4294967295"]),
        ("global_batch_size=true", ["field 'global_batch_size'", "not a boolean"]),
        ("ema=yes", ["field 'ema'", "not a boolean"]),
        ("arch.hidden_size=true", ["field 'arch.hidden_size'", "not a boolean"]),
        ("arch.loss=5", ["field 'arch.loss'"]),
        ("depth_curriculum=[{until: true, H_cycles: 1, L_cycles: 1}]", ["field 'depth_curriculum.0.until'", "boolean"]),
        ("global_batch_size=-1", ["field 'global_batch_size'", "greater than 0"]),
        ("max_steps=99999999999999999999", ["field 'max_steps'", "9223372036854775807"]),
        ("arch.halt_max_steps=99999999999999999999", ["field 'arch.halt_max_steps'", "9223372036854775807"]),
        ("lr=nan", ["field 'lr'", "finite"]),
        ("lr=inf", ["field 'lr'", "finite"]),
        ("max_seconds=.inf", ["field 'max_seconds'", "finite"]),
        ("arch.rope_theta=.inf", ["field 'arch.rope_theta'", "finite"]),
        ("arch.halt_exploration_prob=nan", ["field 'arch.halt_exploration_prob'", "finite"]),
    ],
)
def test_a_bad_override_is_one_line_naming_the_key(override: str, fragments: list[str]) -> None:
    with pytest.raises(UserError) as e:
        load_config(REPO / "configs" / "quickstart.yaml", [override])
    message = str(e.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_overrides_keep_their_type() -> None:
    config = load_config(REPO / "configs" / "quickstart.yaml", ["seed=4294967295", "run_name=2024", "data_path=123"])
    assert config.seed == 2**32 - 1  # the largest seed numpy takes
    assert config.run_name == "2024" and config.data_path == "123"  # text fields keep the text given
    assert load_config(REPO / "configs" / "quickstart.yaml", ["compile=true"]).compile is True


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("global_batch_size: true", "field 'global_batch_size': expected a number, not a boolean"),
        ("arch: 5", "field 'arch': expected a mapping of model options"),
        ("lr: .nan", "field 'lr'"),
    ],
)
def test_a_config_file_is_read_as_strictly_as_an_override(tmp_path: Path, line: str, fragment: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"data_path: d\n{line}\n")
    with pytest.raises(UserError, match=fragment):
        load_config(path)


# --- `hrm train --resume` names what is missing, not the default config's dataset (issue 35)


def test_a_resume_without_its_run_names_the_flag_or_the_path(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from hrm_reason.config import resume_config

    with pytest.raises(UserError, match=r"^--resume needs --run-dir"):
        resume_config(None, None, True, [], "quickstart.yaml")
    with pytest.raises(UserError, match=rf"^{tmp_path / 'nowhere'}: no such run directory to resume"):
        resume_config(tmp_path / "nowhere", None, True, [], "quickstart.yaml")
    (tmp_path / "run").mkdir()
    with pytest.raises(UserError, match=rf"^{tmp_path / 'run' / 'config.yaml'} not found: --resume reads"):
        resume_config(tmp_path / "run", None, True, [], "quickstart.yaml")
    config = tiny_config(tmp_path / "data", tmp_path / "run")
    save_config(config, tmp_path / "run" / "config.yaml")
    assert resume_config(tmp_path / "run", None, True, [], "quickstart.yaml") == config
    assert "no --config given" not in capsys.readouterr().err
