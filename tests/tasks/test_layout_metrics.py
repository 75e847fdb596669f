"""Task metrics for datasets the original HRM scripts wrote (no `builder` record in dataset.json): the maze and ARC
metrics are chosen from the layout, and give the same numbers as on the same data with our record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from datasets_build import arc as A
from datasets_build import maze as M
from hrm_reason.data.puzzle import load_split
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import evaluate
from hrm_reason.models.act import ACTOutput
from hrm_reason.tasks import arc as V
from hrm_reason.tasks import choose_metrics, task_metrics
from hrm_reason.tasks.maze import OPEN, WALL, OptimalPathAccuracy
from tests.helpers import write_original_layout

MMAX = 2


def strip_builder(data: Path, to: Path) -> Path:
    """A copy of `data` as the original scripts write it: dataset.json without our `builder` record."""
    shutil.copytree(data, to)
    for meta in to.glob("*/dataset.json"):
        record = json.loads(meta.read_text())
        assert record.pop("builder") is not None
        meta.write_text(json.dumps(record))
    return to


class StandIn(nn.Module):
    """Predicts, for each input row, the label when its example index is not a multiple of 3 and the input otherwise
    (a mix of right and wrong answers); halts at the first segment with a confidence that varies by row."""

    def __init__(self, split_dir: Path, vocab: int) -> None:
        super().__init__()
        s = load_split(split_dir.parent, split_dir.name).sets["all"]
        x, y = np.asarray(s.inputs), np.asarray(s.labels)
        self.vocab = vocab
        self.script = {x[i].astype(np.uint8).tobytes(): (y[i] if i % 3 else x[i], (i % 7) / 7) for i in range(len(x))}

    def empty_carry(self, batch: dict[str, torch.Tensor]) -> dict[str, int]:
        return {"segment": 0}

    def forward(self, carry: dict[str, int], batch: dict[str, torch.Tensor], halt_max_steps: int):
        pad = (np.zeros(batch["inputs"].shape[1], dtype=np.int64), 0.0)  # the last batch's padding rows
        rows = [self.script.get(x.numpy().astype(np.uint8).tobytes(), pad) for x in batch["inputs"]]
        preds = torch.stack([torch.from_numpy(p.astype(np.int64)) for p, _ in rows])
        q = torch.tensor([q for _, q in rows])
        logits = nn.functional.one_hot(preds, self.vocab).float()
        return {"segment": carry["segment"] + 1}, ACTOutput(logits, q, torch.zeros_like(q))


def run(data: Path, vocab: int) -> dict:
    split = load_split(data, "test")
    model = StandIn(split.path, vocab)
    result = evaluate(model, split, MMAX, 5, torch.device("cpu"), progress=False, metrics=task_metrics(split, MMAX))
    return result.to_dict()


@pytest.fixture(scope="module")
def maze(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("maze")
    built = M.build_maze(M.MazeBuildOptions(out=root / "ours", source="generate", size=9, train_size=4, test_size=12))
    return built, strip_builder(built, root / "original")


@pytest.fixture(scope="module")
def arc(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Three real ARC-AGI-1 evaluation tasks (two with two test inputs) in the original 30x30 canvas."""
    root = tmp_path_factory.mktemp("arc")
    options = A.ArcBuildOptions(
        out=root / "ours", version="1", num_aug=3, task_ids=["00576224", "31d5ba1a", "6ea4a07e"]
    )
    built = A.build_arc(options)
    return built, strip_builder(built, root / "original")


def test_maze_metric_is_chosen_from_the_layout_and_equal(maze: tuple[Path, Path], capsys) -> None:
    ours, original = maze
    name, why, metrics = choose_metrics(load_split(original, "test"), MMAX)
    assert name == "maze" and why.startswith("no builder record") and isinstance(metrics[0], OptimalPathAccuracy)
    capsys.readouterr()
    task_metrics(load_split(original, "test"), MMAX, announce=True)
    assert capsys.readouterr().err == (
        "metric: maze optimal-path (no builder record; vocabulary and characters match the maze layout)\n"
    )
    a, b = run(ours, 6), run(original, 6)
    assert a == b
    assert 0 < a["extra"]["act_optimal_path_accuracy"] < 1  # a mix of right and wrong paths, not a vacuous 0 or 1


def test_a_label_that_moves_a_wall_is_not_the_maze_layout(maze: tuple[Path, Path], tmp_path: Path) -> None:
    data = shutil.copytree(maze[1], tmp_path / "d")
    labels = np.load(data / "test" / "all__labels.npy")
    row = labels[0]
    row[np.flatnonzero(row == WALL)[0]] = OPEN
    np.save(data / "test" / "all__labels.npy", labels)
    assert choose_metrics(load_split(data, "test"), MMAX)[0] is None


def test_arc_voting_is_chosen_from_the_layout_and_equal(arc: tuple[Path, Path], capsys) -> None:
    ours, original = arc
    split = load_split(original, "test")
    name, why, metrics = choose_metrics(split, MMAX)
    assert name == "arc" and why.startswith("no builder record") and isinstance(metrics[0], V.ArcVoting)
    derived, recorded = V.ArcTestSet.from_split(split), V.ArcTestSet.from_split(load_split(ours, "test"))
    assert [t["name"] for t in derived.tasks] == [t["name"] for t in recorded.tasks]
    assert derived.size == recorded.size == 30 and derived.answers == recorded.answers
    assert derived.test_inputs == recorded.test_inputs
    for field in ("task_of", "transform_of", "inverse_colours"):
        assert np.array_equal(getattr(derived, field), getattr(recorded, field))
    a, b = run(ours, 12), run(original, 12)
    assert a == b
    voting = a["extra"]["arc_voting"]
    assert (
        0 < a["extra"]["pass@1"] < 1
        and voting["tasks_scored"] == 3
        and voting["rows"] == a["count"]
        and voting["unmatched_rows"] == 0
    )
    V.require_arc_dataset(original, "--submission")  # --submission accepts it too


def test_arc_layout_needs_its_identifiers_and_untranslated_canvases(arc: tuple[Path, Path], tmp_path: Path) -> None:
    no_ids = shutil.copytree(arc[1], tmp_path / "no_ids")
    (no_ids / "identifiers.json").unlink()
    assert choose_metrics(load_split(no_ids, "test"), MMAX) == (
        None,
        "no builder record; the layout is neither the maze's nor ARC's",
        [],
    )
    moved = shutil.copytree(arc[1], tmp_path / "moved")
    inputs = np.load(moved / "test" / "all__inputs.npy")
    inputs[0] = np.roll(inputs[0].reshape(30, 30), 1, axis=1).reshape(-1)  # the first original, shifted right
    np.save(moved / "test" / "all__inputs.npy", inputs)
    with pytest.raises(UserError, match="not at the top-left"):
        V.layout_record(load_split(moved, "test"))
    assert choose_metrics(load_split(moved, "test"), MMAX)[0] is None


def test_a_dataset_matching_neither_gets_no_extra_metric(tmp_path: Path, capsys) -> None:
    # 4x4 Sudoku: vocab 6 and a square grid, like a maze, but not its characters
    data = write_original_layout(tmp_path / "sudoku4")
    capsys.readouterr()
    assert task_metrics(load_split(data, "test"), MMAX, announce=True) == []
    assert capsys.readouterr().err == ""  # no metric chosen, nothing said
    result = run(data, 6)
    assert result["extra"] == {}
    with pytest.raises(UserError, match="not an ARC dataset"):
        V.require_arc_dataset(data, "--submission")
