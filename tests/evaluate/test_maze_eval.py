"""Optimal-path accuracy: BFS against plain BFS written here, the metric against its definition checked by brute force,
and the metric inside `evaluate` (per segment, ACT, across two processes).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from datasets_build import maze as M
from hrm_reason.data.puzzle import load_split
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import evaluate
from hrm_reason.models.act import ACTOutput
from hrm_reason.tasks import task_metrics
from hrm_reason.tasks.maze import (
    GOAL,
    OPEN,
    PATH,
    START,
    WALL,
    OptimalPathAccuracy,
    bfs_distances,
    optimal_path_correct,
    pack_rows,
    segment_metrics,
    start_distances,
    unpack_rows,
    wavefront,
)
from tests.helpers import halting_output, ref_distances

# ------------------------------------------------------------------------------------------- independent helpers


def ref_is_shortest_path(grid: np.ndarray, pred: np.ndarray) -> bool:
    """The definition: the 'o' cells are open, there are d(S,G) - 1 of them, and with S and G they hold an S-G walk."""
    start, goal = tuple(np.argwhere(grid == START)[0]), tuple(np.argwhere(grid == GOAL)[0])
    d = ref_distances(grid != WALL, [start])[goal]
    marked = pred == PATH
    if d < 0 or (marked & (grid != OPEN)).any() or marked.sum() != d - 1:
        return False
    return ref_distances(marked | (grid == START) | (grid == GOAL), [start])[goal] >= 0


def random_maze(rng: np.random.Generator, h: int, w: int, wall_p: float) -> np.ndarray | None:
    grid = np.where(rng.random((h, w)) < wall_p, WALL, OPEN)
    open_cells = np.argwhere(grid == OPEN)
    if len(open_cells) < 2:
        return None
    s, g = rng.choice(len(open_cells), size=2, replace=False)
    grid[tuple(open_cells[s])], grid[tuple(open_cells[g])] = START, GOAL
    return grid


def other_shortest_path(grid: np.ndarray, label: np.ndarray) -> np.ndarray | None:
    """A shortest path other than the label's, found by walking back from G preferring cells off the label path."""
    start, goal = tuple(np.argwhere(grid == START)[0]), tuple(np.argwhere(grid == GOAL)[0])
    lvl = ref_distances(grid != WALL, [start])
    H, W = grid.shape
    out = grid.copy()
    cur = goal
    while lvl[cur] > 1:
        steps = [(cur[0] + a, cur[1] + b) for a, b in ((-1, 0), (1, 0), (0, -1), (0, 1))]
        steps = [p for p in steps if 0 <= p[0] < H and 0 <= p[1] < W and lvl[p] == lvl[cur] - 1]
        steps.sort(key=lambda p: label[p] == PATH)  # off the labelled path first
        cur = steps[0]
        out[cur] = PATH
    return None if np.array_equal(out, label) else out


def tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(x, dtype=np.int64))


# ----------------------------------------------------------------------------------------------------------- BFS


def test_bfs_matches_plain_bfs_on_random_grids() -> None:
    rng = np.random.default_rng(0)
    for h, w, p in [(1, 1, 0.0), (3, 7, 0.3), (8, 8, 0.4), (13, 5, 0.45), (30, 30, 0.38), (20, 62, 0.35)]:
        passable = rng.random((6, h, w)) >= p
        sources = np.zeros_like(passable)
        src_lists = []
        for b in range(6):
            cells = [tuple(x) for x in rng.integers(0, [h, w], size=(b % 3 + 1, 2))]  # 1-3 sources, maybe on walls
            src_lists.append(cells)
            for cell in cells:
                sources[b][cell] = True
        got = bfs_distances(torch.from_numpy(passable), torch.from_numpy(sources)).numpy()
        for b in range(6):
            assert np.array_equal(got[b], ref_distances(passable[b], src_lists[b])), (h, w, b)


def test_bit_parallel_generator_bfs_matches_plain_bfs() -> None:
    """The wavefront itself (reach, farthest layer, eccentricity, cells within k moves) on random layouts: the one BFS
    the builder's generator, the labels and the metric share (tasks/maze.py)."""
    rng = np.random.default_rng(1)
    for size in (4, 9, 30, 62):
        passable = rng.random((8, size, size)) >= 0.35
        cells = rng.integers(0, size, size=(8, 2))
        seeds = np.zeros_like(passable)
        seeds[np.arange(8), cells[:, 0], cells[:, 1]] = True
        near = size // 2
        wave = wavefront(pack_rows(passable), pack_rows(seeds), np.uint64((1 << size) - 1), near=near)
        for b in range(8):
            ref = ref_distances(passable[b], [tuple(cells[b])])
            ecc = max(ref.max(), 0)
            assert np.array_equal(unpack_rows(wave.reach[b], size), ref >= 0)
            assert wave.ecc[b] == ecc
            assert np.array_equal(
                unpack_rows(wave.last[b], size), (ref == ecc) if ref.max() >= 0 else np.zeros_like(passable[b])
            )
            assert np.array_equal(unpack_rows(wave.within[b], size), (ref >= 0) & (ref <= near))


