"""Is `output` a valid answer to a 5x5 Futoshiki puzzle `input`? Both are 9x9 grids of one-character strings: digits
'1'-'5' or '.' at even (row, col), '<' '>' or ' ' between left/right cells, '^' (upper < lower), 'v' or ' ' between
upper/lower cells, ' ' at odd (row, col). Pure Python; a malformed grid is simply not valid."""

SIZE = 5
SIDE = 2 * SIZE - 1
DIGITS = "12345"


def _grid(g: object) -> bool:
    """A SIDE x SIDE list of lists of one-character strings."""
    return (
        isinstance(g, list)
        and len(g) == SIDE
        and all(
            isinstance(row, list) and len(row) == SIDE and all(isinstance(x, str) and len(x) == 1 for x in row)
            for row in g
        )
    )


def valid(input: object, output: object) -> bool:
    """True when `output` is `input` with every blank filled by a digit, each row and column holds 1..5 once, and
    every sign holds."""
    if not (_grid(input) and _grid(output)):
        return False
    for r in range(SIDE):
        for c in range(SIDE):
            given, answer = input[r][c], output[r][c]
            if r % 2 == 0 and c % 2 == 0:  # a cell: a kept digit, or a digit where the puzzle has a blank
                if answer not in DIGITS or given not in DIGITS + "." or given not in (".", answer):
                    return False
            elif answer != given:  # signs and gaps are copied unchanged
                return False
    cells = [[int(output[2 * r][2 * c]) for c in range(SIZE)] for r in range(SIZE)]
    if any(sorted(row) != [1, 2, 3, 4, 5] for row in cells):
        return False
    if any(sorted(col) != [1, 2, 3, 4, 5] for col in zip(*cells)):
        return False
    for r in range(SIZE):
        for c in range(SIZE):
            right = output[2 * r][2 * c + 1] if c < SIZE - 1 else " "
            below = output[2 * r + 1][2 * c] if r < SIZE - 1 else " "
            if right not in "<> " or below not in "^v ":
                return False
            if (right == "<" and cells[r][c] > cells[r][c + 1]) or (right == ">" and cells[r][c] < cells[r][c + 1]):
                return False
            if (below == "^" and cells[r][c] > cells[r + 1][c]) or (below == "v" and cells[r][c] < cells[r + 1][c]):
                return False
    return all(output[r][c] == " " for r in range(1, SIDE, 2) for c in range(1, SIDE, 2))
