"""`hrm viz`: grid kinds and rule checks, PNGs rendered without a display, and the commands as a user runs them."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.image import imread

from hrm_reason.data.puzzle import PuzzleDatasetMetadata, load_split
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import evaluate
from hrm_reason.models.registry import build_model
from hrm_reason.tasks.arc import EOS as ARC_EOS
from hrm_reason.train.loop import train
from hrm_reason.viz.canvas import DPI, png_bytes
from hrm_reason.viz.curves import read_metrics, run_figures, smooth
from hrm_reason.viz.grids import (
    GridSpec,
    content_window,
    grid_spec,
    rule_violations,
    wrong_cells,
)
from hrm_reason.viz.predictions import SegmentTrace, predictions_figure, trace_segments
from hrm_reason.viz.puzzles import Example, get_example, puzzle_figure
from tests.helpers import assert_one_line_error, latin_4x4, on_cpu, tiny_config, write_original_layout


def metadata(seq_len: int, vocab_size: int, builder: dict | None = None) -> PuzzleDatasetMetadata:
    return PuzzleDatasetMetadata.of_shape(seq_len, vocab_size, builder=builder)


# ---------------------------------------------------------------------------------------------------------------------
# Synthetic grids in the builders' token layouts


def sudoku_9x9() -> tuple[np.ndarray, np.ndarray]:
    """A valid 9x9 solution (the shifted-row pattern) and a puzzle with every other cell blank; tokens digit+1."""
    solution = np.array([[(3 * (r % 3) + r // 3 + c) % 9 + 1 for c in range(9)] for r in range(9)])
    puzzle = np.where(np.indices((9, 9)).sum(0) % 2 == 0, solution, 0)
    return puzzle.reshape(-1) + 1, solution.reshape(-1) + 1


def maze(side: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Walls around and a wall column; the path runs along row 1 then down the last open column from S to G."""
    grid = np.full((side, side), 2)
    grid[0, :] = grid[-1, :] = grid[:, 0] = grid[:, -1] = 1
    grid[3:, 4] = 1
    route = [(1, c) for c in range(1, side - 2)] + [(r, side - 3) for r in range(2, side - 1)]
    label = grid.copy()
    for cell in route:
        label[cell] = 5
    grid[route[0]] = label[route[0]] = 3
    grid[route[-1]] = label[route[-1]] = 4
    return grid.reshape(-1), label.reshape(-1)


def arc() -> tuple[np.ndarray, np.ndarray]:
    """A 3x4 input and its 4x3 rotation in the 30x30 frame: colours as 2..11, EOS row below and column right, PAD 0."""
    colours = np.arange(12).reshape(3, 4) % 10
    frames = []
    for grid in (colours, np.rot90(colours)):
        frame = np.zeros((30, 30), dtype=np.int64)
        h, w = grid.shape
        frame[:h, :w] = grid + 2
        frame[h, :w] = ARC_EOS
        frame[:h, w] = ARC_EOS
        frames.append(frame.reshape(-1))
    return frames[0], frames[1]


CASES = {
    "sudoku4": (metadata(16, 6, {"name": "sudoku", "box": "2x2"}), lambda: _latin()),
    "sudoku9": (metadata(81, 11), sudoku_9x9),
    "maze": (metadata(144, 6, {"name": "maze"}), maze),
    "arc": (metadata(900, 12, {"name": "arc"}), arc),
}


def _latin() -> tuple[np.ndarray, np.ndarray]:
    solution = latin_4x4(np.random.default_rng(3))
    puzzle = np.where(np.eye(4, dtype=bool)[:, [0, 2, 1, 3]], solution, 0)
    return puzzle.reshape(-1) + 1, solution.reshape(-1) + 1


# ---------------------------------------------------------------------------------------------------------------------
# Grid kinds and cell checks


