"""`hrm solve`: the user's own puzzles through a trained model, answers checked against the rules.

A puzzle is read in the format people write it (a Sudoku line, a text maze, an ARC task JSON), encoded with the token
layout of its task module (hrm_reason.tasks), run for at most mmax segments with ACT halting at inference (the first
segment where q_halt > q_continue, as `hrm eval`'s ACT column), and the answer is decoded back to text and checked:
Sudoku rules and givens, a maze path from S to G and whether it is shortest; ARC has no rules to check.

Which task a model solves comes from its dataset's `builder.name` (dataset.json of the run's data), else from the
token layout as `hrm viz` reads it (datasets of other tools). A puzzle that does not fit the model is a one-line
UserError naming the puzzle; all puzzles are parsed, then checked against their task's rules (`check_puzzles`: one
without a solution is refused, as the model would only guess at it), before the model runs.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from hrm_reason.checkpoint import saved_model_config
from hrm_reason.data.puzzle import PuzzleDatasetMetadata, dataset_kind
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import check_mmax
from hrm_reason.evaluate.tta import TestTimeOptions, carry_row_bytes, fit_batch, fit_to_group, predict, trajectories
from hrm_reason.jsonfile import decode_text, parse_json, read_json, read_json_model, read_text
from hrm_reason.load import load_run
from hrm_reason.models.registry import family_spec
from hrm_reason.runtime.device import free_memory, resolve_device
from hrm_reason.runtime.logs import progress_bar
from hrm_reason.tasks import arc, dihedral, layout_task, maze, sudoku
from hrm_reason.tasks.base import TaskTransforms

SUDOKU_SEPARATORS = "|+-"  # box drawing, ignored like whitespace
SUDOKU_BLANKS = ".0"
MAZE_CHARS = "# SG"  # the input alphabet; 'o' (path) is what the model writes

# --------------------------------------------------------------------------------------------------------- puzzles


@dataclass
class Puzzle:
    """One puzzle in the model's token layout, and how it was written (to write the answer the same way)."""

    name: str  # "puzzles.txt line 3", "task.json test 1": what errors and answers are called
    tokens: np.ndarray  # [seq_len] int32
    identifier: int  # the puzzle identifier fed to the puzzle embedding
    layout: str | None = (
        None  # Sudoku: the lines as typed, separators and spacing kept, to write the answer the same way
    )
    expected: np.ndarray | None = None  # ARC: the test output when the task file gives it
    notes: list[str] = field(default_factory=list)


@dataclass
class Answer:
    """The model's answer to one puzzle: decoded, checked, with the segments it took and its confidence."""

    puzzle: Puzzle
    tokens: np.ndarray  # [seq_len] the predicted tokens at the halting segment
    segments: int
    confidence: float  # sigmoid(q_halt) at the halting segment
    text: str  # the answer grid, written as the puzzle was
    grid: list[Any]  # the answer grid for JSON: rows of digits (Sudoku, ARC) or strings (maze)
    valid: bool | None  # None: no rules to check (ARC)
    check: str  # the verdict in words
    shortest: bool | None = None  # maze only

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.puzzle.name,
            "answer": self.text,
            "grid": self.grid,
            "valid": self.valid,
            "check": self.check,
            "segments": self.segments,
            "confidence": self.confidence,
            "tokens": self.tokens.tolist(),
        }
        if self.shortest is not None:
            d["shortest"] = self.shortest
        if self.puzzle.notes:
            d["notes"] = self.puzzle.notes
        return d


class SolveTask(Protocol):
    """A task as `hrm solve` meets it: parse the user's text into puzzles, and read an answer back."""

    kind: str
    transforms: TaskTransforms  # the task's symmetries for test-time augmentation

    def describe(self) -> str: ...

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]: ...

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> tuple[str, list[Any], bool | None, str, bool | None]: ...

    def problem(self, puzzle: Puzzle) -> tuple[str | None, str | None]:
        """(why the puzzle has no solution, a note on a check left unfinished); None, None for a puzzle to solve."""
        ...


