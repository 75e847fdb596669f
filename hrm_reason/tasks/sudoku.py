"""Sudoku: the token layout, the board geometry, the augmentation group with its inverse, the rules, the one solver,
and `SudokuTask`, the task as every other layer meets it (tasks/base.py `Task`).

Written once here for the builder (datasets_build/sudoku.py: it generates and rates puzzles with this solver),
evaluation, training's augmentation, `hrm solve` and the pictures (hrm_reason/viz).

Boards of side n = r*c (4x4, 6x6, 9x9) have boxes of r rows x c columns; the n/r = c *bands* are r rows tall and the
n/c = r *stacks* are c columns wide. Cells hold 0 for a blank and 1..n for a digit. Tokens are value + 1, as the
original builder: PAD 0, blank 1, digit d -> d + 1, vocab n + 2; every cell of the label is supervised (docs/data.md).

`puzzle_problem` says why a puzzle someone typed has no solution (a repeated given, a cell left without a candidate,
or an exhaustive search that found none), so `hrm solve` refuses it before the model guesses at it, and notes one
that has more than one solution (the search counts to two). The search is the builder's, bounded in placements.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from hrm_reason.errors import UserError
from hrm_reason.tasks.base import MARKS, GridLook, Puzzle, Reading, Task, text_lines

if TYPE_CHECKING:  # the builders import this module without torch's start-up cost
    from hrm_reason.data.puzzle import PuzzleDatasetMetadata, PuzzleSplit

BOXES: dict[str, tuple[int, int]] = {"2x2": (2, 2), "2x3": (2, 3), "3x3": (3, 3)}
BOX_OF_SIDE: dict[int, tuple[int, int]] = {r * c: (r, c) for r, c in BOXES.values()}
PAD, BLANK = 0, 1  # tokens; a digit d is d + 1


def to_tokens(values: np.ndarray) -> np.ndarray:
    """Cell values (0 blank, 1..n) -> tokens, keeping the dtype."""
    return values + 1


def vocab_size(n: int) -> int:
    return n + 2


# ---------------------------------------------------------------------------------------------------------- geometry


@dataclass(frozen=True)
class Geometry:
    """Static structure of one board shape, computed once per shape (pure data, safe to cache)."""

    r: int
    c: int
    n: int
    cells: int
    full: int  # bitmask with all n digits
    units: tuple[tuple[int, ...], ...]  # rows, columns, boxes (cell indices)
    cell_units: tuple[tuple[int, int, int], ...]  # per cell: index of its row, column and box in `units`
    peers: tuple[tuple[int, ...], ...]
    col_perms: np.ndarray  # [r! * (c!)^r, n]: every stack permutation x column-in-stack permutation


@cache
def geometry(r: int, c: int) -> Geometry:
    n = r * c
    rows = [tuple(i * n + j for j in range(n)) for i in range(n)]
    cols = [tuple(i * n + j for i in range(n)) for j in range(n)]
    boxes = [
        tuple((band * r + i) * n + stack * c + j for i in range(r) for j in range(c))
        for band in range(c)
        for stack in range(r)
    ]
    units = tuple(rows + cols + boxes)
    peers = []
    for cell in range(n * n):
        near = set().union(*(u for u in units if cell in u))
        near.discard(cell)
        peers.append(tuple(sorted(near)))
    col_perms = np.array(
        [
            [stack * c + within[k][j] for k, stack in enumerate(stacks) for j in range(c)]
            for stacks in itertools.permutations(range(r))
            for within in itertools.product(itertools.permutations(range(c)), repeat=r)
        ],
        dtype=np.intp,
    )
    col_perms.setflags(write=False)
    cell_units = tuple(
        (cell // n, n + cell % n, 2 * n + (cell // n // r) * r + (cell % n) // c) for cell in range(n * n)
    )
    assert all(cell in units[k] for cell, ks in enumerate(cell_units) for k in ks)
    return Geometry(r, c, n, n * n, (1 << n) - 1, units, cell_units, tuple(peers), col_perms)


# ------------------------------------------------------------------------------------------------------------- rules


def is_valid_solution(grid: np.ndarray, r: int, c: int) -> bool:
    """A complete grid whose every row, column and box holds each digit 1..n exactly once."""
    geo = geometry(r, c)
    flat = np.asarray(grid).reshape(-1)
    if flat.size != geo.cells or flat.min() < 1 or flat.max() > geo.n:
        return False
    want = np.arange(1, geo.n + 1)
    return all(np.array_equal(np.sort(flat[list(u)]), want) for u in geo.units)


def unit_error(grid: np.ndarray, geo: Geometry) -> str | None:
    """Name the first row/column/box that does not hold every digit once (1-based), or None if the grid is valid."""
    names = (
        [f"row {i + 1}" for i in range(geo.n)]
        + [f"column {i + 1}" for i in range(geo.n)]
        + [f"box {i + 1}" for i in range(geo.n)]
    )
    want = np.arange(1, geo.n + 1)
    for name, unit in zip(names, geo.units):
        if not np.array_equal(np.sort(grid[list(unit)]), want):
            return f"{name} does not hold each digit 1-{geo.n} once"
    return None


def rule_violations(grid: np.ndarray, given: np.ndarray, box: tuple[int, int] | None) -> np.ndarray:
    """[n, n] tokens of a prediction and of its puzzle -> [n, n] bool: a digit repeated in its row, column or box; a
    given that was changed; a cell without a digit. `box` None checks rows and columns only."""
    n = grid.shape[-1]
    grid, given = grid.astype(np.int64), given.astype(np.int64)
    digit = (grid >= 2) & (grid <= n + 1)
    bad = ~digit | ((given != BLANK) & (given != grid))
    units = [(np.s_[r, :]) for r in range(n)] + [(np.s_[:, c]) for c in range(n)]
    if box is not None:
        br, bc = box
        units += [np.s_[r : r + br, c : c + bc] for r in range(0, n, br) for c in range(0, n, bc)]
    for unit in units:
        values, is_digit = grid[unit], digit[unit]
        counts = np.bincount(values[is_digit].ravel(), minlength=n + 2)
        bad[unit] |= is_digit & (counts[values] > 1)
    return bad


# ------------------------------------------------------------------------------------------------- puzzle check

SEARCH_NODES = 100_000  # placements the exact search makes at most: about a second of Python (~10 us each)


def _cell(i: int, n: int) -> str:
    return f"row {i // n + 1}, column {i % n + 1}"


def _digits(values: list[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def repeated_given(values: np.ndarray, r: int, c: int) -> str | None:
    """The first row, column or box (1-based, boxes left to right then down) that holds a given twice, with the digit
    and its cells; None when no given repeats."""
    geo = geometry(r, c)
    flat = np.asarray(values).reshape(-1)
    kinds = ("row", "column", "box")
    for k, unit in enumerate(geo.units):
        seen: dict[int, list[int]] = {}
        for i in unit:
            if flat[i]:
                seen.setdefault(int(flat[i]), []).append(i)
        for digit, cells in sorted(seen.items()):
            if len(cells) > 1:
                times = "twice" if len(cells) == 2 else f"{len(cells)} times"
                kind = kinds[k // geo.n]
                if kind == "box":
                    where = " and ".join(_cell(i, geo.n) for i in cells)
                else:  # the other coordinate of each cell is enough in a row or a column
                    other = "columns" if kind == "row" else "rows"
                    where = f"{other} {_digits([(i % geo.n if kind == 'row' else i // geo.n) + 1 for i in cells])}"
                return f"the given {digit} appears {times} in {kind} {k % geo.n + 1} ({where})"
    return None


class SearchBound(Exception):
    """The exact search made its SEARCH_NODES placements without settling the puzzle; `found` holds the solutions it
    had found by then."""

    def __init__(self, found: list[Any] | None = None) -> None:
        super().__init__()
        self.found = found or []


# ------------------------------------------------------------------------------------------------------------ solver
# The one Sudoku solver: the builder rates and generates with it (datasets_build/sudoku.py), `hrm solve` checks typed
# puzzles with it. Candidates are int bitmasks (bit d-1 = digit d). Pure Python: small ints and lists beat numpy at
# this granularity.

RATING_DEFINITION = (
    "dead ends met by a deterministic backtracking search with naked- and hidden-single propagation that finds the "
    "solution and proves it unique (0 = solved by singles alone)"
)


def _propagate(cand: list[int], todo: list[int], geo: Geometry) -> bool:
    """Naked and hidden singles to a fixed point; False on a contradiction. `todo` holds newly fixed cells."""
    peers, units, full = geo.peers, geo.units, geo.full
    while True:
        while todo:
            i = todo.pop()
            m = cand[i]
            for p in peers[i]:
                pm = cand[p]
                if pm & m:
                    pm ^= m
                    if not pm:
                        return False
                    cand[p] = pm
                    if not pm & (pm - 1):
                        todo.append(p)
        for unit in units:
            ones = twos = 0
            for i in unit:
                m = cand[i]
                twos |= ones & m
                ones |= m
            if ones != full:
                return False  # some digit has no place left in this unit
            once = ones & ~twos
            if once:
                for i in unit:
                    h = cand[i] & once
                    if h:
                        if h & (h - 1):
                            return False  # two digits can only go in this one cell
                        if h != cand[i]:
                            cand[i] = h
                            todo.append(i)
        if not todo:
            return True


def _branch_cell(cand: list[int]) -> int:
    """Unfilled cell with the fewest candidates (lowest index on ties), or -1 when the grid is full."""
    best, best_count = -1, 1 << 30
    for i, m in enumerate(cand):
        if m & (m - 1):
            k = m.bit_count()
            if k < best_count:
                best, best_count = i, k
                if k == 2:
                    break
    return best


def _fixed(cand: list[int]) -> int:
    """Cells holding one candidate."""
    return sum(1 for m in cand if not m & (m - 1))


def _spend(stats: list[int], budget: int, placements: int) -> None:
    stats[2] += placements
    if stats[2] > budget:
        raise SearchBound


def _search(
    cand: list[int], geo: Geometry, limit: int, solutions: list[list[int]], stats: list[int], budget: int | None = None
) -> None:
    """Depth-first search collecting up to `limit` solutions; stats = [guesses, dead_ends, placements]. With a
    `budget`, the placements (cells fixed by a guess or by the propagation after it; a guess that fails counts one)
    are counted and SearchBound is raised past it."""
    cell = _branch_cell(cand)
    if cell < 0:
        solutions.append(cand)
        return
    m = cand[cell]
    while m:
        bit = m & -m
        m ^= bit
        child = cand.copy()
        child[cell] = bit
        stats[0] += 1
        if _propagate(child, [cell], geo):
            if budget is not None:
                _spend(stats, budget, _fixed(child) - _fixed(cand))
            _search(child, geo, limit, solutions, stats, budget)
            if len(solutions) >= limit:
                return
        else:
            stats[1] += 1
            if budget is not None:
                _spend(stats, budget, 1)


def _search_ordered(cand: list[int], geo: Geometry, order: list[list[int]]) -> list[int] | None:
    """First solution, trying each cell's digits in the given (random) order: a randomized full grid."""
    cell = _branch_cell(cand)
    if cell < 0:
        return cand
    m = cand[cell]
    for bit in order[cell]:
        if m & bit:
            child = cand.copy()
            child[cell] = bit
            if _propagate(child, [cell], geo):
                found = _search_ordered(child, geo, order)
                if found is not None:
                    return found
    return None