def test_grid_kind_from_builder_name_or_layout() -> None:
    assert grid_spec(metadata(16, 6, {"name": "sudoku", "box": "2x2"})).box == (2, 2)
    assert grid_spec(metadata(36, 8, {"name": "sudoku", "box": "3x2"})).box == (3, 2)
    assert grid_spec(metadata(36, 8)).box == (2, 3)  # no builder record: the usual 6x6 boxes
    assert grid_spec(metadata(81, 11)).kind == "sudoku"
    assert grid_spec(metadata(16, 6)).kind == "sudoku"  # the original layout: vocab 6, 4x4
    assert grid_spec(metadata(16, 6, {"name": "maze"})).kind == "maze"  # the builder name decides a 4x4 maze
    assert grid_spec(metadata(900, 6)).kind == "maze"
    assert grid_spec(metadata(900, 12)).kind == "arc"
    assert grid_spec(metadata(900, 12, {"name": "arc"})).side == 30
    assert grid_spec(metadata(49, 20)).kind == "tokens"
    with pytest.raises(UserError, match="seq_len 17"):
        grid_spec(metadata(17, 6), "x/dataset.json")
    with pytest.raises(UserError, match="builder 'sudoku'"):
        grid_spec(metadata(17, 6, {"name": "sudoku"}))


def test_sudoku_violations_are_repeats_changed_givens_and_holes() -> None:
    spec = grid_spec(CASES["sudoku9"][0])
    puzzle, solution = sudoku_9x9()
    assert not rule_violations(spec, solution, puzzle).any()
    grid = solution.reshape(9, 9).copy()
    # Cell (0,1) given? (0+1) is odd: blank, free to change. Write cell (0,0)'s digit there: a repeat in row 0 and
    # box 0.
    grid[0, 1] = grid[0, 0]
    bad = rule_violations(spec, grid.reshape(-1), puzzle).reshape(9, 9)
    # The same digit also sits in column 1 once (every digit is in every column): that cell is a repeat too.
    col_twin = int(np.flatnonzero(solution.reshape(9, 9)[:, 1] == grid[0, 0])[0])
    assert set(zip(*np.nonzero(bad))) == {(0, 0), (0, 1), (col_twin, 1)}
    changed_given, hole = solution.copy(), solution.copy()
    changed_given[0] = solution[0] % 9 + 2  # another digit in cell 0, a given
    hole[1] = 1  # blank token
    assert rule_violations(spec, changed_given, puzzle)[0]
    assert rule_violations(spec, hole, puzzle)[1] and rule_violations(spec, hole, puzzle).sum() == 1


def test_maze_violations_are_changed_walls_and_broken_paths() -> None:
    spec = grid_spec(CASES["maze"][0])
    inputs, label = maze()
    assert not rule_violations(spec, label, inputs).any()
    broken = label.reshape(12, 12).copy()
    broken[1, 5] = 2  # cut the path: its two neighbours become dead ends
    bad = rule_violations(spec, broken.reshape(-1), inputs).reshape(12, 12)
    assert set(zip(*np.nonzero(bad))) == {(1, 4), (1, 6)}
    walled = label.reshape(12, 12).copy()
    walled[5, 4] = 2  # a wall removed
    assert set(zip(*np.nonzero(rule_violations(spec, walled.reshape(-1), inputs).reshape(12, 12)))) == {(5, 4)}


def test_wrong_cells_skip_unsupervised_pad_and_arc_window() -> None:
    spec = grid_spec(CASES["arc"][0])
    inputs, label = arc()
    pred = label.copy()
    pred[label == 0] = 5  # anything in PAD cells is unsupervised
    assert not wrong_cells(spec, pred, label).any()
    pred[0] = 7
    assert wrong_cells(spec, pred, label).nonzero()[0].tolist() == [0]
    rows, cols = content_window(spec, inputs, label)
    assert (rows.start, rows.stop, cols.start, cols.stop) == (0, 5, 0, 5)  # 4x4 content plus the EOS row and column
    assert not rule_violations(spec, pred, inputs).any()


def test_smooth_is_a_trailing_mean() -> None:
    values = np.random.default_rng(0).random(50)
    expected = [values[max(0, i - 6) : i + 1].mean() for i in range(50)]
    np.testing.assert_allclose(smooth(values, 7), expected)


# ---------------------------------------------------------------------------------------------------------------------
# PNGs


def decode(png: bytes) -> np.ndarray:
    return imread(io.BytesIO(png), format="png")