def _lines(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.split("\n")]


# ---------------------------------------------------------------------------------------------------------- Sudoku


@dataclass
class SudokuSolve:
    r: int
    c: int
    blank_identifier: int
    transforms: sudoku.SudokuTransforms
    kind: str = "sudoku"

    @property
    def n(self) -> int:
        return self.r * self.c

    def describe(self) -> str:
        return f"{self.n}x{self.n} Sudoku ({self.r}x{self.c} boxes)"

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]:
        """One puzzle per line (n*n cells), or n lines of n cells; whitespace and | + - are ignored, a blank line ends
        a board written in rows."""
        n, puzzles = self.n, []
        rows: list[str] = []
        typed: list[str] = []  # the board's lines as written, box-drawing lines between its rows included
        first = 0
        for i, raw in enumerate(_lines(text), 1):
            where = f"{source} line {i}"
            if not raw.strip():
                if rows:
                    raise UserError(f"{source} line {first}: a board of {len(rows)} rows; expected {n}")
                continue
            cells = "".join(ch for ch in raw if not ch.isspace() and ch not in SUDOKU_SEPARATORS)
            if not cells:  # a box-drawing line between bands
                typed += [raw] if rows else []
                continue
            self._check_cells(cells, where)
            if len(cells) == n * n and not rows:
                puzzles.append(self._puzzle(cells, where, raw.strip()))
            elif len(cells) == n:
                first = first if rows else i
                rows.append(cells)
                typed.append(raw.rstrip())
                if len(rows) == n:
                    layout = "\n".join(typed)
                    puzzles.append(self._puzzle("".join(rows), f"{source} line {first}", layout))
                    rows, typed = [], []
            elif rows:
                raise UserError(f"{where}: a board row of {len(cells)} cells; expected {n} (board from line {first})")
            else:
                raise UserError(
                    f"{where}: {len(cells)} cells; expected {n * n} for a {self.describe()} (digits 1-{n}, . or 0 for "
                    f"a blank), one puzzle per line"
                )
        if rows:
            raise UserError(f"{source} line {first}: a board of {len(rows)} rows; expected {n}")
        return puzzles

    def _check_cells(self, cells: str, where: str) -> None:
        """Letters first, then a board of another size (its digits may exceed n), then digits above n."""
        letter = next((ch for ch in cells if ch not in SUDOKU_BLANKS and not (ch.isascii() and ch.isdigit())), None)
        if letter is not None:
            raise UserError(f"{where}: {letter!r} is not a digit 1-{self.n} or a blank (. or 0)")
        side = math.isqrt(len(cells))
        if side != self.n and side * side == len(cells) and side in sudoku.BOX_OF_SIDE:
            raise UserError(
                f"{where}: a {side}x{side} Sudoku ({len(cells)} cells), but the model solves a {self.describe()} "
                f"({self.n * self.n} cells)"
            )
        high = next((ch for ch in cells if ch not in SUDOKU_BLANKS and int(ch) > self.n), None)
        if high is not None:
            raise UserError(f"{where}: digit {high} is outside 1-{self.n} for a {self.describe()}")

    def _puzzle(self, cells: str, name: str, layout: str) -> Puzzle:
        values = np.array([0 if ch in SUDOKU_BLANKS else int(ch) for ch in cells], dtype=np.int32)
        return Puzzle(name, sudoku.to_tokens(values), self.blank_identifier, layout=layout)

    def problem(self, puzzle: Puzzle) -> tuple[str | None, str | None]:
        """Repeated givens, a cell without a candidate, no solution by the bounded exact search (tasks/sudoku.py)."""
        return sudoku.puzzle_problem(puzzle.tokens.astype(np.int64) - 1, self.r, self.c)

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> tuple[str, list[Any], bool | None, str, bool | None]:
        n = self.n
        values = tokens.astype(np.int64) - 1  # blank and PAD (not digits) become 0 and -1
        digits = "".join(str(v) if 1 <= v <= n else "." for v in values)
        # The answer written as the puzzle was typed: its cells in order, every other character as the user wrote it.
        answer = iter(digits)
        layout = puzzle.layout or digits
        text = "".join(next(answer) if not ch.isspace() and ch not in SUDOKU_SEPARATORS else ch for ch in layout)
        grid = np.where((values >= 1) & (values <= n), values, 0).reshape(n, n).tolist()
        given = puzzle.tokens.reshape(n, n)
        bad = sudoku.rule_violations(tokens.reshape(n, n), given, (self.r, self.c))
        if not bad.any():
            return text, grid, True, f"valid: every row, column and box holds 1-{n} once, givens kept", None
        reasons = []
        changed = int(((given != sudoku.BLANK) & (tokens.reshape(n, n) != given)).sum())
        empty = int(((values < 1) | (values > n)).sum())
        if changed:
            reasons.append(f"{changed} given{'s' * (changed > 1)} changed")
        if empty:
            reasons.append(f"{empty} cell{'s' * (empty > 1)} without a digit")
        unit = sudoku.unit_error(values, sudoku.geometry(self.r, self.c))
        if unit is not None and not empty:
            reasons.append(unit)
        return text, grid, False, "invalid: " + "; ".join(reasons), None


