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
