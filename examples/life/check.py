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
    padded = [[0] * (w + 2)] + [[0, *row, 0] for row in b] + [[0] * (w + 2)]
    across = [[row[c] + row[c + 1] + row[c + 2] for c in range(w)] for row in padded]  # 3 cells wide, per row
    nxt = []
    for r in range(h):
        n = [across[r][c] + across[r + 1][c] + across[r + 2][c] - b[r][c] for c in range(w)]
        nxt.append([int(n[c] == 3 or (n[c] == 2 and b[r][c] == 1)) for c in range(w)])
    return nxt


def valid(input: object, output: object) -> bool:
    """True when `output` equals the centre of `input` after STEPS generations."""
    if not (_board(input) and _board(output)) or len(input) <= 2 * MARGIN or len(input[0]) <= 2 * MARGIN:
        return False
    board = input
    for _ in range(STEPS):
        board = _step(board)
    return output == [row[MARGIN:-MARGIN] for row in board[MARGIN:-MARGIN]]