# ------------------------------------------------------------------------------------------------------------ maze


@dataclass
class MazeSolve:
    side: int
    blank_identifier: int
    transforms: dihedral.DihedralTransforms
    kind: str = "maze"

    def describe(self) -> str:
        return f"{self.side}x{self.side} maze"

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]:
        """Text rows of '#', ' ', 'S', 'G'; an empty line separates mazes. Trailing spaces (open cells) that an
        editor dropped are restored: rows shorter than the model's side are padded with open cells."""
        puzzles, block, first = [], [], 0
        lines = _lines(text)
        for i, raw in enumerate([*lines, ""], 1):
            # An empty line ends a maze; a line of spaces is a row of open cells while a maze is still short of rows.
            if raw == "" or (not raw.strip() and not (0 < len(block) < self.side)):
                if block:
                    puzzles.append(self._puzzle(block, f"{source} line {first}"))
                    block = []
                continue
            if not block:
                first = i
            block.append((i, raw))
        return puzzles

    def _puzzle(self, block: list[tuple[int, str]], name: str) -> Puzzle:
        side = self.side
        for i, row in block:
            for j, ch in enumerate(row):
                if ch not in MAZE_CHARS:
                    raise UserError(
                        f"{name}: {ch!r} at line {i}, column {j + 1} is not a maze character ('#' wall, ' ' open, "
                        f"'S' start, 'G' goal)"
                    )
            if len(row) > side:
                raise UserError(f"{name}: line {i} has {len(row)} cells, but the model solves a {self.describe()}")
        if len(block) != side:
            raise UserError(f"{name}: {len(block)} rows, but the model solves a {self.describe()}")
        text = "".join(row.ljust(side) for _, row in block)
        tokens = maze.TOKEN_OF[np.frombuffer(text.encode("ascii"), dtype=np.uint8)].astype(np.int32)
        return Puzzle(name, tokens, self.blank_identifier)

    def problem(self, puzzle: Puzzle) -> tuple[str | None, str | None]:
        """Not one S and one G, or no path between them (tasks/maze.py)."""
        return maze.puzzle_problem(puzzle.tokens.reshape(self.side, self.side)), None

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> tuple[str, list[Any], bool | None, str, bool | None]:
        side = self.side
        chars = np.array(list("?" + maze.CHARSET))[np.clip(tokens, 0, len(maze.CHARSET))]
        rows = ["".join(chars[r * side : (r + 1) * side]) for r in range(side)]
        given = puzzle.tokens.reshape(side, side)
        pred = tokens.reshape(side, side).astype(np.int64)
        fixed = np.isin(given, (maze.WALL, maze.START, maze.GOAL))
        changed = int((fixed & (pred != given)).sum())
        stray = int((~fixed & ~np.isin(pred, (maze.OPEN, maze.PATH))).sum())
        g, p = torch.from_numpy(given.astype(np.int64))[None], torch.from_numpy(pred)[None]
        route = (p == maze.PATH) | (g == maze.START) | (g == maze.GOAL)
        marks = int((g == maze.START).sum()) == 1 and int((g == maze.GOAL).sum()) == 1  # else: --allow-unsolvable
        shortest_moves = int(maze.start_distances(g)[g == maze.GOAL][0]) if marks else -1
        moves = int(maze.bfs_distances(route, g == maze.START)[g == maze.GOAL][0]) if marks else -1
        reasons = []
        if changed:
            reasons.append(f"{changed} wall/S/G cell{'s' * (changed > 1)} changed")
        if stray:
            reasons.append(f"{stray} open cell{'s' * (stray > 1)} turned into something else")
        if moves < 0:
            reasons.append("the marked cells do not join S to G")
        if reasons:
            return "\n".join(rows), rows, False, "invalid: " + "; ".join(reasons), False
        shortest = bool(maze.optimal_path_correct(g, p)[0])
        if shortest:
            verdict = f"valid: a path from S to G of {moves} moves, shortest ({shortest_moves})"
        else:
            extra = int((p == maze.PATH).sum()) - (moves - 1)
            detail = (
                f"{extra} extra cell{'s' * (extra > 1)} marked"
                if moves == shortest_moves
                else f"the shortest is {shortest_moves}"
            )
            verdict = f"valid: a path from S to G of {moves} moves, not shortest ({detail})"
        return "\n".join(rows), rows, True, verdict, shortest


