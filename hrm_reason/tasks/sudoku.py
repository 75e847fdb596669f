"""Sudoku: the token layout, the board geometry, the augmentation group with its inverse, and the rules.

Written once here for the builder (datasets_build/sudoku.py), evaluation and the pictures (hrm_reason/viz).

Boards of side n = r*c (4x4, 6x6, 9x9) have boxes of r rows x c columns; the n/r = c *bands* are r rows tall and the
n/c = r *stacks* are c columns wide. Cells hold 0 for a blank and 1..n for a digit. Tokens are value + 1, as the
original builder: PAD 0, blank 1, digit d -> d + 1, vocab n + 2; every cell of the label is supervised (docs/data.md).

`puzzle_problem` says why a puzzle someone typed has no solution (a repeated given, a cell left without a candidate,
or an exhaustive search that found none), so `hrm solve` refuses it before the model guesses at it, and notes one
that has more than one solution (the search counts to two).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from hrm_reason.errors import UserError

if TYPE_CHECKING:  # the builders import this module without torch's start-up cost
    from hrm_reason.data.puzzle import PuzzleSplit

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

SEARCH_NODES = 200_000  # placements the exact search tries at most: about a second of Python (~5 us each)


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
    """The exact search tried its SEARCH_NODES placements without settling the puzzle; `found` holds the solutions
    it had found by then."""

    def __init__(self, found: list[np.ndarray] | None = None) -> None:
        super().__init__()
        self.found = found or []


def search_solutions(
    values: np.ndarray, r: int, c: int, limit: int = 1, max_nodes: int = SEARCH_NODES
) -> list[np.ndarray]:
    """Up to `limit` solutions of a puzzle whose givens do not repeat ([n*n] values, 0 blank); fewer when it has
    fewer (none: no solution); raises SearchBound after `max_nodes` placements. Depth first, always on the blank with
    the fewest candidates (a blank with one is placed at once, one with none ends the branch): exact, and bounded in
    time by the placements. limit=2 tells a puzzle with one solution from one with several."""
    geo = geometry(r, c)
    cells = [int(v) for v in np.asarray(values).reshape(-1)]
    used = [0] * len(geo.units)
    for i, v in enumerate(cells):
        if v:
            for k in geo.cell_units[i]:
                used[k] |= 1 << (v - 1)
    blanks = [i for i, v in enumerate(cells) if not v]
    nodes = 0
    found: list[np.ndarray] = []

    def place() -> bool:
        """True once `limit` solutions are found (the search stops there)."""
        nonlocal nodes
        best, best_mask, best_count = -1, 0, geo.n + 1
        for i in blanks:
            if cells[i]:
                continue
            a, b, k = geo.cell_units[i]
            mask = geo.full & ~(used[a] | used[b] | used[k])
            count = mask.bit_count()
            if count < best_count:
                best, best_mask, best_count = i, mask, count
                if count <= 1:
                    break
        if best < 0:  # every blank filled
            found.append(np.array(cells, dtype=np.int64))
            return len(found) >= limit
        units = geo.cell_units[best]
        while best_mask:
            bit = best_mask & -best_mask
            best_mask ^= bit
            nodes += 1
            if nodes > max_nodes:
                raise SearchBound
            cells[best] = bit.bit_length()
            for k in units:
                used[k] |= bit
            done = place()
            for k in units:
                used[k] ^= bit
            if done:
                return True
        cells[best] = 0
        return False

    try:
        place()
    except SearchBound:
        raise SearchBound(found) from None
    return found


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


def tta_transforms(metadata: Any) -> SudokuTransforms:
    """The hook of hrm_reason.tasks for datasets whose builder is "sudoku": the box shape from the builder record."""
    box = BOXES.get(str((metadata.builder or {}).get("box")))
    n = math.isqrt(metadata.seq_len)
    if box is None or box[0] * box[1] != n or n * n != metadata.seq_len or metadata.vocab_size != vocab_size(n):
        raise UserError(
            f"dataset.json: a Sudoku dataset needs builder.box (one of {', '.join(BOXES)}) matching seq_len "
            f"{metadata.seq_len} and vocab_size n + 2, got box {(metadata.builder or {}).get('box')!r} and vocab_size "
            f"{metadata.vocab_size}"
        )
    return SudokuTransforms(*box)
