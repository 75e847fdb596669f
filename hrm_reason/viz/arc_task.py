"""`hrm viz arc-task`: one ARC task as a model answered it, a row per demonstration (input, output) and per test input
(input, attempt 1, attempt 2, answer), each attempt framed green where it is the answer and red where it is not.

What is drawn comes from three files: the dataset (`hrm build-data arc`: the demonstrations are the train split's
puzzle named exactly by the task id, its original and not an augmentation; the test inputs and answers are the test
split's original puzzle of the task), the Kaggle submission.json of `hrm eval --submission` (one entry per test
input, `{"attempt_1": grid, "attempt_2": grid}`), and optionally `hrm eval --json` (pass@1, pass@2 and the votes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from hrm_reason.data.puzzle import PuzzleSplit, load_split
from hrm_reason.errors import UserError
from hrm_reason.readers import read_json
from hrm_reason.tasks import task_class
from hrm_reason.tasks.arc import (
    COLOUR_OFFSET,
    MAX_SIZE,
    PAD,
    TEST_TASKS,
    VOCAB_SIZE,
    ArcTask,
    crop,
    layout_record,
    parse_grid,
    placed_grid,
)
from hrm_reason.viz.canvas import panel_figure
from hrm_reason.viz.grids import WRONG_COLOUR, GridSpec, draw_grid

RIGHT_COLOUR = "#1a9e3f"  # green frame: the attempt is the answer (WRONG_COLOUR's red: it is not)
PANEL = 2.0  # inches per panel; four panels a row
FRAME_WIDTH = 3.0  # points: the line of an attempt's green or red frame
FRAME_REACH = FRAME_WIDTH + 1.5  # points beyond the grid the frame reaches (1 point of white, then the line)
ATTEMPTS = ("attempt_1", "attempt_2")
Grid = np.ndarray


@dataclass
class TestCase:
    input: Grid
    answer: Grid | None  # None: the dataset does not know it (a hidden test output)
    attempts: list[Grid]
    votes: list[int | None] = field(default_factory=lambda: [None, None])  # from --eval

    @property
    def right(self) -> list[bool] | None:
        """Per attempt, whether it is the answer (None where the answer is unknown)."""
        if self.answer is None:
            return None
        return [a.shape == self.answer.shape and bool((a == self.answer).all()) for a in self.attempts]


@dataclass
class ArcTaskView:
    task: str
    demonstrations: list[tuple[Grid, Grid]]
    demonstrations_from: str  # where they were read, for the footer
    tests: list[TestCase]
    passed: dict[int, bool] | None = None  # --eval: pass@1, pass@2

    @property
    def status(self) -> str:
        """solved (attempt k), not solved, or answer unknown: from the attempts against the answers."""
        rights = [t.right for t in self.tests]
        if any(r is None for r in rights):
            return "answer unknown"
        firsts = [next((i + 1 for i, ok in enumerate(r) if ok), None) for r in rights]  # type: ignore[arg-type]
        if None in firsts:
            right = sum(f is not None for f in firsts)
            return "not solved" + (f" ({right} of {len(firsts)} test inputs right)" if right else "")
        if len(set(firsts)) == 1:
            return f"solved (attempt {firsts[0]})"
        return "solved (attempts " + ", ".join(str(f) for f in firsts) + ")"

    @property
    def summary(self) -> str:
        line = f"{self.task}: {self.status}"
        if self.passed is not None:
            line += f" (--eval: {_passes(self.passed)})"
        return line


def _passes(passed: dict[int, bool]) -> str:
    return ", ".join(f"pass@{k} {'yes' if ok else 'no'}" for k, ok in sorted(passed.items()))


def _few(names: list[str]) -> str:
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"it holds {shown}" if names else "it holds none"


# ---------------------------------------------------------------------------------------------------------------------
# Reading


def read_arc_task(data: Path, submission: Path, task: str, eval_json: Path | None) -> ArcTaskView:
    """The task's grids, attempts and (with `eval_json`) pass@k; every fault one line naming its flag or file."""
    names, inputs, answers = _test_split(data, task)
    demonstrations, source = _demonstrations(data, task, names)
    attempts = read_submission(submission, task, len(inputs))
    tests = [TestCase(x, y, a) for x, y, a in zip(inputs, answers, attempts)]
    view = ArcTaskView(task, demonstrations, source, tests)
    if eval_json is not None:
        view.passed, votes = read_eval(eval_json, task, len(tests))
        for case, v in zip(tests, votes):
            case.votes = v
    return view