# ------------------------------------------------------------------------------------------------------------- ARC


@dataclass
class ArcSolve:
    size: int  # the model's canvas side
    blank_identifier: int
    identifiers: dict[str, int]  # task name (and source id) -> the identifier of its original, unaugmented puzzle
    transforms: arc.ArcTransforms
    kind: str = "arc"

    def describe(self) -> str:
        return f"ARC model ({self.size}x{self.size} canvas)"

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]:
        """An ARC task JSON ({"test": [{"input": grid, "output": grid?}, ...], "train": ...}: its test inputs), or
        one bare grid (a list of rows). The task is recognised by its file name (the task id)."""
        data = parse_json(text, source)
        if isinstance(data, list):
            items = [{"input": data}]
        elif isinstance(data, dict) and isinstance(data.get("test"), list) and data["test"]:
            items = data["test"]
        else:
            raise UserError(f"{source}: expected an ARC task (an object with a non-empty 'test' list) or one grid")
        identifier, notes = self.blank_identifier, []
        if stem is not None and stem in self.identifiers:
            identifier = self.identifiers[stem]
        else:
            what = f"task {stem!r} is" if stem is not None else "the task (read without a file name) is"
            notes.append(f"{what} not among the model's puzzles: the blank puzzle identifier is used")
        puzzles = []
        for k, item in enumerate(items):
            name = f"{source} test {k}"
            if not isinstance(item, dict) or "input" not in item:
                raise UserError(f"{name}: no 'input' grid")
            canvas = f"the model's {self.size}x{self.size} canvas"
            grid = arc.parse_grid(item["input"], f"{name} input", self.size, canvas)
            expected = arc.parse_grid(item["output"], f"{name} output", self.size, canvas) if "output" in item else None
            x, _ = arc.encode_pairs([(grid, grid)], [(0, arc.IDENTITY_COLOURS)], self.size, None)
            puzzles.append(Puzzle(name, x[0].astype(np.int32), identifier, expected=expected, notes=list(notes)))
        return puzzles

    def problem(self, puzzle: Puzzle) -> tuple[str | None, str | None]:
        """ARC has no rules to check a test input against."""
        return None, None

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> tuple[str, list[Any], bool | None, str, bool | None]:
        grid = arc.crop(tokens.reshape(self.size, self.size).astype(np.int64)).astype(np.int64)
        text = "\n".join("".join(str(v) for v in row) for row in grid) if grid.size else "(empty grid)"
        if puzzle.expected is None:
            check = f"no answer to check against ({grid.shape[0]}x{grid.shape[1]} grid)"
        elif np.array_equal(grid, puzzle.expected):
            check = "matches the task's test output"
        else:
            check = "differs from the task's test output"
        return text, grid.tolist(), None, check, None


