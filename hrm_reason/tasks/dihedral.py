"""The 8 symmetries of the square, numbered as the original HRM builders number them (docs/data.md, "Grid symmetries").

0 identity, 1 rot90, 2 rot180, 3 rot270 (counter-clockwise, as np.rot90), 4 fliplr, 5 flipud, 6 transpose,
7 anti-transpose. Maze augmentation and ARC augmentation use them; ARC voting and test-time augmentation undo them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TRANSFORM_NAMES = ("identity", "rot90", "rot180", "rot270", "fliplr", "flipud", "transpose", "anti-transpose")
DIHEDRAL_INVERSE = (0, 3, 2, 1, 4, 5, 6, 7)
SWAPS_AXES = (1, 3, 6, 7)  # the transforms that exchange height and width


def dihedral_transform(grid: np.ndarray, tid: int) -> np.ndarray:
    """Symmetry `tid` of the last two axes (leading axes are a batch); a view, as np.rot90/np.flip would give."""
    if tid == 0:
        return grid
    if tid == 1:  # np.rot90(grid)
        return np.swapaxes(grid[..., ::-1], -1, -2)
    if tid == 2:
        return grid[..., ::-1, ::-1]
    if tid == 3:  # np.rot90(grid, 3)
        return np.swapaxes(grid, -1, -2)[..., ::-1]
    if tid == 4:  # np.fliplr
        return grid[..., ::-1]
    if tid == 5:  # np.flipud
        return grid[..., ::-1, :]
    if tid == 6:
        return np.swapaxes(grid, -1, -2)
    if tid == 7:  # np.fliplr(np.rot90(grid))
        return np.swapaxes(grid[..., ::-1], -1, -2)[..., ::-1]
    raise ValueError(f"dihedral transform id must be in 0..7, got {tid}")


def inverse_dihedral_transform(grid: np.ndarray, tid: int) -> np.ndarray:
    return dihedral_transform(grid, DIHEDRAL_INVERSE[tid])


@dataclass(frozen=True)
class DihedralTransforms:
    """Test-time augmentation of square `side` x `side` token grids by the 8 symmetries (hrm_reason.evaluate.tta): the
    tokens are unchanged, only their places. Each row goes through the 7 non-identity symmetries in its own random
    order before any repeats, so 8 copies are the whole group."""

    side: int

    @property
    def group_size(self) -> int:
        return len(TRANSFORM_NAMES)

    @property
    def group_name(self) -> str:
        return "the square's symmetry group"

    def draw(self, rng: np.random.Generator, rows: int, copies: int) -> list[np.ndarray]:
        order = 1 + np.argsort(rng.random((rows, 7)), axis=1)  # [rows, 7] a permutation of 1..7 per row
        return [order[:, k % 7] for k in range(copies - 1)]

    def apply(self, tokens: np.ndarray, element: np.ndarray) -> np.ndarray:
        return self._move(tokens, element, forward=True)

    def invert(self, tokens: np.ndarray, element: np.ndarray) -> np.ndarray:
        return self._move(tokens, element, forward=False)

    def _move(self, tokens: np.ndarray, ts: np.ndarray, forward: bool) -> np.ndarray:
        grids = np.asarray(tokens).reshape(-1, self.side, self.side)
        out = np.empty_like(grids)
        for t in np.unique(ts).tolist():
            rows = np.flatnonzero(ts == t)
            out[rows] = dihedral_transform(grids[rows], t if forward else DIHEDRAL_INVERSE[t])
        return out.reshape(grids.shape[0], -1)