def _test_split(data: Path, task: str) -> tuple[list[str], list[Grid], list[Grid | None]]:
    """identifiers.json's names, and the test inputs and answers of the task's original puzzle in the test split."""
    split = load_split(data, "test")
    where = split.path / "dataset.json"
    builder = split.metadata.builder if split.metadata.builder is not None else layout_record(split)
    tasks = builder.get("tasks")
    if task_class(builder.get("name")) is not ArcTask or not isinstance(tasks, list) or list(split.sets) != ["all"]:
        raise UserError(f"--data {data}: {where} is not an ARC dataset (build one with hrm build-data arc)")
    s = split.sets["all"]
    if len(tasks) != s.group_indices.size - 1:
        raise UserError(f"{where}: builder.tasks lists {len(tasks)} tasks but the split has {s.group_indices.size - 1}")
    listed = [str(t.get("name")) if isinstance(t, dict) else "?" for t in tasks]
    if task not in listed:
        raise UserError(f"--task {task}: not a task of the test split of {data} ({_few(listed)})")
    g = listed.index(task)
    ids_path = Path(data) / "identifiers.json"
    names = read_json(ids_path, "the puzzle names hrm build-data arc writes")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UserError(f"{ids_path}: expected a list of puzzle names")
    first = int(s.group_indices[g])
    ident = int(s.puzzle_identifiers[first])
    if not 0 <= ident < len(names) or names[ident] != task:
        raise UserError(f"{ids_path}: the first test puzzle of task {task!r} is not its original (named {task!r})")
    size = _canvas_side(split, builder)
    rows = slice(int(s.puzzle_indices[first]), int(s.puzzle_indices[first + 1]))
    x = np.asarray(s.inputs[rows]).reshape(-1, size, size)
    y = np.asarray(s.labels[rows]).reshape(-1, size, size)
    inputs, answers = [crop(c) for c in x], [crop(c) for c in y]
    for k, (a, b) in enumerate(zip(inputs, answers)):
        if a.size == 0 or b.size == 0:
            raise UserError(f"{where}: test input {k} of task {task!r} holds no grid at the top-left of its canvas")
    known = tasks[g].get("answers", True) is not False
    return names, inputs, answers if known else [None] * len(inputs)


def _canvas_side(split: PuzzleSplit, builder: dict[str, Any]) -> int:
    size = int(builder.get("grid_size", math.isqrt(split.metadata.seq_len)))
    if size * size != split.metadata.seq_len:
        raise UserError(f"{split.path / 'dataset.json'}: seq_len {split.metadata.seq_len} is not grid_size {size}^2")
    return size


def _demonstrations(data: Path, task: str, names: list[str]) -> tuple[list[tuple[Grid, Grid]], str]:
    """The train split's puzzle named exactly `task` (its original), every pair decoded where it was placed; a task
    whose demonstrations are not there (a --strict build) has them in DATA/test_tasks/TASK.json."""
    split = load_split(data, "train")
    ident = names.index(task)
    size = _canvas_side(split, split.metadata.builder or {})
    for set_name, s in split.sets.items():
        found = np.flatnonzero(np.asarray(s.puzzle_identifiers) == ident)
        if found.size == 0:
            continue
        p = int(found[0])
        rows = slice(int(s.puzzle_indices[p]), int(s.puzzle_indices[p + 1]))
        pairs = []
        for k, (x, y) in enumerate(
            zip(np.asarray(s.inputs[rows]).reshape(-1, size, size), np.asarray(s.labels[rows]).reshape(-1, size, size))
        ):
            a, b = placed_grid(x), placed_grid(y)
            if a is None or b is None:
                raise UserError(
                    f"{split.path / set_name}__inputs.npy: demonstration {k} of task {task!r} is not one grid in the "
                    "ARC layout"
                )
            pairs.append((a, b))
        return pairs, f"the train split's puzzle {task}"
    path = Path(data) / TEST_TASKS / f"{task}.json"
    if not path.is_file():
        return [], "none in the dataset"
    value = read_json(path, None)
    train = value.get("train") if isinstance(value, dict) else None
    if not isinstance(train, list):
        raise UserError(f"{path}: expected an ARC task with a 'train' list")
    pairs = []
    for k, pair in enumerate(train):
        if not isinstance(pair, dict):
            raise UserError(f"{path}: train[{k}] is not an input/output pair")
        pairs.append(tuple(parse_grid(pair.get(p), f"{path}: train[{k}].{p}") for p in ("input", "output")))
    return pairs, f"{TEST_TASKS}/{task}.json (not in the train split)"  # type: ignore[return-value]