def _candidates(
    values: list[int], geo: Geometry, skip: int = -1, exclude: int = 0
) -> tuple[list[int], list[int]] | None:
    """Candidates left by the givens (cell `skip` treated as blank, minus digit `exclude` there), and the cells that
    became singles; None if the givens already clash. Unit masks instead of peer-by-peer elimination: ~10x cheaper."""
    used = []
    for unit in geo.units:
        m = 0
        for i in unit:
            d = values[i]
            if d and i != skip:
                bit = 1 << (d - 1)
                if m & bit:
                    return None
                m |= bit
        used.append(m)
    full = geo.full
    cand, todo = [], []
    for i, (d, (a, b, c)) in enumerate(zip(values, geo.cell_units)):
        if d and i != skip:
            cand.append(1 << (d - 1))
            continue
        m = full & ~(used[a] | used[b] | used[c])
        if i == skip and exclude:
            m &= ~(1 << (exclude - 1))
        if not m:
            return None
        if not m & (m - 1):
            todo.append(i)
        cand.append(m)
    return cand, todo


def _as_values(grid: np.ndarray | list[int], geo: Geometry) -> list[int]:
    values = [int(v) for v in np.asarray(grid).reshape(-1)]
    if len(values) != geo.cells or min(values) < 0 or max(values) > geo.n:
        raise ValueError(f"expected {geo.cells} cells with values 0..{geo.n}")
    return values


