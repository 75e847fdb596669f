"""Which grid a dataset holds, how its tokens read, which cells break the puzzle's rules, and how to draw one grid.

Token layouts and rules are those of the task modules (`hrm_reason.tasks.sudoku`, `.maze`, `.arc`), all flattened
row-major squares. The kind comes from dataset.json `builder.name`; datasets of other tools (no builder record) are
recognised by their vocabulary and length. Anything else that is square is drawn as token ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PatchCollection
from matplotlib.patches import Polygon, Rectangle

from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.tasks import arc, layout_task, maze, sudoku

GridKind = Literal["sudoku", "maze", "arc", "tokens"]

MAZE_COLOURS = {
    maze.PAD: "#d9d9d9",
    maze.WALL: "#27303a",
    maze.OPEN: "#ffffff",
    maze.START: "#2ca02c",
    maze.GOAL: "#9467bd",
    maze.PATH: "#3d7fd9",
}

# The standard ARC ten-colour palette (colour 0..9), as in the ARC testing interface.
ARC_PALETTE = [
    "#000000",
    "#0074D9",
    "#FF4136",
    "#2ECC40",
    "#FFDC00",
    "#AAAAAA",
    "#F012BE",
    "#FF851B",
    "#7FDBFF",
    "#870C25",
]
ARC_EOS_COLOUR = "#e9e3d6"

CHANGED_COLOUR = "#ffbf00"  # amber shade: the cell changed since the previous segment
WRONG_COLOUR = "#e0102f"  # red frame: the cell differs from the answer
GIVEN_COLOUR = "#111111"
FILLED_COLOUR = "#1f4e9c"


@dataclass(frozen=True)
class GridSpec:
    kind: GridKind
    side: int
    vocab_size: int
    ignore_label_id: int | None = 0
    box: tuple[int, int] | None = None  # Sudoku box rows x columns

    def grid(self, tokens: np.ndarray) -> np.ndarray:
        return np.asarray(tokens).reshape(self.side, self.side)

    @property
    def legend(self) -> str:
        if self.kind == "arc":
            return (
                "hatched: changed since the previous segment;  white cross: differs from the answer;  "
                "beige: end-of-grid marker (part of the answer)"
            )
        marks = "shaded: changed since the previous segment;  red frame: differs from the answer"
        if self.kind == "sudoku":
            return f"bold: given;  {marks};  red corner: breaks a rule (repeated digit, changed given, empty cell)"
        if self.kind == "maze":
            return f"blue: path;  {marks};  red corner: breaks a rule (wall changed, broken path)"
        return marks


def grid_spec(metadata: PuzzleDatasetMetadata, source: str = "dataset.json") -> GridSpec:
    """Decide how to draw a dataset: `builder.name` first, then the token layout of the known builders."""
    name = str((metadata.builder or {}).get("name", "")).lower()
    seq_len, vocab = metadata.seq_len, metadata.vocab_size
    side = math.isqrt(seq_len)
    square = side * side == seq_len
    common = {"side": side, "vocab_size": vocab, "ignore_label_id": metadata.ignore_label_id}
    if name and not square:
        raise UserError(
            f"{source}: builder '{name}' with seq_len {seq_len}, which is not a square grid: cannot draw it"
        )
    layout = None if name else layout_task(seq_len, vocab)
    if name == "sudoku" or layout == "sudoku":
        return GridSpec("sudoku", box=_sudoku_box(metadata, side), **common)
    if name == "maze" or layout == "maze":
        return GridSpec("maze", **common)
    if name.startswith("arc") or layout == "arc":
        return GridSpec("arc", **common)
    if square:
        return GridSpec("tokens", **common)
    raise UserError(
        f"{source}: seq_len {seq_len} is not a square grid and the dataset has no known builder name: cannot draw it"
    )


def _sudoku_box(metadata: PuzzleDatasetMetadata, side: int) -> tuple[int, int] | None:
    box = (metadata.builder or {}).get("box")
    if isinstance(box, str) and "x" in box:
        rows, cols = (int(v) for v in box.split("x"))
        if rows * cols == side:
            return rows, cols
    if side in sudoku.BOX_OF_SIDE:
        return sudoku.BOX_OF_SIDE[side]
    root = math.isqrt(side)
    return (root, root) if root * root == side else None


# ---------------------------------------------------------------------------------------------------------------------
# Cell checks (numpy, on flattened token arrays)


def supervised(spec: GridSpec, labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    return labels != spec.ignore_label_id if spec.ignore_label_id is not None else np.ones(labels.shape, dtype=bool)


def wrong_cells(spec: GridSpec, preds: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Supervised cells whose prediction differs from the answer (what exact accuracy counts)."""
    return supervised(spec, labels) & (np.asarray(preds) != np.asarray(labels))


