"""The 8 symmetries of the square, numbered as the original HRM builders number them (docs/data.md, "Grid symmetries").

0 identity, 1 rot90, 2 rot180, 3 rot270 (counter-clockwise, as np.rot90), 4 fliplr, 5 flipud, 6 transpose,
7 anti-transpose. Maze augmentation and ARC augmentation use them; ARC voting undoes them.
"""

from __future__ import annotations

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
