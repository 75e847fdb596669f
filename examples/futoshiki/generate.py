"""Write 5x5 Futoshiki puzzles with a unique solution as JSON Lines (DIR/train.jsonl, DIR/test.jsonl).

Uniqueness is decided against every 5x5 Latin square at once (there are 161,280, enumerated with numpy), which is
exact and fast; a small backtracking solver then re-counts each puzzle's solutions as an independent check and tells
whether propagation alone solves it or the solver had to branch.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass, field
from itertools import permutations
from pathlib import Path
from typing import NamedTuple

import numpy as np

SIZE = 5
# The 40 neighbour pairs (cell a, cell b) a sign can sit between: 20 left/right, then 20 upper/lower.
PAIRS = [(r * SIZE + c, r * SIZE + c + 1) for r in range(SIZE) for c in range(SIZE - 1)] + [
    (r * SIZE + c, (r + 1) * SIZE + c) for r in range(SIZE - 1) for c in range(SIZE)
]
FULL = (1 << SIZE) - 1


def latin_squares() -> np.ndarray:
    """All 5x5 Latin squares, (161280, 25) int8 of 1..5, built row by row from the rows that clash with none so far."""
    perms = np.array(list(permutations(range(1, SIZE + 1))), dtype=np.int8)
    fits = ~(perms[:, None, :] == perms[None, :, :]).any(2)  # two rows may stack: no column repeats a digit
    partial = np.arange(len(perms))[:, None]
    for _ in range(SIZE - 1):
        ok = fits[partial].all(1)  # (squares so far, next row)
        rows, nxt = np.nonzero(ok)
        partial = np.concatenate([partial[rows], nxt[:, None]], axis=1)
    return perms[partial].reshape(-1, SIZE * SIZE)


def signatures(squares: np.ndarray) -> np.ndarray:
    """Bit p set when the first cell of pair p is the smaller: two squares differ at bit p when a sign there tells them apart."""
    sig = np.zeros(len(squares), dtype=np.uint64)
    for p, (a, b) in enumerate(PAIRS):
        sig |= (squares[:, a] < squares[:, b]).astype(np.uint64) << np.uint64(p)
    return sig


def canonical_ids(squares: np.ndarray) -> np.ndarray:
    """Per square, the least index among its 16 images (8 turns/mirrors, digits kept or d -> 6-d, which reverses every
    sign): those images are the same puzzle in disguise, so one id per family keeps a family on one side of the split."""
    weights = SIZE ** np.arange(SIZE * SIZE, dtype=np.int64)
    code = (squares.astype(np.int64) - 1) @ weights
    order = np.argsort(code)
    grids = squares.reshape(-1, SIZE, SIZE)
    best = np.arange(len(squares))
    for turns in range(4):
        for mirror in (False, True):
            img = np.rot90(grids, turns, axes=(1, 2))
            img = img[:, :, ::-1] if mirror else img
            for flip in (False, True):
                img2 = (SIZE + 1 - img) if flip else img
                c = (img2.reshape(len(squares), -1).astype(np.int64) - 1) @ weights
                best = np.minimum(best, order[np.searchsorted(code, c, sorter=order)])
    return best


def unique(e: np.ndarray, mask: int) -> bool:
    """True when only the solution (e == 0) keeps every sign in `mask`; `e` holds each candidate's differing signs."""
    return int(np.count_nonzero((e & np.uint64(mask)) == 0)) == 1


NEAR = 3


def near(e: np.ndarray, mask: int) -> np.ndarray:
    """The candidates ruled out by at most NEAR signs of `mask`: after fewer than NEAR drops only these can still
    spoil uniqueness, and there are few of them. (A speed-up only: on numpy < 2, without bitwise_count, all of them.)"""
    if not hasattr(np, "bitwise_count"):
        return e
    return e[np.bitwise_count(e & np.uint64(mask)) <= NEAR]


class Squares(NamedTuple):
    """Every 5x5 Latin square, indexed for the puzzle maker: rows (N, 25) of digits, the same as columns (25, N) for
    fast per-cell tests, sign bits (signatures), family (canonical_ids), and by_cell[c][d - 1], the squares with
    digit d at cell c."""

    rows: np.ndarray
    cols: np.ndarray
    sig: np.ndarray
    family: np.ndarray
    by_cell: list[list[np.ndarray]]

    @classmethod
    def build(cls) -> Squares:
        rows = latin_squares()
        cols = np.ascontiguousarray(rows.T)
        by_cell = [[np.flatnonzero(cols[c] == d) for d in range(1, SIZE + 1)] for c in range(SIZE * SIZE)]
        return cls(rows, cols, signatures(rows), canonical_ids(rows), by_cell)