def _run(values: list[int], geo: Geometry, limit: int, budget: int | None = None) -> tuple[list[list[int]], list[int]]:
    """(up to `limit` solutions as candidate lists, [guesses, dead_ends, placements]) of a puzzle; a clash among the
    givens or a contradiction of the singles they force is one dead end. Solutions found before SearchBound is
    raised are in its `found` (as candidate lists)."""
    start = _candidates(values, geo)
    solutions: list[list[int]] = []
    stats = [0, 0, 0]
    if start is None or not _propagate(*start, geo):
        stats[1] += 1
        return solutions, stats
    try:
        if budget is not None:
            _spend(stats, budget, _fixed(start[0]) - sum(1 for v in values if v))
        _search(start[0], geo, limit, solutions, stats, budget)
    except SearchBound:
        raise SearchBound(solutions) from None  # candidate lists: the callers convert them
    return solutions, stats


def solve(puzzle: np.ndarray, r: int, c: int, limit: int = 2) -> tuple[list[np.ndarray], int]:
    """Up to `limit` solutions (as [n, n] arrays of 1..n) and the number of dead ends the search met."""
    geo = geometry(r, c)
    solutions, stats = _run(_as_values(puzzle, geo), geo, limit)
    return [np.array([m.bit_length() for m in s], dtype=np.uint8).reshape(geo.n, geo.n) for s in solutions], stats[1]