def cell_pixels(fig, spec: GridSpec, tokens: tuple[np.ndarray, ...], cell: int, margin: float, ax=None) -> np.ndarray:
    """One cell of a panel (default: the last segment's) in the saved PNG, `margin` (in cells) trimmed from each
    side."""
    image = decode(png_bytes(fig))
    ax = ax or fig.axes[-3]  # strips: puzzle, segments 1..mmax, answer, q strip
    rows, cols = content_window(spec, *tokens)
    r, c = divmod(cell, spec.side)
    r, c = r - rows.start, c - cols.start
    (x0, y0), (x1, y1) = ax.transData.transform([(c + margin, r + margin), (c + 1 - margin, r + 1 - margin)])
    top, bottom = (
        int(np.rint(image.shape[0] - y)) for y in (max(y0, y1), min(y0, y1))
    )  # display y starts at the bottom
    return image[top:bottom, int(np.rint(min(x0, x1))) : int(np.rint(max(x0, x1)))]


@pytest.mark.parametrize("case", list(CASES))
def test_puzzle_png_has_the_figure_size(case: str) -> None:
    meta, make = CASES[case]
    spec = grid_spec(meta)
    inputs, labels = make()
    fig = puzzle_figure(spec, Example(0, "all", inputs, labels, 0, ""), f"{case} example 0")
    image = decode(png_bytes(fig))
    assert image.shape[:2] == (round(fig.get_figheight() * DPI), round(fig.get_figwidth() * DPI))
    assert image[..., :3].std() > 0.1  # something is drawn
    # The puzzle and the solution differ in the cells to find, so the two panels differ.
    left, right = (
        cell_pixels(fig, spec, (inputs, labels), int(np.flatnonzero(labels != inputs)[0]), 0.1, ax)
        for ax in fig.axes[:2]
    )
    assert left.shape == right.shape and np.abs(left - right).max() > 0.2


