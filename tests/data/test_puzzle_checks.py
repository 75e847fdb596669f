"""A puzzle dataset that holds nothing to learn from or to score is refused by the loader in one line naming the file
or field (hrm_reason/data/puzzle.py, load_split): float inputs, an empty `sets` list, a split of 0 examples. Each
dataset here is a sound one in the original layout (tests/helpers.py) damaged in one place."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hrm_reason.data.puzzle import load_split
from hrm_reason.errors import UserError
from tests.helpers import hrm_in_process, write_original_layout


def _floats(root: Path) -> None:
    path = root / "test" / "all__inputs.npy"
    np.save(path, np.load(path).astype(np.float32))


def _no_sets(root: Path) -> None:
    path = root / "train" / "dataset.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps({**meta, "sets": []}))


def _empty(split: str) -> Callable[[Path], None]:
    """Every array of the split's set cut to no examples, no puzzles and no groups: consistent, and empty."""

    def damage(root: Path) -> None:
        d = root / split
        for name in ("inputs", "labels"):
            np.save(d / f"all__{name}.npy", np.load(d / f"all__{name}.npy")[:0])
        np.save(d / "all__puzzle_identifiers.npy", np.zeros(0, dtype=np.int32))
        for name in ("puzzle_indices", "group_indices"):
            np.save(d / f"all__{name}.npy", np.zeros(1, dtype=np.int32))
        meta = json.loads((d / "dataset.json").read_text())
        (d / "dataset.json").write_text(json.dumps({**meta, "total_groups": 0}))

    return damage


CASES = {
    "float-inputs": (_floats, "test", r"test/all__inputs\.npy: .*float32"),
    "no-sets": (_no_sets, "train", r"train/dataset\.json: sets is empty"),
    "empty-train": (_empty("train"), "train", r"train: 0 examples \(all__inputs\.npy is empty\)$"),
    "empty-test": (_empty("test"), "test", r"test: 0 examples"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_dataset_with_nothing_to_use_is_refused_in_one_line(case: str, tmp_path: Path) -> None:
    damage, split, message = CASES[case]
    root = write_original_layout(tmp_path / "d")
    load_split(root, split)  # sound before the damage
    damage(root)
    with pytest.raises(UserError, match=message) as e:
        load_split(root, split)
    assert "\n" not in str(e.value)


def test_hrm_train_refuses_an_empty_split_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_original_layout(tmp_path / "d")
    _empty("test")(root)
    run = tmp_path / "run"
    code, err = hrm_in_process(
        capsys, monkeypatch, "train", "--data", str(root), "--run-dir", str(run), "max_steps=1", "device=cpu"
    )
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("no --config given")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "test: 0 examples" in lines[0], err
    assert not (run / "checkpoints").exists()