def rate_puzzle(puzzle: np.ndarray, r: int, c: int) -> int:
    """Difficulty rating: see RATING_DEFINITION (the way tdoku rates Sudoku-Extreme: search effort, not technique)."""
    return solve(puzzle, r, c, limit=2)[1]


def fill_grid(geo: Geometry, order: list[list[int]]) -> list[int]:
    """A complete grid (values 1..n): the first the search finds on the empty board trying each cell's digits in
    `order` (bits, per cell), so a random order gives a random grid."""
    found = _search_ordered([geo.full] * geo.cells, geo, order)
    assert found is not None, "an empty board always has a solution"
    return [m.bit_length() for m in found]


def other_solution_exists(givens: list[int], geo: Geometry, cell: int, digit: int) -> bool:
    """Whether a grid keeps every given but the one at `cell` and holds another digit than `digit` there: removing
    that clue from a puzzle whose solution has `digit` at `cell` leaves it unique exactly when none does."""
    start = _candidates(givens, geo, skip=cell, exclude=digit)
    other: list[list[int]] = []
    if start is not None and _propagate(*start, geo):
        _search(start[0], geo, 1, other, [0, 0, 0])
    return bool(other)


def search_solutions(
    values: np.ndarray, r: int, c: int, limit: int = 1, max_nodes: int = SEARCH_NODES
) -> list[np.ndarray]:
    """Up to `limit` solutions ([n*n] int64 values) of a puzzle whose givens do not repeat ([n*n] values, 0 blank);
    fewer when it has fewer (none: no solution); raises SearchBound after `max_nodes` placements (the solver above,
    bounded: exact, and bounded in time by the placements). limit=2 tells a puzzle with one solution from one with
    several."""
    geo = geometry(r, c)

    def flat(solutions: list[list[int]]) -> list[np.ndarray]:
        return [np.array([m.bit_length() for m in s], dtype=np.int64) for s in solutions]

    try:
        solutions, _ = _run(_as_values(values, geo), geo, limit, max_nodes)
    except SearchBound as bound:
        raise SearchBound(flat(bound.found)) from None
    return flat(solutions)


def search_solution(values: np.ndarray, r: int, c: int, max_nodes: int = SEARCH_NODES) -> np.ndarray | None:
    """One solution of a puzzle whose givens do not repeat, or None when it has none (`search_solutions`)."""
    found = search_solutions(values, r, c, 1, max_nodes)
    return found[0] if found else None


