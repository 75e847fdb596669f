"""What a task is, declared once: the `Task` every benchmark implements (tasks/sudoku.py, tasks/maze.py, tasks/arc.py),
and what it gives evaluation: its own score per segment (`SegmentMetric`: maze optimal paths, ARC votes), its symmetry
group for test-time augmentation (`TaskTransforms`), and the one ranking of votes (`vote_order`).

A `Task` is built once from a dataset's metadata (`from_metadata`; `hrm_reason.tasks.task_of` picks the class) and
then answers for everything that depends on the benchmark: the token layout and its checks, the symmetry group, the
metrics, augmentation on the fly, the rules an answer must keep, the text people write puzzles in (`hrm solve`) and
how pictures draw its grids (`look`, read by hrm_reason/viz). Callers outside hrm_reason/tasks never ask which task it
is. This module imports neither torch nor the data layer at run time: the builders read the task modules without that
start-up cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    import torch

    from hrm_reason.data.puzzle import Augmentation, PuzzleDatasetMetadata, PuzzleSplit
    from hrm_reason.models.act import ACTOutput


class SegmentMetric(Protocol):
    """A task's own score, computed on the fly beside exact accuracy (maze: optimal paths; ARC: votes).

    `update` sees every segment of every batch (segment is 0-based; rows where `valid` is false are padding) and must
    only reduce, never keep logits. `result` runs once, after all batches, on every rank: it reduces across ranks when
    world_size > 1 and returns JSON-ready values. A list of length mmax is a per-segment column in the eval table.
    """

    def update(
        self, segment: int, preds: torch.Tensor, out: ACTOutput, batch: dict[str, torch.Tensor], valid: torch.Tensor
    ) -> None: ...

    def result(self, world_size: int) -> dict[str, Any]: ...


class TaskTransforms(Protocol):
    """A task's symmetry group acting on token sequences [rows, seq_len], with exact inverses (hrm_reason.tasks).

    `draw` returns the elements of copies 1..copies-1 (copy 0 is the identity), each one element per row; drawn
    sequentially from `rng`, so the first k copies do not depend on how many are drawn."""

    @property
    def group_size(self) -> int:
        """Elements of the group: more copies than this only repeat them (evaluate/tta.py caps --tta there)."""
        ...

    @property
    def group_name(self) -> str: ...

    def draw(self, rng: np.random.Generator, rows: int, copies: int) -> list[Any]: ...

    def apply(self, tokens: np.ndarray, element: Any) -> np.ndarray: ...

    def invert(self, tokens: np.ndarray, element: Any) -> np.ndarray: ...


def vote_order(counts: torch.Tensor, mean_q: torch.Tensor) -> torch.Tensor:
    """Candidates best first along the last axis: most votes, then the highest mean confidence, then the earlier
    candidate. The one ranking of every vote here and in ARC's (tasks/arc.py `rank_candidates`)."""
    by_q = mean_q.sort(dim=-1, descending=True, stable=True).indices
    by_count = counts.gather(-1, by_q).sort(dim=-1, descending=True, stable=True).indices
    return by_q.gather(-1, by_count)


# ------------------------------------------------------------------------------------------------------ hrm solve


def text_lines(text: str) -> list[str]:
    """The lines of a text as typed, without the carriage returns of Windows line ends."""
    return [line.rstrip("\r") for line in text.split("\n")]


@dataclass
class Puzzle:
    """One puzzle someone wrote, in the task's token layout, and how it was written (to write the answer the same
    way)."""

    name: str  # "puzzles.txt line 3", "task.json test 1": what errors and answers are called
    tokens: np.ndarray  # [seq_len] int32
    identifier: int  # the puzzle identifier fed to the puzzle embedding
    layout: str | None = None  # Sudoku: the lines as typed, separators and spacing kept
    expected: np.ndarray | None = None  # ARC: the test output when the task file gives it
    notes: list[str] = field(default_factory=list)
    ident: str | int | None = None  # a declared task's example "id", as the file gives it


class Reading(NamedTuple):
    """A model's answer read back by its task: the text written as the puzzle was, the grid for JSON (rows of digits
    or strings), whether it keeps the rules (None: the task has none to check), the verdict in words, and whether a
    maze path is shortest (None for other tasks)."""

    text: str
    grid: list[Any] | str  # a declared task's: the answer as its examples file writes it
    valid: bool | None
    check: str
    shortest: bool | None = None


# ------------------------------------------------------------------------------------------------------- pictures


MARKS = "shaded: changed since the previous segment;  red frame: differs from the answer"  # what pictures mark