def make_puzzle(sq: Squares, s: int, max_givens: int, rng: np.random.Generator) -> tuple[list[int], int]:
    """A minimal puzzle for solution `s`: (given cells, sign mask). Signs are added in a random order while they cut
    the candidate squares (plus a given where two remain after all 40 signs); then each sign and each given is
    dropped, in a random order, if the solution stays unique without it."""
    sol = sq.cols[:, s]

    def narrow(idx: np.ndarray | None, cell: int) -> np.ndarray:
        """The candidates of `idx` (None: every square) with the solution's digit at `cell`."""
        return sq.by_cell[cell][sol[cell] - 1] if idx is None else idx[sq.cols[cell, idx] == sol[cell]]

    givens = [int(c) for c in rng.permutation(SIZE * SIZE)[: rng.integers(0, max_givens + 1)]]
    idx = None  # the candidate squares (None: all)
    for c in givens:
        idx = narrow(idx, c)
    e = (sq.sig if idx is None else sq.sig[idx]) ^ sq.sig[s]  # per candidate, the signs that would rule it out
    signs = [int(p) for p in rng.permutation(len(PAIRS))]
    mask = sum(1 << p for p in signs[:8])  # the first few nearly always cut: one pass, not eight (spares go below)
    alive = e[(e & np.uint64(mask)) == 0]
    for p in signs[8:]:
        if len(alive) == 1:
            break
        kept = alive[(alive & np.uint64(1 << p)) == 0]
        if len(kept) < len(alive):
            mask, alive = mask | (1 << p), kept
    while len(alive) > 1:  # squares no sign tells apart from the solution: give a digit where they differ
        left = np.flatnonzero((e & np.uint64(mask)) == 0)
        rest = sq.cols[:, left if idx is None else idx[left]]
        givens.append(int(rng.choice(np.flatnonzero((rest != sol[:, None]).any(1)))))
        idx = narrow(idx, givens[-1])
        e = sq.sig[idx] ^ sq.sig[s]
        alive = e[(e & np.uint64(mask)) == 0]
    pool, drops = e, NEAR
    for p in rng.permutation([q for q in range(len(PAIRS)) if mask >> q & 1]):
        if drops == NEAR:  # after NEAR drops a far candidate may have come near: look at all again
            pool, drops = near(e, mask), 0
        if unique(pool, mask & ~(1 << int(p))):
            mask, drops = mask & ~(1 << int(p)), drops + 1
    if givens:
        rest = sq.cols[:, np.flatnonzero(((sq.sig ^ sq.sig[s]) & np.uint64(mask)) == 0)]  # what the signs alone allow
        for cell in rng.permutation(givens):
            fewer = [c for c in givens if c != cell]
            if (rest[fewer] == sol[fewer, None]).all(0).sum() == 1:
                givens = fewer
    return sorted(givens), mask


UNITS = [[r * SIZE + c for c in range(SIZE)] for r in range(SIZE)] + [
    [r * SIZE + c for r in range(SIZE)] for c in range(SIZE)
]
PEERS = [sorted({j for u in UNITS if i in u for j in u} - {i}) for i in range(SIZE * SIZE)]


def propagate(d: list[int], less: list[tuple[int, int]]) -> bool:
    """Narrow the domains `d` (bit v-1 set: digit v possible) in place until nothing changes: a fixed digit leaves its
    row and column, a digit with one place left in a row or column goes there, and each a < b bounds the other side.
    False on a contradiction."""
    while True:
        before = d.copy()
        for i in range(SIZE * SIZE):
            v = d[i]
            if v & (v - 1) == 0:
                for j in PEERS[i]:
                    d[j] &= ~v
        for unit in UNITS:
            once = twice = 0
            for i in unit:
                twice |= once & d[i]
                once |= d[i]
            if once != FULL:
                return False
            for i in unit:
                if d[i] & once & ~twice:
                    d[i] &= once & ~twice
        for a, b in less:
            if d[a] and d[b]:
                d[b] &= ~((d[a] & -d[a]) * 2 - 1)  # b above a's smallest
                d[a] &= (1 << (d[b].bit_length() - 1)) - 1 if d[b] else 0  # a below b's largest
        if not all(d):
            return False
        if d == before:
            return True


def count_solutions(d: list[int], less: list[tuple[int, int]], limit: int = 2) -> int:
    """Solutions of the domains `d` under the signs `less`, counted up to `limit`, by propagation and backtracking on
    the open cell with the fewest digits left."""
    d = d.copy()
    if not propagate(d, less):
        return 0
    open_cells = [i for i in range(SIZE * SIZE) if d[i] & (d[i] - 1)]
    if not open_cells:
        return 1
    i = min(open_cells, key=lambda j: bin(d[j]).count("1"))
    found = 0
    for bit in (1, 2, 4, 8, 16):
        if d[i] & bit and found < limit:
            d2 = d.copy()
            d2[i] = bit
            found += count_solutions(d2, less, limit - found)
    return found