# ------------------------------------------------------------------------------------------------------ the model


def task_for(meta: PuzzleDatasetMetadata, names: Sequence[str] | None, where: str) -> SolveTask:
    """The task a model of this dataset solves: `builder.name`, else the token layout (tasks.layout_task)."""
    builder = meta.builder or {}
    name = builder.get("name")
    seq_len, vocab = meta.seq_len, meta.vocab_size
    side = math.isqrt(seq_len)
    square = side * side == seq_len
    blank = meta.blank_identifier_id
    shape = f"seq_len {seq_len}, vocab_size {vocab}"
    layout = layout_task(seq_len, vocab) if name is None else None
    if name == "sudoku" or layout == "sudoku":
        box = builder.get("box")
        r, c = (
            (int(v) for v in box.split("x"))
            if isinstance(box, str) and "x" in box
            else sudoku.BOX_OF_SIDE.get(side, (0, 0))
        )
        if not square or r * c != side or vocab != sudoku.vocab_size(side):
            raise UserError(f"{where}: a Sudoku dataset whose shape ({shape}, box {box}) is not a Sudoku board")
        return SudokuSolve(r, c, blank, sudoku.SudokuTransforms(r, c))
    if name == "maze" or layout == "maze":
        if not square or vocab != maze.VOCAB_SIZE or side > maze.MAX_SIDE:
            raise UserError(f"{where}: a maze dataset whose shape ({shape}) is not a square maze grid")
        return MazeSolve(side, blank, maze.MazeTransforms(side))
    if name == "arc" or layout == "arc":
        if not square or vocab != arc.VOCAB_SIZE:
            raise UserError(f"{where}: an ARC dataset whose shape ({shape}) is not a square canvas")
        identifiers: dict[str, int] = {}
        for i, n in enumerate(names or []):
            if i != blank and arc.AUG_NAME.match(n) is None:
                identifiers.setdefault(n, i)
        for task in builder.get("tasks", []):  # a source id that differs from the unique name it was given
            if isinstance(task, dict) and task.get("name") in identifiers:
                identifiers.setdefault(str(task.get("id")), identifiers[task["name"]])
        size = int(builder.get("grid_size", side))
        return ArcSolve(size, blank, identifiers, arc.ArcTransforms(size))
    raise UserError(
        f"{where}: the model's task is unknown (builder.name {name!r}, {shape}); hrm solve knows sudoku, maze and arc"
    )


@dataclass
class Solver:
    model: nn.Module
    task: SolveTask
    halt_max_steps: int
    batch_size: int
    device: torch.device


def load_solver(path: Path, config_path: Path | None, device_name: str) -> Solver:
    """The model at `path` and the task it solves, read from its dataset's dataset.json (or the weights' header)."""
    device = resolve_device(device_name)
    loaded = load_run(path, device, config_path)
    if not family_spec(loaded.family).segments or loaded.config is None:
        raise UserError(f"{path}: a language-model head; hrm solve needs an ACT puzzle model (hrm, trm, ...)")
    config = loaded.config
    data = Path(config.data_path)
    names: list[str] | None = None
    if dataset_kind(data) == "puzzle":
        where = data / "test" / "dataset.json"
        meta = read_json_model(where, PuzzleDatasetMetadata, "the dataset the model was trained on")
        try:
            value = read_json(data / "identifiers.json", None)
            names = [str(v) for v in value] if isinstance(value, list) else None
        except UserError:  # ARC task names only: the blank identifier is used (and said) without them
            names = None
    else:  # the dataset is not on disk: the shapes of the weights' header (load_run built the model from them)
        saved = saved_model_config(loaded.checkpoint) or {}
        where = loaded.checkpoint
        meta = PuzzleDatasetMetadata.of_shape(saved["seq_len"], saved["vocab_size"], saved["num_puzzle_identifiers"])
    task = task_for(meta, names, str(where))
    batch = config.eval_global_batch_size or config.global_batch_size
    return Solver(loaded.model, task, config.arch.halt_max_steps, batch, device)