def puzzle_problem(values: np.ndarray, r: int, c: int, max_nodes: int = SEARCH_NODES) -> tuple[str | None, str | None]:
    """(problem, note) of a puzzle ([n*n] values, 0 blank) before a model is asked to solve it. The problem, None when
    there is none, says why it has no solution: a given repeated in a row, column or box (naming it and the digit), a
    blank whose row, column and box already hold every digit (naming the cell), else no solution found by the exact
    search. The note, None for a puzzle with exactly one solution, says that it has several (a model trained on
    unique puzzles answers one of them, with a confidence that does not say the puzzle was determined) or that the
    search stopped at its bound before settling whether it has one, or a second."""
    geo = geometry(r, c)
    flat = np.asarray(values).reshape(-1)
    repeated = repeated_given(flat, r, c)
    if repeated is not None:
        return repeated, None
    for i in np.flatnonzero(flat == 0).tolist():
        held = {int(flat[j]) for j in geo.peers[i] if flat[j]}
        if len(held) == geo.n:
            return (
                f"the blank at {_cell(i, geo.n)} has no candidate: its row, column and box already hold "
                f"{_digits(sorted(held))}",
                None,
            )
    try:
        found = search_solutions(flat, r, c, 2, max_nodes)
    except SearchBound as bound:
        what = "a second solution" if bound.found else "a solution"
        return None, f"not checked for {what}: the exact search stopped after {max_nodes} placements"
    if not found:
        return "every blank has a candidate, but an exhaustive search fills no board", None
    if len(found) > 1:
        return None, MULTIPLE_SOLUTIONS
    return None, None


# What hrm solve says of a puzzle with several solutions: the answer may be any of them, valid or not.
MULTIPLE_SOLUTIONS = (
    "more than one solution: the givens do not determine the board, so the answer is checked against the rules and "
    "the givens only, and its confidence does not say which solution is meant"
)


def matches_layout(split: PuzzleSplit, sample: int = 4096) -> tuple[int, int] | None:
    """The box (r, c) of a split with no builder record whose layout is a Sudoku's (docs/data.md, "Datasets of the
    original scripts"), else None: a square board of a side with a known box, vocab n + 2, PAD 0, and in the first
    `sample` examples of each set labels that are solved boards and inputs that hold only blanks and the label's
    digits. The data decides, not the shapes alone: a 4x4 Sudoku and a small maze share vocabulary and length."""
    meta = split.metadata
    n = math.isqrt(meta.seq_len)
    box = BOX_OF_SIDE.get(n)
    if box is None or n * n != meta.seq_len or meta.vocab_size != vocab_size(n) or meta.pad_id != PAD:
        return None
    units = np.array(geometry(*box).units, dtype=np.intp)  # [3n, n] cells of each row, column and box
    want = np.arange(BLANK + 1, n + 2)  # the tokens of digits 1..n
    seen = 0
    for s in split.sets.values():
        x, y = np.asarray(s.inputs[:sample]), np.asarray(s.labels[:sample])
        if not ((x == BLANK) | (x == y)).all():
            return None
        if not (np.sort(y[:, units], axis=-1) == want).all():
            return None
        seen += x.shape[0]
    return box if seen > 0 else None


# -------------------------------------------------------------------------------------------------- augmentation


@dataclass(frozen=True)
class GridTransforms:
    """A batch of augmentation-group elements, applied as in the original `shuffle_sudoku`:
    optional transpose, then new[i, j] = old[row_perm[i], col_perm[j]], then digit_map (with 0 -> 0)."""

    digit_map: np.ndarray  # [B, n+1] uint8
    transpose: np.ndarray  # [B] bool
    row_perm: np.ndarray  # [B, n]
    col_perm: np.ndarray  # [B, n]

    def __len__(self) -> int:
        return self.digit_map.shape[0]


def random_transforms(rng: np.random.Generator, r: int, c: int, count: int) -> GridTransforms:
    """`count` random group elements. Row order = shuffled bands, each with its rows shuffled; columns likewise.
    Transpose (p=0.5) only for square boxes: transposing a 2x3-box board gives 3x2 boxes, a different puzzle family."""
    n = r * c
    digits = np.argsort(rng.random((count, n)), axis=1) + 1
    digit_map = np.concatenate([np.zeros((count, 1), dtype=np.uint8), digits.astype(np.uint8)], axis=1)
    transpose = rng.random(count) < 0.5 if r == c else np.zeros(count, dtype=bool)
    bands = np.argsort(rng.random((count, c)), axis=1)
    rows_in_band = np.argsort(rng.random((count, c, r)), axis=2)
    stacks = np.argsort(rng.random((count, r)), axis=1)
    cols_in_stack = np.argsort(rng.random((count, r, c)), axis=2)
    row_perm = (bands[:, :, None] * r + rows_in_band).reshape(count, n)
    col_perm = (stacks[:, :, None] * c + cols_in_stack).reshape(count, n)
    return GridTransforms(digit_map, transpose, row_perm, col_perm)


