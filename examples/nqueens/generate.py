"""Write 8-queens completion puzzles as JSON Lines (DIR/train.jsonl, DIR/test.jsonl): k queens of a solution in, the
one full solution they complete to out.

The 92 solutions fall into 12 families under the 8 turns and mirrors of the board; whole families are held out for
test, so no test board completes to a solution that training shows, even turned or mirrored.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

N = 8


def solutions() -> np.ndarray:
    """All 92 solutions as (92, 8): the queen's column in each row, in lexicographic order (a solution's index is
    stable, so it can name the group)."""
    found: list[list[int]] = []

    def place(cols: list[int]) -> None:
        if len(cols) == N:
            found.append(cols)
            return
        r = len(cols)
        for c in range(N):
            if all(c != cc and abs(c - cc) != r - rr for rr, cc in enumerate(cols)):
                place([*cols, c])

    place([])
    return np.array(found, dtype=np.int64)


def families(sols: np.ndarray) -> list[list[int]]:
    """The solutions grouped by the 8 symmetries of the board (12 families: 11 of 8, one of 4)."""
    index = {tuple(s): i for i, s in enumerate(sols.tolist())}
    boards = np.zeros((len(sols), N, N), dtype=np.int8)
    boards[np.arange(len(sols))[:, None], np.arange(N), sols] = 1
    family = list(range(len(sols)))
    for turns in range(4):
        for image in (np.rot90(boards, turns, axes=(1, 2)), np.rot90(boards, turns, axes=(1, 2))[:, :, ::-1]):
            for i, cols in enumerate(image.argmax(2).tolist()):
                family[i] = min(family[i], index[tuple(cols)])
    return [[i for i in range(len(sols)) if family[i] == f] for f in sorted(set(family))]


def unique_table(sols: np.ndarray) -> np.ndarray:
    """unique[s, rows] (rows a bitmask): the queens of solution s on those rows belong to no other solution, so the
    board completes in exactly one way."""
    table = np.zeros((len(sols), 1 << N), dtype=bool)
    for m in range(1 << N):
        sub = sols[:, [r for r in range(N) if m >> r & 1]]
        table[:, m] = (sub[:, None, :] == sub[None, :, :]).all(2).sum(1) == 1
    return table


def board(cols: np.ndarray, rows: int) -> list[list[str]]:
    """The 8x8 grid of '.' and 'Q' with the solution's queens on the rows of bitmask `rows`."""
    return [["Q" if rows >> r & 1 and c == cols[r] else "." for c in range(N)] for r in range(N)]


def pool_size(unique: np.ndarray, ids: list[int], ks: tuple[int, int]) -> int:
    """How many distinct puzzles with k in `ks` queens complete uniquely to one of the solutions `ids`."""
    return int(unique[ids][:, [m for m in range(1 << N) if ks[0] <= bin(m).count("1") <= ks[1]]].sum())


def draw(
    count: int, ids: list[int], sols: np.ndarray, unique: np.ndarray, ks: tuple[int, int], rng: np.random.Generator
) -> tuple[list[dict], int, int]:
    """`count` distinct puzzles (at most pool_size) from the solutions `ids`: a solution, k in `ks` and k of its rows
    drawn uniformly; a draw whose queens also fit another solution, or that repeats a puzzle, is rejected. Returns the
    examples and the two rejection counts."""
    chosen: dict[tuple[int, int], None] = {}  # insertion-ordered: the order drawn
    ambiguous = repeats = 0
    while len(chosen) < count:
        s = rng.choice(ids, 4096)
        k = rng.integers(ks[0], ks[1] + 1, 4096)
        rank = rng.random((4096, N)).argsort(1).argsort(1)  # a random order of the rows; the first k are kept
        masks = ((rank < k[:, None]) << np.arange(N)).sum(1)
        for si, m in zip(s.tolist(), masks.tolist()):
            if not unique[si, m]:
                ambiguous += 1
            elif (si, m) in chosen:
                repeats += 1
            else:
                chosen[si, m] = None
                if len(chosen) == count:
                    break
    examples = [{"input": board(sols[s], m), "output": board(sols[s], (1 << N) - 1), "group": s} for s, m in chosen]
    return examples, ambiguous, repeats


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
    parser.add_argument("--min-queens", type=int, default=4, help="fewest queens given (4)")
    parser.add_argument("--max-queens", type=int, default=6, help="most queens given (6)")
    parser.add_argument("--test-families", type=int, default=2, help="symmetry families held out for test, of 12 (2)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    args = parser.parse_args()
    if args.train < 0 or args.test < 0 or not 0 <= args.min_queens <= args.max_queens <= N - 1:
        parser.error("--train and --test must be >= 0 and 0 <= --min-queens <= --max-queens <= 7")
    if not 1 <= args.test_families <= 11:
        parser.error("--test-families must be within 1..11")

    rng = np.random.default_rng(args.seed)
    sols = solutions()
    fams = families(sols)
    held = rng.permutation(len(fams))[: args.test_families]
    test_ids = sorted(i for f in held for i in fams[f])
    train_ids = sorted(set(range(len(sols))) - set(test_ids))
    unique = unique_table(sols)
    ks = (args.min_queens, args.max_queens)
    for flag, count, ids in (("--train", args.train, train_ids), ("--test", args.test, test_ids)):
        if count > pool_size(unique, ids, ks):
            parser.error(
                f"{flag} {count}: only {pool_size(unique, ids, ks)} distinct puzzles complete to its solutions"
            )
    test, amb_test, rep_test = draw(args.test, test_ids, sols, unique, ks, rng)
    train, amb_train, rep_train = draw(args.train, train_ids, sols, unique, ks, rng)
    for split, part in (("train", train), ("test", test)):
        for i, row in enumerate(part):
            row["id"] = f"{split}-{i}"
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out / "train.jsonl", train)
    write_jsonl(args.out / "test.jsonl", test)
    queens = [sum(row.count("Q") for row in ex["input"]) for ex in train + test]
    spread = ", ".join(f"{k}: {queens.count(k)}" for k in range(ks[0], ks[1] + 1))
    print(
        f"nqueens 8x8: train {len(train)} of {pool_size(unique, train_ids, ks)} possible ({len(train_ids)} solutions), "
        f"test {len(test)} of {pool_size(unique, test_ids, ks)} ({len(test_ids)} solutions in {args.test_families} "
        f"held-out families); queens given {spread}; draws rejected: "
        f"{amb_train + amb_test} not unique, {rep_train + rep_test} repeats -> {args.out}"
    )


if __name__ == "__main__":
    main()