@pytest.mark.parametrize("case", list(CASES))
def test_wrong_cell_looks_different_from_a_right_one(case: str) -> None:
    """The same predicted token drawn once as wrong and once as right (the answer changed to match): the marks alone
    change that cell's pixels; and a right cell elsewhere is drawn the same whether or not another cell is wrong."""
    meta, make = CASES[case]
    spec = grid_spec(meta)
    inputs, labels = make()
    to_find = np.flatnonzero((labels != 0) & (labels != inputs))
    wrong_at, right_at = int(to_find[0]), int(to_find[-1])
    mmax = 3
    all_right = np.repeat(labels[None], mmax, 0)
    one_wrong = all_right.copy()
    one_wrong[-1, wrong_at] = labels[wrong_at] + 1 if labels[wrong_at] + 1 < meta.vocab_size else 2
    answer_matching = labels.copy()
    answer_matching[wrong_at] = one_wrong[-1, wrong_at]
    q = np.array([0.1, 0.5, 0.9])

    def strip(preds: np.ndarray, answer: np.ndarray):
        fig = predictions_figure(
            spec, SegmentTrace(Example(0, "all", inputs, answer, 0, ""), preds, q, np.full(mmax, 0.6)), "t"
        )
        image = decode(png_bytes(fig))
        assert image.shape[:2] == (round(fig.get_figheight() * DPI), round(fig.get_figwidth() * DPI))
        return fig

    wrong_fig, marked_right_fig, right_fig = (
        strip(one_wrong, labels),
        strip(one_wrong, answer_matching),
        strip(all_right, labels),
    )
    assert (
        wrong_cells(spec, one_wrong[-1], labels).sum() == 1
        and not wrong_cells(spec, one_wrong[-1], answer_matching).any()
    )
    grids = (inputs, labels)
    as_wrong = cell_pixels(wrong_fig, spec, grids, wrong_at, 0.02)
    as_right = cell_pixels(marked_right_fig, spec, grids, wrong_at, 0.02)
    assert as_wrong.shape == as_right.shape and as_wrong.size > 0

    # PNGs have an adaptive 256-colour palette, so one colour may come out some levels apart in two files (most on
    # antialiased edges): a visible difference is one of more than 0.3 (of 1) in a channel.
    def visible(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.abs(a - b)[..., :3].max(-1) > 0.3

    assert visible(as_wrong, as_right).mean() > 0.1  # the marks cover a good part of the cell
    assert not visible(
        cell_pixels(wrong_fig, spec, grids, right_at, 0.25), cell_pixels(right_fig, spec, grids, right_at, 0.25)
    ).any()


def test_act_halt_is_the_first_segment_with_q_halt_above_q_continue() -> None:
    def trace(q_halt: list[float], q_continue: list[float]) -> SegmentTrace:
        example = Example(0, "all", np.ones(16), np.ones(16), 0, "")
        return SegmentTrace(example, np.ones((len(q_halt), 16)), np.array(q_halt), np.array(q_continue))

    assert trace([-1.0, 2.0, 3.0], [0.0, 0.0, 5.0]).act_halt == 2
    assert trace([-1.0, 0.0, 3.0], [0.0, 0.0, 5.0]).act_halt == 3  # never above: the cap, as in hrm eval
    np.testing.assert_allclose(trace([0.0, 2.0], [0.0, 0.0]).q_halt, [0.5, 1 / (1 + np.exp(-2))])


def test_trace_segments_matches_evaluate(tmp_path: Path) -> None:
    """The strips show what `hrm eval` scores: per-segment token accuracy from the traces equals evaluate()'s."""
    data = write_original_layout(tmp_path / "data")
    config = tiny_config(data, tmp_path / "run")
    split = load_split(data, "test")
    model = build_model(config.arch, split.metadata, torch.device("cpu"), seed=1)
    with torch.no_grad():
        q_head = model.inner.q_head
        q_head.weight.copy_(torch.randn(q_head.weight.shape, generator=torch.Generator().manual_seed(0)))
        q_head.bias.zero_()
    spec = grid_spec(split.metadata)
    examples = [get_example(split, i, "test") for i in range(split.num_examples)]
    traces = trace_segments(model, examples, 4, torch.device("cpu"))
    token = [np.mean([1 - wrong_cells(spec, t.preds[m], t.example.labels).mean() for t in traces]) for m in range(4)]
    result = evaluate(model, split, 4, 8, torch.device("cpu"), progress=False)
    np.testing.assert_allclose(token, result.token_accuracy, atol=1e-6)
    assert len({round(v, 6) for v in token}) > 1  # the segments do change the prediction
    # The marked halting segment is the one ACT evaluation uses (a random Q head, so that they halt before the cap).
    assert (
        np.mean([t.act_halt for t in traces]) == pytest.approx(result.act_mean_segments)
        and result.act_mean_segments < 4
    )
    np.testing.assert_allclose(traces[0].q_halt, 1 / (1 + np.exp(-traces[0].q_halt_logits)))


# ---------------------------------------------------------------------------------------------------------------------
# metrics.jsonl and the run pictures


def write_metrics(run: Path, lines: list[str]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(lines))


def test_read_metrics_keeps_last_record_per_step_and_skips_a_partial_last_line(tmp_path: Path) -> None:
    records = [
        {"step": 0, "num_params": 10},
        {"step": 1, "train/lm_loss": 2.0},
        {"step": 2, "train/lm_loss": 1.5},
        {"step": 2, "eval/exact_accuracy": 0.1},
        {"step": 2, "train/lm_loss": 1.4},
    ]  # resumed at step 1
    write_metrics(tmp_path / "r", [json.dumps(r) + "\n" for r in records] + ['{"step": 3, "train/lm'])
    got = read_metrics(tmp_path / "r")
    assert [(r["step"], r.get("train/lm_loss")) for r in got] == [(0, None), (1, 2.0), (2, 1.4), (2, None)]
    write_metrics(
        tmp_path / "bad", ['{"step": 1, "train/lm_loss": 2.0}\n', "oops\n", '{"step": 2, "train/lm_loss": 1.0}\n']
    )
    with pytest.raises(UserError, match="line 2"):
        read_metrics(tmp_path / "bad")
    write_metrics(tmp_path / "empty", ['{"step": 0, "num_params": 10}\n'])
    with pytest.raises(UserError, match="no training or evaluation records"):
        read_metrics(tmp_path / "empty")


def test_run_pictures_from_metrics_and_eval_json(tmp_path: Path) -> None:
    run = tmp_path / "run"
    lines = [
        json.dumps(
            {"step": s, "train/lm_loss": 2 / s, "train/exact_accuracy": s / 100, "train/steps": 3.0, "train/lr": 1e-3}
        )
        + "\n"
        for s in range(1, 101)
    ]
    lines += [
        json.dumps({"step": s, "eval/exact_accuracy": s / 200, "eval/act_exact_accuracy": s / 250, "eval/steps": 2.5})
        + "\n"
        for s in (50, 100)
    ]
    write_metrics(run, lines)
    (run / "config.yaml").write_text("arch:\n  halt_max_steps: 4\n")
    assert [name for name, _ in run_figures(run, [])] == ["curves.png"]
    result = {
        "count": 10,
        "mmax": 6,
        "exact_accuracy": [0.1, 0.2, 0.3, 0.4, 0.4, 0.4],
        "token_accuracy": [0.5] * 6,
        "act_exact_accuracy": 0.35,
        "act_mean_segments": 3.5,
        "extra": {"optimal_path": [0.0, 0.1, 0.2, 0.3, 0.3, 0.3]},
    }
    (run / "eval16.json").write_text(json.dumps(result))
    (run / "other.json").write_text(json.dumps({"not": "an eval"}))  # ignored when searching the run
    figures = dict(run_figures(run, []))
    assert sorted(figures) == ["curves.png", "segments.png"]
    for fig in figures.values():
        assert decode(png_bytes(fig)).shape[:2] == (round(fig.get_figheight() * DPI), round(fig.get_figwidth() * DPI))
    with pytest.raises(UserError, match="other.json"):
        run_figures(run, [run / "other.json"])


# ---------------------------------------------------------------------------------------------------------------------
# The commands


@pytest.fixture
def hrm(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """The `hrm` entry point in this process (a subprocess per call would spend its time importing torch)."""
    import cli

    def run(*args: str) -> subprocess.CompletedProcess:
        monkeypatch.setattr(sys, "argv", ["hrm", *on_cpu(args)])  # on the CPU unless ARGS name a device
        with pytest.raises(SystemExit) as exit_info:
            cli.main()
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, exit_info.value.code, out.out, out.err)

    return run


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("viz")
    data = write_original_layout(root / "data")
    run = train(tiny_config(data, root / "run", "epochs=2", "eval_interval=2"), progress=False)
    return data, run


def test_viz_commands_write_pngs_and_a_self_contained_page(trained_run: tuple[Path, Path], tmp_path: Path, hrm) -> None:
    data, run = trained_run
    proc = hrm("viz", "puzzle", "--data", str(data), "--index", "2", "--count", "2", "--out", str(tmp_path / "p"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["puzzle_test_000002.png", "puzzle_test_000003.png"]
    proc = hrm("viz", "predictions", "--run", str(run), "--index", "5", "--mmax", "5", "--out", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr
    strip = imread(tmp_path / "s" / "predictions_test_000005.png")
    assert strip.shape[1] > 7 * 1.35 * DPI  # puzzle, 5 segments, answer side by side
    proc = hrm("eval", "--run", str(run), "--mmax", "5", "--quiet", "--json", str(run / "eval5.json"))
    assert proc.returncode == 0, proc.stderr
    proc = hrm("viz", "run", str(run))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (run / "viz").iterdir()) == ["curves.png", "segments.png"]
    proc = hrm("viz", "html", str(run), "--count", "1", "--mmax", "3", "--out", str(tmp_path / "page.html"))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "page.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3  # curves, segments, one strip
    assert "http://" not in page and "https://" not in page


def test_viz_errors_are_one_line(trained_run: tuple[Path, Path], tmp_path: Path, hrm) -> None:
    data, run = trained_run
    assert_one_line_error(
        hrm("viz", "puzzle", "--data", str(data), "--index", "16", "--out", str(tmp_path)), "--index 16", "16 examples"
    )
    assert_one_line_error(
        hrm("viz", "predictions", "--run", str(run), "--index", "-1", "--out", str(tmp_path)), "--index -1"
    )
    (tmp_path / "not-a-run").mkdir()
    assert_one_line_error(hrm("viz", "run", str(tmp_path / "not-a-run")), "metrics.jsonl", "not a run directory")
    assert_one_line_error(hrm("viz", "puzzle", "--data", str(tmp_path / "nothing")), "nothing")
    assert not any(tmp_path.glob("*.png"))


def test_damaged_inputs_of_viz_are_one_line_naming_the_file(tmp_path: Path, hrm) -> None:
    """Random bytes, a file of another tool or a hand-edited result where viz reads metrics.jsonl, an eval JSON
    (--eval or the argument of test-time) or config.yaml: one line naming the file, never a traceback (issue 35)."""
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x1f\x8b\x08 not text\n\xff\xfe")
    run = tmp_path / "run"
    write_metrics(run, ['{"step": 1, "train/lm_loss": 2.0}\n'])
    (run / "metrics.jsonl").write_bytes(garbage.read_bytes())
    assert_one_line_error(hrm("viz", "run", str(run)), f"{run / 'metrics.jsonl'} line 1: not UTF-8 text")
    write_metrics(run, ['{"step": 1, "train/lm_loss": 2.0}\n', "[1, 2]\n"])
    assert_one_line_error(hrm("viz", "run", str(run)), "line 2: expected a JSON object with an integer 'step'")
    write_metrics(run, ['{"step": 1, "train/lm_loss": 2.0}\n'])
    assert_one_line_error(
        hrm("viz", "run", str(run), "--eval", str(garbage), "--out", str(tmp_path / "v")),
        f"--eval {garbage}: not valid JSON (not UTF-8 text: invalid byte 0x8b at offset 1)",
    )
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"mmax": 2, "exact_accuracy": ["a", "b"], "token_accuracy": [0.1, 0.2]}))
    assert_one_line_error(
        hrm("viz", "run", str(run), "--eval", str(wrong)), f"--eval {wrong}: not a result of hrm eval"
    )
    assert_one_line_error(hrm("viz", "test-time", str(garbage)), f"{garbage}: not valid JSON (not UTF-8 text")
    result = {"mmax": 1, "exact_accuracy": [0.5], "token_accuracy": [0.5]}
    for table, fragment in (
        (None, "no test_time table"),
        ({"table": [{"tta": 1, "samples": 1}]}, "extra.test_time.table: expected a list of objects with numbers"),
        ({"table": [], "act": "x"}, "extra.test_time.act: expected a list"),
        ({"table": []}, "extra.test_time.table is empty"),
    ):
        wrong.write_text(json.dumps({**result, "extra": {"test_time": table}}))
        assert_one_line_error(hrm("viz", "test-time", str(wrong), "--out", str(tmp_path / "v")), fragment)
    (run / "config.yaml").write_bytes(garbage.read_bytes())
    assert_one_line_error(
        hrm("viz", "html", str(run), "--count", "0", "--out", str(tmp_path / "p.html")),
        f"{run / 'config.yaml'}: not UTF-8 text",
    )
    assert not (tmp_path / "v").exists() and not (tmp_path / "p.html").exists()


