"""The declared task's layer (hrm_reason/tasks/declared.py), without the CLI: the token layouts, the declared symmetries
against numpy's reference, the task built from a Declaration (tokens, file values, parsing) and loading the user's
rules."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hrm_reason.errors import UserError
from hrm_reason.tasks.declared import (
    EOS,
    FIRST_SYMBOL,
    PAD,
    Declaration,
    DeclaredTask,
    DeclaredTransforms,
    TokenLayout,
    load_check,
)
from tests.helpers import DIHEDRAL_REFERENCE

N_SYMBOLS = 6  # symbol tokens 2..7 in the random grids
VOCAB = N_SYMBOLS + FIRST_SYMBOL


def random_grid(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return rng.integers(FIRST_SYMBOL, VOCAB, (h, w))


# ------------------------------------------------------------------------------------------- the token layout


def test_fixed_layout_round_trips_and_is_row_major() -> None:
    rng = np.random.default_rng(0)
    lay = TokenLayout("fixed", (5, 5))
    assert lay.seq_len == 25
    for _ in range(50):
        g = random_grid(rng, 5, 5)
        tokens = lay.encode(g)
        assert tokens.shape == (25,)
        np.testing.assert_array_equal(tokens, g.reshape(-1))
        np.testing.assert_array_equal(lay.decode(tokens), g)


def test_strip_layout_round_trips_with_exactly_one_eos_after_the_symbols() -> None:
    rng = np.random.default_rng(1)
    lay = TokenLayout("strip", (1, 9))
    for n in range(9):  # 0..8 symbols
        for _ in range(5):
            g = random_grid(rng, 1, n)
            tokens = lay.encode(g)
            assert tokens.shape == (9,)
            np.testing.assert_array_equal(tokens[:n], g[0])
            assert tokens[n] == EOS
            assert (tokens == EOS).sum() == 1
            assert (tokens[n + 1 :] == PAD).all()
            back = lay.decode(tokens)
            assert back.shape == (1, n)
            np.testing.assert_array_equal(back, g)


@pytest.mark.parametrize("shape", [(7, 7), (1, 1), (1, 7), (7, 1), (3, 5), (6, 2)])
def test_canvas_layout_round_trips_edge_shapes(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(2)
    lay = TokenLayout("canvas", (7, 7))
    g = random_grid(rng, *shape)
    back = lay.decode(lay.encode(g))
    assert back.shape == shape
    np.testing.assert_array_equal(back, g)


def test_canvas_layout_round_trips_random_shapes() -> None:
    rng = np.random.default_rng(3)
    lay = TokenLayout("canvas", (7, 7))
    for _ in range(200):
        h, w = rng.integers(1, 8, 2)
        g = random_grid(rng, int(h), int(w))
        tokens = lay.encode(g)
        assert tokens.shape == (49,)
        back = lay.decode(tokens)
        assert back.shape == (h, w)
        np.testing.assert_array_equal(back, g)


def test_canvas_places_the_eos_row_and_column_by_hand() -> None:
    """A 2x3 grid on a 4x4 canvas: the grid at the top-left, an EOS row under it (its 3 columns), an EOS column right
    of it (its 2 rows), the corner and the rest PAD."""
    lay = TokenLayout("canvas", (4, 4))
    g = np.array([[2, 3, 4], [5, 6, 7]])
    expected = np.array(
        [
            [2, 3, 4, EOS],
            [5, 6, 7, EOS],
            [EOS, EOS, EOS, PAD],
            [PAD, PAD, PAD, PAD],
        ]
    )
    np.testing.assert_array_equal(lay.encode(g), expected.reshape(-1))
    # the full canvas has no marker; a 1x1 grid has one EOS below and one to its right
    np.testing.assert_array_equal(lay.encode(np.full((4, 4), 3)), np.full(16, 3))
    one = lay.encode(np.array([[5]])).reshape(4, 4)
    assert one[0, 0] == 5 and one[0, 1] == EOS and one[1, 0] == EOS
    assert (one == EOS).sum() == 2 and (one == PAD).sum() == 13


def test_fits_names_why_a_grid_has_no_place() -> None:
    assert TokenLayout("fixed", (3, 3)).fits(np.zeros((3, 3))) is None
    assert "2x3" in TokenLayout("fixed", (3, 3)).fits(np.zeros((2, 3)))
    assert TokenLayout("strip", (1, 9)).fits(np.zeros((1, 8))) is None  # room for the end marker
    assert "9 symbols, more than the task's 8" in TokenLayout("strip", (1, 9)).fits(np.zeros((1, 9)))
    assert "2 rows" in TokenLayout("strip", (1, 9)).fits(np.zeros((2, 3)))
    assert TokenLayout("canvas", (7, 7)).fits(np.zeros((7, 7))) is None
    assert "8x2" in TokenLayout("canvas", (7, 7)).fits(np.zeros((8, 2)))


# ------------------------------------------------------------------------------------------- the symmetries


def encode_rows(lay: TokenLayout, grids: list[np.ndarray]) -> np.ndarray:
    return np.stack([lay.encode(g) for g in grids]).astype(np.int64)


def random_grids(lay: TokenLayout, rng: np.random.Generator, n: int) -> list[np.ndarray]:
    rows, cols = lay.shape
    if lay.layout == "fixed":
        return [random_grid(rng, rows, cols) for _ in range(n)]
    if lay.layout == "strip":
        return [random_grid(rng, 1, int(rng.integers(0, cols))) for _ in range(n)]
    return [random_grid(rng, int(rng.integers(1, rows + 1)), int(rng.integers(1, cols + 1))) for _ in range(n)]


CASES = {
    "fixed-dihedral": (TokenLayout("fixed", (5, 5)), True),
    "fixed-nonsquare": (TokenLayout("fixed", (3, 4)), False),
    "strip": (TokenLayout("strip", (1, 9)), False),
    "canvas-dihedral": (TokenLayout("canvas", (7, 7)), True),
}


@pytest.mark.parametrize(
    "case, permuted",
    [(case, p) for case in CASES for p in ((), (2, 3, 5, 7)) if p or CASES[case][1]],  # not the trivial group
    ids=lambda v: v if isinstance(v, str) else ("perm" if v else "no-perm"),
)
def test_invert_undoes_apply(case: str, permuted: tuple[int, ...]) -> None:
    lay, dihedral = CASES[case]
    rng = np.random.default_rng(4)
    tr = DeclaredTransforms(lay, VOCAB, dihedral, permuted)
    x = encode_rows(lay, random_grids(lay, rng, 64))
    for _ in range(3):
        element = tr.random(rng, x.shape[0])
        moved = tr.apply(x, element)
        assert moved.shape == x.shape
        np.testing.assert_array_equal(tr.invert(moved, element), x)
    for element in tr.draw(rng, x.shape[0], 8):
        np.testing.assert_array_equal(tr.invert(tr.apply(x, element), element), x)


def test_fixed_square_dihedral_matches_numpy_reference() -> None:
    rng = np.random.default_rng(5)
    lay = TokenLayout("fixed", (5, 5))
    tr = DeclaredTransforms(lay, VOCAB, True, ())
    grids = random_grids(lay, rng, 8)
    x = encode_rows(lay, grids)
    identity = np.tile(np.arange(VOCAB), (8, 1))
    for t in range(8):
        moved = tr.apply(x, (np.full(8, t), identity))
        for g, m in zip(grids, moved):
            np.testing.assert_array_equal(m.reshape(5, 5), DIHEDRAL_REFERENCE[t](g), err_msg=f"transform {t}")
    # one row per transform in one call
    moved = tr.apply(x, (np.arange(8), identity))
    for t, (g, m) in enumerate(zip(grids, moved)):
        np.testing.assert_array_equal(m.reshape(5, 5), DIHEDRAL_REFERENCE[t](g), err_msg=f"transform {t}")


def test_permutation_maps_only_the_declared_symbols() -> None:
    rng = np.random.default_rng(6)
    lay = TokenLayout("canvas", (6, 6))
    permuted = (3, 4, 6)
    tr = DeclaredTransforms(lay, VOCAB, False, permuted)
    x = encode_rows(lay, random_grids(lay, rng, 100))
    element = tr.random(rng, x.shape[0])
    ts, maps = element
    assert (ts == 0).all()
    moved = tr.apply(x, element)
    others = ~np.isin(x, permuted)  # PAD, EOS and the symbols not declared
    np.testing.assert_array_equal(moved[others], x[others])
    assert np.isin(moved[~others], permuted).all()
    for row, (xi, mi) in enumerate(zip(x, moved)):
        np.testing.assert_array_equal(mi, maps[row][xi])  # one bijection per row
        assert sorted(maps[row][list(permuted)].tolist()) == sorted(permuted)
    assert any(not np.array_equal(m[list(permuted)], permuted) for m in maps)  # some draw is not the identity


@pytest.mark.parametrize(
    "dihedral, permuted, size",
    [(True, (2, 3, 4, 5), 8 * 24), (False, (2, 3, 4, 5), 24), (True, (), 8), (False, (), 1), (True, (3,), 8)],
)
def test_group_size(dihedral: bool, permuted: tuple[int, ...], size: int) -> None:
    tr = DeclaredTransforms(TokenLayout("fixed", (3, 3)), VOCAB, dihedral, permuted)
    assert tr.group_size == size
    assert size == (8 if dihedral else 1) * math.factorial(len(permuted))


def test_draw_with_dihedral_alone_gives_every_non_identity_transform_once_per_row() -> None:
    rng = np.random.default_rng(7)
    tr = DeclaredTransforms(TokenLayout("fixed", (4, 4)), VOCAB, True, ())
    elements = tr.draw(rng, 50, 8)
    assert len(elements) == 7
    ts = np.stack([t for t, _ in elements], axis=1)  # [rows, 7]
    for row in ts:
        assert sorted(row.tolist()) == list(range(1, 8))
    for _, maps in elements:
        np.testing.assert_array_equal(maps, np.tile(np.arange(VOCAB), (50, 1)))
    assert len({tuple(r) for r in ts.tolist()}) > 1  # each row its own order


def test_canvas_transform_keeps_the_grid_top_left_with_its_eos_border() -> None:
    rng = np.random.default_rng(8)
    lay = TokenLayout("canvas", (6, 6))
    tr = DeclaredTransforms(lay, VOCAB, True, ())
    g = random_grid(rng, 2, 5)
    x = encode_rows(lay, [g] * 8)
    moved = tr.apply(x, (np.arange(8), np.tile(np.arange(VOCAB), (8, 1))))
    for t in range(8):
        want = DIHEDRAL_REFERENCE[t](g)
        np.testing.assert_array_equal(lay.decode(moved[t]), want, err_msg=f"transform {t}")
        np.testing.assert_array_equal(moved[t], lay.encode(want))  # at the top-left, EOS row and column
        canvas = moved[t].reshape(6, 6)
        h, w = want.shape
        assert (canvas[h, :w] == EOS).all() and (canvas[:h, w] == EOS).all() and canvas[h, w] == PAD


# -------------------------------------------------------------------------------------------- the declared task


def declaration(**kw: Any) -> Declaration:
    fields: dict[str, Any] = dict(
        input_form="grid",
        output_form="grid",
        cells="int",
        separator=None,
        grid=None,
        symbols=["0", "1", "2"],
        blank=None,
        layout="fixed",
        shape=(3, 3),
        dihedral=False,
        permute=[],
        check=None,
    )
    return Declaration(**(fields | kw))


def test_tokens_of_encodes_and_refuses_naming_where() -> None:
    task = DeclaredTask(declaration())
    tokens = task.tokens_of([["0", "1", "2"], ["2", "1", "0"], ["0", "0", "0"]], "here")
    np.testing.assert_array_equal(tokens, [2, 3, 4, 4, 3, 2, 2, 2, 2])
    assert tokens.dtype == np.int32
    with pytest.raises(UserError, match=r"^ex\.jsonl line 4: field 'input': symbol '7' is not one of the task's"):
        task.tokens_of([["0", "1", "2"], ["2", "7", "0"], ["0", "0", "0"]], "ex.jsonl line 4: field 'input'")
    with pytest.raises(UserError, match=r"^puzzles\.txt line 2: a 2x3 grid"):
        task.tokens_of([["0", "1", "2"], ["2", "1", "0"]], "puzzles.txt line 2")
    strip = DeclaredTask(declaration(input_form="text", output_form="text", layout="strip", shape=(1, 4)))
    np.testing.assert_array_equal(strip.tokens_of([["1", "2"]], "x"), [3, 4, EOS, PAD])
    with pytest.raises(UserError, match=r"^seq line 9: 4 symbols, more than the task's 3"):
        strip.tokens_of([["1", "2", "0", "1"]], "seq line 9")
    canvas = DeclaredTask(declaration(layout="canvas", shape=(3, 3)))
    with pytest.raises(UserError, match=r"^g line 1: a 4x1 grid, larger than the task's 3x3 canvas"):
        canvas.tokens_of([["0"], ["1"], ["2"], ["0"]], "g line 1")


def test_file_value_gives_ints_for_int_grids_and_strings_for_text() -> None:
    grid_task = DeclaredTask(declaration(symbols=["0", "1", "2", "10"]))
    rows = [["0", "10", "2"], ["1", "1", "1"], ["2", "0", "10"]]
    value = grid_task.file_value(grid_task.tokens_of(rows, "x"), "output")
    assert value == [[0, 10, 2], [1, 1, 1], [2, 0, 10]]
    assert all(type(c) is int for row in value for c in row)
    chars = DeclaredTask(declaration(cells="str", symbols=["#", ".", "S"]))
    assert chars.file_value(chars.tokens_of([["#", ".", "S"]] * 3, "x"), "input") == [["#", ".", "S"]] * 3
    text = DeclaredTask(
        declaration(
            input_form="text", output_form="text", cells="str", layout="strip", shape=(1, 6), symbols=list("abc")
        )
    )
    assert text.file_value(text.tokens_of([list("cab")], "x"), "input") == "cab"
    spaced = DeclaredTask(
        declaration(
            input_form="text", output_form="text", separator=" ", layout="strip", shape=(1, 4), symbols=["1", "10"]
        )
    )
    assert spaced.file_value(spaced.tokens_of([["10", "1", "10"]], "x"), "output") == "10 1 10"
    flat = DeclaredTask(
        declaration(input_form="flat", output_form="flat", cells="str", grid=(2, 2), shape=(2, 2), symbols=list(".12"))
    )
    assert flat.file_value(flat.tokens_of([[".", "1"], ["2", "."]], "x"), "input") == ".12."
    # mixed: int grids in, a string out
    mixed = DeclaredTask(declaration(output_form="text", layout="canvas", shape=(3, 3)))
    tokens = mixed.tokens_of([["1", "2", "0"]], "x")
    assert mixed.file_value(tokens, "input") == [[1, 2, 0]]
    assert mixed.file_value(tokens, "output") == "120"


def test_parse_jsonl_with_expected_outputs() -> None:
    task = DeclaredTask(declaration())
    text = (
        '{"input": [[0,1,2],[2,1,0],[0,0,0]], "output": [[1,1,1],[2,2,2],[0,0,0]]}\n'
        "\n"
        '{"input": [[1,1,1],[1,1,1],[1,1,1]]}\n'
    )
    puzzles = task.parse(text, "mine.jsonl")
    assert [p.name for p in puzzles] == ["mine.jsonl line 1", "mine.jsonl line 3"]
    np.testing.assert_array_equal(puzzles[0].tokens, [2, 3, 4, 4, 3, 2, 2, 2, 2])
    assert puzzles[0].expected is not None
    np.testing.assert_array_equal(puzzles[0].expected, [3, 3, 3, 4, 4, 4, 2, 2, 2])
    assert puzzles[1].expected is None
    np.testing.assert_array_equal(puzzles[1].tokens, np.full(9, 3))
    with pytest.raises(UserError, match=r"mine\.jsonl line 1: field 'input'"):
        task.parse('{"input": [[0,1],[2,1]]}\n', "mine.jsonl")
    with pytest.raises(UserError, match=r"mine\.jsonl line 2: field 'output'.*'5'"):
        task.parse('{"input": [[0,1,2],[2,1,0],[0,0,0]]}\n{"input": [[0,1,2],[2,1,0],[0,0,0]], "output": '
                   '[[0,1,2],[2,5,0],[0,0,0]]}\n', "mine.jsonl")  # fmt: skip


def test_parse_plain_text_sequences() -> None:
    task = DeclaredTask(
        declaration(
            input_form="text", output_form="text", cells="str", layout="strip", shape=(1, 6), symbols=list("abc")
        )
    )
    puzzles = task.parse("abc\n\ncab\r\nb\n", "seqs.txt")
    assert [p.name for p in puzzles] == ["seqs.txt line 1", "seqs.txt line 3", "seqs.txt line 4"]
    assert [task.file_value(p.tokens, "input") for p in puzzles] == ["abc", "cab", "b"]
    assert all(p.expected is None for p in puzzles)
    with pytest.raises(UserError, match=r"seqs\.txt line 2"):
        task.parse("abc\nabd\n", "seqs.txt")


def test_parse_grid_blocks_and_one_line_fixed_grids() -> None:
    task = DeclaredTask(declaration())
    puzzles = task.parse("012\n210\n000\n\n\n111\n222\n000\n\n012210000\n", "grids.txt")
    assert [p.name for p in puzzles] == ["grids.txt line 1", "grids.txt line 6", "grids.txt line 10"]
    values = [task.file_value(p.tokens, "input") for p in puzzles]
    assert values == [
        [[0, 1, 2], [2, 1, 0], [0, 0, 0]],
        [[1, 1, 1], [2, 2, 2], [0, 0, 0]],
        [[0, 1, 2], [2, 1, 0], [0, 0, 0]],
    ]
    wide = DeclaredTask(declaration(symbols=["0", "1", "10"], shape=(2, 2)))
    puzzles = wide.parse("10 0\n1 10\n\n0 1 10 0\n", "wide.txt")
    assert [wide.file_value(p.tokens, "input") for p in puzzles] == [[[10, 0], [1, 10]], [[0, 1], [10, 0]]]
    with pytest.raises(UserError, match=r"grids\.txt line 5: .*2x2"):
        task.parse("012\n210\n000\n\n01\n21\n", "grids.txt")
    with pytest.raises(UserError, match=r"grids\.txt line 1: .*ragged"):
        task.parse("012\n21\n000\n", "grids.txt")
    spaced = task.parse("0 1 2\n2 1\t0\n 0 0 0 \n", "spaced.txt")  # blanks that are no symbol space cells out
    assert [task.file_value(p.tokens, "input") for p in spaced] == [[[0, 1, 2], [2, 1, 0], [0, 0, 0]]]


def test_parse_plain_text_flat_grids() -> None:
    task = DeclaredTask(
        declaration(input_form="flat", output_form="flat", cells="str", grid=(2, 2), shape=(2, 2), symbols=list(".12"))
    )
    puzzles = task.parse("1..2\n\n.21.\n", "quiz.txt")
    assert [p.name for p in puzzles] == ["quiz.txt line 1", "quiz.txt line 3"]
    assert [task.file_value(p.tokens, "input") for p in puzzles] == ["1..2", ".21."]
    with pytest.raises(UserError, match=r"quiz\.txt line 2: field 'input': 3 symbols, where --grid 2x2 holds 4"):
        task.parse("1..2\n1.2\n", "quiz.txt")
    rows = task.parse("1.\n.2\n\n. 1\n2 .\n\n1..2\n.21.\n", "rows.txt")  # a row a line, or a grid a line
    assert [(p.name, task.file_value(p.tokens, "input")) for p in rows] == [
        ("rows.txt line 1", "1..2"),
        ("rows.txt line 4", ".12."),
        ("rows.txt line 7", "1..2"),
        ("rows.txt line 8", ".21."),
    ]
    separated = DeclaredTask(
        declaration(input_form="flat", output_form="flat", cells="str", grid=(2, 2), shape=(2, 2), symbols=list(".12"),
                    separator=",")
    )  # fmt: skip
    assert [separated.file_value(p.tokens, "input") for p in separated.parse("1,.\n.,2\n", "s.txt")] == ["1,.,.,2"]


def test_parse_plain_text_sequences_of_bracket_symbols() -> None:
    """A sequence task over brackets (balanced parentheses, a classic): its puzzles typed a line each are plain text,
    although a line starts with '[' as JSON does."""
    task = DeclaredTask(
        declaration(
            input_form="text", output_form="text", cells="str", layout="strip", shape=(1, 7), symbols=list("[]")
        )
    )
    puzzles = task.parse("[[]]\n[]\n", "brackets.txt")
    assert [task.file_value(p.tokens, "input") for p in puzzles] == ["[[]]", "[]"]
    puzzles = task.parse("[[]]\n", "one.txt")
    assert [task.file_value(p.tokens, "input") for p in puzzles] == ["[[]]"]


# --------------------------------------------------------------------------------------------- the user's rules


def test_load_check_loads_the_function(tmp_path: Path) -> None:
    path = tmp_path / "rules.py"
    path.write_text("def valid(given, answer):\n    return answer == given\n")
    check = load_check(path, "valid")
    assert check([[1]], [[1]]) and not check([[1]], [[2]])


@pytest.mark.parametrize(
    "source, fragments",
    [
        ("raise RuntimeError('boom')\n", ("does not load", "RuntimeError: boom")),
        ("import sys\nsys.exit(3)\n", ("does not load", "SystemExit")),
        ("def valid(:\n", ("does not load", "SyntaxError")),
        ("def other(given, answer):\n    return True\nvalid = 3\n", ("defines no function 'valid'", "other")),
    ],
    ids=["raises", "exits", "syntax", "no-function"],
)
def test_load_check_refuses_a_bad_file_naming_the_flag_and_path(
    tmp_path: Path, source: str, fragments: tuple[str, ...]
) -> None:
    path = tmp_path / "rules.py"
    path.write_text(source)
    with pytest.raises(UserError) as info:
        load_check(path, "valid", "--check")
    message = str(info.value)
    assert message.startswith(f"--check {path}:valid: ")
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_load_check_refuses_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.py"
    with pytest.raises(UserError, match="no such file") as info:
        load_check(path, "valid", "dataset check")
    assert str(info.value).startswith(f"dataset check {path}:valid")


# ------------------------------------------------------------------------------------------ hrm solve's reading


def test_answers_of_a_task_with_wide_symbols_are_spaced_whatever_they_hold() -> None:
    """One printed format for every answer of a task, the one solve reads back: a task with a symbol of two characters
    spaces its rows even where an answer holds none of them."""
    task = DeclaredTask(declaration(symbols=["0", "1", "10"], shape=(2, 2)))
    narrow = task.tokens_of([["0", "1"], ["1", "0"]], "x")
    wide = task.tokens_of([["10", "1"], ["1", "0"]], "x")
    for tokens in (narrow, wide):
        text = task.answer(task.parse("0 1\n1 0\n", "p.txt")[0], tokens).text
        assert all(" " in row for row in text.split("\n")), text
        back = task.parse(text + "\n", "again.txt")
        np.testing.assert_array_equal(back[0].tokens, tokens)
    single = DeclaredTask(declaration())  # one character each: no spaces
    assert single.answer(single.parse("012\n210\n000\n", "p")[0], np.full(9, 3)).text == "111\n111\n111"


def test_an_answer_the_rules_raise_on_is_invalid_and_said(tmp_path: Path) -> None:
    class Fussy(DeclaredTask):
        def valid(self, given: Any, answer: Any) -> bool:
            if answer[0][0] == 2:
                raise ValueError("no twos up front")
            return True

    task = Fussy(declaration())
    puzzle = task.parse("012\n210\n000\n", "p.txt")[0]
    raised = task.answer(puzzle, np.full(9, 4))
    assert raised.valid is False and raised.check.startswith(
        "invalid: the task's rules raised on it (ValueError: no tw"
    )
    accepted = task.answer(puzzle, np.full(9, 3))
    assert accepted.valid is True and accepted.check.startswith("valid")

    class Quitter(DeclaredTask):
        def valid(self, given: Any, answer: Any) -> bool:
            raise SystemExit(0)  # sys.exit() in the user's function: their code failing, not the command ending

    quit_reading = Quitter(declaration()).answer(puzzle, np.full(9, 3))
    assert quit_reading.valid is False and "(SystemExit: 0)" in quit_reading.check


def test_answer_tokens_are_the_outputs_symbols_and_the_markers_where_the_layout_has_them() -> None:
    fixed = DeclaredTask(declaration(symbols=["a", "b", "c"], cells="str"))
    np.testing.assert_array_equal(fixed.answer_tokens(), [FIRST_SYMBOL, FIRST_SYMBOL + 1, FIRST_SYMBOL + 2])
    outputs = DeclaredTask(declaration(symbols=["a", "b", "c"], cells="str", answer_symbols=["a", "c"]))
    np.testing.assert_array_equal(outputs.answer_tokens(), [FIRST_SYMBOL, FIRST_SYMBOL + 2])  # 'b' only in inputs
    canvas = DeclaredTask(declaration(layout="canvas", answer_symbols=["1"]))
    np.testing.assert_array_equal(canvas.answer_tokens(), [PAD, EOS, FIRST_SYMBOL + 1])  # the end marker closes it
    strip = DeclaredTask(declaration(input_form="text", output_form="text", layout="strip", shape=(1, 4)))
    np.testing.assert_array_equal(strip.answer_tokens(), [PAD, EOS, 2, 3, 4])


def test_a_fixed_answer_with_a_marker_or_a_string_over_rows_is_not_well_formed() -> None:
    fixed = DeclaredTask(declaration())
    assert fixed.well_formed(np.full(9, FIRST_SYMBOL)) and not fixed.well_formed(np.r_[np.full(8, 2), PAD])
    counts = DeclaredTask(declaration(output_form="text", layout="canvas", shape=(3, 3)))
    one_row = counts.tokens_of([["1", "2"]], "x")
    two_rows = counts.tokens_of([["1", "2"], ["0", "0"]], "x")
    assert counts.well_formed(one_row) and not counts.well_formed(two_rows)
    reading = counts.answer(counts.parse('{"input": [[1, 2, 0]]}', "p")[0], two_rows)
    assert reading.check.startswith("invalid: the answer is not one string (it spans 2 rows)"), reading.check


def test_plain_text_keeps_the_blanks_of_a_task_whose_symbols_hold_the_space() -> None:
    grids = DeclaredTask(declaration(cells="str", symbols=[" ", "#", "x"], shape=(2, 3)))
    puzzles = grids.parse(" x \n#  \n\n   \n x#\n", "p.txt")  # a row of blanks is a row, an empty line ends a grid
    assert [grids.file_value(p.tokens, "input") for p in puzzles] == [
        [[" ", "x", " "], ["#", " ", " "]],
        [[" ", " ", " "], [" ", "x", "#"]],
    ]
    seqs = DeclaredTask(
        declaration(
            input_form="text", output_form="text", cells="str", layout="strip", shape=(1, 5), symbols=[" ", "a"]
        )
    )
    assert [seqs.file_value(p.tokens, "input") for p in seqs.parse("a a\n  \n\na\n", "s.txt")] == ["a a", "  ", "a"]
    plain = DeclaredTask(declaration(cells="str", symbols=["#", "x"], shape=(1, 2)))
    assert len(plain.parse(" #x \n   \n", "p.txt")) == 1  # without a space symbol, blanks are layout


def test_solve_inputs_carry_their_ids_and_refuse_unknown_fields() -> None:
    task = DeclaredTask(declaration())
    text = '{"input": [[0,1,2],[2,1,0],[0,0,0]], "id": "q7"}\n{"input": [[1,1,1],[1,1,1],[1,1,1]], "id": 3}\n'
    assert [p.ident for p in task.parse(text, "mine.jsonl")] == ["q7", 3]  # as the file writes them
    with pytest.raises(UserError, match=r"^mine\.jsonl line 1: unknown field 'ouput'"):
        task.parse('{"input": [[0,1,2],[2,1,0],[0,0,0]], "ouput": [[0,1,2],[2,1,0],[0,0,0]]}\n', "mine.jsonl")
    strings = DeclaredTask(
        declaration(
            input_form="text", output_form="text", cells="str", layout="strip", shape=(1, 7), symbols=list("ab")
        )
    )
    for t in (task, strings):  # a JSON array of examples is not read as a grid, nor as a line of symbols
        with pytest.raises(UserError, match=r"^mine\.json: a JSON array of examples; write them as JSON Lines"):
            t.parse(' [\n {"input": "ab"}]\n', "mine.json")


def test_parse_file_reads_the_build_columns_of_a_csv_and_an_npz(tmp_path: Path) -> None:
    task = DeclaredTask(
        declaration(input_form="flat", output_form="flat", cells="str", grid=(2, 2), shape=(2, 2), symbols=list(".12")),
        columns=("quizzes", "solutions"),
    )
    csv_file = tmp_path / "test.csv"
    csv_file.write_text("quizzes,solutions\n1..2,1212\n.21.,1211\n")
    puzzles = task.parse_file(csv_file)
    assert puzzles is not None and [task.file_value(p.tokens, "input") for p in puzzles] == ["1..2", ".21."]
    assert puzzles[0].expected is not None and task.file_value(puzzles[0].expected, "output") == "1212"
    inputs_only = tmp_path / "inputs.csv"
    inputs_only.write_text("quizzes\n1..2\n")  # answers without the solutions column
    assert [p.expected for p in task.parse_file(inputs_only) or []] == [None]
    grid_task = DeclaredTask(declaration(shape=(2, 2)))
    npz = tmp_path / "test.npz"
    np.savez(npz, inputs=np.array([[[0, 1], [2, 0]]]))
    assert [grid_task.file_value(p.tokens, "input") for p in grid_task.parse_file(npz) or []] == [[[0, 1], [2, 0]]]
    assert task.parse_file(tmp_path / "test.jsonl") is None  # text formats: parse
