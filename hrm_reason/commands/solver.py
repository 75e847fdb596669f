"""The solver of `hrm solve` (commands/solve.py is the command): the user's own puzzles through a trained model,
answers checked against the rules.

A puzzle is read in the format people write it (a Sudoku line, a text maze, an ARC task JSON) and encoded by its task
(hrm_reason.tasks, `Task.parse`), run for at most mmax segments with ACT halting at inference (the first
segment where q_halt > q_continue, as `hrm eval`'s ACT column), and the answer is decoded back to text and checked by
the task (`Task.answer`): Sudoku rules and givens, a maze path from S to G and whether it is shortest; ARC has no rules
to check.

Which task a model solves comes from its dataset's `builder.name` (dataset.json of the run's data), else from the
token layout as `hrm viz` reads it (datasets of other tools). A puzzle that does not fit the model is a one-line
UserError naming the puzzle; all puzzles are parsed, then checked against their task's rules (`check_puzzles`: one
without a solution is refused, as the model would only guess at it), before the model runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hrm_reason.checkpoint import saved_model_config
from hrm_reason.data.puzzle import PuzzleDatasetMetadata, dataset_kind
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import check_mmax
from hrm_reason.evaluate.tta import TestTimeOptions, carry_row_bytes, fit_batch, fit_to_group, predict, trajectories
from hrm_reason.load import load_run
from hrm_reason.models.registry import family_spec
from hrm_reason.readers import decode_text, read_json, read_json_model, read_text
from hrm_reason.runtime.device import free_memory, resolve_device
from hrm_reason.runtime.logs import progress_bar
from hrm_reason.tasks import task_classes, task_of
from hrm_reason.tasks.base import Puzzle, Task

# --------------------------------------------------------------------------------------------------------- answers


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
            **({"id": self.puzzle.ident} if self.puzzle.ident is not None else {}),
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


def task_for(meta: PuzzleDatasetMetadata, names: Sequence[str] | None, where: str) -> Task:
    """The task a model of this dataset solves (hrm_reason.tasks `task_of`: `builder.name`, else the token layout)."""
    task = task_of(meta, where, list(names) if names is not None else None)
    if task is None:
        name = (meta.builder or {}).get("name")
        kinds = ", ".join(cls.kind for cls in task_classes()[:-1]) + f" and {task_classes()[-1].kind}"
        raise UserError(
            f"{where}: the model's task is unknown (builder.name {name!r}, seq_len {meta.seq_len}, vocab_size "
            f"{meta.vocab_size}); hrm solve knows {kinds}"
        )
    return task


@dataclass
class Solver:
    model: nn.Module
    task: Task
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
        if task_of(meta, str(where), None) is None and not data.exists():  # a task only its dataset declares
            raise UserError(
                f"{path}: its dataset {data} (the run's data_path) is not found from {Path.cwd()}, and the model's task "
                "is declared there: run from the directory training ran in, or --config a copy of the run's config "
                "with data_path set to where the dataset is"
            )
    task = task_for(meta, names, str(where))
    batch = config.eval_global_batch_size or config.global_batch_size
    return Solver(loaded.model, task, config.arch.halt_max_steps, batch, device)


def read_puzzles(task: Task, puzzle: str | None, file: Path | None, stdin: Any) -> list[Puzzle]:
    """The puzzles of the argument (`-`: stdin) or of --file, exactly one of them."""
    if (puzzle is None) == (file is None):
        raise UserError("give exactly one puzzle source: a PUZZLE argument, - for stdin, or --file PATH")
    if file is not None and (read := task.parse_file(file)) is not None:
        return read
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


def check_puzzles(task: Task, puzzles: list[Puzzle], allow_unsolvable: bool = False) -> None:
    """Every puzzle against its task's rules before the model runs (`Task.problem`): one
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
    answer_tokens = solver.task.answer_tokens()
    allowed = None if answer_tokens is None else torch.from_numpy(answer_tokens).to(solver.device)
    bar = progress_bar(total=len(puzzles), desc=f"solve (mmax={mmax})", unit="puzzle", enabled=progress, leave=False)
    for start in range(0, len(puzzles), bs):
        chunk = puzzles[start : start + bs]
        batch = {
            "inputs": torch.from_numpy(np.stack([p.tokens for p in chunk]).astype(np.int32)).to(solver.device),
            "puzzle_identifiers": torch.tensor([p.identifier for p in chunk], dtype=torch.int32, device=solver.device),
        }
        segments_run = trajectories(solver.model, batch, mmax, options, transforms, key=(start,), allowed=allowed)
        pred = predict(segments_run, mmax, options.select)
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
        name = a.puzzle.name if a.puzzle.ident is None else f"{a.puzzle.name} (id {a.puzzle.ident})"
        head = f"{name}: {a.segments} segment{'s' * (a.segments > 1)}, confidence {a.confidence:.3f}; {a.check}"
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
        from hrm_reason.viz.grids import content_window, draw_grid, rule_violations, task_spec
    except ImportError:
        raise UserError('--png: needs matplotlib (pip install "hrm-reason[viz]")') from None
    task = solver.task
    spec = task_spec(task, answers[0].tokens.size if answers else 0)
    paths = []
    for i, a in enumerate(answers):
        fig, (ax_in, ax_out), _ = panel_figure(
            2, 2, task.look.panel_inches[0], title_h=0.3, header=a.puzzle.name, footer=a.check
        )
        givens = task.givens(a.puzzle.tokens)
        windows = content_window(spec, a.puzzle.tokens), content_window(spec, a.tokens)
        frame = max(w[0].stop - w[0].start for w in windows), max(w[1].stop - w[1].start for w in windows)
        draw_grid(ax_in, spec, a.puzzle.tokens, givens=givens, window=windows[0], frame=frame)
        violations = rule_violations(spec, a.tokens, a.puzzle.tokens)
        draw_grid(ax_out, spec, a.tokens, givens=givens, violations=violations, window=windows[1], frame=frame)
        ax_in.set_title("puzzle", fontsize=10)
        ax_out.set_title(f"answer: {a.segments} segments, q {a.confidence:.2f}", fontsize=10)
        paths.append(save_png(fig, Path(out_dir) / f"solve_{i + 1:04d}.png"))
    return paths