def rule_violations(spec: GridSpec, preds: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Cells that break the puzzle's rules whatever the answer is; no rules are known for ARC and raw tokens."""
    if spec.kind == "sudoku":
        return sudoku.rule_violations(spec.grid(preds), spec.grid(inputs), spec.box).reshape(-1)
    if spec.kind == "maze":
        return maze.rule_violations(spec.grid(preds), spec.grid(inputs)).reshape(-1)
    return np.zeros(np.asarray(preds).shape, dtype=bool)


def content_window(spec: GridSpec, *token_arrays: np.ndarray) -> tuple[slice, slice]:
    """ARC: the bounding box of the non-PAD cells of the given grids (a grid sits anywhere in its 30 x 30 frame)."""
    full = (slice(0, spec.side), slice(0, spec.side))
    if spec.kind != "arc":
        return full
    used = np.zeros((spec.side, spec.side), dtype=bool)
    for tokens in token_arrays:
        used |= spec.grid(tokens) != arc.PAD
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

    if spec.kind == "sudoku":
        _draw_sudoku(ax, spec, grid, cut(givens), cut(changed), cut(wrong), cell_pt)
    else:
        ax.imshow(_colours(spec, grid), extent=(0, w, h, 0), interpolation="nearest")
        if spec.kind == "tokens" and max(h, w) <= 12:
            for (r, c), t in np.ndenumerate(grid):
                _cell_text(ax, r, c, str(t), fontsize=0.45 * cell_pt, color="black")
        if spec.kind in ("arc", "tokens") and max(h, w) <= 30:
            _grid_lines(ax, h, w, "#606060", 0.3 if cell_pt < 8 else 0.6)
        _shade(ax, cut(changed), alpha=0.6 if spec.kind == "maze" else 0.0, hatch=spec.kind != "maze")
        if spec.kind == "maze":
            _endpoints(ax, grid, cell_pt)
        if spec.kind == "arc":
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


def _colours(spec: GridSpec, grid: np.ndarray) -> np.ndarray:
    from matplotlib.colors import to_rgb

    if spec.kind == "maze":
        table = {t: to_rgb(c) for t, c in MAZE_COLOURS.items()}
        lookup = lambda t: table.get(t, (1.0, 0.0, 1.0))
    elif spec.kind == "arc":
        table = {
            arc.PAD: (1.0, 1.0, 1.0),
            arc.EOS: to_rgb(ARC_EOS_COLOUR),
            **{i + arc.COLOUR_OFFSET: to_rgb(c) for i, c in enumerate(ARC_PALETTE)},
        }
        lookup = lambda t: table.get(t, (1.0, 0.0, 1.0))
    else:
        from matplotlib import colormaps

        cmap = colormaps["tab20"]
        lookup = lambda t: cmap(t % 20)[:3]
    return np.array([[lookup(int(t)) for t in row] for row in grid], dtype=np.float32)


def _draw_sudoku(
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
        if t == sudoku.BLANK:
            continue
        label = str(t - 1) if 2 <= t <= n + 1 else "?"
        colour = WRONG_COLOUR if wrong[r, c] else (GIVEN_COLOUR if givens[r, c] else FILLED_COLOUR)
        weight = "bold" if givens[r, c] else "normal"
        _cell_text(ax, r + 0.03, c, label, fontsize=0.55 * cell_pt, fontweight=weight, color=colour, zorder=5)


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


def _endpoints(ax: Axes, grid: np.ndarray, cell_pt: float) -> None:
    """Start and goal as lettered discs larger than a cell: on a 30 x 30 maze a single cell is hard to spot."""
    for token, letter in ((maze.START, "S"), (maze.GOAL, "G")):
        rows, cols = np.nonzero(grid == token)
        if rows.size:
            ax.scatter(
                cols + 0.5,
                rows + 0.5,
                s=(1.9 * cell_pt) ** 2,
                color=MAZE_COLOURS[token],
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
