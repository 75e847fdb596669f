"""Maze: the token layout, the rules of a path, and optimal-path accuracy (any shortest S-G path counts).

Tokens are those of the original builder (docs/data.md, "Maze"): PAD 0, '#' 1, ' ' 2, 'S' 3, 'G' 4, 'o' 5; the label is
the grid with the cells of one shortest path marked 'o'. Written once here for the builder (datasets_build/maze.py),
evaluation and the pictures (hrm_reason/viz).

The paper scores a maze as solved when the predicted path is "valid and optimal"; exact match against one labelled
path marks every other shortest path wrong. Here a prediction is correct when the cells it marks as path ('o') are
open cells that, with S and G, contain a walk from S to G, and there are exactly d(S, G) - 1 of them (d: the
breadth-first-search distance in moves). Such a walk cannot be shorter than d, so it uses every marked cell once and is
a shortest path; conversely any shortest path passes. Cells not marked 'o' are not scored (exact match scores them).

The check is local once the BFS distance `lvl` from S is known: every marked cell c needs a neighbour in
{S} + marked cells at distance lvl(c) - 1, and G needs one at d - 1; following those links back from G reaches S in
d steps. The BFS runs once per batch (a wavefront over all mazes of the batch at once) and serves every segment.

The breadth-first search is the package's one (`wavefront`, bit-parallel: a grid row is one uint64, bit j = column j,
so a step over thousands of grids is a few shifts and ANDs on [n, H] words): the builder's screening and pair draws
(datasets_build/maze.py), the labels, the metric and `hrm solve` all run it. `MazeTask` is the maze as the other
layers meet it (tasks/base.py `Task`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from hrm_reason.data.puzzle import PuzzleDatasetMetadata, PuzzleSplit
from hrm_reason.errors import UserError
from hrm_reason.tasks.base import MARKS, GridLook, Puzzle, Reading, Task, text_lines
from hrm_reason.tasks.dihedral import DihedralTransforms

if TYPE_CHECKING:
    from hrm_reason.models.act import ACTOutput

CHARSET = "# SGo"
PAD, WALL, OPEN, START, GOAL, PATH = 0, 1, 2, 3, 4, 5
VOCAB_SIZE = len(CHARSET) + 1
MAX_SIDE = 62  # the widest grid the package takes (rows are 64-bit words; datasets_build/options.py restates it)

TOKEN_OF = np.zeros(256, dtype=np.uint8)  # ASCII byte -> token; 0: not a maze character
TOKEN_OF[np.frombuffer(CHARSET.encode("ascii"), dtype=np.uint8)] = np.arange(1, len(CHARSET) + 1, dtype=np.uint8)


def grid_side(seq_len: int) -> int | None:
    """Side of the square grid a sequence of this length holds, or None when it is not a square."""
    side = math.isqrt(seq_len)
    return side if side * side == seq_len else None


def rule_violations(grid: np.ndarray, given: np.ndarray) -> np.ndarray:
    """[H, W] tokens of a prediction and of its maze -> [H, W] bool. Walls, start and goal are fixed: changing one is a
    violation; so is a path cell on a wall, and a broken path: a path cell with fewer than two path/start/goal
    neighbours, or a start or goal with none."""
    fixed = np.isin(given, (WALL, START, GOAL))
    bad = (fixed & (grid != given)) | (~fixed & ~np.isin(grid, (OPEN, PATH)))
    on_route = np.pad(np.isin(grid, (PATH, START, GOAL)), 1)
    neighbours = on_route[:-2, 1:-1].astype(int) + on_route[2:, 1:-1] + on_route[1:-1, :-2] + on_route[1:-1, 2:]
    bad |= (grid == PATH) & (neighbours < 2)
    bad |= np.isin(grid, (START, GOAL)) & (neighbours < 1)
    return bad


# ------------------------------------------------------------------------------------------ bit-parallel BFS

_ONE = np.uint64(1)


def pack_rows(mask: np.ndarray) -> np.ndarray:
    """[..., H, W] bool -> [..., H] uint64 rows, bit j = column j."""
    padded = np.zeros(mask.shape[:-1] + (64,), dtype=bool)
    padded[..., : mask.shape[-1]] = mask
    return np.packbits(padded, axis=-1, bitorder="little").view("<u8")[..., 0].astype(np.uint64)


def unpack_rows(rows: np.ndarray, width: int) -> np.ndarray:
    """[..., H] uint64 rows -> [..., H, W] bool."""
    octets = np.ascontiguousarray(rows.astype("<u8"))[..., None].view(np.uint8)
    return np.unpackbits(octets, axis=-1, bitorder="little")[..., :width].astype(bool)


def popcount(rows: np.ndarray) -> np.ndarray:
    """Set cells per grid: [..., H] uint64 -> [...] int64."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return np.bitwise_count(rows).sum(-1, dtype=np.int64)
    return np.unpackbits(np.ascontiguousarray(rows.astype("<u8"))[..., None].view(np.uint8), axis=-1).sum(
        (-1, -2), dtype=np.int64
    )


