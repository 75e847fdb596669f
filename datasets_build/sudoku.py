"""Sudoku benchmark builder: Sudoku-Extreme (Hugging Face or local CSV) or built-in generated puzzles, in the HRM
format.

What it adds over the original `dataset/build_sudoku_dataset.py` (docs/data.md, "Sudoku"), keeping its output format:
- every draw comes from a seeded `np.random.Generator`, so the same options and seed give the same bytes;
- every CSV row is checked (81 cells, legal characters, the answer is a complete grid that agrees with every given);
- a generator of unique-solution puzzles for 2x2, 2x3 and 3x3 boxes (4x4, 6x6, 9x9 boards), rated by search effort
  (the solver and the rating are `hrm_reason.tasks.sudoku`'s, the one Sudoku solver);
- for generated data a strict split: no test puzzle can be turned into a training puzzle (or back) by the augmentation
  group, tested exactly with a canonical form; with `--strict-split solution` no test puzzle's solution can be turned
  into a training puzzle's solution either.

The grid conventions, tokens, augmentation group and rules are those of `hrm_reason.tasks.sudoku`.
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

from datasets_build import sources
from datasets_build.hrm_format import check_out, record_head, solution_class_counts, write_grid_dataset
from datasets_build.options import SudokuBuildOptions
from datasets_build.workers import worker_pool
from hrm_reason.errors import UserError
from hrm_reason.runtime.logs import progress_bar
from hrm_reason.tasks.sudoku import (
    BOXES,
    RATING_DEFINITION,
    Geometry,
    apply_transforms,
    fill_grid,
    geometry,
    is_valid_solution,
    other_solution_exists,
    random_transforms,
    rate_puzzle,
    to_tokens,
    unit_error,
    vocab_size,
)

BUILDER_VERSION = "1"
HF_REPO = "sapientinc/sudoku-extreme"
CSV_HEADER = ("source", "q", "a", "rating")
# Independent random streams derived from the one user seed, so adding draws to one stage never shifts another.
# Independent of datasets_build.sources.STREAM_SUBSAMPLE (3) and STREAM_SIZE (5).
_STREAM_GENERATE, _STREAM_SPLIT, _STREAM_AUGMENT = 1, 2, 4


# ----------------------------------------------------------------------------------------------------------- options


DEFAULT_GENERATED_SIZES = (1000, 1000)
# Classes of minimal puzzles and of full grids (solutions) under the augmentation group, where they are few enough to
# count (tests/builders/test_sudoku_build.py enumerates them): a strict split cannot place more on its two sides.
MINIMAL_PUZZLE_CLASSES = {"2x2": 36}
SOLUTION_CLASSES = {"2x2": 2}
# Attempts without a new class after which the classes seen are taken to be all there are: a split that owns none of
# them can then never fill (36 minimal 4x4 classes all turn up within a few hundred attempts).
STALL_ATTEMPTS = 2000


def parse_box(box: str) -> tuple[int, int]:
    """'RxC' -> (box rows, box columns)."""
    if box not in BOXES:
        raise UserError(f"--box {box!r}: expected one of {', '.join(BOXES)}")
    return BOXES[box]


@dataclass(frozen=True)
class GeneratedPuzzle:
    puzzle: np.ndarray  # [n*n] uint8, 0 = blank
    solution: np.ndarray  # [n*n] uint8
    rating: int


def generate_puzzle(rng: np.random.Generator, r: int, c: int, min_givens: int | None = None) -> GeneratedPuzzle:
    """A minimal puzzle with a unique solution: a random full grid, then clues removed in random order while unique.

    Removing clue x keeps the solution unique iff no grid satisfies the other clues with x holding another digit, so
    each step is one existence search instead of counting solutions. A clue that is needed stays needed as more clues
    go, hence the result is minimal (every remaining clue is necessary). With `min_givens`, random cells of the
    solution are given back until the puzzle has that many clues: still unique, no longer minimal, and easier (the
    draws come after the minimal puzzle's, so the minimal puzzles of a seed are the same with or without it).
    """
    geo = geometry(r, c)
    digit_order = np.argsort(rng.random((geo.cells, geo.n)), axis=1)
    solution = fill_grid(geo, [[1 << int(d) for d in row] for row in digit_order])
    givens = solution.copy()
    for cell in rng.permutation(geo.cells).tolist():
        if not other_solution_exists(givens, geo, cell, solution[cell]):
            givens[cell] = 0
    puzzle = np.array(givens, dtype=np.uint8)
    if min_givens is not None and (need := min_givens - int(np.count_nonzero(puzzle))) > 0:
        back = rng.permutation(np.flatnonzero(puzzle == 0))[:need]
        puzzle[back] = np.array(solution, dtype=np.uint8)[back]
    return GeneratedPuzzle(puzzle, np.array(solution, dtype=np.uint8), rate_puzzle(puzzle, r, c))


# ---------------------------------------------------------------------------------------------- canonical form


def _lexmin_rows(rows: np.ndarray, start: int = 0) -> np.ndarray:
    """Indices of all rows equal to the lexicographic minimum of a 2-D array."""
    idx = np.arange(rows.shape[0])
    for p in range(start, rows.shape[1]):
        col = rows[idx, p]
        keep = col == col.min()
        if not keep.all():
            idx = idx[keep]
            if idx.size == 1:
                break
    return idx


def canonical_key(puzzle: np.ndarray, solution: np.ndarray, r: int, c: int) -> bytes:
    """Exact canonical form of a uniquely solvable puzzle under the augmentation group (digit relabelling, transpose
    when r == c, band/stack permutations, row-in-band and column-in-stack permutations).

    Two such puzzles are equivalent iff their keys are equal. Because the solution is unique, any g with g(P1) = P2 also
    maps solution to solution, so we canonicalize the *solution* (lexicographically smallest grid over the group) and
    then the given-mask over the few transforms that reach that minimum. The grid minimum needs no search over all
    row orders: once the top row and the column order are fixed, relabelling makes the top row 1..n and every
    other row's first cell distinct, so sorting rows (within bands, then bands) by their first cell is optimal. That
    leaves (transpose x top row x column order) = 2*9*1296 candidates for 9x9, filtered first on the top band alone.
    """
    geo = geometry(r, c)
    n, K = geo.n, geo.col_perms
    nK = K.shape[0]
    S = np.asarray(solution, dtype=np.intp).reshape(n, n)
    M = np.asarray(puzzle).reshape(n, n) != 0
    if not is_valid_solution(S, r, c):
        raise ValueError("canonical_key needs the puzzle's complete, valid solution")
    flips = (False, True) if r == c else (False,)  # a transpose turns r x c boxes into c x r boxes

    # Stage 1: top band only, for every (transpose, top row, column order k). With the top row relabelled to read
    # 1..n, a digit's new label is 1 + its new column in the top row, so another row i becomes
    # 1 + Kinv[k][pos_top[G[i, K[k, j]]]]: two gathers for all candidates at once.
    Kinv = np.argsort(K, axis=1).astype(np.uint8)
    f, tags = [], []
    for t in flips:
        G = S.T if t else S
        pos = np.argsort(G, axis=1)  # pos[i, d-1] = column of digit d in row i
        for top in range(n):
            band = top // r
            for i in range(band * r, band * r + r):
                if i != top:
                    f.append(pos[top][G[i] - 1])
            tags.append((int(t), top))
    f_arr = np.array(f, dtype=np.uint8).reshape(len(tags), r - 1, n)
    flat = f_arr[:, :, K] + (np.arange(nK) * n)[None, None, :, None]
    rest = np.take(Kinv.reshape(-1), flat)  # [tags, r-1, nK, n]; a flat take is far faster than take_along_axis here
    rows = [rest[:, i] for i in range(r - 1)]
    for a in range(r - 2):  # order the other rows by their first cell (bubble passes; r <= 3 in practice)
        for b in range(r - 2 - a):
            swap = (rows[b][:, :, 0] > rows[b + 1][:, :, 0])[..., None]
            rows[b], rows[b + 1] = np.where(swap, rows[b + 1], rows[b]), np.where(swap, rows[b], rows[b + 1])
    # lexicographic minimum over (tag, k) of the concatenated rows, narrowing the candidate set cell by cell
    first = rows[0][:, :, 0]
    ti, ki = np.nonzero(first == first.min())
    for i, j in itertools.product(range(r - 1), range(n)):
        if ti.size == 1:
            break
        v = rows[i][ti, ki, j]
        keep = v == v.min()
        ti, ki = ti[keep], ki[keep]
    tag_arr = np.array(tags, dtype=np.intp)
    survivors = np.concatenate([tag_arr[ti], ki[:, None]], axis=1)

    # Stage 2: the whole grid and given-mask for the survivors.
    t_s, top_s, k_s = survivors[:, 0].astype(bool), survivors[:, 1], survivors[:, 2]
    m = survivors.shape[0]
    Kp = np.broadcast_to(K[k_s][:, None, :], (m, n, n))
    GK = np.take_along_axis(np.where(t_s[:, None, None], S.T, S), Kp, axis=2)
    MK = np.take_along_axis(np.where(t_s[:, None, None], M.T, M), Kp, axis=2)
    sigma = np.zeros((m, n + 1), dtype=np.intp)
    sigma[np.arange(m)[:, None], GK[np.arange(m), top_s]] = np.arange(1, n + 1)
    R = np.take_along_axis(sigma[:, None, :], GK, axis=2)
    first = R[:, :, 0].reshape(m, c, r)  # c bands of r rows
    within = np.argsort(first, axis=2, kind="stable")
    band_order = np.argsort(first.min(axis=2), axis=1, kind="stable")
    row_order = (band_order[:, :, None] * r + np.take_along_axis(within, band_order[:, :, None], axis=1)).reshape(m, n)
    grids = np.take_along_axis(R, row_order[:, :, None], axis=1).reshape(m, -1)
    masks = np.take_along_axis(MK, row_order[:, :, None], axis=1).reshape(m, -1)
    best = _lexmin_rows(np.concatenate([grids, masks.astype(np.intp)], axis=1), start=n)[0]
    return bytes([r, c]) + grids[best].astype(np.uint8).tobytes() + np.packbits(masks[best]).tobytes()


def solution_key(key: bytes) -> bytes:
    """The class of a puzzle's solution under the same group, read off its `canonical_key`: the key starts with the
    box shape and the solution's canonical grid (its smallest image over the whole group), which is a function of the
    solution alone. Two puzzles of one class have solutions of one class; the converse fails (docs/data.md, "Held-out
    splits")."""
    n = key[0] * key[1]
    return key[: 2 + n * n]


# ----------------------------------------------------------------------------------------------------------- sources


@dataclass
class SudokuRows:
    """Original puzzles of one split: flattened grids (0 = blank) and their ratings."""

    puzzles: np.ndarray  # [N, n*n] uint8
    solutions: np.ndarray  # [N, n*n] uint8
    ratings: np.ndarray  # [N] int64
    keys: np.ndarray | None = None  # [N] canonical keys (object array of bytes), for generated rows

    def __len__(self) -> int:
        return self.puzzles.shape[0]

    def take(self, idx: np.ndarray) -> SudokuRows:
        keys = None if self.keys is None else self.keys[idx]
        return SudokuRows(self.puzzles[idx], self.solutions[idx], self.ratings[idx], keys)

    def classes(self) -> int | None:
        """Distinct equivalence classes among the rows (None when the keys were not computed)."""
        return None if self.keys is None else len(set(self.keys.tolist()))


def read_sudoku_csv(path: Path) -> SudokuRows:
    """Read and fully check a Sudoku-Extreme CSV (`source,q,a,rating`, header skipped); errors name file and line."""
    path = Path(path)
    geo = geometry(3, 3)
    q_buf, a_buf = bytearray(), bytearray()
    ratings: list[int] = []
    lines: list[int] = []
    for where, line, (_, q, a, rating) in sources.csv_rows(path, CSV_HEADER):
        if not (q.isascii() and a.isascii()):
            raise UserError(f"{where}: non-ASCII character in q or a")
        if len(q) != geo.cells:
            raise UserError(f"{where}: puzzle q has {len(q)} cells, expected {geo.cells}")
        if len(a) != geo.cells:
            raise UserError(f"{where}: answer a has {len(a)} cells, expected {geo.cells}")
        try:
            ratings.append(int(rating))
        except ValueError:
            raise UserError(f"{where}: rating {rating!r} is not an integer") from None
        q_buf += q.encode("ascii")
        a_buf += a.encode("ascii")
        lines.append(line)
    q = np.frombuffer(bytes(q_buf), dtype=np.uint8).reshape(-1, geo.cells)
    a = np.frombuffer(bytes(a_buf), dtype=np.uint8).reshape(-1, geo.cells)
    q_ok = (q == ord(".")) | ((q >= ord("0")) & (q <= ord("9")))
    a_ok = (a >= ord("1")) & (a <= ord("9"))
    for ok, arr, what, legal in ((q_ok, q, "puzzle q", "'.', '0' or 1-9"), (a_ok, a, "answer a", "1-9")):
        bad_rows = np.flatnonzero(~ok.all(axis=1))
        if bad_rows.size:
            i = int(bad_rows[0])
            j = int(np.flatnonzero(~ok[i])[0])
            raise UserError(f"{path} line {lines[i]}: {what} has {chr(arr[i, j])!r} at cell {j + 1}, expected {legal}")
    puzzles = np.where(q == ord("."), 0, q - ord("0")).astype(np.uint8)
    solutions = (a - ord("0")).astype(np.uint8)
    _check_answers(path, puzzles, solutions, lines, geo)
    return SudokuRows(puzzles, solutions, np.array(ratings, dtype=np.int64))


def _check_answers(path: Path, puzzles: np.ndarray, solutions: np.ndarray, lines: list[int], geo: Geometry) -> None:
    """Every answer must be a valid complete grid that keeps every given; vectorized, in chunks to bound memory."""
    units = np.array(geo.units, dtype=np.intp)  # [3n, n]
    for start in range(0, len(lines), 100_000):
        q, a = puzzles[start : start + 100_000], solutions[start : start + 100_000]
        bits = np.left_shift(np.uint16(1), a.astype(np.uint16) - 1)
        seen = np.bitwise_or.reduce(bits[:, units], axis=2)  # [rows, 3n]
        bad_grid = (seen != geo.full).any(axis=1)
        bad_given = ((q != 0) & (q != a)).any(axis=1)
        bad = np.flatnonzero(bad_grid | bad_given)
        if bad.size:
            i = int(bad[0])
            where = f"{path} line {lines[start + i]}: answer does not solve the puzzle"
            if bad_given[i]:
                j = int(np.flatnonzero((q[i] != 0) & (q[i] != a[i]))[0])
                raise UserError(
                    f"{where} (row {j // geo.n + 1} column {j % geo.n + 1}: given {q[i, j]}, answer {a[i, j]})"
                )
            raise UserError(f"{where} ({unit_error(a[i], geo)})")


# -------------------------------------------------------------------------------------------------------- generation


def _in_range(rating: int, min_difficulty: int | None, max_difficulty: int | None) -> bool:
    return (min_difficulty is None or rating >= min_difficulty) and (max_difficulty is None or rating <= max_difficulty)


def _attempt_chunk(
    opts: SudokuBuildOptions, r: int, c: int, start: int, count: int
) -> list[tuple[GeneratedPuzzle, bytes | None]]:
    """Attempts start..start+count-1. Attempt i is a pure function of (seed, i), so parallel and serial runs agree
    byte for byte. The canonical key is computed only for puzzles rated within --min/--max-difficulty."""
    out = []
    for attempt in range(start, start + count):
        g = generate_puzzle(np.random.default_rng([opts.seed, _STREAM_GENERATE, attempt]), r, c, opts.min_givens)
        ok = _in_range(g.rating, opts.min_difficulty, opts.max_difficulty)
        out.append((g, canonical_key(g.puzzle, g.solution, r, c) if ok else None))
    return out


def _attempts(opts: SudokuBuildOptions, r: int, c: int, workers: int) -> Iterator[tuple[GeneratedPuzzle, bytes | None]]:
    """Results of attempts 0, 1, 2, ... in order; with workers > 1 a few chunks run ahead in worker processes.
    If worker processes cannot run (e.g. a __main__ read from stdin cannot be re-imported) it carries on serially."""
    start = 0
    if workers > 1:
        chunk = max(1, 4096 // (r * c) ** 3)  # about 50 ms of work per task
        pool = worker_pool(workers)  # its processes die with this one (kill -9 included)
        pending: deque[tuple[int, Future]] = deque()
        try:
            for submit in itertools.count(0, chunk):
                pending.append((submit, pool.submit(_attempt_chunk, opts, r, c, submit, chunk)))
                if len(pending) >= 4 * workers:
                    first, future = pending.popleft()
                    yield from future.result()
                    start = first + chunk  # where a serial fallback would pick up
        except BrokenProcessPool:
            print("sudoku: worker processes failed to run; generating in this process", file=sys.stderr, flush=True)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # at most `workers` chunks are still running
    for attempt in itertools.count(start):
        yield from _attempt_chunk(opts, r, c, attempt, 1)


@dataclass
class _Generated:
    train: SudokuRows
    test: SudokuRows
    stats: dict[str, int]


def _generate_split(opts: SudokuBuildOptions, r: int, c: int, train_size: int, test_size: int) -> _Generated:
    """Generate train and test originals with a strict split.

    Each puzzle's equivalence class (canonical_key) belongs to the split that received its first member; later members
    can only join that split. New classes go to test with probability (test places left) / (all places left). For 9x9
    classes practically never repeat; for 4x4 (36 classes of minimal puzzles) this is what keeps test unseen.
    `dropped_for_overlap` counts the puzzles whose class's split was full: placing them in the other split would put
    one class on both sides (docs/data.md, "The CPU ladder").

    With `--strict-split solution` the class that is owned by one split is the solution's (solution_key) instead: a
    coarser partition (every puzzle class lies in one solution class), so the puzzle split stays strict as well, and a
    puzzle whose solution class belongs to a full split is dropped, whichever split came first. `train_classes`,
    `test_classes` and `duplicates_within_split` still count puzzle classes.
    """
    n = r * c
    sizes = {"train": train_size, "test": test_size}
    rows: dict[str, list[tuple[GeneratedPuzzle, bytes]]] = {"train": [], "test": []}
    by_solution = opts.strict_split == "solution"
    owner: dict[bytes, str] = {}  # the split of each class that decides it: puzzle classes, or solution classes
    seen: set[bytes] = set()  # puzzle classes placed
    classes = {"train": 0, "test": 0}
    owned = {"train": 0, "test": 0}  # classes of `owner` per split
    last_new = 0  # the attempt that last found a new class
    stats = {
        "attempts": 0,
        "below_min_difficulty": 0,
        "above_max_difficulty": 0,
        "dropped_for_overlap": 0,
        "duplicates_within_split": 0,
    }
    split_rng = np.random.default_rng([opts.seed, _STREAM_SPLIT])
    needed = train_size + test_size
    max_attempts = 20 * needed + 2000
    bar = progress_bar(enabled=not opts.quiet, total=needed, desc=f"generating {n}x{n}", unit="puzzle")
    gen = _attempts(opts, r, c, _workers(opts, needed * n**3))
    try:
        for puzzle, key in gen:
            stats["attempts"] += 1
            if key is None:
                low = opts.min_difficulty is not None and puzzle.rating < opts.min_difficulty
                stats["below_min_difficulty" if low else "above_max_difficulty"] += 1
            else:
                class_key = solution_key(key) if by_solution else key
                split = owner.get(class_key)
                if split is None:
                    left = {s: sizes[s] - len(rows[s]) for s in sizes}
                    split = "test" if split_rng.random() * (left["train"] + left["test"]) < left["test"] else "train"
                    owner[class_key] = split  # the drawn split always has room
                    owned[split] += 1
                    last_new = stats["attempts"]
                if len(rows[split]) < sizes[split]:
                    if key in seen:
                        stats["duplicates_within_split"] += 1
                    else:
                        seen.add(key)
                        classes[split] += 1
                    rows[split].append((puzzle, key))
                    bar.update(1)
                else:  # its class's split is full, and the other split would leak it
                    stats["dropped_for_overlap"] += 1
            if all(len(rows[s]) >= sizes[s] for s in sizes):
                break
            attempts = stats["attempts"]
            starved = [s for s in sizes if len(rows[s]) < sizes[s] and not owned[s]]
            if starved and owner and attempts - last_new >= STALL_ATTEMPTS:
                off = stats["below_min_difficulty"] + stats["above_max_difficulty"]
                if off > attempts // 2:  # the difficulty range is what leaves so few classes: say that
                    raise _generation_error(opts, n, stats, rows, sizes, len(seen), len(owner) if by_solution else None)
                raise _exhausted_error(opts, n, stats, rows, sizes, starved[0], len(owner), STALL_ATTEMPTS)
            if attempts >= max_attempts or (
                attempts >= 2000 and attempts % 500 == 0 and not _on_course(attempts, max_attempts, rows, needed)
            ):
                raise _generation_error(opts, n, stats, rows, sizes, len(seen), len(owner) if by_solution else None)
    finally:
        gen.close()
        bar.close()
    stats.update(train_classes=classes["train"], test_classes=classes["test"])
    return _Generated(_pack(rows["train"], n), _pack(rows["test"], n), stats)


def _workers(opts: SudokuBuildOptions, work: int) -> int:
    """--workers, or for 0 (auto) one per core, but one for small jobs (`work`: puzzles x n^3), which finish before
    worker processes would have started."""
    if opts.workers:
        return opts.workers
    return 1 if work < 200 * 9**3 else min(os.cpu_count() or 1, 32)


def _pack(items: list[tuple[GeneratedPuzzle, bytes]], n: int) -> SudokuRows:
    keys = np.empty(len(items), dtype=object)
    keys[:] = [k for _, k in items]
    return SudokuRows(
        np.array([g.puzzle for g, _ in items], dtype=np.uint8).reshape(-1, n * n),
        np.array([g.solution for g, _ in items], dtype=np.uint8).reshape(-1, n * n),
        np.array([g.rating for g, _ in items], dtype=np.int64),
        keys,
    )


def _on_course(attempts: int, max_attempts: int, rows: dict[str, list], needed: int) -> bool:
    """Fail fast rather than after max_attempts: would the rate so far fill both splits within the cap?"""
    placed = sum(len(v) for v in rows.values())
    return placed > 0 and placed / attempts * (max_attempts - attempts) >= needed - placed


def _exhausted_error(
    opts: SudokuBuildOptions,
    n: int,
    stats: dict[str, int],
    rows: dict,
    sizes: dict,
    starved: str,
    n_classes: int,
    stall: int,
) -> UserError:
    """The generator keeps finding classes it has seen, and every one of them belongs to the other split: `starved`
    can never fill (a strict split keeps each class on one side)."""
    other = "train" if starved == "test" else "test"
    kind = "solution" if opts.strict_split == "solution" else "puzzle"
    if kind == "solution":
        known, what = SOLUTION_CLASSES.get(opts.box), "solutions"
        more = "use --strict-split puzzle or a larger --box"
    else:
        known, what = MINIMAL_PUZZLE_CLASSES.get(opts.box) if opts.min_givens is None else None, "minimal puzzles"
        more = "or use a larger --box" if known is None else "pass --min-givens (more puzzles) or use a larger --box"
    bound = f", and {n}x{n} {what} fall into {known} classes in all" if known is not None else ""
    return UserError(
        f"--{starved}-size {sizes[starved]}: only {len(rows[starved])} {starved} {n}x{n} puzzles after "
        f"{stats['attempts']:,} attempts: all {n_classes} {kind} classes found went to {other} "
        f"({len(rows[other]):,} of --{other}-size {sizes[other]}) and none new came in the last {stall:,} attempts; a "
        f"strict split keeps each class on one side{bound}; lower --{other}-size, {more}"
    )


def _generation_error(
    opts: SudokuBuildOptions,
    n: int,
    stats: dict[str, int],
    rows: dict,
    sizes: dict,
    n_classes: int,
    n_solution_classes: int | None = None,
) -> UserError:
    got = {s: len(rows[s]) for s in rows}
    off = stats["below_min_difficulty"] + stats["above_max_difficulty"]
    if off > stats["attempts"] // 2:
        kept = stats["attempts"] - off
        if stats["below_min_difficulty"] >= stats["above_max_difficulty"]:
            return UserError(
                f"--min-difficulty {opts.min_difficulty}: only {kept} of {stats['attempts']} generated {n}x{n} puzzles "
                f"reached that rating; lower it, or use a larger --box"
            )
        return UserError(
            f"--max-difficulty {opts.max_difficulty}: only {kept} of {stats['attempts']} generated {n}x{n} puzzles "
            f"were rated within --min-difficulty/--max-difficulty; raise it, or use a smaller --box"
        )
    if n_solution_classes is not None:
        return UserError(
            f"--strict-split solution: after {stats['attempts']} attempts only {got['train']} train and {got['test']} "
            f"test {n}x{n} puzzles fit a split with no solution class on both sides ({n_solution_classes} solution "
            f"classes seen); lower --train-size {sizes['train']} / --test-size {sizes['test']}, use a larger --box, "
            f"or --strict-split puzzle"
        )
    return UserError(
        f"--train-size {sizes['train']} / --test-size {sizes['test']}: after {stats['attempts']} attempts only "
        f"{got['train']} train and {got['test']} test {n}x{n} puzzles fit a strict split ({n_classes} distinct puzzle classes "
        f"seen); lower the sizes or use a larger --box"
    )


# ---------------------------------------------------------------------------------------------------------- building


def _check_options(opts: SudokuBuildOptions, source: str) -> None:
    if (
        opts.min_difficulty is not None
        and opts.max_difficulty is not None
        and opts.max_difficulty < opts.min_difficulty
    ):
        raise UserError(
            f"--max-difficulty {opts.max_difficulty}: below --min-difficulty {opts.min_difficulty}, no puzzle can pass"
        )
    if opts.min_givens is not None:
        if source != "generate":
            raise UserError(
                f"--min-givens {opts.min_givens}: only generated puzzles can be given clues; use --source generate"
            )
        n = math.prod(parse_box(opts.box))
        if opts.min_givens >= n * n:
            raise UserError(f"--min-givens {opts.min_givens}: a {n}x{n} puzzle has {n * n} cells; give fewer")
    if source != "generate" and opts.strict_split != "puzzle":
        raise UserError(
            f"--strict-split {opts.strict_split}: only generated puzzles can be split so; use --source generate "
            f"(--source {source} keeps the published split)"
        )
    if source in ("hf", "csv") and opts.box != "3x3":
        raise UserError(
            f"--box {opts.box}: --source {source} holds 9x9 puzzles only; use --box 3x3 or --source generate"
        )


def _in_range_rows(ratings: np.ndarray, opts: SudokuBuildOptions) -> np.ndarray:
    keep = np.ones(ratings.shape, dtype=bool)
    if opts.min_difficulty is not None:
        keep &= ratings >= opts.min_difficulty
    if opts.max_difficulty is not None:
        keep &= ratings <= opts.max_difficulty
    return keep


def _default_out(source: str, box: str) -> Path:
    n = BOXES[box][0] * BOXES[box][1]
    return Path({"hf": "data/sudoku-extreme-full", "csv": "data/sudoku-csv"}.get(source, f"data/sudoku-gen-{n}x{n}"))


def _difficulty(ratings: np.ndarray) -> dict[str, Any]:
    if ratings.size == 0:
        return {"histogram": {}, "mean": None, "min": None, "max": None}
    values, counts = np.unique(ratings, return_counts=True)
    return {
        "histogram": {str(int(v)): int(k) for v, k in zip(values, counts)},
        "mean": round(float(ratings.mean()), 4),
        "min": int(ratings.min()),
        "max": int(ratings.max()),
    }


def _row_hashes(grids: np.ndarray) -> np.ndarray:
    """64-bit hash per row (fixed weights, wrap-around arithmetic): cheap exact-duplicate detection for millions of
    rows."""
    weights = np.random.default_rng(0x5D0C).integers(1, 2**63, size=grids.shape[1], dtype=np.uint64) | np.uint64(1)
    out = np.zeros(grids.shape[0], dtype=np.uint64)
    for j in range(grids.shape[1]):
        out = out * np.uint64(1_000_003) + grids[:, j].astype(np.uint64) * weights[j]
    return out


def _examples(
    rows: SudokuRows, r: int, c: int, num_aug: int, rng: np.random.Generator, desc: str, progress: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Tokens of each original followed by its num_aug augmented copies (the original's layout)."""
    n = r * c
    per = 1 + num_aug
    inputs = np.empty((len(rows) * per, n * n), dtype=np.uint8)
    labels = np.empty_like(inputs)
    inputs[::per] = to_tokens(rows.puzzles)
    labels[::per] = to_tokens(rows.solutions)
    if num_aug == 0 or len(rows) == 0:
        return inputs, labels
    chunk = max(1, 65536 // num_aug)  # originals per vectorized step (bounds memory at ~65k grids)
    with progress_bar(enabled=progress, total=len(rows), desc=desc, unit="puzzle") as bar:
        for s in range(0, len(rows), chunk):
            e = min(s + chunk, len(rows))
            tf = random_transforms(rng, r, c, (e - s) * num_aug)
            src = np.repeat(np.arange(s, e), num_aug)
            q = apply_transforms(rows.puzzles[src].reshape(-1, n, n), tf).reshape(e - s, num_aug, n * n)
            a = apply_transforms(rows.solutions[src].reshape(-1, n, n), tf).reshape(e - s, num_aug, n * n)
            block = slice(s * per, e * per)
            inputs[block].reshape(e - s, per, n * n)[:, 1:] = to_tokens(q)
            labels[block].reshape(e - s, per, n * n)[:, 1:] = to_tokens(a)
            bar.update(e - s)
    return inputs, labels


def _originals(
    opts: SudokuBuildOptions, src: sources.Source, r: int, c: int
) -> tuple[SudokuRows, SudokuRows, dict[str, Any], dict[str, Any]]:
    """The train and test originals before --subsample-size: generated with a strict split, or read from the CSVs,
    filtered by difficulty and sampled to the sizes; the counts for the record, and the source detail."""
    stats: dict[str, Any] = {}
    if src.csvs is None:
        train_size = opts.train_size or DEFAULT_GENERATED_SIZES[0]
        test_size = opts.test_size or DEFAULT_GENERATED_SIZES[1]
        gen = _generate_split(opts, r, c, train_size, test_size)
        detail = {
            "generator": "random full grid, clues removed while the solution stays unique (minimal puzzles)"
            + ("" if opts.min_givens is None else f", then random clues given back up to {opts.min_givens}"),
            "rating": RATING_DEFINITION,
        }
        return gen.train, gen.test, dict(gen.stats), detail
    train, test = read_sudoku_csv(src.csvs[0]), read_sudoku_csv(src.csvs[1])
    stats["rows_read"] = {"train": len(train), "test": len(test)}
    if opts.min_difficulty is not None or opts.max_difficulty is not None:
        train = train.take(np.flatnonzero(_in_range_rows(train.ratings, opts)))
        test = test.take(np.flatnonzero(_in_range_rows(test.ratings, opts)))
    stats["rows_after_min_difficulty"] = {"train": len(train), "test": len(test)}
    train, test = sources.sample_splits(train, test, opts)
    # The published split is kept as is; report exact repeats of a test puzzle in train (equivalents not checked).
    stats["test_puzzles_also_in_train"] = int(np.isin(_row_hashes(test.puzzles), _row_hashes(train.puzzles)).sum())
    return train, test, stats, src.detail


def build_sudoku(opts: SudokuBuildOptions, hub_probe: Callable[[], bool] | None = None) -> Path:
    """Build the dataset described by `opts` and return its directory (written atomically: all or nothing)."""
    r, c = parse_box(opts.box)
    n = r * c
    forced = None if opts.box == "3x3" else f"--box {opts.box}: Sudoku-Extreme has 9x9 puzzles only"
    source, reason = sources.resolve_source(opts, HF_REPO, hub_probe or sources.hub_reachable, forced)
    _check_options(opts, source)
    src = sources.open_source(opts, source, reason, HF_REPO)
    sources.check_subsample(opts, src.name, DEFAULT_GENERATED_SIZES[0], "puzzles")
    out = Path(opts.out) if opts.out is not None else _default_out(src.name, opts.box)
    check_out(out, opts.overwrite, "sudoku")
    print(f"sudoku: source {src.name} ({src.reason}), {n}x{n} boards, output {out}", flush=True)

    train, test, stats, detail = _originals(opts, src, r, c)
    why = [
        f"--{k.replace('_', '-')} {v}"
        for k, v in (("min_difficulty", opts.min_difficulty), ("max_difficulty", opts.max_difficulty))
        if v is not None
    ]
    train = sources.subsample_train(train, test, opts, " / ".join(why) or None, "puzzles")
    if train.keys is not None and test.keys is not None:
        stats["train_classes"] = train.classes()  # --subsample-size may have dropped some
        # added after builder version 1, hence last: what the held-out split holds at the level of solutions
        stats.update(solution_class_counts(map(solution_key, train.keys), [solution_key(k) for k in test.keys]))

    train_inputs, train_labels = _examples(
        train,
        r,
        c,
        opts.num_aug,
        np.random.default_rng([opts.seed, _STREAM_AUGMENT]),
        "augmenting train",
        not opts.quiet,
    )
    test_inputs, test_labels = _examples(test, r, c, 0, np.random.default_rng(0), "")
    options = opts.record()

    def record(split: str, rows: SudokuRows, examples: int) -> dict[str, Any]:
        return {
            **record_head("sudoku", BUILDER_VERSION, split, src.name, detail, options, opts.seed),
            "box": opts.box,
            "grid_size": n,
            "strict_split": opts.strict_split if src.csvs is None else None,  # None: the published split, kept
            "counts": {
                "originals": len(rows),
                "examples": examples,
                "train_originals": len(train),
                "test_originals": len(test),
                **stats,
            },
            "difficulty": _difficulty(rows.ratings),
        }

    return write_grid_dataset(
        out,
        opts.overwrite,
        vocab_size(n),
        {
            "train": (train_inputs, train_labels, len(train), record("train", train, train_inputs.shape[0])),
            "test": (test_inputs, test_labels, len(test), record("test", test, test_inputs.shape[0])),
        },
    )


def summary(out: Path) -> str:
    """One line for the CLI: where the dataset is and what it holds."""
    counts = {}
    for split in ("train", "test"):
        b = json.loads((out / split / "dataset.json").read_text())["builder"]
        counts[split] = (b["counts"]["originals"], b["counts"]["examples"])
    return (
        f"wrote {out}: train {counts['train'][0]} puzzles / {counts['train'][1]} examples, "
        f"test {counts['test'][0]} puzzles / {counts['test'][1]} examples"
    )