def test_start_distances_ignore_mazes_without_a_single_start() -> None:
    grid = np.full((2, 3, 3), OPEN)
    grid[0, 0, 0] = START
    grid[1, 0, 0] = grid[1, 2, 2] = START  # two starts: no distances at all
    lvl = start_distances(tensor(grid)).numpy()
    assert lvl[0, 2, 2] == 4 and (lvl[1] == -1).all()


# -------------------------------------------------------------------------------------------------------- metric


def test_metric_equals_its_definition_on_every_prediction_of_small_mazes() -> None:
    """All 2^k markings of the open cells of small random mazes, against the definition written out above."""
    rng = np.random.default_rng(2)
    checked = positives = 0
    while checked < 12:
        grid = random_maze(rng, 4, 4, 0.3)
        if grid is None:
            continue
        opens = np.argwhere(grid == OPEN)
        if not 4 <= len(opens) <= 11:
            continue
        preds = np.repeat(grid[None], 2 ** len(opens), axis=0)
        for k, subset in enumerate(itertools.product([False, True], repeat=len(opens))):
            preds[k][tuple(opens[np.array(subset, dtype=bool)].T)] = PATH
        # also a few markings on walls, S and G
        bad = preds[-3:].copy()
        bad[0][grid == START] = PATH
        bad[1][grid == GOAL] = PATH
        if (grid == WALL).any():
            bad[2][tuple(np.argwhere(grid == WALL)[0])] = PATH
        preds = np.concatenate([preds, bad])
        got = optimal_path_correct(tensor(np.repeat(grid[None], len(preds), axis=0)), tensor(preds)).numpy()
        want = np.array([ref_is_shortest_path(grid, p) for p in preds])
        assert np.array_equal(got, want)
        checked += 1
        positives += int(want.sum())
    assert positives >= 5  # the positive case was exercised


def test_another_shortest_path_is_right_for_the_metric_and_wrong_for_exact_match() -> None:
    grids = np.concatenate([M.generate_chunk(3, "test", c, 9, 20, (0.3, 0.5)).grids for c in range(2)])
    labels, _ = M.label_paths(grids)
    found = 0
    for grid, label in zip(grids, labels):
        alt = other_shortest_path(grid, label)
        if alt is None:
            continue
        found += 1
        assert not np.array_equal(alt, label)  # exact match says wrong
        both = optimal_path_correct(tensor(np.stack([grid, grid])), tensor(np.stack([alt, label]))).tolist()
        assert both == [True, True]
        assert ref_is_shortest_path(grid, alt)
    assert found >= 3


def test_broken_paths_are_wrong() -> None:
    grids = M.generate_chunk(4, "test", 0, 9, 20, (0.3, 0.5)).grids[:6]
    labels, _ = M.label_paths(grids)
    rng = np.random.default_rng(5)
    for grid, label in zip(grids, labels):
        path = np.argwhere(label == PATH)
        cases = {"label": label}
        gap = label.copy()
        gap[tuple(path[rng.integers(len(path))])] = OPEN
        cases["gap"] = gap
        extra = label.copy()
        extra[tuple(np.argwhere(label == OPEN)[0])] = PATH  # one cell too many (a longer "path")
        cases["extra"] = extra
        wall = label.copy()
        wall[tuple(np.argwhere(grid == WALL)[0])] = PATH
        wall[tuple(path[0])] = OPEN  # same count, one cell on a wall instead
        cases["wall"] = wall
        cases["nothing"] = grid
        got = optimal_path_correct(
            tensor(np.stack([grid] * len(cases))), tensor(np.stack(list(cases.values())))
        ).tolist()
        assert dict(zip(cases, got)) == {"label": True, "gap": False, "extra": False, "wall": False, "nothing": False}


def test_unreachable_goal_and_adjacent_start_goal() -> None:
    shut = np.array([[START, WALL, GOAL], [OPEN, WALL, OPEN]])
    near = np.array([[START, GOAL, OPEN], [OPEN, OPEN, OPEN]])
    near_marked = near.copy()
    near_marked[1, 0] = PATH
    got = optimal_path_correct(tensor(np.stack([shut, near, near_marked])), tensor(np.stack([shut, near, near_marked])))
    assert got.tolist() == [False, True, False]  # d = 1: the right answer marks nothing


