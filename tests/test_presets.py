"""The presets in configs/ and their `base:` key (issue 45, item 4). Every preset resolves to the config recorded in
tests/fixtures/resolved_presets.json, written from the presets as they stood before they inherited (each stating every
value): rewriting a preset to state only what differs from its base must change none of its values. Then the merge
itself: the child's keys win, mappings merge key by key, a chain of bases resolves, a cycle or a missing base is one
line naming the file and its `base` key, and a run's saved config.yaml holds the resolved values with no `base` key.

After a deliberate change of a preset's values, rewrite the record: python -m tests.test_presets --write"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hrm_reason.config import load_config, save_config
from hrm_reason.errors import UserError

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "resolved_presets.json"


def resolved(path: Path) -> dict[str, Any]:
    """The config `hrm train -c PATH` validates, as JSON holds it."""
    return json.loads(json.dumps(load_config(path).model_dump(mode="json")))


def presets() -> list[Path]:
    return sorted(CONFIGS.glob("*.yaml"))


def test_every_preset_resolves_as_recorded() -> None:
    recorded = json.loads(FIXTURE.read_text())
    assert sorted(recorded) == [p.name for p in presets()], "a preset added or removed: rewrite the record (--write)"
    for path in presets():
        assert resolved(path) == recorded[path.name], f"{path.name} resolves to other values than recorded"


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


BASE = """\
data_path: data/base
lr: 2.0e-3
seed: 3
arch:
  name: hrm
  hidden_size: 64
  H_layers: 1
  loss:
    loss_type: softmax_cross_entropy
"""


def test_the_child_wins_and_mappings_merge_key_by_key(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", BASE)
    child = write(tmp_path, "child.yaml", "base: base.yaml\nlr: 1.0e-3\narch:\n  hidden_size: 32\n")
    config = load_config(child).model_dump()
    assert (config["data_path"], config["lr"], config["seed"]) == ("data/base", 1.0e-3, 3)
    assert (config["arch"]["hidden_size"], config["arch"]["H_layers"]) == (32, 1)
    assert config["arch"]["loss"]["loss_type"] == "softmax_cross_entropy"
    # Overrides come after the merge, on the resolved values.
    assert load_config(child, ["arch.hidden_size=16", "seed=5"]).model_dump()["arch"]["hidden_size"] == 16
    assert load_config(child, ["seed=5"]).seed == 5


def test_an_arch_of_another_model_replaces_the_bases(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", BASE)
    child = write(tmp_path, "child.yaml", "base: base.yaml\narch:\n  name: trm\n  hidden_size: 32\n")
    config = load_config(child)
    assert (config.arch.name, config.arch.hidden_size, config.data_path) == ("trm", 32, "data/base")
    assert config.arch.loss.loss_type == "stablemax_cross_entropy"  # trm's default, not the base's hrm setting
    same = write(tmp_path, "same.yaml", "base: base.yaml\narch:\n  name: hrm\n  hidden_size: 32\n")
    assert load_config(same).arch.H_layers == 1  # the same model: merged


def test_a_chain_of_bases_resolves_relative_to_each_file(tmp_path: Path) -> None:
    write(tmp_path, "shared/root.yaml", BASE)
    write(tmp_path, "shared/middle.yaml", "base: root.yaml\nseed: 4\narch:\n  H_layers: 2\n")
    child = write(tmp_path, "child.yaml", "base: shared/middle.yaml\nlr: 1.0e-3\n")
    config = load_config(child).model_dump()
    assert (config["data_path"], config["seed"], config["lr"]) == ("data/base", 4, 1.0e-3)
    assert (config["arch"]["hidden_size"], config["arch"]["H_layers"]) == (64, 2)


def test_a_cycle_is_refused_in_one_line(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "base: b.yaml\nseed: 1\n")
    write(tmp_path, "b.yaml", "base: a.yaml\nseed: 2\n")
    with pytest.raises(UserError) as e:
        load_config(tmp_path / "a.yaml")
    message = str(e.value)
    assert "\n" not in message and "'base'" in message and "cycle" in message
    assert str(tmp_path / "b.yaml") in message and "a.yaml" in message
    write(tmp_path, "self.yaml", "base: self.yaml\nseed: 1\n")
    with pytest.raises(UserError, match="cycle"):
        load_config(tmp_path / "self.yaml")


def test_a_missing_or_malformed_base_is_refused_in_one_line(tmp_path: Path) -> None:
    child = write(tmp_path, "child.yaml", "base: nowhere.yaml\nseed: 1\n")
    with pytest.raises(UserError) as e:
        load_config(child)
    message = str(e.value)
    assert "\n" not in message and "'base'" in message and str(child) in message
    assert str(tmp_path / "nowhere.yaml") in message
    for bad in ("base: 3\n", "base: ''\n", "base: [a.yaml]\n"):
        with pytest.raises(UserError, match="'base'"):
            load_config(write(tmp_path, "bad.yaml", bad + "seed: 1\n"))
    # A base that is not a config names the base file, as any config file would be named.
    write(tmp_path, "list.yaml", "- 1\n")
    with pytest.raises(UserError, match="list.yaml"):
        load_config(write(tmp_path, "child2.yaml", "base: list.yaml\n"))
    # An override cannot name a base: bases are a file's, resolved before the overrides.
    with pytest.raises(UserError, match="base"):
        load_config(None, ["base=x.yaml"])


def test_the_saved_config_is_resolved_with_no_base(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", BASE)
    child = write(tmp_path, "child.yaml", "base: base.yaml\nlr: 1.0e-3\n")
    config = load_config(child)
    save_config(config, tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert "base" not in saved and saved["data_path"] == "data/base" and saved["arch"]["hidden_size"] == 64
    assert load_config(tmp_path / "config.yaml") == config
    # The shipped presets too: a preset with a base saves every value.
    for path in presets():
        if "base" in yaml.safe_load(path.read_text()):
            save_config(load_config(path), tmp_path / "preset.yaml")
            assert yaml.safe_load((tmp_path / "preset.yaml").read_text()) == load_config(path).model_dump(mode="json")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_presets --write  (records every preset's resolved config)")
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps({p.name: resolved(p) for p in presets()}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE.relative_to(REPO)}: {len(presets())} presets")


def test_a_packaged_config_is_found_from_any_folder(tmp_path: Path, monkeypatch: Any) -> None:
    """The README's `-c configs/NAME.yaml` names the packaged config outside the checkout too (NAME.yaml and NAME as
    well); a file of that path in the folder wins, and a name that is neither is refused in one line."""
    expected = load_config(CONFIGS / "your_task.yaml")
    monkeypatch.chdir(tmp_path)
    for name in ("configs/your_task.yaml", "your_task.yaml", "your_task"):
        assert load_config(name) == expected
    (tmp_path / "configs").mkdir()
    save_config(expected.model_copy(update={"data_path": "data/mine"}), tmp_path / "configs" / "your_task.yaml")
    assert load_config("configs/your_task.yaml").data_path == "data/mine"  # the user's own file, not ours
    for name in ("configs/nope.yaml", "nope"):
        with pytest.raises(UserError, match=rf"^config file {name} not found, nor is nope\.yaml one of the packaged"):
            load_config(name)
    with pytest.raises(UserError, match=r"^config file elsewhere/your_task\.yaml not found$"):
        load_config("elsewhere/your_task.yaml")