def read_submission(path: Path, task: str, tests: int) -> list[list[Grid]]:
    """The two attempts per test input of `task` in a Kaggle submission.json."""
    name = f"--submission {path}"
    value = read_json(path, None, name=name)
    if not isinstance(value, dict):
        raise UserError(
            f'{name}: expected an ARC submission.json ({{task: [{{"attempt_1": grid, "attempt_2": grid}}]}})'
        )
    if task not in value:
        raise UserError(f"--task {task}: not in {name} ({_few(list(value))})")
    entries = value[task]
    if not isinstance(entries, list) or len(entries) != tests:
        held = f"{len(entries)} entries" if isinstance(entries, list) else "no list"
        raise UserError(f"{name}: task {task} has {held}, expected one per test input ({tests})")
    attempts = []
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict) or any(a not in entry for a in ATTEMPTS):
            raise UserError(f"{name}: {task}[{k}] is not an object with attempt_1 and attempt_2")
        attempts.append([parse_grid(entry[a], f"{name}: {task}[{k}].{a}") for a in ATTEMPTS])
    return attempts


def read_eval(path: Path, task: str, tests: int) -> tuple[dict[int, bool], list[list[int | None]]]:
    """pass@1 and pass@2 of the task and the votes of each attempt, from `hrm eval --json` (extra.arc_voting) or
    `hrm eval --adapt --json` (tests)."""
    name = f"--eval {path}"
    value = read_json(path, None, name=name)
    not_ours = UserError(
        f"{name}: not a result of hrm eval --json on an ARC dataset (expected extra.arc_voting.tasks, or the tests of "
        "hrm eval --adapt)"
    )
    try:
        if isinstance(value, dict) and "tests" in value and "arc_voting" not in value.get("extra", {}):
            per = [t for t in value["tests"] if t["task"] == task]
            known = sorted({str(t["task"]) for t in value["tests"]})
            matches = [t["matches"] for t in per]
            passed = None if None in matches else {1: all(m[0] for m in matches), 2: all(any(m) for m in matches)}
            tops = [t["top"] for t in per]
        else:
            records = value["extra"]["arc_voting"]["tasks"]
            known = sorted(records)
            record = records.get(task)
            passed = None if record is None else {k: bool(record["solved"][str(k)]) for k in (1, 2)}
            tops = [] if record is None else [t["top"] for t in record["test_inputs"]]
        if task not in known:
            raise UserError(f"--task {task}: not in {name} ({_few(known)})")
        votes = [[int(top[i]["votes"]) if i < len(top) else None for i in range(len(ATTEMPTS))] for top in tops]
    except (KeyError, TypeError, IndexError, ValueError, AttributeError):
        raise not_ours from None
    if len(votes) != tests:
        raise UserError(f"{name}: task {task} has {len(votes)} test inputs, the dataset {tests}")
    if passed is None:
        raise UserError(f"{name}: task {task}'s answers are unknown there")
    return passed, votes


# ---------------------------------------------------------------------------------------------------------------------
# Drawing