# ------------------------------------------------------------------------------------------ inside evaluation


class Scripted(nn.Module):
    """A stand-in model: for each input row, a fixed prediction per segment, and q_halt > q_continue from segment
    `halt`."""

    def __init__(self, script: dict[bytes, list[np.ndarray]], halt: int, vocab: int = 6) -> None:
        super().__init__()
        self.script, self.halt, self.vocab = script, halt, vocab

    def empty_carry(self, batch: dict[str, torch.Tensor]) -> dict[str, int]:
        return {"segment": 0}

    def forward(self, carry: dict[str, int], batch: dict[str, torch.Tensor], halt_max_steps: int):
        m = carry["segment"]
        rows = [self.script.get(x.numpy().astype(np.uint8).tobytes()) for x in batch["inputs"]]
        preds = torch.stack(
            [
                torch.from_numpy(r[min(m, len(r) - 1)].astype(np.int64))
                if r
                else torch.zeros_like(batch["inputs"][0], dtype=torch.int64)
                for r in rows
            ]
        )
        logits = nn.functional.one_hot(preds, self.vocab).float()
        q = torch.full((preds.shape[0],), 1.0 if m >= self.halt else -1.0)
        return {"segment": m + 1}, ACTOutput(logits=logits, q_halt_logits=q, q_continue_logits=torch.zeros_like(q))


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("maze") / "ds"
    return M.build_maze(M.MazeBuildOptions(out=out, source="generate", size=9, train_size=4, test_size=12, seed=1))


def test_evaluate_reports_optimal_path_accuracy_per_segment_and_act(small_dataset: Path) -> None:
    split = load_split(small_dataset, "test")
    inputs, labels = np.asarray(split.sets["all"].inputs), np.asarray(split.sets["all"].labels)
    script, alternatives = {}, 0
    for x, y in zip(inputs, labels):
        alt = other_shortest_path(x.reshape(9, 9), y.reshape(9, 9))
        alternatives += alt is not None
        # segment 1: no path; 2: another shortest path where there is one (else a gap); 3+: the label
        second = alt.reshape(-1) if alt is not None else np.where(y == PATH, OPEN, y)
        script[x.astype(np.uint8).tobytes()] = [x, second, y]
    assert 0 < alternatives < len(inputs)
    metrics = task_metrics(split, 4)
    assert len(metrics) == 1 and isinstance(metrics[0], OptimalPathAccuracy)
    result = evaluate(
        Scripted(script, halt=1),
        split,
        mmax=4,
        global_batch_size=5,
        device=torch.device("cpu"),
        progress=False,
        metrics=metrics,
    )
    n = len(inputs)
    assert result.count == n
    assert result.exact_accuracy == pytest.approx([0.0, 0.0, 1.0, 1.0])
    assert result.extra["optimal_path_accuracy"] == pytest.approx([0.0, alternatives / n, 1.0, 1.0])
    assert result.extra["act_optimal_path_accuracy"] == pytest.approx(alternatives / n)  # halts after segment 2


def test_segment_metrics_rejects_a_non_maze_layout(small_dataset: Path) -> None:
    split = load_split(small_dataset, "test")
    split.metadata.seq_len = 80
    with pytest.raises(UserError, match="square grid"):
        segment_metrics(split, 2)


def _two_rank_worker(rank: int, init_file: str, results: dict) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    grid = np.array([[START, OPEN, GOAL], [OPEN, OPEN, OPEN], [OPEN, WALL, OPEN]])
    good = grid.copy()
    good[0, 1] = PATH
    metric = OptimalPathAccuracy(2, 3)
    preds = [good, grid] if rank == 0 else [grid, grid]  # rank 0 solves one maze, rank 1 none
    batch = {"inputs": tensor(np.stack([grid, grid]).reshape(2, -1))}
    q = torch.zeros(2)
    for m in range(2):
        metric.update(
            m,
            tensor(np.stack(preds).reshape(2, -1)),
            halting_output(q, q),
            batch,
            torch.tensor([True, rank == 0]),
        )
    results[rank] = metric.result(2)
    torch.distributed.destroy_process_group()


def test_result_sums_counts_across_ranks(tmp_path: Path) -> None:
    ctx = torch.multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        results = manager.dict()
        torch.multiprocessing.start_processes(
            _two_rank_worker, args=(str(tmp_path / "init"), results), nprocs=2, start_method="spawn"
        )
        # 3 valid rows in all (2 on rank 0, 1 on rank 1), one solved at both segments
        for rank in (0, 1):
            assert results[rank]["optimal_path_accuracy"] == pytest.approx([1 / 3, 1 / 3])
            assert results[rank]["act_optimal_path_accuracy"] == pytest.approx(1 / 3)