def read_puzzles(task: SolveTask, puzzle: str | None, file: Path | None, stdin: Any) -> list[Puzzle]:
    """The puzzles of the argument (`-`: stdin) or of --file, exactly one of them."""
    if (puzzle is None) == (file is None):
        raise UserError("give exactly one puzzle source: a PUZZLE argument, - for stdin, or --file PATH")
    if file is not None:
        text, source, stem = read_text(file, name=f"--file {file}"), str(file), file.stem
    elif puzzle == "-":
        try:  # the bytes where there are any, so that a binary stdin is named as one line, not decoded by the locale
            text = decode_text(stdin.buffer.read(), "stdin") if hasattr(stdin, "buffer") else stdin.read()
        except UnicodeDecodeError as e:  # a text stream of another encoding than UTF-8
            raise UserError(f"stdin: not readable text ({e.reason})") from None
        source, stem = "stdin", None
    else:
        text, source, stem = puzzle, "argument", None
    puzzles = task.parse(text, source, stem)
    if not puzzles:
        raise UserError(f"{source}: no puzzle found (expected a {task.describe()})")
    return puzzles


# ---------------------------------------------------------------------------------------------------- prediction


def check_puzzles(task: SolveTask, puzzles: list[Puzzle], allow_unsolvable: bool = False) -> None:
    """Every puzzle against its task's rules before the model runs (`problem`: tasks/sudoku.py, tasks/maze.py): one
    without a solution is a one-line UserError naming it (the model would only guess), or with `allow_unsolvable` a
    note beside the model's answer; a check left unfinished (the Sudoku search's bound) is a note."""
    for p in puzzles:
        problem, note = task.problem(p)
        if problem is not None and not allow_unsolvable:
            raise UserError(
                f"{p.name}: not a solvable {task.describe()}: {problem} (--allow-unsolvable runs the model anyway)"
            )
        for line in (f"not solvable: {problem}" if problem is not None else None, note):
            if line is not None and line not in p.notes:
                p.notes.append(line)


def solve(
    solver: Solver,
    puzzles: list[Puzzle],
    mmax: int,
    options: TestTimeOptions | None = None,
    progress: bool = True,
    allow_unsolvable: bool = False,
) -> list[Answer]:
    """Every puzzle checked (`check_puzzles`), then through the model in batches, each answer decoded and checked.
    With `options` beyond the plain ones, each puzzle's answer is chosen over transformed copies and noisy
    trajectories (hrm_reason.evaluate.tta); copies beyond the task's group are capped and the batch cut to the memory
    their carried states need, each with a notice on stderr. `mmax` above MAX_MMAX is a UserError."""
    check_mmax(mmax, solver.halt_max_steps)
    options = options or TestTimeOptions()
    options, capped = fit_to_group(options, solver.task.transforms if options.tta > 1 else None)
    bs, cut = solver.batch_size, None
    if options.trajectories > 1 and puzzles:
        row = carry_row_bytes(solver.model, puzzles[0].tokens.size, solver.device)
        bs, cut = fit_batch(min(bs, len(puzzles)), options, row, free_memory(solver.device))
    check_puzzles(solver.task, puzzles, allow_unsolvable)
    for notice in (capped, cut):
        if notice is not None:
            print(notice, file=sys.stderr)
    answers: list[Answer] = []
    transforms = solver.task.transforms if options.tta > 1 else None
    bar = progress_bar(total=len(puzzles), desc=f"solve (mmax={mmax})", unit="puzzle", enabled=progress, leave=False)
    for start in range(0, len(puzzles), bs):
        chunk = puzzles[start : start + bs]
        batch = {
            "inputs": torch.from_numpy(np.stack([p.tokens for p in chunk]).astype(np.int32)).to(solver.device),
            "puzzle_identifiers": torch.tensor([p.identifier for p in chunk], dtype=torch.int32, device=solver.device),
        }
        pred = predict(trajectories(solver.model, batch, mmax, options, transforms, key=(start,)), mmax, options.select)
        tokens = pred.preds.cpu().numpy()
        confidence, segments = pred.confidence.cpu().tolist(), pred.segments.cpu().tolist()
        for i, p in enumerate(chunk):
            text, grid, valid, check, shortest = solver.task.answer(p, tokens[i])
            answers.append(
                Answer(p, tokens[i], int(segments[i]), float(confidence[i]), text, grid, valid, check, shortest)
            )
        bar.update(len(chunk))
    bar.close()
    return answers