def first_cell(rows: np.ndarray) -> np.ndarray:
    """Flat index (r * 64 + c) of the first set cell (lowest row, lowest column) of each [H] grid; rows must be
    non-empty."""
    r = np.argmax(rows != 0, axis=1)
    word = rows[np.arange(rows.shape[0]), r]
    low = word & (~word + _ONE)  # lowest set bit
    return r * 64 + np.log2(low.astype(np.float64)).astype(np.int64)


def one_hot_rows(cells: np.ndarray, height: int) -> np.ndarray:
    """[n] flat indices (r * 64 + c) -> [n, H] rows with that one cell set."""
    rows = np.zeros((cells.size, height), dtype=np.uint64)
    rows[np.arange(cells.size), cells // 64] = _ONE << (cells % 64).astype(np.uint64)
    return rows


def _expand(frontier: np.ndarray, full: np.uint64) -> np.ndarray:
    """Cells of the frontier and their 4 neighbours."""
    grown = frontier | ((frontier << _ONE) & full) | (frontier >> _ONE)
    grown[:, 1:] |= frontier[:, :-1]
    grown[:, :-1] |= frontier[:, 1:]
    return grown


@dataclass
class Wave:
    reach: np.ndarray  # [n, H] cells reachable from the seeds
    last: np.ndarray  # [n, H] the farthest layer
    ecc: np.ndarray  # [n] its distance (moves)
    within: np.ndarray | None  # [n, H] cells at distance <= `near` (per grid)
    planes: np.ndarray | None  # [K, n, H] bit k of every reached cell's distance (`distances`)


def wavefront(
    open_rows: np.ndarray,
    seeds: np.ndarray,
    full: np.uint64,
    near: int | np.ndarray | None = None,
    planes: bool = False,
) -> Wave:
    """BFS from `seeds` through `open_rows` ([n, H] rows, `full` the row of all W columns) in every grid at once;
    finished grids leave the working set so long ones do not drag short ones. `near` also keeps the cells within that
    many moves; `planes` the bit planes of every cell's distance (plane k collects the layers whose step has bit k)."""
    frontier = seeds & open_rows
    n, height = frontier.shape
    reach, last = frontier.copy(), frontier.copy()
    ecc = np.zeros(n, dtype=np.int64)
    within = frontier.copy() if near is not None else None
    bits = np.zeros((max(1, (height * 64).bit_length()), n, height), dtype=np.uint64) if planes else None
    act = np.flatnonzero(frontier.any(axis=1))
    f, r, o = frontier[act], reach[act], open_rows[act]
    k = np.broadcast_to(np.asarray(near if near is not None else -1, dtype=np.int64), (n,))[act]
    step = 0
    while act.size:
        step += 1
        nxt = _expand(f, full) & o & ~r
        grew = nxt.any(axis=1)
        if not grew.all():
            stop = ~grew
            reach[act[stop]], last[act[stop]], ecc[act[stop]] = r[stop], f[stop], step - 1
            if within is not None:  # finished before reaching their capture step: everything is within
                early = stop & (step <= k)
                within[act[early]] = r[early]
            act, nxt, r, o, k = act[grew], nxt[grew], r[grew], o[grew], k[grew]
        r = r | nxt
        f = nxt
        if within is not None:
            capture = k == step
            within[act[capture]] = r[capture]
        if bits is not None:
            for b in range(step.bit_length()):
                if step >> b & 1:
                    bits[b, act] |= nxt
    return Wave(reach, last, ecc, within, bits)


def distances(passable: np.ndarray, source: np.ndarray) -> np.ndarray:
    """Moves from the source cells to every cell through passable cells (4-neighbour), -1 where unreachable (a source
    on an impassable cell is none). passable, source: [B, H, W] bool, W <= 64 -> [B, H, W] int32."""
    width = passable.shape[-1]
    wave = wavefront(pack_rows(passable), pack_rows(source), np.uint64((1 << width) - 1), planes=True)
    assert wave.planes is not None
    weights = (np.int64(1) << np.arange(wave.planes.shape[0], dtype=np.int64)).reshape(-1, 1, 1, 1)
    moves = (unpack_rows(wave.planes, width).astype(np.int64) * weights).sum(0)
    return np.where(unpack_rows(wave.reach, width), moves, -1).astype(np.int32)


def start_levels(grids: np.ndarray) -> np.ndarray:
    """BFS distance from S for [B, H, W] token grids; -1 everywhere in a maze without exactly one S."""
    start = grids == START
    lvl = distances((grids == OPEN) | start | (grids == GOAL), start)
    one_start = start.reshape(start.shape[0], -1).sum(-1) == 1
    return np.where(one_start[:, None, None], lvl, -1).astype(np.int32)


def bfs_distances(passable: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """`distances` of torch masks ([B, H, W] bool, on any device; W <= MAX_SIDE), returned on their device."""
    if passable.shape != source.shape or passable.dim() != 3:
        raise ValueError(f"expected two [B, H, W] masks, got {tuple(passable.shape)} and {tuple(source.shape)}")
    if passable.shape[-1] > MAX_SIDE:
        raise ValueError(f"grids wider than {MAX_SIDE} cells are not supported, got {passable.shape[-1]}")
    moves = distances(passable.cpu().numpy(), source.cpu().numpy())
    return torch.from_numpy(moves).to(passable.device)


def start_distances(grids: torch.Tensor) -> torch.Tensor:
    """`start_levels` of torch token grids, returned on their device."""
    return torch.from_numpy(start_levels(grids.cpu().numpy())).to(grids.device)


def label_paths(grids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The canonical label of each maze ([n, H, W] tokens) and its shortest-path length in moves.

    Walking back from G, the next cell is the first neighbour one step closer to S in the order up, down, left, right.
    The generator's rule (datasets_build/maze.py); training with augment=symmetry relabels generated mazes by it.
    """
    n, H, W = grids.shape
    labels = grids.copy()
    if n == 0:
        return labels, np.zeros(0, dtype=np.int64)
    lvl = start_levels(grids)
    goal = np.argmax((grids == GOAL).reshape(n, -1), axis=1)
    d = lvl.reshape(n, -1)[np.arange(n), goal].astype(np.int64)
    if (d < 1).any():
        raise ValueError("label_paths: a maze whose goal is not reachable from its start")
    padded = np.full((n, H + 2, W + 2), -9, dtype=np.int64)
    padded[:, 1:-1, 1:-1] = lvl
    r, c = goal // W + 1, goal % W + 1
    level = d.copy()
    rows = np.arange(n)
    for _ in range(int(d.max()) - 1):
        go = level > 1  # the next cell is not S
        nr, nc = r.copy(), c.copy()
        found = np.zeros(n, dtype=bool)
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            hit = go & ~found & (padded[rows, r + dr, c + dc] == level - 1)
            nr, nc = np.where(hit, r + dr, nr), np.where(hit, c + dc, nc)
            found |= hit
        r, c = nr, nc
        labels[rows[go], r[go] - 1, c[go] - 1] = PATH
        level = level - go
    return labels, d


def optimal_path_correct(grids: torch.Tensor, preds: torch.Tensor, lvl: torch.Tensor | None = None) -> torch.Tensor:
    """[B] bool: the cells `preds` marks 'o' form a shortest S-G path of the maze `grids` (both [B, H, W] tokens).

    `lvl` (start_distances(grids)) may be passed to reuse one BFS across many predictions of the same mazes.
    A maze without exactly one S and one G, or with G unreachable, has no correct prediction.
    """
    if lvl is None:
        lvl = start_distances(grids)
    goal = grids == GOAL
    one_goal = goal.flatten(1).sum(-1) == 1
    d = torch.where(goal, lvl, torch.zeros_like(lvl)).flatten(1).sum(-1)  # distance S -> G (-1: unreachable)
    marked = preds == PATH
    # a cell has a "predecessor" when a neighbour in {S} + marked sits one step closer to S
    chain = F.pad(marked | (grids == START), (1, 1, 1, 1), value=False)
    lvl_p = F.pad(lvl, (1, 1, 1, 1), value=-2)
    H, W = grids.shape[-2:]
    has_pred = torch.zeros_like(marked)
    for dr, dc in ((0, 1), (2, 1), (1, 0), (1, 2)):  # up, down, left, right neighbour
        has_pred |= chain[:, dr : dr + H, dc : dc + W] & (lvl_p[:, dr : dr + H, dc : dc + W] == lvl - 1)
    # Every mark needs a predecessor and a level >= 1: a wall or padding is unreachable (level -1) and S is level 0;
    # a mark on G would need d - 1 other marks to link, one too many. So no separate "open cells only" test is needed.
    linked = ~(marked & ~(has_pred & (lvl >= 1))).flatten(1).any(-1)
    goal_linked = (goal & has_pred).flatten(1).any(-1)
    right_length = marked.flatten(1).sum(-1) == d - 1
    return one_goal & (d >= 1) & linked & goal_linked & right_length


class OptimalPathAccuracy:
    """SegmentMetric: optimal-path accuracy after every segment, and at the ACT halting segment.

    Only counts are kept (on the device, read once in `result`); the BFS from S is computed once per batch.
    """

    def __init__(self, mmax: int, side: int) -> None:
        self.mmax, self.side = mmax, side
        self.sums: torch.Tensor | None = None  # [0:mmax] correct per segment, [mmax] ACT correct, [mmax+1] count
        self._inputs: torch.Tensor | None = None
        self._grids: torch.Tensor | None = None
        self._lvl: torch.Tensor | None = None
        self._act_done: torch.Tensor | None = None

    def update(self, segment: int, preds: Tensor, out: ACTOutput, batch: dict[str, Tensor], valid: Tensor) -> None:
        inputs = batch["inputs"]
        if self.sums is None:
            self.sums = torch.zeros(self.mmax + 2, dtype=torch.float64, device=preds.device)
        if inputs is not self._inputs:  # a new batch: one BFS for all of its segments
            self._inputs = inputs
            self._grids = inputs.view(-1, self.side, self.side)
            self._lvl = start_distances(self._grids)
            self._act_done = torch.zeros_like(valid)
            self.sums[self.mmax + 1] += valid.sum()
        assert self._grids is not None and self._act_done is not None
        ok = valid & optimal_path_correct(self._grids, preds.view(-1, self.side, self.side), self._lvl)
        self.sums[segment] += ok.sum()
        # ACT: the segment where the example halts, by the rule `evaluate` uses (q_halt > q_continue, or the last)
        halt = valid & ~self._act_done & ((out.q_halt_logits > out.q_continue_logits) | (segment == self.mmax - 1))
        self.sums[self.mmax] += (halt & ok).sum()
        self._act_done |= halt

    def result(self, world_size: int) -> dict[str, Any]:
        sums = self.sums
        if sums is None:
            device = (
                torch.device("cuda", torch.cuda.current_device())
                if world_size > 1 and dist.get_backend() == "nccl"
                else torch.device("cpu")
            )
            sums = torch.zeros(self.mmax + 2, dtype=torch.float64, device=device)
        if world_size > 1:
            sums = sums.clone()
            dist.all_reduce(sums)
        sums = sums.cpu()
        count = max(float(sums[self.mmax + 1]), 1.0)
        return {
            "optimal_path_accuracy": (sums[: self.mmax] / count).tolist(),
            "act_optimal_path_accuracy": float(sums[self.mmax]) / count,
        }


def matches_layout(split: PuzzleSplit, sample: int = 4096) -> bool:
    """A split with no builder record is a maze dataset when its layout is the maze's (docs/training.md, "Task metrics
    of datasets without a builder record"): vocab PAD + '# SG' + 'o', a square grid, and in the first `sample`
    examples of each set inputs of walls, open cells and exactly one S and one G, labels equal to their input except
    open cells marked 'o'."""
    meta = split.metadata
    side = grid_side(meta.seq_len)
    if side is None or side > MAX_SIDE or meta.vocab_size != VOCAB_SIZE or meta.pad_id != PAD:
        return False
    seen = 0
    for s in split.sets.values():
        x, y = np.asarray(s.inputs[:sample]), np.asarray(s.labels[:sample])
        if not np.isin(x, (WALL, OPEN, START, GOAL)).all():
            return False
        if not (((x == START).sum(1) == 1) & ((x == GOAL).sum(1) == 1)).all():
            return False
        if not ((y == x) | ((x == OPEN) & (y == PATH))).all():
            return False
        seen += x.shape[0]
    return seen > 0


def segment_metrics(split: PuzzleSplit, mmax: int) -> list[OptimalPathAccuracy]:
    """The optimal-path metric of a maze split (`MazeTask`)."""
    return MazeTask.from_metadata(split.metadata, str(split.path / "dataset.json")).segment_metrics(split, mmax)


@dataclass(frozen=True)
class MazeTransforms(DihedralTransforms):
    """The maze's test-time group: the 8 dihedral maps of its square grid (the first 8 copies are all of them)."""

    @property
    def group_name(self) -> str:
        return "the maze's symmetry group"


def tta_transforms(metadata: PuzzleDatasetMetadata) -> MazeTransforms:
    """The test-time group of a maze dataset (`MazeTask.from_metadata`)."""
    return MazeTask.from_metadata(metadata, "dataset.json").transforms


def puzzle_problem(grid: np.ndarray) -> str | None:
    """Why a maze someone typed ([side, side] tokens) has no solution, or None: not exactly one S and one G, or no
    path from S to G through open cells."""
    grid = np.asarray(grid)
    for mark, what in ((START, "S (start)"), (GOAL, "G (goal)")):
        count = int((grid == mark).sum())
        if count != 1:
            return f"{count} cells marked {what}, where a maze has exactly one"
    if int(start_levels(grid[None])[0][grid == GOAL][0]) < 0:
        return "G cannot be reached from S through open cells"
    return None


class DihedralSymmetry:
    """Augmentation on the fly (hrm_reason/tasks/augment.py): the 8 dihedral maps on token rows, drawn uniformly
    (identity included), `DihedralTransforms.apply`.

    relabel: the label of a mapped maze is the generator's label of that maze (`label_paths`), not the mapped label;
    the two differ where the maze has several shortest paths.
    """

    def __init__(self, side: int, relabel: bool = False) -> None:
        self.side, self.relabel = side, relabel
        self.transforms = DihedralTransforms(side)

    def __call__(
        self, rng: np.random.Generator, inputs: np.ndarray, labels: np.ndarray, rows: slice, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        tids = rng.integers(0, 8, count)[rows]
        inputs = self.transforms.apply(inputs, tids)
        if not self.relabel:
            return inputs, self.transforms.apply(labels, tids)
        relabelled, _ = label_paths(inputs.reshape(-1, self.side, self.side))
        return inputs, relabelled.reshape(inputs.shape).astype(labels.dtype)


# ---------------------------------------------------------------------------------------------------------- the task

COLOURS = {PAD: "#d9d9d9", WALL: "#27303a", OPEN: "#ffffff", START: "#2ca02c", GOAL: "#9467bd", PATH: "#3d7fd9"}
INPUT_CHARS = "# SG"  # what people type; 'o' (path) is what the model writes


@dataclass(frozen=True)
class MazeTask(Task):
    """Mazes on a `side` x `side` grid (tasks/base.py `Task`)."""

    side: int
    blank_identifier: int = 0
    relabel: bool = False  # generated mazes: augmentation on the fly relabels by the generator's rule
    owner: ClassVar[str] = "the maze's"
    on_the_fly: ClassVar[bool] = True
    kind: ClassVar[str] = "maze"
    metric_name: ClassVar[str | None] = "maze optimal-path"

    @classmethod
    def from_metadata(cls, metadata: PuzzleDatasetMetadata, where: str, names: list[str] | None = None) -> MazeTask:
        """A square grid of side <= MAX_SIDE over the maze's tokens."""
        side = grid_side(metadata.seq_len)
        if side is None:
            raise UserError(f"{where}: a maze dataset of seq_len {metadata.seq_len}, not a square grid")
        if side > MAX_SIDE or metadata.vocab_size != VOCAB_SIZE:
            raise UserError(
                f"{where}: a maze dataset needs a square grid of side <= {MAX_SIDE} and vocab_size {VOCAB_SIZE} "
                f"(tokens PAD + '{CHARSET}'), got seq_len {metadata.seq_len} and vocab_size {metadata.vocab_size}"
            )
        generated = (metadata.builder or {}).get("source") == "generate"
        return cls(side, metadata.blank_identifier_id, relabel=generated)

    @classmethod
    def fits_shape(cls, seq_len: int, vocab_size: int) -> bool:
        """A square grid over the maze's tokens, larger than 9x9 (a 4x4 Sudoku has the same vocabulary)."""
        side = grid_side(seq_len)
        return side is not None and vocab_size == VOCAB_SIZE and side > 9

    @classmethod
    def layout_of(cls, split: PuzzleSplit) -> tuple[MazeTask, str] | None:
        if not matches_layout(split):
            return None
        side = grid_side(split.metadata.seq_len)
        assert side is not None
        return cls(side, split.metadata.blank_identifier_id), "vocabulary and characters match the maze layout"

    @property
    def transforms(self) -> MazeTransforms:
        return MazeTransforms(self.side)

    def segment_metrics(self, split: PuzzleSplit, mmax: int) -> list[OptimalPathAccuracy]:
        return [OptimalPathAccuracy(mmax, self.side)]

    @property
    def symmetry_name(self) -> str:
        return "the maze's 8 dihedral maps, labels " + (
            "relabelled by the generator's rule" if self.relabel else "mapped"
        )

    def augmentation(self, kind: str, split: PuzzleSplit) -> DihedralSymmetry:
        return DihedralSymmetry(self.side, relabel=self.relabel)

    def rule_violations(self, preds: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        shape = (self.side, self.side)
        return rule_violations(np.asarray(preds).reshape(shape), np.asarray(inputs).reshape(shape)).reshape(-1)

    @property
    def look(self) -> GridLook:
        return GridLook(
            puzzle_legend="S: start;  G: goal;  blue: the path;  dark: walls",
            legend=f"blue: path;  {MARKS};  red corner: breaks a rule (wall changed, broken path)",
            panel_inches=(3.0, 1.8),
            colours=COLOURS,
            changed_fill=True,
            endpoints=((START, "S"), (GOAL, "G")),
        )

    # --- hrm solve

    def describe(self) -> str:
        return f"{self.side}x{self.side} maze"

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]:
        """Text rows of '#', ' ', 'S', 'G'; an empty line separates mazes. Trailing spaces (open cells) that an
        editor dropped are restored: rows shorter than the model's side are padded with open cells."""
        puzzles, block, first = [], [], 0
        for i, raw in enumerate([*text_lines(text), ""], 1):
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
                if ch not in INPUT_CHARS:
                    raise UserError(
                        f"{name}: {ch!r} at line {i}, column {j + 1} is not a maze character ('#' wall, ' ' open, "
                        f"'S' start, 'G' goal)"
                    )
            if len(row) > side:
                raise UserError(f"{name}: line {i} has {len(row)} cells, but the model solves a {self.describe()}")
        if len(block) != side:
            raise UserError(f"{name}: {len(block)} rows, but the model solves a {self.describe()}")
        text = "".join(row.ljust(side) for _, row in block)
        tokens = TOKEN_OF[np.frombuffer(text.encode("ascii"), dtype=np.uint8)].astype(np.int32)
        return Puzzle(name, tokens, self.blank_identifier)

    def problem(self, puzzle: Puzzle) -> tuple[str | None, str | None]:
        """Not one S and one G, or no path between them (`puzzle_problem`)."""
        return puzzle_problem(puzzle.tokens.reshape(self.side, self.side)), None

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> Reading:
        side = self.side
        chars = np.array(list("?" + CHARSET))[np.clip(tokens, 0, len(CHARSET))]
        rows = ["".join(chars[r * side : (r + 1) * side]) for r in range(side)]
        given = puzzle.tokens.reshape(side, side)
        pred = tokens.reshape(side, side).astype(np.int64)
        fixed = np.isin(given, (WALL, START, GOAL))
        changed = int((fixed & (pred != given)).sum())
        stray = int((~fixed & ~np.isin(pred, (OPEN, PATH))).sum())
        g, p = given.astype(np.int64)[None], pred[None]
        marks = int((g == START).sum()) == 1 and int((g == GOAL).sum()) == 1  # else: --allow-unsolvable
        route = (p == PATH) | (g == START) | (g == GOAL)
        shortest_moves = int(start_levels(g)[g == GOAL][0]) if marks else -1
        moves = int(distances(route, g == START)[g == GOAL][0]) if marks else -1
        reasons = []
        if changed:
            reasons.append(f"{changed} wall/S/G cell{'s' * (changed > 1)} changed")
        if stray:
            reasons.append(f"{stray} open cell{'s' * (stray > 1)} turned into something else")
        if moves < 0:
            reasons.append("the marked cells do not join S to G")
        if reasons:
            return Reading("\n".join(rows), rows, False, "invalid: " + "; ".join(reasons), False)
        shortest = bool(optimal_path_correct(torch.from_numpy(g), torch.from_numpy(p))[0])
        if shortest:
            verdict = f"valid: a path from S to G of {moves} moves, shortest ({shortest_moves})"
        else:
            extra = int((p == PATH).sum()) - (moves - 1)
            detail = (
                f"{extra} extra cell{'s' * (extra > 1)} marked"
                if moves == shortest_moves
                else f"the shortest is {shortest_moves}"
            )
            verdict = f"valid: a path from S to G of {moves} moves, not shortest ({detail})"
        return Reading("\n".join(rows), rows, True, verdict, shortest)
