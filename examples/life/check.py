"""Is `output` the centre of board `input` after 3 generations of Conway's Game of Life? `input` is an HxW list of
rows of 0 (dead) and 1 (alive), with every cell outside it dead for good; `output` is the (H-4)x(W-4) centre. Pure
Python; the answer is unique, so valid means exactly right, and a malformed grid is simply not valid."""

STEPS = 3
MARGIN = 2


def _board(g: object) -> bool:
    """A non-empty rectangular list of rows of the integers 0 and 1."""
    return (
        isinstance(g, list)
        and len(g) > 0
        and all(isinstance(row, list) and len(row) == len(g[0]) > 0 for row in g)
        and all(type(x) is int and x in (0, 1) for row in g for x in row)
    )


def _step(b: list[list[int]]) -> list[list[int]]:
    """One generation on the bounded board: born on 3 live neighbours, kept on 2 or 3."""
    h, w = len(b), len(b[0])
    nxt = [[0] * w for _ in range(h)]
    for r in range(h):
        for c in range(w):
            n = sum(
                b[rr][cc] for rr in range(max(r - 1, 0), min(r + 2, h)) for cc in range(max(c - 1, 0), min(c + 2, w))
            )
            n -= b[r][c]
            nxt[r][c] = int(n == 3 or (b[r][c] == 1 and n == 2))
    return nxt


def valid(input: object, output: object) -> bool:
    """True when `output` equals the centre of `input` after STEPS generations."""
    if not (_board(input) and _board(output)) or len(input) <= 2 * MARGIN or len(input[0]) <= 2 * MARGIN:
        return False
    board = input
    for _ in range(STEPS):
        board = _step(board)
    return output == [row[MARGIN:-MARGIN] for row in board[MARGIN:-MARGIN]]