# ------------------------------------------------------------------------------------------------------ reporting


def format_answers(answers: list[Answer]) -> str:
    blocks = []
    for a in answers:
        head = (
            f"{a.puzzle.name}: {a.segments} segment{'s' * (a.segments > 1)}, confidence {a.confidence:.3f}; {a.check}"
        )
        blocks.append("\n".join([head, *(f"note: {n}" for n in a.puzzle.notes), a.text]))
    return "\n\n".join(blocks)


def answers_json(solver: Solver, answers: list[Answer], mmax: int, pngs: list[Path] | None = None) -> str:
    puzzles = [a.to_dict() for a in answers]
    for d, png in zip(puzzles, pngs or []):
        d["png"] = str(png)
    return json.dumps({"task": solver.task.kind, "mmax": mmax, "puzzles": puzzles})


def write_pngs(solver: Solver, answers: list[Answer], out_dir: Path) -> list[Path]:
    """One picture per puzzle: the puzzle beside the answer, cells breaking a rule marked (hrm_reason.viz)."""
    try:
        from hrm_reason.viz.canvas import panel_figure, save_png
        from hrm_reason.viz.grids import GridSpec, content_window, draw_grid, rule_violations
        from hrm_reason.viz.puzzles import PANEL_INCHES
    except ImportError:
        raise UserError('--png: needs matplotlib (pip install "hrm-reason[viz]")') from None
    task = solver.task
    side = math.isqrt(answers[0].tokens.size) if answers else 0
    spec = GridSpec(
        task.kind, side, 0, ignore_label_id=0, box=(task.r, task.c) if isinstance(task, SudokuSolve) else None
    )
    paths = []
    for i, a in enumerate(answers):
        fig, (ax_in, ax_out), _ = panel_figure(
            2, 2, PANEL_INCHES[task.kind], title_h=0.3, header=a.puzzle.name, footer=a.check
        )
        givens = a.puzzle.tokens >= 2 if task.kind == "sudoku" else None
        windows = content_window(spec, a.puzzle.tokens), content_window(spec, a.tokens)
        frame = max(w[0].stop - w[0].start for w in windows), max(w[1].stop - w[1].start for w in windows)
        draw_grid(ax_in, spec, a.puzzle.tokens, givens=givens, window=windows[0], frame=frame)
        violations = rule_violations(spec, a.tokens, a.puzzle.tokens)
        draw_grid(ax_out, spec, a.tokens, givens=givens, violations=violations, window=windows[1], frame=frame)
        ax_in.set_title("puzzle", fontsize=10)
        ax_out.set_title(f"answer: {a.segments} segments, q {a.confidence:.2f}", fontsize=10)
        paths.append(save_png(fig, Path(out_dir) / f"solve_{i + 1:04d}.png"))
    return paths
