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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from hrm_reason.data.puzzle import PuzzleSplit
from hrm_reason.errors import UserError
from hrm_reason.tasks.dihedral import DihedralTransforms

if TYPE_CHECKING:
    from hrm_reason.models.act import ACTOutput

CHARSET = "# SGo"
PAD, WALL, OPEN, START, GOAL, PATH = 0, 1, 2, 3, 4, 5
VOCAB_SIZE = len(CHARSET) + 1
MAX_SIDE = 62  # one int64 per grid row, sign bit never set

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


def _pack_rows(mask: torch.Tensor) -> torch.Tensor:
    """[B, H, W] bool -> [B, H] int64 rows, bit j = column j (W <= MAX_SIDE keeps the sign bit clear)."""
    bits = torch.arange(mask.shape[-1], device=mask.device, dtype=torch.int64)
    return (mask.to(torch.int64) << bits).sum(-1)


def _unpack_rows(rows: torch.Tensor, width: int) -> torch.Tensor:
    """[..., H] int64 rows -> [..., H, W] bool."""
    bits = torch.arange(width, device=rows.device, dtype=torch.int64)
    return ((rows.unsqueeze(-1) >> bits) & 1).bool()


def bfs_distances(passable: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """Moves from the source cells to every cell through passable cells (4-neighbour), -1 where unreachable.

    passable, source: [B, H, W] bool. A wavefront over the whole batch, bit-parallel: a grid row is one int64, so a
    step is a few shifts and ANDs on [B, H] words. The distance of each cell is assembled from bit planes (plane k
    collects the wavefronts whose step has bit k set) and unpacked once at the end.
    """
    if passable.shape != source.shape or passable.dim() != 3:
        raise ValueError(f"expected two [B, H, W] masks, got {tuple(passable.shape)} and {tuple(source.shape)}")
    B, H, W = passable.shape
    if W > MAX_SIDE:
        raise ValueError(f"grids wider than {MAX_SIDE} cells are not supported, got {W}")
    full = (1 << W) - 1
    open_ = _pack_rows(passable)
    frontier = _pack_rows(source) & open_
    seen = frontier.clone()
    planes = torch.zeros(max(1, (H * W).bit_length()), B, H, dtype=torch.int64, device=passable.device)
    step = 0
    while True:
        for k in range(planes.shape[0]):
            if step >> k & 1:
                planes[k] |= frontier
        grown = frontier | ((frontier << 1) & full) | (frontier >> 1)
        grown[:, 1:] |= frontier[:, :-1]
        grown[:, :-1] |= frontier[:, 1:]
        frontier = grown & open_ & ~seen
        seen |= frontier
        step += 1
        if step % 8 == 0 and not bool(frontier.any()):  # one host sync every 8 steps
            break
    weights = (1 << torch.arange(planes.shape[0], device=passable.device, dtype=torch.int64)).view(-1, 1, 1, 1)
    dist_ = (_unpack_rows(planes, W).to(torch.int64) * weights).sum(0)
    return torch.where(_unpack_rows(seen, W), dist_, -1).to(torch.int32)


def start_distances(grids: torch.Tensor) -> torch.Tensor:
    """BFS distance from S for [B, H, W] token grids; -1 everywhere in a maze without exactly one S."""
    passable = (grids == OPEN) | (grids == START) | (grids == GOAL)
    start = grids == START
    lvl = bfs_distances(passable, start)
    one_start = start.flatten(1).sum(-1) == 1
    return torch.where(one_start[:, None, None], lvl, torch.full_like(lvl, -1))


def label_paths(grids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The canonical label of each maze ([n, H, W] tokens) and its shortest-path length in moves.

    Walking back from G, the next cell is the first neighbour one step closer to S in the order up, down, left, right.
    The generator's rule (datasets_build/maze.py); training with augment=symmetry relabels generated mazes by it.
    """
    n, H, W = grids.shape
    labels = grids.copy()
    if n == 0:
        return labels, np.zeros(0, dtype=np.int64)
    lvl = start_distances(torch.from_numpy(grids.astype(np.int64))).numpy()
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
    """The hook `hrm_reason.tasks` calls for datasets whose builder is "maze" (or, with no builder record, whose layout
    is the maze's)."""
    meta = split.metadata
    side = grid_side(meta.seq_len)
    if side is None or side > MAX_SIDE or meta.vocab_size != VOCAB_SIZE:
        raise UserError(
            f"{split.path / 'dataset.json'}: a maze dataset needs a square grid of side <= {MAX_SIDE} and vocab_size {VOCAB_SIZE} "
            f"(tokens PAD + '{CHARSET}'), got seq_len {meta.seq_len} and vocab_size {meta.vocab_size}"
        )
    return [OptimalPathAccuracy(mmax, side)]


@dataclass(frozen=True)
class MazeTransforms(DihedralTransforms):
    """The maze's test-time group: the 8 dihedral maps of its square grid (the first 8 copies are all of them)."""

    @property
    def group_name(self) -> str:
        return "the maze's symmetry group"


def tta_transforms(metadata: Any) -> MazeTransforms:
    """The hook of hrm_reason.tasks for datasets whose builder is "maze": the 8 symmetries of the square grid."""
    side = grid_side(metadata.seq_len)
    if side is None:
        raise UserError(f"dataset.json: a maze dataset needs a square grid, got seq_len {metadata.seq_len}")
    return MazeTransforms(side)


def puzzle_problem(grid: np.ndarray) -> str | None:
    """Why a maze someone typed ([side, side] tokens) has no solution, or None: not exactly one S and one G, or no
    path from S to G through open cells."""
    grid = np.asarray(grid)
    for mark, what in ((START, "S (start)"), (GOAL, "G (goal)")):
        count = int((grid == mark).sum())
        if count != 1:
            return f"{count} cells marked {what}, where a maze has exactly one"
    tokens = torch.from_numpy(grid.astype(np.int64)[None])
    if int(start_distances(tokens)[tokens == GOAL][0]) < 0:
        return "G cannot be reached from S through open cells"
    return None


def layout_metrics(split: PuzzleSplit, mmax: int) -> list[OptimalPathAccuracy] | None:
    """The optimal-path metric of a split with no builder record whose layout is the maze's, else None."""
    return segment_metrics(split, mmax) if matches_layout(split) else None