def arc_task_figure(view: ArcTaskView) -> Figure:
    """Two demonstrations a row (input, output, input, output), then a row per test input (input, attempt 1,
    attempt 2, answer); every cell of one size, each grid at its own shape."""
    grids = [g for pair in view.demonstrations for g in pair]
    grids += [g for t in view.tests for g in (t.input, *t.attempts, *([t.answer] if t.answer is not None else []))]
    frame = max(g.shape[0] for g in grids), max(g.shape[1] for g in grids)
    demo_rows = -(-len(view.demonstrations) // 2)
    n_rows = demo_rows + len(view.tests)
    title = f"ARC task {view.task}: {view.status}"
    if view.passed is not None:
        title += f"   (hrm eval: {_passes(view.passed)})"
    footer = (
        "the ten ARC colours;  green frame: the attempt is the answer, red frame: it is not;  white cross: a cell that "
        f"differs from the answer;  demonstrations: {view.demonstrations_from}"
    )
    fig, axes, _ = panel_figure(4 * n_rows, 4, PANEL, header=title, footer=footer)
    for d, (a, b) in enumerate(view.demonstrations):
        _draw(axes[2 * d], a, frame, f"demonstration {d + 1}: input")
        _draw(axes[2 * d + 1], b, frame, "output")
    for ax in axes[2 * len(view.demonstrations) : 4 * demo_rows]:  # an odd count leaves half a row
        ax.set_visible(False)
    for k, case in enumerate(view.tests):
        row = axes[4 * (demo_rows + k) : 4 * (demo_rows + k) + 4]
        _draw(row[0], case.input, frame, "test input" if len(view.tests) == 1 else f"test input {k + 1}")
        right = case.right
        for i, attempt in enumerate(case.attempts):
            ok = None if right is None else right[i]
            wrong = None
            if case.answer is not None and attempt.shape == case.answer.shape:
                wrong = (attempt != case.answer).reshape(-1)
            verdict = "" if ok is None else (": right" if ok else ": wrong")
            votes = case.votes[i]
            notes = [] if votes is None else [f"{votes} vote" + ("" if votes == 1 else "s")]
            if ok is False and wrong is None:
                assert case.answer is not None
                notes.append(f"shape {_shape(attempt)}, answer {_shape(case.answer)}")
            label = f"attempt {i + 1}{verdict}" + ("\n" + ", ".join(notes) if notes else "")
            _draw(row[1 + i], attempt, frame, label, wrong=wrong, colour=None if ok is None else ok)
        if case.answer is not None:
            _draw(row[3], case.answer, frame, "answer")
        else:
            row[3].set_axis_off()
            row[3].text(0.5, 0.5, "answer hidden", ha="center", va="center", transform=row[3].transAxes, fontsize=9)
    return fig


def _draw(
    ax: Axes,
    grid: Grid,
    frame: tuple[int, int],
    title: str,
    wrong: np.ndarray | None = None,
    colour: bool | None = None,
) -> None:
    """One colour grid (0..9) drawn with hrm viz's ARC look; `colour` True or False frames it green or red."""
    h, w = grid.shape
    spec = GridSpec("arc", max(h, w), VOCAB_SIZE, ignore_label_id=PAD, task=ArcTask(MAX_SIZE), shape=(h, w))
    tokens = grid.reshape(-1).astype(np.int64) + COLOUR_OFFSET
    draw_grid(ax, spec, tokens, wrong=wrong, window=(slice(0, h), slice(0, w)), frame=frame)
    # Every panel keeps a margin of FRAME_REACH points around the frame's cells, in which an attempt's frame is drawn
    # (1 point outside the grid): frames never touch a neighbour or the footer, and cells keep one size throughout.
    box = ax.get_position()
    panel_pt = min(box.width * ax.figure.get_figwidth(), box.height * ax.figure.get_figheight()) * 72
    margin = FRAME_REACH * max(frame) / (panel_pt - 2 * FRAME_REACH)  # in cells: FRAME_REACH points once rescaled
    ax.set_xlim(-margin, frame[1] + margin)
    ax.set_ylim(frame[0] + margin, -margin)
    mark = {True: RIGHT_COLOUR, False: WRONG_COLOUR}.get(colour) if colour is not None else None
    ax.set_title(title, fontsize=9, color=mark or "black", fontweight="bold" if mark else "normal")
    if mark is not None:
        pad = (FRAME_WIDTH / 2 + 1) * (max(frame) + 2 * margin) / panel_pt  # points -> cells
        box_ = Rectangle((-pad, -pad), w + 2 * pad, h + 2 * pad, fill=False, edgecolor=mark, lw=FRAME_WIDTH, zorder=9)
        box_.set_clip_on(False)
        ax.add_patch(box_)


def _shape(grid: Grid) -> str:
    return f"{grid.shape[0]}x{grid.shape[1]}"
