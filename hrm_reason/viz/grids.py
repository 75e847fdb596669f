"""Which grid a dataset holds, how its tokens read, which cells break the puzzle's rules, and how to draw one grid.

The dataset's task (hrm_reason.tasks `task_of`: dataset.json `builder.name`, else the vocabulary and length of the
known layouts) says how: its rules (`Task.rule_violations`), its givens and its look (`Task.look`: colours, digits,
box lines, markers), all flattened row-major squares. Anything else that is square is drawn as token ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PatchCollection
from matplotlib.patches import Polygon, Rectangle

from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.tasks import record_task, task_of
from hrm_reason.tasks.base import MARKS, GridLook, Task

# Square grids of no known task: token ids, one colour each.
TOKENS_LOOK = GridLook(
    puzzle_legend="token ids",
    legend=MARKS,
    panel_inches=(2.2, 1.5),
    grid_lines=True,
    token_text=True,
)

CHANGED_COLOUR = "#ffbf00"  # amber shade: the cell changed since the previous segment
WRONG_COLOUR = "#e0102f"  # red frame: the cell differs from the answer
GIVEN_COLOUR = "#111111"
FILLED_COLOUR = "#1f4e9c"


@dataclass(frozen=True)
class GridSpec:
    kind: str  # the task's (`Task.kind`), or "tokens"
    side: int
    vocab_size: int
    ignore_label_id: int | None = 0
    task: Task | None = None
    shape: tuple[int, int] | None = None  # rows x columns where the grid is not side x side (a declared task's)

    @property
    def dims(self) -> tuple[int, int]:
        return self.shape if self.shape is not None else (self.side, self.side)

    def grid(self, tokens: np.ndarray) -> np.ndarray:
        return np.asarray(tokens).reshape(self.dims)

    @property
    def look(self) -> GridLook:
        return self.task.look if self.task is not None else TOKENS_LOOK

    @property
    def box(self) -> tuple[int, int] | None:
        """Rows x columns of the boxes outlined by thick lines (Sudoku's), or None."""
        return self.look.blocks

    @property
    def legend(self) -> str:
        return self.look.legend


def task_spec(task: Task, seq_len: int) -> GridSpec:
    """The drawing of one task's grids of `seq_len` cells (`hrm solve --png`: a model's task, no dataset at hand)."""
    return GridSpec(task.kind, math.isqrt(seq_len), 0, ignore_label_id=0, task=task, shape=task.grid_shape(seq_len))


def grid_spec(metadata: PuzzleDatasetMetadata, source: str = "dataset.json") -> GridSpec:
    """Decide how to draw a dataset: its task (`builder.name` first, then the token layout of the known tasks), else
    token ids on a square grid."""
    name = (metadata.builder or {}).get("name")
    seq_len, vocab = metadata.seq_len, metadata.vocab_size
    side = math.isqrt(seq_len)
    square = side * side == seq_len
    common = {"side": side, "vocab_size": vocab, "ignore_label_id": metadata.ignore_label_id}
    cls = record_task(metadata.builder, source)
    shaped = cls is not None and cls.grid_shape is not Task.grid_shape  # draws grids of its own shape (a declared task)
    if name and not square and not shaped:
        raise UserError(
            f"{source}: builder '{name}' with seq_len {seq_len}, which is not a square grid: cannot draw it"
        )
    task = task_of(metadata, source) if square or shaped else None
    shape = task.grid_shape(seq_len) if task is not None else None
    if task is not None:
        return GridSpec(task.kind, task=task, shape=shape, **common)
    if square:
        return GridSpec("tokens", **common)
    raise UserError(
        f"{source}: seq_len {seq_len} is not a square grid and the dataset has no known builder name: cannot draw it"
    )


# ---------------------------------------------------------------------------------------------------------------------
# Cell checks (numpy, on flattened token arrays)


def supervised(spec: GridSpec, labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    return labels != spec.ignore_label_id if spec.ignore_label_id is not None else np.ones(labels.shape, dtype=bool)


def wrong_cells(spec: GridSpec, preds: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Supervised cells whose prediction differs from the answer (what exact accuracy counts)."""
    return supervised(spec, labels) & (np.asarray(preds) != np.asarray(labels))


def rule_violations(spec: GridSpec, preds: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Cells that break the puzzle's rules whatever the answer is (the task's); none for raw tokens."""
    if spec.task is None:
        return np.zeros(np.asarray(preds).shape, dtype=bool)
    return spec.task.rule_violations(preds, inputs)


def given_cells(spec: GridSpec, inputs: np.ndarray) -> np.ndarray | None:
    """The cells the puzzle gives, drawn apart from those a model fills (None where the task does not tell them)."""
    return spec.task.givens(inputs) if spec.task is not None else None


def content_window(spec: GridSpec, *token_arrays: np.ndarray) -> tuple[slice, slice]:
    """The cells to show: all, or for a canvas (ARC: a grid sits anywhere in its 30 x 30 frame) the bounding box of
    the cells of the given grids that do not hold the canvas's background token."""
    full = (slice(0, spec.dims[0]), slice(0, spec.dims[1]))
    background = spec.look.content_token
    if background is None:
        return full
    used = np.zeros(spec.dims, dtype=bool)
    for tokens in token_arrays:
        used |= spec.grid(tokens) != background
    rows, cols = np.flatnonzero(used.any(1)), np.flatnonzero(used.any(0))
    if rows.size == 0:
        return full
    return slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)


# ---------------------------------------------------------------------------------------------------------------------
# Drawing


def draw_grid(
    ax: Axes,
    spec: GridSpec,
    tokens: np.ndarray,
    *,
    givens: np.ndarray | None = None,
    changed: np.ndarray | None = None,
    wrong: np.ndarray | None = None,
    violations: np.ndarray | None = None,
    window: tuple[slice, slice] | None = None,
    frame: tuple[int, int] | None = None,
) -> None:
    """Draw one grid on `ax` (row 0 at the top, one data unit per cell); the masks are flat boolean arrays.

    `window` picks the cells to show (default: all; for ARC the non-PAD ones); `frame` (rows, columns) sizes the view
    so that grids of different shapes side by side have cells of one size, anchored at the top left."""
    window = window or content_window(spec, tokens)
    rows, cols = window

    def cut(mask: np.ndarray | None) -> np.ndarray:
        return (
            np.zeros((rows.stop - rows.start, cols.stop - cols.start), dtype=bool)
            if mask is None
            else spec.grid(mask)[window]
        )

    grid = spec.grid(tokens)[window].astype(np.int64)
    h, w = grid.shape
    view_h, view_w = frame or (h, w)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    cell_pt = _cell_points(ax, max(w, view_w), max(h, view_h))

    look = spec.look
    if look.digits:
        _draw_digits(ax, spec, grid, cut(givens), cut(changed), cut(wrong), cell_pt)
    else:
        ax.imshow(_colours(look, grid), extent=(0, w, h, 0), interpolation="nearest")
        if look.token_text and max(h, w) <= 12:
            for (r, c), t in np.ndenumerate(grid):
                _cell_text(ax, r, c, str(t), fontsize=0.45 * cell_pt, color="black")
        if look.symbols and max(h, w) <= 30:
            _symbols(ax, look, grid, cut(givens) if givens is not None else None, cell_pt)
        if look.grid_lines and max(h, w) <= 30:
            _grid_lines(ax, h, w, "#606060", 0.3 if cell_pt < 8 else 0.6)
        _shade(ax, cut(changed), alpha=0.6 if look.changed_fill else 0.0, hatch=not look.changed_fill)
        _endpoints(ax, look, grid, cell_pt)
        if look.crosses:
            _crosses(ax, cut(wrong), cell_pt)
        else:
            _frames(ax, cut(wrong), cell_pt)
        _border(ax, h, w)
    _corners(ax, cut(violations))
    ax.set_xlim(0, max(w, view_w))
    ax.set_ylim(max(h, view_h), 0)


def _cell_points(ax: Axes, w: int, h: int) -> float:
    """The side of one cell in points, from the axes' fixed position in the figure."""
    fig = ax.get_figure()
    pos = ax.get_position()
    width_pt, height_pt = pos.width * fig.get_figwidth() * 72, pos.height * fig.get_figheight() * 72
    return min(width_pt / w, height_pt / h)


def _colours(look: GridLook, grid: np.ndarray) -> np.ndarray:
    """[h, w, 3] RGB: the look's colour of each token (magenta for a token it has none for), else one per token id."""
    from matplotlib.colors import to_rgb

    if look.colours:
        table = {t: to_rgb(c) for t, c in look.colours.items()}
        lookup = lambda t: table.get(t, (1.0, 0.0, 1.0))
    else:
        from matplotlib import colormaps

        cmap = colormaps["tab20"]
        lookup = lambda t: cmap(t % 20)[:3]
    return np.array([[lookup(int(t)) for t in row] for row in grid], dtype=np.float32)


def _draw_digits(
    ax: Axes,
    spec: GridSpec,
    grid: np.ndarray,
    givens: np.ndarray,
    changed: np.ndarray,
    wrong: np.ndarray,
    cell_pt: float,
) -> None:
    n = spec.side
    ax.add_patch(Rectangle((0, 0), n, n, facecolor="white", edgecolor="none", zorder=0))
    _shade(ax, changed, alpha=0.55, hatch=False)
    _grid_lines(ax, n, n, "#9a9a9a", 0.6)
    if spec.box is not None:
        br, bc = spec.box
        for r in range(0, n + 1, br):
            ax.plot([0, n], [r, r], color="black", lw=2.2, solid_capstyle="projecting", zorder=3)
        for c in range(0, n + 1, bc):
            ax.plot([c, c], [0, n], color="black", lw=2.2, solid_capstyle="projecting", zorder=3)
    _border(ax, n, n)
    _frames(ax, wrong, cell_pt)
    for (r, c), t in np.ndenumerate(grid):
        if t == 1:  # the blank
            continue
        label = str(t - 1) if 2 <= t <= n + 1 else "?"
        colour = WRONG_COLOUR if wrong[r, c] else (GIVEN_COLOUR if givens[r, c] else FILLED_COLOUR)
        weight = "bold" if givens[r, c] else "normal"
        _cell_text(ax, r + 0.03, c, label, fontsize=0.55 * cell_pt, fontweight=weight, color=colour, zorder=5)


def _symbols(ax: Axes, look: GridLook, grid: np.ndarray, givens: np.ndarray | None, cell_pt: float) -> None:
    """A declared task's symbols written in their cells (the givens bold where the task tells them apart)."""
    for (r, c), t in np.ndenumerate(grid):
        text = look.symbols.get(int(t))
        if text is None or not text.strip():
            continue
        size = min(0.55, 1.1 / max(1, len(text))) * cell_pt
        weight = "bold" if givens is not None and givens[r, c] else "normal"
        _cell_text(ax, r + 0.03, c, text, fontsize=size, fontweight=weight, color="black", zorder=5)


def _cell_text(ax: Axes, r: float, c: float, text: str, **style: Any) -> None:
    """`text` centred on the cell at row r, column c (fractional rows nudge it down)."""
    ax.text(c + 0.5, r + 0.5, text, ha="center", va="center", **style)


def _grid_lines(ax: Axes, h: int, w: int, colour: str, lw: float) -> None:
    from matplotlib.collections import LineCollection

    lines = [[(0, r), (w, r)] for r in range(h + 1)] + [[(c, 0), (c, h)] for c in range(w + 1)]
    ax.add_collection(LineCollection(lines, colors=colour, linewidths=lw, zorder=2))


def _border(ax: Axes, h: int, w: int) -> None:
    ax.add_patch(Rectangle((0, 0), w, h, facecolor="none", edgecolor="black", lw=2.2, zorder=4))


def _shade(ax: Axes, mask: np.ndarray, alpha: float, hatch: bool) -> None:
    """Changed cells: an amber fill (Sudoku, maze) or an amber hatch that leaves ARC colours readable."""
    cells = [Rectangle((c, r), 1, 1) for r, c in zip(*np.nonzero(mask))]
    if not cells:
        return
    if hatch:
        collection = PatchCollection(
            cells, facecolor="none", edgecolor=CHANGED_COLOUR, hatch="////", linewidth=0, zorder=3
        )
    else:
        collection = PatchCollection(cells, facecolor=CHANGED_COLOUR, edgecolor="none", alpha=alpha, zorder=1)
    ax.add_collection(collection)


def _endpoints(ax: Axes, look: GridLook, grid: np.ndarray, cell_pt: float) -> None:
    """Start and goal as lettered discs larger than a cell: on a 30 x 30 maze a single cell is hard to spot."""
    for token, letter in look.endpoints:
        rows, cols = np.nonzero(grid == token)
        if rows.size:
            ax.scatter(
                cols + 0.5,
                rows + 0.5,
                s=(1.9 * cell_pt) ** 2,
                color=look.colours.get(token, "black"),
                edgecolors="white",
                linewidths=1,
                zorder=5,
            )
            for r, c in zip(rows, cols):
                _cell_text(ax, r + 0.05, c, letter, fontsize=1.2 * cell_pt, color="white", fontweight="bold", zorder=6)


def _frames(ax: Axes, mask: np.ndarray, cell_pt: float) -> None:
    inset = 0.08
    cells = [Rectangle((c + inset, r + inset), 1 - 2 * inset, 1 - 2 * inset) for r, c in zip(*np.nonzero(mask))]
    if cells:
        lw = float(np.clip(0.09 * cell_pt, 0.8, 2.5))
        ax.add_collection(PatchCollection(cells, facecolor="none", edgecolor=WRONG_COLOUR, linewidth=lw, zorder=6))


def _crosses(ax: Axes, mask: np.ndarray, cell_pt: float) -> None:
    """ARC: red is one of the ten colours, so a wrong cell gets a white cross outlined in black."""
    from matplotlib.collections import LineCollection

    d = 0.22
    lines = [
        seg
        for r, c in zip(*np.nonzero(mask))
        for seg in ([(c + d, r + d), (c + 1 - d, r + 1 - d)], [(c + d, r + 1 - d), (c + 1 - d, r + d)])
    ]
    if lines:
        lw = float(np.clip(0.1 * cell_pt, 0.8, 2.5))
        ax.add_collection(LineCollection(lines, colors="black", linewidths=lw * 2.2, zorder=6))
        ax.add_collection(LineCollection(lines, colors="white", linewidths=lw, zorder=7))


def _corners(ax: Axes, mask: np.ndarray) -> None:
    """A red triangle in the top-right corner of every cell that breaks a rule."""
    s = 0.34
    triangles = [Polygon([(c + 1 - s, r), (c + 1, r), (c + 1, r + s)], closed=True) for r, c in zip(*np.nonzero(mask))]
    if triangles:
        ax.add_collection(PatchCollection(triangles, facecolor=WRONG_COLOUR, edgecolor="none", zorder=8))