def apply_transforms(grids: np.ndarray, tf: GridTransforms) -> np.ndarray:
    """Transform [n, n] (one grid for every element) or [B, n, n] grids; returns [B, n, n] uint8."""
    B, n = len(tf), tf.row_perm.shape[1]
    g = np.broadcast_to(np.asarray(grids), (B, n, n))
    g = np.where(tf.transpose[:, None, None], g.transpose(0, 2, 1), g)
    moved = g[np.arange(B)[:, None, None], tf.row_perm[:, :, None], tf.col_perm[:, None, :]]
    return np.take_along_axis(tf.digit_map, moved.reshape(B, -1).astype(np.intp), axis=1).reshape(B, n, n)


def inverse_transforms(tf: GridTransforms) -> GridTransforms:
    """The elements that undo `tf`: apply_transforms(apply_transforms(g, tf), inverse_transforms(tf)) == g.

    Forward: g1 = transpose?(g), g2[i, j] = g1[row_perm[i], col_perm[j]], then the digit map. Backward the position
    permutations invert (argsort) and, when transposed, trade places, since a transpose after permuting rows by a and
    columns by b equals permuting rows by b and columns by a after it; the digit map inverts (0 stays 0).
    """
    inv_rows, inv_cols = np.argsort(tf.row_perm, axis=1), np.argsort(tf.col_perm, axis=1)
    t = tf.transpose[:, None]
    return GridTransforms(
        digit_map=np.argsort(tf.digit_map, axis=1).astype(np.uint8),
        transpose=tf.transpose.copy(),
        row_perm=np.where(t, inv_cols, inv_rows),
        col_perm=np.where(t, inv_rows, inv_cols),
    )


# -------------------------------------------------------------------------------------------------- test time


@dataclass(frozen=True)
class SudokuTransforms:
    """Test-time augmentation on token sequences (hrm_reason.evaluate.tta, docs/training.md "Test-time compute"): the
    group above acting on tokens (value + 1; PAD and blank stay), one element per row."""

    r: int
    c: int

    @property
    def group_size(self) -> int:
        """Elements of the group the copies are drawn from: digit relabellings n!, band orders c! with the rows of each
        band (r!)^c, stack orders r! with the columns of each stack (c!)^r, and the transpose for square boxes only
        (3072 for 4x4, 2,488,320 for 6x6, about 1.2e12 for 9x9)."""
        r, c, f = self.r, self.c, math.factorial
        return f(r * c) * f(c) * f(r) ** c * f(r) * f(c) ** r * (2 if r == c else 1)

    @property
    def group_name(self) -> str:
        n = self.r * self.c
        return f"the {n}x{n} Sudoku's symmetry group"

    def draw(self, rng: np.random.Generator, rows: int, copies: int) -> list[GridTransforms]:
        return [_on_tokens(random_transforms(rng, self.r, self.c, rows)) for _ in range(copies - 1)]

    def apply(self, tokens: np.ndarray, element: GridTransforms) -> np.ndarray:
        n = self.r * self.c
        return apply_transforms(np.asarray(tokens).reshape(-1, n, n), element).reshape(len(element), n * n)

    def invert(self, tokens: np.ndarray, element: GridTransforms) -> np.ndarray:
        return self.apply(tokens, inverse_transforms(element))


def _on_tokens(tf: GridTransforms) -> GridTransforms:
    """The same elements with the digit map on tokens: PAD 0 -> 0, blank 1 -> 1, d + 1 -> digit_map[d] + 1."""
    pad = np.zeros((len(tf), 1), dtype=np.uint8)
    return GridTransforms(np.concatenate([pad, tf.digit_map + 1], axis=1), tf.transpose, tf.row_perm, tf.col_perm)


def tta_transforms(metadata: PuzzleDatasetMetadata) -> SudokuTransforms:
    """The test-time group of a Sudoku dataset (`SudokuTask.from_metadata`)."""
    return SudokuTask.from_metadata(metadata, "dataset.json").transforms