@dataclass(frozen=True)
class GridLook:
    """How pictures (hrm_reason/viz) draw a task's grids: data only, nothing here draws."""

    puzzle_legend: str  # the footer of `hrm viz puzzle`
    legend: str  # the footer of `hrm viz predictions`: what the marks mean
    panel_inches: tuple[float, float]  # a panel's side in `hrm viz puzzle` (and hrm solve --png), in predictions
    colours: dict[int, str] = field(default_factory=dict)  # token -> colour; empty: one per token id (tab20)
    digits: bool = False  # a board of digits (token t >= 2 shows t - 1, token 1 is a blank) with thick box lines
    blocks: tuple[int, int] | None = None  # rows x columns of the boxes that thick lines outline
    grid_lines: bool = False  # thin lines between all cells
    token_text: bool = False  # the token id written in each cell of a small grid
    changed_fill: bool = False  # changed cells filled (else hatched, leaving the colours readable)
    endpoints: tuple[tuple[int, str], ...] = ()  # (token, letter): cells drawn as lettered discs larger than a cell
    crosses: bool = False  # a wrong cell gets a white cross (red is one of the colours), else a red frame
    content_token: int | None = None  # show only the bounding box of the cells not holding this token (a canvas)
    symbols: dict[int, str] = field(default_factory=dict)  # token -> the text written in its cells (declared tasks)


# --------------------------------------------------------------------------------------------------------- tasks


class Task:
    """One benchmark as every layer meets it. Subclasses set the class attributes and override the hooks that
    apply; the defaults describe a task without rules, metrics or augmentation on the fly."""

    kind: ClassVar[str]  # the `builder.name` of its datasets (dataset.json)
    owner: ClassVar[str]  # whose layout, in words: "the maze's"
    metric_name: ClassVar[str | None] = None  # its extra evaluation metric, named on stderr when chosen
    on_the_fly: ClassVar[bool] = False  # whether training can draw its symmetries on the fly (`augmentation`)
    blank_identifier: int = 0  # the puzzle identifier of a puzzle the model was not trained on

    # --- built once from a dataset's metadata

    @classmethod
    def from_metadata(cls, metadata: PuzzleDatasetMetadata, where: str, names: list[str] | None = None) -> Task:
        """The task of a dataset whose builder record names it (or whose layout is its own); a shape that is not the
        task's is a one-line UserError naming `where`. `names`: identifiers.json, where the task reads it."""
        raise NotImplementedError

    @classmethod
    def fits_shape(cls, seq_len: int, vocab_size: int) -> bool:
        """Whether a dataset of these shapes alone (no builder record, no data) is taken to be this task's: what
        pictures and `hrm solve` go by when they only have a model's shapes."""
        return False

    @classmethod
    def layout_of(cls, split: PuzzleSplit) -> tuple[Task, str] | None:
        """The task of a split with no builder record whose data shows this task's layout, and why; else None."""
        return None

    # --- what evaluation and training ask

    @property
    def transforms(self) -> TaskTransforms:
        """The symmetry group for test-time augmentation."""
        raise NotImplementedError

    def segment_metrics(self, split: PuzzleSplit, mmax: int) -> list[SegmentMetric]:
        """The task's own metrics beside exact accuracy (none: exact accuracy alone)."""
        return []

    @property
    def symmetry_name(self) -> str:
        """The group augmentation on the fly draws from, in words ("the maze's 8 dihedral maps"); for a task without
        one, why it has none."""
        raise NotImplementedError

    def augmentation(self, kind: str, split: PuzzleSplit) -> Augmentation | None:
        """The symmetry drawn on the fly for `augment=kind` (tasks whose `on_the_fly` is true)."""
        raise NotImplementedError

    def rule_violations(self, preds: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        """Flat tokens of a prediction and its puzzle -> flat bool: the cells that break the task's rules whatever the
        answer is (none for a task without rules)."""
        return np.zeros(np.asarray(preds).shape, dtype=bool)

    def givens(self, inputs: np.ndarray) -> np.ndarray | None:
        """Flat bool: the cells the puzzle gives, drawn apart from those a model fills (None: not told apart)."""
        return None

    # --- hrm solve: the text people write, and the answer read back

    def describe(self) -> str:
        """The task in a few words, for messages ("9x9 Sudoku (3x3 boxes)")."""
        return self.kind

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]:
        """The puzzles of a text as people write them; a puzzle that does not fit is a UserError naming it."""
        raise NotImplementedError

    def problem(self, puzzle: Puzzle) -> tuple[str | None, str | None]:
        """(why the puzzle has no solution, a note on a check left unfinished); None, None for a puzzle to solve."""
        return None, None

    def answer_tokens(self) -> np.ndarray | None:
        """The token ids an answer may hold at every place: `hrm solve` answers with the likeliest of them, so that an
        answer is always written in the task's symbols (evaluation scores the plain argmax); None: any token."""
        return None

    def parse_file(self, path: Path) -> list[Puzzle] | None:
        """The puzzles of a file that is not text (`hrm solve --file`); None: read it as text (`parse`)."""
        return None

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> Reading:
        """The model's answer ([seq_len] tokens) read back and checked against the rules and the puzzle."""
        raise NotImplementedError

    # --- pictures

    def grid_shape(self, seq_len: int) -> tuple[int, int] | None:
        """Rows x columns pictures draw a sequence of `seq_len` tokens as; None: a square (the benchmarks')."""
        return None

    @property
    def look(self) -> GridLook:
        raise NotImplementedError
