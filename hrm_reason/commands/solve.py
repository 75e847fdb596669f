"""`hrm solve` from its arguments to what it prints: the --adapt route (commands/adapt.py `solve_adapted`: one ARC task
the model never saw) or the solver of commands/solver.py on the puzzles given, with --png claimed before the model
loads. The work is solver.py's; this module only routes and orders it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from hrm_reason.commands.adapt import refuse_unused, solve_adapted
from hrm_reason.commands.cli_options import one_of, written
from hrm_reason.commands.solver import answers_json, format_answers, load_solver, read_puzzles, solve, write_pngs
from hrm_reason.outputs import SOLVE_PNG, claim


def solve_command(
    puzzle: str | None,
    run: Path | None,
    checkpoint: Path | None,
    config: Path | None,
    file: Path | None,
    stdin: TextIO,
    mmax: int | None,
    allow_unsolvable: bool,
    as_json: bool,
    png: Path | None,
    adapt_steps: int | None,
    device: str,
    progress: bool,
    test_time: Any,
) -> Iterator[str]:
    """What `hrm solve` prints: the answers (as text or JSON), then where each picture went. With --adapt
    (`adapt_steps`), `solve_adapted` answers, refusing the flags it does not use."""
    if adapt_steps is not None:
        others = {"--checkpoint": checkpoint, "--config": config, "--png": png, "PUZZLE": puzzle}
        why = "it adapts a run's rows, then votes"
        refuse_unused(others | {"--allow-unsolvable": allow_unsolvable}, test_time, why)
        yield solve_adapted(run, file, adapt_steps, mmax, as_json, device, progress)
        return
    claim(png, SOLVE_PNG)
    solver = load_solver(one_of(run, checkpoint), config, device)
    puzzles = read_puzzles(solver.task, puzzle, file, stdin)
    budget = mmax or solver.halt_max_steps
    answers = solve(solver, puzzles, budget, test_time, progress=progress, allow_unsolvable=allow_unsolvable)
    pngs = write_pngs(solver, answers, png) if png is not None else []
    if as_json:
        yield answers_json(solver, answers, budget, pngs or None)
        return
    yield format_answers(answers)
    yield from written(pngs)