def to_grid(sol: np.ndarray, givens: list[int] | None, mask: int) -> list[list[str]]:
    """The 9x9 grid: digits at even (row, col), '<' '>' between left/right cells, '^' 'v' between upper/lower cells,
    ' ' elsewhere; `givens` None writes every digit (the answer)."""
    grid = [[" "] * (2 * SIZE - 1) for _ in range(2 * SIZE - 1)]
    for i in range(SIZE * SIZE):
        r, c = divmod(i, SIZE)
        grid[2 * r][2 * c] = str(int(sol[i])) if givens is None or i in givens else "."
    for p, (a, b) in enumerate(PAIRS):
        if mask >> p & 1:
            r, c = divmod(a, SIZE)
            less = sol[a] < sol[b]
            if b == a + 1:  # left/right
                grid[2 * r][2 * c + 1] = "<" if less else ">"
            else:
                grid[2 * r + 1][2 * c] = "^" if less else "v"
    return grid


@dataclass
class Stats:
    """What the summary line reports, over both splits."""

    givens: list[int] = field(default_factory=list)
    signs: list[int] = field(default_factory=list)
    branched: list[bool] = field(default_factory=list)
    held_out: int = 0  # train draws whose solution's family is a test one
    repeats: int = 0  # draws that repeated an input of the same split


def draw(
    count: int, sq: Squares, banned: set[int], max_givens: int, rng: np.random.Generator, stats: Stats
) -> tuple[list[dict], set[int]]:
    """`count` puzzles with distinct inputs whose solutions' families are not in `banned`, and the families used;
    `group` names the family by its least member."""
    rows: list[dict] = []
    seen: set[str] = set()
    families: set[int] = set()
    while len(rows) < count:
        s = int(rng.integers(len(sq.rows)))
        if int(sq.family[s]) in banned:
            stats.held_out += 1
            continue
        givens, mask = make_puzzle(sq, s, max_givens, rng)
        sol = sq.rows[s]
        grid = to_grid(sol, givens, mask)
        key = "".join(map("".join, grid))
        if key in seen:
            stats.repeats += 1
            continue
        seen.add(key)
        dom = [1 << int(sol[i] - 1) if i in givens else FULL for i in range(SIZE * SIZE)]
        less = [(a, b) if sol[a] < sol[b] else (b, a) for p, (a, b) in enumerate(PAIRS) if mask >> p & 1]
        propagate(dom, less)
        branched = any(v & (v - 1) for v in dom)  # propagation alone left a cell open
        if count_solutions(dom, less) != 1:
            raise AssertionError(f"the solver and the enumeration disagree on puzzle {key!r}")
        stats.givens.append(len(givens))
        stats.signs.append(len(less))
        stats.branched.append(branched)
        families.add(int(sq.family[s]))
        group = "".join(str(int(v)) for v in sq.rows[sq.family[s]])
        rows.append({"input": grid, "output": to_grid(sol, None, mask), "group": group})
    return rows, families


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Write one JSON object a line to a temporary file beside `path`, then rename: a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.writelines(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=10000, help="training puzzles (10000)")
    parser.add_argument("--test", type=int, default=1000, help="test puzzles (1000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--max-givens", type=int, default=1, help="digits drawn per puzzle before minimising (1)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    args = parser.parse_args()
    if args.train < 0 or args.test < 0 or not 0 <= args.max_givens <= SIZE * SIZE:
        parser.error("--train and --test must be >= 0, --max-givens within 0..25")

    rng = np.random.default_rng(args.seed)
    sq = Squares.build()
    stats = Stats()
    test, held = draw(args.test, sq, set(), args.max_givens, rng, stats)  # test first: its families stay out of train
    train, _ = draw(args.train, sq, held, args.max_givens, rng, stats)
    for split, part in (("train", train), ("test", test)):
        for i, row in enumerate(part):
            row["id"] = f"{split}-{i}"
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out / "train.jsonl", train)
    write_jsonl(args.out / "test.jsonl", test)
    n = max(1, len(stats.givens))
    print(
        f"futoshiki 5x5: train {len(train)}, test {len(test)} (test solutions from {len(held)} families no train "
        f"puzzle uses); mean givens {sum(stats.givens) / n:.2f}, mean signs {sum(stats.signs) / n:.2f}, "
        f"solver branched on {sum(stats.branched) / n:.1%}; draws rejected: {stats.held_out} held-out family, "
        f"{stats.repeats} repeated input -> {args.out}"
    )


if __name__ == "__main__":
    main()