def test_missing_matplotlib_is_one_line(trained_run: tuple[Path, Path], tmp_path: Path) -> None:
    data, _ = trained_run
    code = "import sys; sys.modules['matplotlib'] = None; import cli; cli.main()"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", code, "viz", "puzzle", "--data", str(data), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert_one_line_error(proc, 'pip install "hrm-reason[viz]"')


@pytest.mark.parametrize(("args", "extra"), [(("viz", "--help"), "viz"), (("build-data", "text", "--help"), "text")])
def test_help_names_the_extra_to_install(args: tuple[str, ...], extra: str) -> None:
    """Issue 36: the help renderer ate `[viz]` and `[text]` as markup, leaving `pip install "hrm-reason"`."""
    from typer.testing import CliRunner

    import cli

    result = CliRunner().invoke(cli.app, list(args), env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert f"hrm-reason[{extra}]" in result.output


# ---------------------------------------------------------------------------------------------------------------------
# hrm viz arc-task: one ARC task as answered, from a dataset built from hand-written task files


# Asymmetric grids of several colours, so that a transformed or recoloured variant never equals the original.
ARC_TASKS = {
    "evaluation/aaaa0001": {
        "train": [
            {"input": [[1, 2, 0], [3, 0, 0]], "output": [[1, 3], [2, 0], [0, 0]]},
            {"input": [[4, 5, 6, 0], [0, 7, 0, 0]], "output": [[4, 0], [5, 7], [6, 0], [0, 0]]},
        ],
        "test": [{"input": [[8, 1], [2, 0], [0, 9]], "output": [[8, 2, 0], [1, 0, 9]]}],
    },
    "evaluation/bbbb0002": {
        "train": [{"input": [[1, 0], [0, 0]], "output": [[1, 1], [0, 0]]}],
        "test": [
            {"input": [[2, 0, 0], [0, 0, 3]], "output": [[2, 2, 0], [0, 3, 3]]},
            {"input": [[0, 4]], "output": [[4, 4]]},
        ],
    },
    "cccc0003": {  # a training task: no test split entry
        "train": [{"input": [[5, 0]], "output": [[5, 5]]}],
        "test": [{"input": [[0, 6]], "output": [[6, 6]]}],
    },
}
A_WRONG = [[8, 2, 0], [1, 0, 1]]  # one cell off


@pytest.fixture(scope="module")
def arc_task_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ARC tasks above built as `hrm build-data arc --source json DIR --num-aug 2` builds them (and --strict),
    with a submission: aaaa0001 right at attempt 2, bbbb0002 right on one of its two test inputs."""
    from datasets_build.arc import ArcBuildOptions, build_arc

    root = tmp_path_factory.mktemp("arc-task")
    for name, task in ARC_TASKS.items():
        (root / "tasks" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "tasks" / f"{name}.json").write_text(json.dumps(task))
    for out, strict in (("data", False), ("strict", True)):
        build_arc(ArcBuildOptions(source="json", dirs=[root / "tasks"], out=root / out, num_aug=2, strict=strict))
    a, b = ARC_TASKS["evaluation/aaaa0001"]["test"], ARC_TASKS["evaluation/bbbb0002"]["test"]
    submission = {
        "aaaa0001": [{"attempt_1": A_WRONG, "attempt_2": a[0]["output"]}],
        "bbbb0002": [
            {"attempt_1": [[2, 2, 0]], "attempt_2": [[2, 2, 0], [0, 3, 0]]},
            {"attempt_1": b[1]["output"], "attempt_2": [[4, 0]]},
        ],
    }
    (root / "submission.json").write_text(json.dumps(submission))
    return root


def test_arc_task_demonstrations_are_the_identity_variants(arc_task_files: Path) -> None:
    from hrm_reason.viz.arc_task import arc_task_figure, read_arc_task

    root = arc_task_files
    task = ARC_TASKS["evaluation/aaaa0001"]
    for data, source in (("data", "the train split's puzzle aaaa0001"), ("strict", "test_tasks/aaaa0001.json")):
        view = read_arc_task(root / data, root / "submission.json", "aaaa0001", None)
        assert [(a.tolist(), b.tolist()) for a, b in view.demonstrations] == [
            (p["input"], p["output"]) for p in task["train"]
        ]
        assert view.demonstrations_from.startswith(source)
        assert [(t.input.tolist(), t.answer.tolist()) for t in view.tests] == [
            (p["input"], p["output"]) for p in task["test"]
        ]
        assert view.tests[0].right == [False, True] and view.status == "solved (attempt 2)"
    # The train split holds the augmented variants too (translated, transformed, recoloured): the identity was chosen.
    names = json.loads((root / "data" / "identifiers.json").read_text())
    train = load_split(root / "data", "train").sets["all"]
    variants = [i for i, n in enumerate(names) if n.startswith("aaaa0001_t")]
    assert len(variants) == 2 and set(variants) <= set(train.puzzle_identifiers.tolist())
    view = read_arc_task(root / "data", root / "submission.json", "bbbb0002", None)
    assert view.status == "not solved (1 of 2 test inputs right)"
    assert [t.right for t in view.tests] == [[False, False], [True, False]]
    texts = [t.get_text() for t in arc_task_figure(view).texts]
    assert texts[0] == "ARC task bbbb0002: not solved (1 of 2 test inputs right)"


def test_arc_task_reads_votes_and_pass_at_k_from_eval_json(arc_task_files: Path, tmp_path: Path) -> None:
    from hrm_reason.viz.arc_task import arc_task_figure, read_arc_task

    root = arc_task_files
    top = [{"votes": 5, "mean_q": 0.5, "correct": False}, {"votes": 3, "mean_q": 0.4, "correct": True}]
    record = {"solved": {"1": False, "2": True}, "test_inputs": [{"answer_rank": 2, "top": top}]}
    plain = tmp_path / "eval.json"
    plain.write_text(json.dumps({"mmax": 2, "extra": {"arc_voting": {"tasks": {"aaaa0001": record}}}}))
    adapted = tmp_path / "adapted.json"
    adapted.write_text(
        json.dumps({"tests": [{"task": "aaaa0001", "test": 0, "attempts": [], "top": top, "matches": [False, True]}]})
    )
    for path in (plain, adapted):
        view = read_arc_task(root / "data", root / "submission.json", "aaaa0001", path)
        assert view.passed == {1: False, 2: True} and view.tests[0].votes == [5, 3]
        assert view.summary == "aaaa0001: solved (attempt 2) (--eval: pass@1 no, pass@2 yes)"
        texts = [t.get_text() for t in arc_task_figure(view).texts]
        assert "pass@2 yes" in texts[0]
        titles = [ax.get_title() for ax in arc_task_figure(view).axes]
        assert "attempt 2: right\n3 votes" in titles
    with pytest.raises(UserError, match="--task bbbb0002: not in --eval"):
        read_arc_task(root / "data", root / "submission.json", "bbbb0002", plain)
    with pytest.raises(UserError, match="not a result of hrm eval --json on an ARC dataset"):
        read_arc_task(root / "data", root / "submission.json", "aaaa0001", root / "submission.json")


def test_viz_arc_task_draws_a_solved_and_a_failed_task(
    arc_task_files: Path, tmp_path: Path, hrm, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = arc_task_files
    common = ("viz", "arc-task", "--data", str(root / "data"), "--submission", str(root / "submission.json"))
    for task, status, rows in (
        ("aaaa0001", "solved (attempt 2)", 2),  # two demonstrations share a row, one test input
        ("bbbb0002", "not solved (1 of 2 test inputs right)", 3),  # one demonstration, two test inputs
    ):
        out = tmp_path / f"{task}.png"
        proc = hrm(*common, "--task", task, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == [f"{task}: {status}", f"wrote {out}"]
        image = imread(out)
        assert image.shape[1] == round((2 * 0.15 + 4 * 2.0 + 3 * 0.12) * DPI)  # four panels a row
        assert rows * 2.0 * DPI < image.shape[0] < (rows + 1) * 2.6 * DPI
        assert image[..., :3].std() > 0.1  # drawn, not blank
    # Its own picture is replaced; a file that is not one of hrm viz's pictures is refused and left as it was.
    proc = hrm(*common, "--task", "aaaa0001", "--out", str(tmp_path / "aaaa0001.png"))
    assert proc.returncode == 0, proc.stderr
    mine = tmp_path / "notes.png"
    mine.write_text("my notes\n")
    proc = hrm(*common, "--task", "aaaa0001", "--out", str(mine))
    assert proc.returncode == 2
    assert_one_line_error(proc, f"--out {mine}", "not a picture or page written by hrm viz")
    assert mine.read_text() == "my notes\n"
    monkeypatch.chdir(tmp_path)  # the default: viz/arc_task_TASK.png
    proc = hrm(*common, "--task", "aaaa0001")
    assert proc.returncode == 0 and (tmp_path / "viz" / "arc_task_aaaa0001.png").is_file(), proc.stderr


def test_viz_arc_task_errors_are_one_line(arc_task_files: Path, tmp_path: Path, hrm) -> None:
    root = arc_task_files
    out = tmp_path / "out.png"

    def run(task: str, submission: Path, *extra: str):
        proc = hrm(
            "viz", "arc-task", "--data", str(root / "data"), "--submission", str(submission), "--task", task,
            "--out", str(out), *extra,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        return proc

    good = root / "submission.json"
    for task in ("cccc0003", "nope"):  # a training task (no test input) and no task at all
        assert_one_line_error(run(task, good), f"--task {task}: not a task of the test split", "aaaa0001, bbbb0002")
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"aaaa0001": json.loads(good.read_text())["aaaa0001"]}))
    assert_one_line_error(run("bbbb0002", partial), f"--task bbbb0002: not in --submission {partial}", "aaaa0001")
    bad = tmp_path / "bad.json"
    for value, fragment in (
        ({"aaaa0001": [{"attempt_1": [[1, 2], [3]], "attempt_2": [[1]]}]}, "aaaa0001[0].attempt_1: ragged grid"),
        ({"aaaa0001": [{"attempt_1": [[1]]}]}, "aaaa0001[0] is not an object with attempt_1 and attempt_2"),
        ({"aaaa0001": []}, "task aaaa0001 has 0 entries, expected one per test input (1)"),
        ([1, 2], "expected an ARC submission.json"),
    ):
        bad.write_text(json.dumps(value))
        assert_one_line_error(run("aaaa0001", bad), f"--submission {bad}", fragment)
    bad.write_bytes(b"\xff\xfe")
    assert_one_line_error(run("aaaa0001", bad), f"--submission {bad}: not valid JSON")
    assert_one_line_error(run("aaaa0001", good, "--eval", str(good)), f"--eval {good}: not a result of hrm eval")
    assert not out.exists()
