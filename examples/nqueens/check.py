"""Is `output` a valid completion of the 8-queens board `input`? Both are 8x8 lists of rows of '.' (empty) and 'Q'
(a queen). Pure Python; a malformed grid is simply not valid."""

N = 8


def _queens(g: object) -> list[tuple[int, int]] | None:
    """The (row, col) of every queen of an 8x8 grid of '.'/'Q', or None when `g` is not such a grid."""
    if not (isinstance(g, list) and len(g) == N and all(isinstance(row, list) and len(row) == N for row in g)):
        return None
    if any(not isinstance(x, str) or x not in (".", "Q") for row in g for x in row):
        return None
    return [(r, c) for r in range(N) for c in range(N) if g[r][c] == "Q"]


def valid(input: object, output: object) -> bool:
    """True when `output` holds exactly 8 queens, no two on one row, column or diagonal, and keeps every queen of
    `input`."""
    given, answer = _queens(input), _queens(output)
    if given is None or answer is None or len(answer) != N or not set(given) <= set(answer):
        return False
    return all(
        len({f(r, c) for r, c in answer}) == N
        for f in (lambda r, c: r, lambda r, c: c, lambda r, c: r - c, lambda r, c: r + c)
    )