class SudokuSymmetry:
    """Augmentation on the fly (hrm_reason/tasks/augment.py): the test-time group on token rows, one element per
    row of the global batch, each process applying its slice `rows`."""

    def __init__(self, r: int, c: int) -> None:
        self.transforms = SudokuTransforms(r, c)

    def __call__(
        self, rng: np.random.Generator, inputs: np.ndarray, labels: np.ndarray, rows: slice, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        (drawn,) = self.transforms.draw(rng, count, 2)  # copy 1 of `count` rows: one element per global-batch row
        tf = GridTransforms(**{f.name: getattr(drawn, f.name)[rows] for f in fields(GridTransforms)})
        return tuple(self.transforms.apply(x, tf).astype(x.dtype) for x in (inputs, labels))  # type: ignore[return-value]


def box_of(value: Any, side: int) -> tuple[int, int] | None:
    """The boxes (rows, columns) of a board of `side`: the builder record's `box` ("RxC") when it tiles the board,
    else the usual boxes of that side (BOX_OF_SIDE), else None."""
    if isinstance(value, str):
        rows, _, cols = value.partition("x")
        if rows.isdigit() and cols.isdigit() and int(rows) * int(cols) == side:
            return int(rows), int(cols)
    return BOX_OF_SIDE.get(side)


# ---------------------------------------------------------------------------------------------------------- the task

SEPARATORS = "|+-"  # box drawing in a typed board, ignored like whitespace
BLANKS = ".0"


@dataclass(frozen=True)
class SudokuTask(Task):
    """Sudoku with r x c boxes on an n x n board, n = r * c (tasks/base.py `Task`)."""

    r: int
    c: int
    blank_identifier: int = 0
    owner: ClassVar[str] = "a Sudoku's"
    on_the_fly: ClassVar[bool] = True
    kind: ClassVar[str] = "sudoku"

    @property
    def n(self) -> int:
        return self.r * self.c

    @classmethod
    def from_metadata(cls, metadata: PuzzleDatasetMetadata, where: str, names: list[str] | None = None) -> SudokuTask:
        """A square board whose boxes are the builder record's (or the usual ones of its side), vocab n + 2."""
        seq_len, vocab = metadata.seq_len, metadata.vocab_size
        side = math.isqrt(seq_len)
        given = (metadata.builder or {}).get("box")
        box = box_of(given, side)
        if side * side != seq_len or box is None or vocab != vocab_size(side):
            raise UserError(
                f"{where}: a Sudoku dataset whose shape (seq_len {seq_len}, vocab_size {vocab}, box {given}) is not a "
                f"Sudoku board (a square board of boxes RxC, vocab_size n + 2)"
            )
        return cls(*box, blank_identifier=metadata.blank_identifier_id)

    @classmethod
    def fits_shape(cls, seq_len: int, vocab_size_: int) -> bool:
        """A square board of a side with known boxes and vocab n + 2."""
        side = math.isqrt(seq_len)
        return side * side == seq_len and side in BOX_OF_SIDE and vocab_size_ == vocab_size(side)

    @classmethod
    def layout_of(cls, split: PuzzleSplit) -> tuple[SudokuTask, str] | None:
        box = matches_layout(split)
        if box is None:
            return None
        task = cls(*box, blank_identifier=split.metadata.blank_identifier_id)
        return task, f"{box[0]}x{box[1]} boxes; the layout and the solved labels are a Sudoku's"

    @property
    def transforms(self) -> SudokuTransforms:
        return SudokuTransforms(self.r, self.c)

    def augmentation(self, kind: str, split: PuzzleSplit) -> SudokuSymmetry:
        return SudokuSymmetry(self.r, self.c)

    @property
    def symmetry_name(self) -> str:
        return f"Sudoku {self.n}x{self.n} symmetries"

    def rule_violations(self, preds: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        n = self.n
        grid, given = np.asarray(preds).reshape(n, n), np.asarray(inputs).reshape(n, n)
        return rule_violations(grid, given, (self.r, self.c)).reshape(-1)

    def givens(self, inputs: np.ndarray) -> np.ndarray:
        return np.asarray(inputs) > BLANK

    @property
    def look(self) -> GridLook:
        return GridLook(
            puzzle_legend="bold: given digits;  blue: digits to find",
            legend=f"bold: given;  {MARKS};  red corner: breaks a rule (repeated digit, changed given, empty cell)",
            panel_inches=(1.9, 1.35),
            digits=True,
            blocks=(self.r, self.c),
            changed_fill=True,
        )

    # --- hrm solve

    def describe(self) -> str:
        return f"{self.n}x{self.n} Sudoku ({self.r}x{self.c} boxes)"

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]:
        """One puzzle per line (n*n cells), or n lines of n cells; whitespace and | + - are ignored, a blank line ends
        a board written in rows."""
        n, puzzles = self.n, []
        rows: list[str] = []
        typed: list[str] = []  # the board's lines as written, box-drawing lines between its rows included
        first = 0
        for i, raw in enumerate(text_lines(text), 1):
            where = f"{source} line {i}"
            if not raw.strip():
                if rows:
                    raise UserError(f"{source} line {first}: a board of {len(rows)} rows; expected {n}")
                continue
            cells = "".join(ch for ch in raw if not ch.isspace() and ch not in SEPARATORS)
            if not cells:  # a box-drawing line between bands
                typed += [raw] if rows else []
                continue
            self._check_cells(cells, where)
            if len(cells) == n * n and not rows:
                puzzles.append(self._puzzle(cells, where, raw.strip()))
            elif len(cells) == n:
                first = first if rows else i
                rows.append(cells)
                typed.append(raw.rstrip())
                if len(rows) == n:
                    puzzles.append(self._puzzle("".join(rows), f"{source} line {first}", "\n".join(typed)))
                    rows, typed = [], []
            elif rows:
                raise UserError(f"{where}: a board row of {len(cells)} cells; expected {n} (board from line {first})")
            else:
                raise UserError(
                    f"{where}: {len(cells)} cells; expected {n * n} for a {self.describe()} (digits 1-{n}, . or 0 for "
                    f"a blank), one puzzle per line"
                )
        if rows:
            raise UserError(f"{source} line {first}: a board of {len(rows)} rows; expected {n}")
        return puzzles

    def _check_cells(self, cells: str, where: str) -> None:
        """Letters first, then a board of another size (its digits may exceed n), then digits above n."""
        letter = next((ch for ch in cells if ch not in BLANKS and not (ch.isascii() and ch.isdigit())), None)
        if letter is not None:
            raise UserError(f"{where}: {letter!r} is not a digit 1-{self.n} or a blank (. or 0)")
        side = math.isqrt(len(cells))
        if side != self.n and side * side == len(cells) and side in BOX_OF_SIDE:
            raise UserError(
                f"{where}: a {side}x{side} Sudoku ({len(cells)} cells), but the model solves a {self.describe()} "
                f"({self.n * self.n} cells)"
            )
        high = next((ch for ch in cells if ch not in BLANKS and int(ch) > self.n), None)
        if high is not None:
            raise UserError(f"{where}: digit {high} is outside 1-{self.n} for a {self.describe()}")

    def _puzzle(self, cells: str, name: str, layout: str) -> Puzzle:
        values = np.array([0 if ch in BLANKS else int(ch) for ch in cells], dtype=np.int32)
        return Puzzle(name, to_tokens(values), self.blank_identifier, layout=layout)

    def problem(self, puzzle: Puzzle) -> tuple[str | None, str | None]:
        """Repeated givens, a cell without a candidate, no solution by the bounded exact search (`puzzle_problem`)."""
        return puzzle_problem(puzzle.tokens.astype(np.int64) - 1, self.r, self.c)

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> Reading:
        n = self.n
        values = tokens.astype(np.int64) - 1  # blank and PAD (not digits) become 0 and -1
        digits = "".join(str(v) if 1 <= v <= n else "." for v in values)
        # The answer written as the puzzle was typed: its cells in order, every other character as the user wrote it.
        answer = iter(digits)
        layout = puzzle.layout or digits
        text = "".join(next(answer) if not ch.isspace() and ch not in SEPARATORS else ch for ch in layout)
        grid = np.where((values >= 1) & (values <= n), values, 0).reshape(n, n).tolist()
        given = puzzle.tokens.reshape(n, n)
        bad = rule_violations(tokens.reshape(n, n), given, (self.r, self.c))
        if not bad.any():
            return Reading(text, grid, True, f"valid: every row, column and box holds 1-{n} once, givens kept")
        reasons = []
        changed = int(((given != BLANK) & (tokens.reshape(n, n) != given)).sum())
        empty = int(((values < 1) | (values > n)).sum())
        if changed:
            reasons.append(f"{changed} given{'s' * (changed > 1)} changed")
        if empty:
            reasons.append(f"{empty} cell{'s' * (empty > 1)} without a digit")
        unit = unit_error(values, geometry(self.r, self.c))
        if unit is not None and not empty:
            reasons.append(unit)
        return Reading(text, grid, False, "invalid: " + "; ".join(reasons))
