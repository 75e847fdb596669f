"""Write Game of Life examples as JSON Lines (DIR/train.jsonl, DIR/test.jsonl): a random board in, the centre of the
board three generations later out (a smaller grid).

The board is bounded: every cell outside it is dead and stays dead. Boards are drawn in batches and stepped with
numpy; an all-dead answer is kept for at most --max-dead of the examples, so that "all dead" is no shortcut.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

STEPS = 3
MARGIN = 2  # rows and columns dropped on each side of the answer: 10x10 in, 6x6 out


def step(boards: np.ndarray) -> np.ndarray:
    """One generation of (B, H, W) boards of 0/1, with dead cells all around: born on 3 neighbours, kept on 2 or 3."""
    padded = np.pad(boards, ((0, 0), (1, 1), (1, 1)))
    h, w = boards.shape[1:]
    n = sum(padded[:, 1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w] for dr in (-1, 0, 1) for dc in (-1, 0, 1)) - boards
    return ((n == 3) | ((boards == 1) & (n == 2))).astype(np.int8)


def answer(boards: np.ndarray) -> np.ndarray:
    """The centre of each board after STEPS generations."""
    for _ in range(STEPS):
        boards = step(boards)
    return boards[:, MARGIN:-MARGIN, MARGIN:-MARGIN]


def draw(
    count: int, size: int, density: float, max_dead: float, seen: set[bytes], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """`count` boards not in `seen` (each added to it) and their answers; a board whose answer is all dead is kept
    only while such boards stay within `max_dead` of `count`."""
    boards, answers, dead = [], [], 0
    while len(boards) < count:
        batch = (rng.random((1024, size, size)) < density).astype(np.int8)
        for board, out in zip(batch, answer(batch)):
            key = board.tobytes()
            is_dead = not out.any()
            if key in seen or (is_dead and dead + 1 > max_dead * count):
                continue
            seen.add(key)
            dead += is_dead
            boards.append(board)
            answers.append(out)
            if len(boards) == count:
                break
    return np.array(boards).reshape(-1, size, size), np.array(answers).reshape(-1, size - 2 * MARGIN, size - 2 * MARGIN)


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
    parser.add_argument("--train", type=int, default=10000, help="training examples (10000)")
    parser.add_argument("--test", type=int, default=1000, help="test examples (1000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--size", type=int, default=10, help="board side; the answer's is 4 less (10)")
    parser.add_argument("--density", type=float, default=0.35, help="chance a cell starts alive (0.35)")
    parser.add_argument("--max-dead", type=float, default=0.10, help="largest share of all-dead answers (0.10)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    args = parser.parse_args()
    if args.train < 0 or args.test < 0 or args.size < 2 * MARGIN + 1:
        parser.error("--train and --test must be >= 0, --size >= 5")
    if not 0 < args.density < 1 or not 0 <= args.max_dead <= 1:
        parser.error("--density must be within (0, 1), --max-dead within [0, 1]")

    rng = np.random.default_rng(args.seed)
    seen: set[bytes] = set()  # shared: no board is drawn twice, in one split or across the two
    splits = {"train": draw(args.train, args.size, args.density, args.max_dead, seen, rng)}
    splits["test"] = draw(args.test, args.size, args.density, args.max_dead, seen, rng)
    args.out.mkdir(parents=True, exist_ok=True)
    offset = 0
    for split, (boards, answers) in splits.items():
        rows = [
            {"input": b.tolist(), "output": a.tolist(), "group": offset + i, "id": f"{split}-{i}"}
            for i, (b, a) in enumerate(zip(boards, answers))
        ]
        write_jsonl(args.out / f"{split}.jsonl", rows)
        offset += len(rows)
    live = np.concatenate([a.sum((1, 2)) for _, a in splits.values()])
    n = max(1, len(live))
    print(
        f"life {args.size}x{args.size} -> {args.size - 2 * MARGIN}x{args.size - 2 * MARGIN} after {STEPS} steps: "
        f"train {len(splits['train'][0])}, test {len(splits['test'][0])}; mean live output cells "
        f"{live.sum() / n:.2f}, all-dead outputs {(live == 0).sum() / n:.1%} -> {args.out}"
    )


if __name__ == "__main__":
    main()
