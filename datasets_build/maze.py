"""Maze-Hard builder: the paper's 30x30 hard mazes (Hugging Face or local CSV) or built-in generated mazes, in the
original HRM format (docs/data.md, "Maze"; tokens of `hrm_reason.tasks.maze`: '# SGo' -> ids 1..5, PAD 0, vocab 6,
every cell supervised, puzzle identifier 0).

The generator follows the instance procedure of Lehnert et al. ("Beyond A*", 2024; facebookresearch/searchformer,
`searchformer/maze.py`), which the HRM paper adopts, plus the paper's hardness filter:
- walls: a uniformly random set of k cells, k uniform in [floor(0.3 N), floor(0.5 N)] of the N cells (Lehnert: N//10*3
  to N//10*5 walls, the same numbers when N is a multiple of 10, e.g. 30x30);
- moves: up, down, left, right; no wrap-around; start S and goal G are distinct open cells;
- hardness (HRM): the shortest S-G path has at least `min_path` moves (110 at 30x30).
Lehnert draws (S, G) uniformly and keeps the pair when it passes; at 30x30 and 110 moves fewer than 1 in 20,000 pairs
passes, so rejection is hopeless. Instead a wall layout is kept when it has a passing pair at all (decided exactly with
a few BFS per layout: see `_far_pair_in_component`), and its (S, G) is then drawn uniformly among *all* its passing
ordered pairs (all-pairs BFS). Given the layout, that is exactly Lehnert's conditional law; the one difference is that
every kept layout weighs the same instead of in proportion to its number of passing pairs. Layouts are independent
draws, one maze each, so no two mazes share walls.

The label marks the cells of one shortest path 'o': walking back from G, always to the first neighbour one step closer
to S in the order up, down, left, right, so the label is a function of the maze (learnable for exact match). Any other
shortest path is just as right; `hrm eval` scores it with the optimal-path accuracy (hrm_reason/tasks/maze.py).

Every search runs the one bit-parallel BFS of `hrm_reason.tasks.maze` (`wavefront`: a grid row is one uint64, bit j =
column j, so a step over thousands of layouts is a few shifts and ANDs on [n, H] words).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from datasets_build import sources
from datasets_build.hrm_format import check_out, record_head, solution_class_counts, write_grid_dataset
from datasets_build.options import MazeBuildOptions
from datasets_build.workers import worker_pool
from hrm_reason.errors import UserError
from hrm_reason.runtime.logs import progress_bar
from hrm_reason.tasks.dihedral import dihedral_transform
from hrm_reason.tasks.maze import (
    CHARSET,
    GOAL,
    OPEN,
    PATH,
    START,
    TOKEN_OF,
    VOCAB_SIZE,
    WALL,
    first_cell,
    grid_side,
    label_paths,
    one_hot_rows,
    optimal_path_correct,
    pack_rows,
    popcount,
    start_distances,
    start_levels,
    unpack_rows,
    wavefront,
)

BUILDER_VERSION = "1"
HF_REPO = "sapientinc/maze-30x30-hard-1k"
CSV_HEADER = ("source", "question", "answer", "rating")
PAPER_SIZE, PAPER_MIN_PATH = 30, 110
LEHNERT_WALL_DENSITY = (0.3, 0.5)
DEFAULT_GENERATED_SIZES = (1000, 1000)  # the published set: 1000 train, 1000 test
# Passing layouts in a row that repeat mazes already seen, at least, after which the mazes seen are taken to be all
# there are (and at least as many as the mazes seen: a coupon collector's wait for a last few grows with their number)
STALL_REPEATS = 2000
CHUNK = 512  # layouts per generation step; part of what the seed means, so a constant and not an option
_STREAM_GENERATE = 1  # independent of datasets_build.sources.STREAM_SUBSAMPLE (3) and STREAM_SIZE (5)
_SPLIT_CODE = {"train": 0, "test": 1}


def default_min_path(size: int) -> int:
    """110 moves at 30x30, scaled to the same tail: about the 99.3rd percentile of the longest shortest path of a random
    Lehnert layout, which grows like side^(7/6) (measured for sides 7..30): 27 at 9x9, 34 at 11x11, 41 at 13x13."""
    return max(1, round(PAPER_MIN_PATH * (size / PAPER_SIZE) ** (7 / 6)))


# -------------------------------------------------------------------------------------------------------- generator


@dataclass
class _Chunk:
    """Mazes of one generation step, and what it took."""

    grids: np.ndarray  # [n, H, W] uint8 tokens (walls, open, S, G)
    pairs: np.ndarray  # [n] passing ordered (S, G) pairs of each kept layout
    layouts: int


def _screen(open_rows: np.ndarray, order: np.ndarray, walls: np.ndarray, size: int, min_path: int) -> np.ndarray:
    """[B] bool: the layout has two cells min_path or more moves apart (exact).

    Components are explored from random unexplored open cells (the next one in the layout's random cell order) until
    one has such a pair or too few unexplored cells remain to hold one (a component needs min_path + 1 cells).
    """
    B, N = order.shape
    full = np.uint64((1 << size) - 1)
    explored = np.zeros_like(open_rows)
    found = np.zeros(B, dtype=bool)
    n_open = N - walls
    pos_of = np.empty_like(order)  # position of each cell in the random order
    np.put_along_axis(pos_of, order, np.broadcast_to(np.arange(N), order.shape), axis=1)
    while True:
        left = n_open - popcount(explored)
        act = np.flatnonzero(~found & (left >= min_path + 1))
        if act.size == 0:
            return found
        # next seed: the first unexplored open cell in the layout's random order
        unexplored = (unpack_rows(open_rows[act] & ~explored[act], size)).reshape(act.size, N)
        cell = np.argmin(np.where(unexplored, pos_of[act], N), axis=1)
        wave = wavefront(open_rows[act], one_hot_rows((cell // size) * 64 + cell % size, size), full)
        explored[act] |= wave.reach
        ok = wave.ecc >= min_path
        # the component's diameter is at most 2 ecc(seed), and a pair min_path apart needs min_path + 1 cells
        todo = np.flatnonzero(~ok & (2 * wave.ecc >= min_path) & (popcount(wave.reach) >= min_path + 1))
        if todo.size:
            ok[todo] = _far_pair_in_component(open_rows[act[todo]], wave.last[todo], size, min_path)
        found[act[ok]] = True


def _far_pair_in_component(open_rows: np.ndarray, last: np.ndarray, size: int, min_path: int) -> np.ndarray:
    """Does the component holding `last` (a BFS layer) have two cells min_path or more moves apart? Exact.

    A double sweep (BFS from a farthest cell a, then its farthest cell b) usually settles it. Otherwise take u halfway
    along a shortest a-b path: a pair x, y min_path apart has d(x, y) <= d(x, u) + d(u, y), so one of them lies at
    least ceil(min_path / 2) from u. BFS from each such cell (few, u being central) decides.
    """
    full = np.uint64((1 << size) - 1)
    a = one_hot_rows(first_cell(last), size)
    wa = wavefront(open_rows, a, full)
    ok = wa.ecc >= min_path
    t = np.flatnonzero(~ok)
    if t.size == 0:
        return ok
    o = open_rows[t]
    D = wa.ecc[t]
    k = (D + 1) // 2
    b = one_hot_rows(first_cell(wa.last[t]), size)
    # the cells x with d(a, x) = k and d(x, b) = D - k
    halfway = wavefront(o, a[t], full, near=k).within & wavefront(o, b, full, near=D - k).within
    half = (min_path + 1) // 2
    wu = wavefront(o, one_hot_rows(first_cell(halfway), size), full, near=half - 1)
    ok[t] = wu.ecc >= min_path
    ends = wu.reach & ~wu.within  # cells at least ceil(min_path / 2) from u
    rest = np.flatnonzero(~ok[t] & ends.any(axis=1))
    if rest.size:
        cells = [np.flatnonzero(unpack_rows(e, 64).reshape(-1)) for e in ends[rest]]  # flat r * 64 + c
        counts = np.array([c.size for c in cells])
        eccs = wavefront(np.repeat(o[rest], counts, axis=0), one_hot_rows(np.concatenate(cells), size), full).ecc
        owner = np.repeat(np.arange(rest.size), counts)
        hit = np.zeros(rest.size, dtype=bool)
        hit[owner[eccs >= min_path]] = True
        ok[t[rest]] = hit
    return ok


def _draw_pairs(
    open_rows: np.ndarray, size: int, min_path: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each layout: an ordered (S, G) pair drawn uniformly among those min_path or more moves apart (all-pairs
    BFS from every open cell), and the number of such pairs. Returns flat cell indices r * size + c."""
    full = np.uint64((1 << size) - 1)
    cells = [np.flatnonzero(unpack_rows(o, size).reshape(-1)) for o in open_rows]
    counts = np.array([c.size for c in cells])
    src = np.concatenate(cells)
    wave = wavefront(
        np.repeat(open_rows, counts, axis=0),
        one_hot_rows((src // size) * 64 + src % size, size),
        full,
        near=min_path - 1,
    )
    assert wave.within is not None
    far = wave.reach & ~wave.within  # cells at distance >= min_path from each source
    per_source = popcount(far)
    starts, goals, totals = [], [], []
    for lo, hi in itertools.pairwise(np.concatenate([[0], np.cumsum(counts)])):
        weights = per_source[lo:hi]
        total = int(weights.sum())
        t = int(rng.integers(total))
        i = int(np.searchsorted(np.cumsum(weights), t, side="right"))
        t -= int(weights[:i].sum())
        goal = np.flatnonzero(unpack_rows(far[lo + i], size).reshape(-1))[t]
        starts.append(src[lo + i])
        goals.append(goal)
        totals.append(total)
    return np.array(starts, dtype=np.int64), np.array(goals, dtype=np.int64), np.array(totals, dtype=np.int64)


def wall_count_range(size: int, density: tuple[float, float]) -> tuple[int, int]:
    """Inclusive range of the number of walls (at least two open cells remain for S and G)."""
    n = size * size
    return min(math.floor(density[0] * n + 1e-9), n - 2), min(math.floor(density[1] * n + 1e-9), n - 2)


def generate_chunk(seed: int, split: str, chunk: int, size: int, min_path: int, density: tuple[float, float]) -> _Chunk:
    """The mazes of generation step `chunk`: a pure function of its arguments, so workers and serial runs agree."""
    rng = np.random.default_rng([seed, _STREAM_GENERATE, _SPLIT_CODE[split], chunk])
    N = size * size
    lo, hi = wall_count_range(size, density)
    walls = rng.integers(lo, hi + 1, size=CHUNK)
    order = rng.permuted(np.broadcast_to(np.arange(N), (CHUNK, N)), axis=1)  # a random order of the cells; walls first
    is_wall = np.zeros((CHUNK, N), dtype=bool)
    np.put_along_axis(is_wall, order, np.arange(N)[None, :] < walls[:, None], axis=1)
    open_rows = pack_rows(~is_wall.reshape(CHUNK, size, size))
    keep = np.flatnonzero(_screen(open_rows, order, walls, size, min_path))
    grids = np.where(is_wall[keep], WALL, OPEN).astype(np.uint8)
    pairs = np.zeros(keep.size, dtype=np.int64)
    if keep.size:
        starts, goals, pairs = _draw_pairs(open_rows[keep], size, min_path, rng)
        grids[np.arange(keep.size), starts] = START
        grids[np.arange(keep.size), goals] = GOAL
    return _Chunk(grids.reshape(-1, size, size), pairs, CHUNK)


def canonical_key(grid: np.ndarray) -> bytes:
    """The same bytes for a maze and its 8 dihedral images: strict de-duplication across the augmentation group."""
    return min(np.ascontiguousarray(dihedral_transform(grid, t)).tobytes() for t in range(8))


def _chunks(
    seed: int, split: str, size: int, min_path: int, density: tuple[float, float], workers: int
) -> Iterator[_Chunk]:
    """Chunks 0, 1, 2, ... in order; with workers > 1 a few run ahead in worker processes (same results)."""
    start = 0
    if workers > 1:
        pool = worker_pool(workers)  # its processes die with this one (kill -9 included)
        pending: deque[tuple[int, Future]] = deque()
        try:
            for submit in itertools.count():
                pending.append((submit, pool.submit(generate_chunk, seed, split, submit, size, min_path, density)))
                if len(pending) >= 2 * workers:
                    first, future = pending.popleft()
                    yield future.result()
                    start = first + 1
        except BrokenProcessPool:
            print("maze: worker processes failed to run; generating in this process", file=sys.stderr, flush=True)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    for chunk in itertools.count(start):
        yield generate_chunk(seed, split, chunk, size, min_path, density)


@dataclass
class MazeRows:
    """Original mazes of one split: tokens of the question and the answer, one row per maze."""

    inputs: np.ndarray  # [n, side*side] uint8
    labels: np.ndarray  # [n, side*side] uint8
    ratings: np.ndarray  # [n] float64 (CSV `rating`; NaN for generated mazes)
    side: int

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def take(self, idx: np.ndarray) -> MazeRows:
        return MazeRows(self.inputs[idx], self.labels[idx], self.ratings[idx], self.side)


def _exhausted_error(
    split: str,
    count: int,
    found: int,
    size: int,
    min_path: int,
    density: tuple[float, float],
    layouts: int,
    repeats: int,
    distinct: int,
) -> UserError:
    """So many passing layouts in a row were mazes seen before that the mazes seen are taken to be about all there are
    at this size (up to the 8 rotations and reflections): the split cannot fill."""
    others = f" besides the {distinct - found:,} of train" if split == "test" else ""
    return UserError(
        f"--{split}-size {count}: found only {found:,} distinct {split} {size}x{size} mazes{others} (path >= "
        f"{min_path} moves, wall density {density[0]:g}-{density[1]:g}, up to rotation and reflection) after "
        f"{layouts:,} random layouts, the last {repeats:,} that passed all repeats: about all there are; lower "
        f"--{split}-size or --min-path, or use a larger --size"
    )


def generate_split(
    opts: MazeBuildOptions,
    split: str,
    count: int,
    size: int,
    min_path: int,
    density: tuple[float, float],
    seen: dict[bytes, str],
    stats: dict[str, Any],
) -> MazeRows:
    """`count` generated mazes, none equal (up to symmetry) to one in `seen` (keys -> split), which is updated."""
    workers = opts.workers
    if workers == 0:  # auto: small jobs finish before worker processes would have started
        workers = 1 if count * size * size < 40_000 else min(os.cpu_count() or 1, 32)
    grids: list[np.ndarray] = []
    pairs: list[int] = []
    layouts = duplicates = overlap = 0
    repeats = 0  # passing layouts in a row that were all mazes seen before (one of this split, or of train)
    max_layouts = 20_000 * count + 100_000  # acceptance below 1 in 20,000 layouts is treated as "cannot reach"
    bar = progress_bar(
        enabled=not opts.quiet,
        total=count,
        desc=f"generating {split} {size}x{size} mazes (path >= {min_path})",
        unit="maze",
    )
    gen = _chunks(opts.seed, split, size, min_path, density, workers)
    try:
        for chunk in gen:
            layouts += chunk.layouts
            for grid, n_pairs in zip(chunk.grids, chunk.pairs):
                if len(grids) >= count:
                    break
                key = canonical_key(grid)
                if key in seen:
                    duplicates += 1
                    repeats += 1
                    overlap += seen[key] != split  # equivalent to a maze of the other split
                    continue
                repeats = 0
                seen[key] = split
                grids.append(grid)
                pairs.append(int(n_pairs))
                bar.update(1)
            bar.set_postfix(kept=f"{len(grids) + duplicates}/{layouts} layouts", refresh=False)
            if len(grids) >= count:
                break
            if repeats >= max(STALL_REPEATS, len(seen)):
                raise _exhausted_error(split, count, len(grids), size, min_path, density, layouts, repeats, len(seen))
            if layouts >= max_layouts or (layouts >= 100 * CHUNK and not grids and not duplicates):
                raise UserError(
                    f"--min-path {min_path}: only {len(grids) + duplicates} of {layouts} random {size}x{size} layouts "
                    f"(wall density {density[0]:g}-{density[1]:g}) have two cells that far apart; lower --min-path "
                    f"(default at this size: {default_min_path(size)}) or change --wall-density"
                )
    finally:
        gen.close()
        bar.close()
    inputs = np.stack(grids).reshape(count, -1) if grids else np.zeros((0, size * size), dtype=np.uint8)
    labels, _ = label_paths(inputs.reshape(-1, size, size))
    p = np.array(pairs, dtype=np.float64)
    stats[split] = {
        "layouts_drawn": layouts,
        "layouts_kept": len(grids) + duplicates,
        "layout_acceptance": round((len(grids) + duplicates) / max(layouts, 1), 6),
        "duplicates_dropped": duplicates,
        "dropped_equivalent_to_other_split": overlap,
        "passing_pairs_per_kept_layout": {"mean": round(float(p.mean()), 2), "median": float(np.median(p))}
        if p.size
        else None,
    }
    return MazeRows(inputs.astype(np.uint8), labels.reshape(count, -1).astype(np.uint8), np.full(count, np.nan), size)


# ----------------------------------------------------------------------------------------------------------- sources


def read_maze_csv(path: Path, side: int | None = None) -> MazeRows:
    """Read and fully check a Maze-Hard CSV (`source,question,answer,rating`, header skipped): square grids of one
    size, only '# SGo', one S and one G, an answer that is the question with the cells of a shortest S-G path marked
    'o'. Errors name the file and line."""
    path = Path(path)
    raw_q, raw_a, ratings, lines, side = _csv_grids(path, side)
    q, a = TOKEN_OF[raw_q], TOKEN_OF[raw_a]
    _check_cells(path, lines, side, (q, a), (raw_q, raw_a))
    _check_paths(path, lines, side, q, a)
    return MazeRows(q, a, np.array(ratings, dtype=np.float64), side)


def _csv_grids(path: Path, side: int | None) -> tuple[np.ndarray, np.ndarray, list[float], list[int], int]:
    """The characters of every question and answer ([n, side * side] bytes), the ratings, the line numbers and the
    side: rows of the wrong length or rating are errors here."""
    q_buf, a_buf = bytearray(), bytearray()
    ratings: list[float] = []
    lines: list[int] = []
    first_line = None
    for where, line, (_, q, a, rating) in sources.csv_rows(path, CSV_HEADER):
        if not (q.isascii() and a.isascii()):
            raise UserError(f"{where}: non-ASCII character in question or answer, expected only {CHARSET!r}")
        n = len(q)
        if side is None:
            s = grid_side(n)
            if s is None or s < 2:
                raise UserError(f"{where}: question has {n} cells, not a square grid")
            side, first_line = s, line
        if n != side * side:
            origin = f" like line {first_line}" if first_line is not None else ""
            raise UserError(f"{where}: question has {n} cells, expected {side * side} ({side}x{side}{origin})")
        if len(a) != n:
            raise UserError(f"{where}: answer has {len(a)} cells, expected {n} like the question")
        try:
            value = float(rating)
        except ValueError:
            raise UserError(f"{where}: rating {rating!r} is not a number") from None
        ratings.append(value)
        q_buf += q.encode("ascii")
        a_buf += a.encode("ascii")
        lines.append(line)
    if side is None or not lines:
        raise UserError(f"{path}: no mazes after the header")
    raw_q, raw_a = (np.frombuffer(bytes(b), dtype=np.uint8).reshape(-1, side * side) for b in (q_buf, a_buf))
    return raw_q, raw_a, ratings, lines, side


def _check_cells(
    path: Path, lines: list[int], side: int, tokens: tuple[np.ndarray, np.ndarray], raw: tuple[np.ndarray, np.ndarray]
) -> None:
    """Legal characters, one S and one G, and an answer that only marks open cells 'o'."""
    (q, a), (raw_q, raw_a) = tokens, raw

    def cell_name(j: int) -> str:
        return f"row {j // side + 1} column {j % side + 1}"

    def first_bad(bad: np.ndarray) -> tuple[int, int] | None:
        rows = np.flatnonzero(bad.any(axis=1))
        return (int(rows[0]), int(np.flatnonzero(bad[rows[0]])[0])) if rows.size else None

    for grid, chars, what, legal in (
        (q, raw_q, "question", "'#', ' ', 'S' or 'G'"),
        (a, raw_a, "answer", repr(CHARSET)),
    ):
        bad = (grid == 0) | ((grid == PATH) if what == "question" else False)
        hit = first_bad(np.asarray(bad))
        if hit is not None:
            i, j = hit
            raise UserError(
                f"{path} line {lines[i]}: {what} has {chr(chars[i, j])!r} at {cell_name(j)}, expected {legal}"
            )
    for token, name in ((START, "'S' (start)"), (GOAL, "'G' (goal)")):
        count = (q == token).sum(axis=1)
        bad = np.flatnonzero(count != 1)
        if bad.size:
            i = int(bad[0])
            got = "no" if count[i] == 0 else str(int(count[i]))
            raise UserError(
                f"{path} line {lines[i]}: question has {got} {name} cell{'s' if count[i] > 1 else ''}, expected exactly one"
            )
    hit = first_bad((a != q) & ~((q == OPEN) & (a == PATH)))
    if hit is not None:
        i, j = hit
        raise UserError(
            f"{path} line {lines[i]}: answer has {chr(raw_a[i, j])!r} at {cell_name(j)} where the question has "
            f"{chr(raw_q[i, j])!r} (the answer may only mark open cells 'o')"
        )


def _check_paths(path: Path, lines: list[int], side: int, q: np.ndarray, a: np.ndarray) -> None:
    """Every answer marks a shortest S-G path."""
    grids, answers = (torch.from_numpy(x.astype(np.int64)).view(-1, side, side) for x in (q, a))
    lvl = start_distances(grids)
    ok = optimal_path_correct(grids, answers, lvl).numpy()
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        d = int(lvl[i][grids[i] == GOAL][0])
        marked = int((answers[i] == PATH).sum())
        why = (
            "G cannot be reached from S"
            if d < 0
            else f"it marks {marked} cells 'o', a shortest S-G path has {d - 1} between S and G"
            if marked != d - 1
            else "its 'o' cells do not join S to G"
        )
        raise UserError(f"{path} line {lines[i]}: answer is not a shortest S-G path ({why})")


# ---------------------------------------------------------------------------------------------------------- building


def _generate_because(opts: MazeBuildOptions) -> str | None:
    """Why `--source auto` must generate although the hub may be reachable, or None."""
    if opts.size is not None and opts.size != PAPER_SIZE:
        return f"--size {opts.size}: {HF_REPO} holds {PAPER_SIZE}x{PAPER_SIZE} mazes only"
    if opts.wall_density is not None:
        return "--wall-density given"
    return None


def _check_options(opts: MazeBuildOptions, source: str) -> None:
    if source == "hf" and opts.size is not None and opts.size != PAPER_SIZE:
        raise UserError(
            f"--size {opts.size}: --source hf holds {PAPER_SIZE}x{PAPER_SIZE} mazes; use --source generate for other sizes"
        )
    if source != "generate" and opts.wall_density is not None:
        raise UserError(f"--wall-density: only used with --source generate (got --source {source})")
    if source != "generate" and opts.strict_split != "puzzle":
        raise UserError(
            f"--strict-split {opts.strict_split}: only generated mazes can be split so; use --source generate "
            f"(--source {source} keeps the published split)"
        )


def _default_out(source: str, size: int) -> Path:
    return Path({"hf": "data/maze-30x30-hard-1k", "csv": "data/maze-csv"}.get(source, f"data/maze-gen-{size}x{size}"))


def path_lengths(rows: MazeRows) -> np.ndarray:
    """Shortest S-G path of every maze, in moves."""
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    grids = rows.inputs.reshape(-1, rows.side, rows.side)
    lvl = start_levels(grids).reshape(len(rows), -1)
    return lvl[grids.reshape(len(rows), -1) == GOAL].astype(np.int64)


def _distribution(values: np.ndarray, histogram: dict[str, int]) -> dict[str, Any]:
    if values.size == 0:
        return {"mean": None, "min": None, "max": None, "histogram": {}}
    q = np.percentile(values, [10, 50, 90])
    return {
        "mean": round(float(values.mean()), 4),
        "min": round(float(values.min()), 4),
        "p10": round(float(q[0]), 4),
        "median": round(float(q[1]), 4),
        "p90": round(float(q[2]), 4),
        "max": round(float(values.max()), 4),
        "histogram": histogram,
    }


def statistics(rows: MazeRows, lengths: np.ndarray) -> dict[str, Any]:
    """Wall density and shortest-path length distribution of a split's original mazes (and how CSV ratings relate)."""
    density = (rows.inputs == WALL).mean(axis=1) if len(rows) else np.zeros(0)
    bins = np.floor(density * 20 + 1e-9).astype(int)  # 0.05-wide bins
    dens_hist = {f"{b / 20:.2f}-{(b + 1) / 20:.2f}": int(k) for b, k in zip(*np.unique(bins, return_counts=True))}
    len_hist = {str(int(v)): int(k) for v, k in zip(*np.unique(lengths, return_counts=True))}
    out = {
        "wall_density": _distribution(density, dens_hist),
        "path_length_moves": _distribution(lengths.astype(np.float64), len_hist),
    }
    rated = ~np.isnan(rows.ratings)
    if rated.any():
        r = rows.ratings[rated]
        out["csv_rating"] = {
            **{k: v for k, v in _distribution(r, {}).items() if k != "histogram"},
            "equals_path_moves": int((r == lengths[rated]).sum()),
            "equals_path_cells": int((r == lengths[rated] + 1).sum()),
        }
    return out


def classes(rows: MazeRows) -> int:
    """Distinct mazes up to the 8 dihedral maps (the augmentation group)."""
    return len({canonical_key(x.reshape(rows.side, rows.side)) for x in rows.inputs})


def solution_keys(rows: MazeRows) -> list[bytes]:
    """The class of each maze's solution (its label: the maze with one shortest path marked) up to the 8 dihedral maps.

    A label holds its maze (mark the path cells open again), and that commutes with every dihedral map, so two mazes
    with solutions of one class are of one class themselves: a split strict on mazes is strict on solutions too
    (docs/data.md, "Held-out splits")."""
    return [canonical_key(y.reshape(rows.side, rows.side)) for y in rows.labels]


def _examples(rows: MazeRows, aug: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """Each maze, or its 8 dihedral images in the original's order (identity first) when `aug`; examples per maze."""
    if not aug:
        return rows.inputs, rows.labels, 1
    s = rows.side
    grids = [dihedral_transform(x.reshape(-1, s, s), t) for x in (rows.inputs, rows.labels) for t in range(8)]
    inputs = np.stack(grids[:8], axis=1).reshape(-1, s * s)
    labels = np.stack(grids[8:], axis=1).reshape(-1, s * s)
    return np.ascontiguousarray(inputs), np.ascontiguousarray(labels), 8


def _generate(opts: MazeBuildOptions, size: int) -> tuple[MazeRows, MazeRows, dict[str, Any], int]:
    """Generated train and test mazes (no test maze equivalent to a train one), the source detail, and min_path."""
    min_path = opts.min_path or default_min_path(size)
    density = opts.wall_density or LEHNERT_WALL_DENSITY
    seen: dict[bytes, str] = {}
    gen_stats: dict[str, Any] = {}
    train = generate_split(
        opts, "train", opts.train_size or DEFAULT_GENERATED_SIZES[0], size, min_path, density, seen, gen_stats
    )
    test = generate_split(
        opts, "test", opts.test_size or DEFAULT_GENERATED_SIZES[1], size, min_path, density, seen, gen_stats
    )
    lo, hi = wall_count_range(size, density)
    detail = {
        "generator": "Lehnert et al. 2024 random-wall layouts, hardness filter of the HRM paper; see datasets_build/maze.py",
        "wall_density_range": list(density),
        "wall_count_range": [lo, hi],
        "min_path_moves": min_path,
        "pair_draw": "uniform over the layout's ordered (S, G) pairs at least min_path moves apart; layouts without one are redrawn",
        "label": "walk back from G to the first neighbour one step closer to S, in the order up, down, left, right",
        "split": "train and test from separate random streams; no test maze equals a train maze up to rotation/reflection",
        **{f"{k}_generation": v for k, v in gen_stats.items()},
    }
    return train, test, detail, min_path


def _read_csvs(opts: MazeBuildOptions, csvs: tuple[Path, Path], counts: dict[str, Any]) -> tuple[MazeRows, MazeRows]:
    """The train and test mazes of the CSVs, filtered by --min-path and sampled to the sizes; `counts` gets the rows
    read and kept, and the test mazes also in train."""
    train_csv, test_csv = csvs
    train = read_maze_csv(train_csv)
    if opts.size is not None and train.side != opts.size:
        raise UserError(f"--size {opts.size}: {train_csv} holds {train.side}x{train.side} mazes")
    test = read_maze_csv(test_csv, side=train.side)
    size = train.side
    counts["rows_read"] = {"train": len(train), "test": len(test)}
    if opts.min_path is not None:
        train = train.take(np.flatnonzero(path_lengths(train) >= opts.min_path))
        test = test.take(np.flatnonzero(path_lengths(test) >= opts.min_path))
        counts["rows_after_min_path"] = {"train": len(train), "test": len(test)}
    train, test = sources.sample_splits(train, test, opts)
    train_keys = {canonical_key(x.reshape(size, size)) for x in train.inputs}
    counts["test_mazes_also_in_train_up_to_symmetry"] = sum(
        canonical_key(x.reshape(size, size)) in train_keys for x in test.inputs
    )
    return train, test


def build_maze(opts: MazeBuildOptions, hub_probe: Callable[[], bool] | None = None) -> Path:
    """Build the dataset described by `opts` and return its directory (written atomically: all or nothing)."""
    source, reason = sources.resolve_source(opts, HF_REPO, hub_probe or sources.hub_reachable, _generate_because(opts))
    _check_options(opts, source)
    src = sources.open_source(opts, source, reason, HF_REPO)
    sources.check_subsample(opts, src.name, DEFAULT_GENERATED_SIZES[0], "mazes")
    size = opts.size or PAPER_SIZE
    out = Path(opts.out) if opts.out is not None else _default_out(src.name, size)
    check_out(out, opts.overwrite, "maze")
    print(f"maze: source {src.name} ({src.reason}), output {out}", flush=True)

    counts: dict[str, Any] = {}
    if src.csvs is None:
        train, test, detail, min_path = _generate(opts, size)
    else:
        train, test = _read_csvs(opts, src.csvs, counts)
        detail, min_path, size = src.detail, opts.min_path, train.side
    train = sources.subsample_train(
        train, test, opts, f"--min-path {min_path}" if min_path is not None else None, "mazes"
    )
    counts["train_classes"], counts["test_classes"] = classes(train), classes(test)
    if src.csvs is None:
        counts["test_mazes_dropped_for_overlap"] = detail["test_generation"]["dropped_equivalent_to_other_split"]
    # added after builder version 1, hence last: what the held-out split holds at the level of solutions
    counts.update(solution_class_counts(solution_keys(train), solution_keys(test)))
    if src.csvs is None and opts.strict_split == "solution" and counts["test_puzzles_with_solution_class_in_train"]:
        raise AssertionError("a maze split strict on mazes shares no solution class (see solution_keys)")

    train_inputs, train_labels, per = _examples(train, opts.aug)
    options = opts.record()

    def record(split: str, rows: MazeRows, examples: int) -> dict[str, Any]:
        return {
            **record_head("maze", BUILDER_VERSION, split, src.name, detail, options, opts.seed),
            "grid_size": size,
            "min_path_moves": min_path,
            "strict_split": opts.strict_split if src.csvs is None else None,  # None: the published split, kept
            "augmentation": "8 dihedral transforms per maze (train only)" if opts.aug and split == "train" else None,
            "counts": {
                "mazes": len(rows),
                "examples": examples,
                "train_mazes": len(train),
                "test_mazes": len(test),
                **counts,
            },
            "statistics": statistics(rows, path_lengths(rows)),
        }

    return write_grid_dataset(
        out,
        opts.overwrite,
        VOCAB_SIZE,
        {
            "train": (
                train_inputs,
                train_labels,
                train_inputs.shape[0] // per,
                record("train", train, train_inputs.shape[0]),
            ),
            "test": (test.inputs, test.labels, test.inputs.shape[0], record("test", test, len(test))),
        },
    )


def summary(out: Path) -> str:
    """One line for the CLI: where the dataset is and what it holds."""
    parts = []
    for split in ("train", "test"):
        b = json.loads((out / split / "dataset.json").read_text())["builder"]
        s = b["statistics"]["path_length_moves"]
        parts.append(
            f"{split} {b['counts']['mazes']} mazes / {b['counts']['examples']} examples (path {s['min']:g}-{s['max']:g} moves)"
        )
    return f"wrote {out}: {b['grid_size']}x{b['grid_size']}, " + ", ".join(parts)
