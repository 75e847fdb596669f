"""What the tasks know about a puzzle before a model sees it (`puzzle_problem`: Sudoku's repeated givens, cells
without a candidate and the bounded exact search; the maze's S, G and path), and the size of each task's test-time
group, counted here by enumerating the group's action rather than by the formula."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hrm_reason.tasks import arc, maze, sudoku

# Sudoku-Extreme-style 9x9 boards that need a real search (Arto Inkala's "AI Escargot" among them).
HARD_9 = (
    "800000000003600000070090200050007000000045700000100030001000068008500010090000400",
    "000000010400000000020000000000050407008000300001090000300400200050100000000806000",
)


def values(text: str) -> np.ndarray:
    return np.array([0 if ch in ".0" else int(ch) for ch in text], dtype=np.int64)


# ------------------------------------------------------------------------------------------------------- Sudoku


@pytest.mark.parametrize(
    ("board", "fragment"),
    [
        ("11.." + "." * 12, "the given 1 appears twice in row 1 (columns 1 and 2)"),
        ("...3" + "...." + "...." + "...3", "the given 3 appears twice in column 4 (rows 1 and 4)"),
        ("2..." + ".2.." + "." * 8, "the given 2 appears twice in box 1 (row 1, column 1 and row 2, column 2)"),
        ("...." * 3 + "..44", "the given 4 appears twice in row 4 (columns 3 and 4)"),
    ],
)
def test_a_repeated_given_names_its_unit_its_digit_and_its_cells(board: str, fragment: str) -> None:
    problem, note = sudoku.puzzle_problem(values(board), 2, 2)
    assert problem == fragment and note is None


def test_boxes_are_numbered_left_to_right_then_down_on_a_6x6_board() -> None:
    board = np.zeros(36, dtype=np.int64)
    board[[2 * 6 + 3, 3 * 6 + 5]] = 6  # rows 3 and 4, columns 4 and 6: the 2x3 box of band 2, stack 2 = box 4
    problem, _ = sudoku.puzzle_problem(board, 2, 3)
    assert problem == "the given 6 appears twice in box 4 (row 3, column 4 and row 4, column 6)"


def test_a_blank_without_a_candidate_is_named() -> None:
    problem, note = sudoku.puzzle_problem(values("12.." + "3..." + "...." + ".4.."), 2, 2)
    assert (
        problem == "the blank at row 2, column 2 has no candidate: its row, column and box already hold 1, 2, 3 and 4"
    )
    assert note is None


def test_a_board_with_candidates_everywhere_but_no_solution_is_found_by_the_search() -> None:
    # the two blanks of box 3 (row 4, columns 1 and 2) each have 4 as their only candidate: no board fills both
    board = values("..1....." + "21.." + "..3.")
    assert sudoku.repeated_given(board, 2, 2) is None
    assert sudoku.search_solution(board, 2, 2) is None
    problem, _ = sudoku.puzzle_problem(board, 2, 2)
    assert problem == "every blank has a candidate, but an exhaustive search fills no board"
    # without the 3 it has a solution: the search is exact, not a heuristic
    solvable = values("..1....." + "21.." + "....")
    assert sudoku.puzzle_problem(solvable, 2, 2) == (None, sudoku.MULTIPLE_SOLUTIONS)  # 4 givens: several boards
    assert sudoku.is_valid_solution(sudoku.search_solution(solvable, 2, 2), 2, 2)


def count_in_cell_order(board: np.ndarray, r: int, c: int) -> int:
    """Every solution counted by the plainest search (cells in order, each digit its row, column and box allow): the
    reference the bounded search's count is checked against."""
    n, grid = r * c, board.reshape(r * c, r * c).copy()

    def allowed(i: int, j: int, d: int) -> bool:
        top, left = i - i % r, j - j % c
        return d not in grid[i] and d not in grid[:, j] and d not in grid[top : top + r, left : left + c]

    def count(k: int) -> int:
        if k == n * n:
            return 1
        i, j = divmod(k, n)
        if grid[i, j]:
            return count(k + 1)
        total = 0
        for d in range(1, n + 1):
            if allowed(i, j, d):
                grid[i, j] = d
                total += count(k + 1)
                grid[i, j] = 0
        return total

    return count(0)


@pytest.mark.parametrize(
    "board",
    [
        "1234" + "3412" + "2143" + "4321",  # solved: one
        "1..." + "..3." + ".4.." + "...2",  # unique with 4 givens
        "12.." + "34.." + ".1.." + "...2",  # two
        "12.." + "34.." + "...." + "....",  # several
        "1..." + "...." + "...." + "...4",  # several
        "." * 16,  # 288
        "12.." + "....." + "21." + "....",  # none: the search fills no board
    ],
)
def test_the_search_counts_to_two_as_the_plainest_search_does(board: str) -> None:
    given = values(board)
    truth = count_in_cell_order(given, 2, 2)
    found = sudoku.search_solutions(given, 2, 2, limit=2)
    assert len(found) == min(truth, 2)
    assert len({f.tobytes() for f in found}) == len(found)
    assert all(sudoku.is_valid_solution(f, 2, 2) and (f[given > 0] == given[given > 0]).all() for f in found)
    problem, note = sudoku.puzzle_problem(given, 2, 2)
    assert (problem is not None, note == sudoku.MULTIPLE_SOLUTIONS) == (truth == 0, truth > 1)


@pytest.mark.parametrize("board", HARD_9)
def test_the_search_solves_hard_9x9_boards_within_its_bound(board: str) -> None:
    given = values(board)
    solution = sudoku.search_solution(given, 3, 3)
    assert solution is not None and sudoku.is_valid_solution(solution, 3, 3)
    assert (solution[given > 0] == given[given > 0]).all()
    assert sudoku.puzzle_problem(given, 3, 3) == (None, None)


def test_a_search_past_its_bound_is_a_note_not_a_verdict() -> None:
    with pytest.raises(sudoku.SearchBound):
        sudoku.search_solution(values(HARD_9[0]), 3, 3, max_nodes=50)
    problem, note = sudoku.puzzle_problem(values(HARD_9[0]), 3, 3, max_nodes=50)
    assert problem is None and note == "not checked for a solution: the exact search stopped after 50 placements"
    # An empty board: the first solution comes at once, the search for a second one runs out of placements.
    problem, note = sudoku.puzzle_problem(np.zeros(81, dtype=np.int64), 3, 3, max_nodes=81)
    assert problem is None and note == "not checked for a second solution: the exact search stopped after 81 placements"


def _position_permutations(r: int, c: int) -> set[bytes]:
    """Every distinct permutation of the n*n cells the group's transpose, band, row, stack and column shuffles make."""
    n = r * c
    cells = np.arange(n * n).reshape(n, n)
    rows = [
        [band * r + within[k][i] for k, band in enumerate(bands) for i in range(r)]
        for bands in itertools.permutations(range(c))
        for within in itertools.product(itertools.permutations(range(r)), repeat=c)
    ]
    cols = sudoku.geometry(r, c).col_perms
    seen = set()
    for grid in [cells, cells.T] if r == c else [cells]:
        for row in rows:
            for col in cols:
                seen.add(grid[np.ix_(row, col)].tobytes())
    return seen


@pytest.mark.parametrize("box", [(2, 2), (2, 3)])
def test_the_sudoku_group_size_counts_distinct_elements(box: tuple[int, int]) -> None:
    """Digit relabellings act on values and the rest on places, so the group is their product: n! times the distinct
    place permutations, enumerated (a transpose equal to some shuffle would make the formula overcount)."""
    r, c = box
    places = _position_permutations(r, c)
    assert sudoku.SudokuTransforms(r, c).group_size == math.factorial(r * c) * len(places)
    assert {(2, 2): 3072, (2, 3): 2_488_320}[box] == sudoku.SudokuTransforms(r, c).group_size


def test_the_9x9_group_is_the_known_count_and_the_names_say_which_board() -> None:
    assert sudoku.SudokuTransforms(3, 3).group_size == 1_218_998_108_160  # 9! x 6^8 x 2, Sudoku's classic count
    assert sudoku.SudokuTransforms(2, 2).group_name == "the 4x4 Sudoku's symmetry group"


def test_the_maze_and_arc_groups() -> None:
    tf = maze.MazeTransforms(5)
    assert tf.group_size == 8 and tf.group_name == "the maze's symmetry group"
    drawn = np.stack(tf.draw(np.random.default_rng(0), 3, 8))  # copies 1..7 of each row: the 7 non-identity maps
    assert all(sorted(drawn[:, row].tolist()) == list(range(1, 8)) for row in range(3))
    assert arc.ArcTransforms(10).group_size == 8 * math.factorial(9) == 2_903_040


# ------------------------------------------------------------------------------------------------------------ maze


def maze_grid(text: str) -> np.ndarray:
    rows = text.split("\n")
    side = len(rows)
    flat = "".join(row.ljust(side) for row in rows)
    return maze.TOKEN_OF[np.frombuffer(flat.encode(), dtype=np.uint8)].reshape(side, side)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("#####\n#S  #\n# # #\n#  G#\n#####", None),
        ("#####\n#S  #\n# # #\n#S G#\n#####", "2 cells marked S (start), where a maze has exactly one"),
        ("#####\n#S  #\n# # #\n#   #\n#####", "0 cells marked G (goal), where a maze has exactly one"),
        ("#####\n#S# #\n### #\n#  G#\n#####", "G cannot be reached from S through open cells"),
    ],
)
def test_maze_problems(text: str, problem: str | None) -> None:
    assert maze.puzzle_problem(maze_grid(text)) == problem
