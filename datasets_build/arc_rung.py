"""A generated ARC rung for the CPU ladder (docs/data.md, "The ARC rung"): small grids (sides 3..10) and ARC-style tasks,
each one rule of a family with its own parameters, 3-4 demonstration pairs ("train") and 1-2 test pairs ("test").

A family is data and three functions (`Family`): `params(rng)` draws a task's rule as JSON-able parameters,
`sample(params, rng)` draws an input grid on which that rule does something, `rule(params, grid)` is the rule; `keep`
turns down the pairs that would make the rule trivial or ambiguous. A task is written in ARC's task JSON layout with
its family and parameters under the key "rung", which the ARC reader ignores (`RungTask.to_json`).
`hrm build-data arc --source generate` gives the tasks, in memory, to the code path of `--source json`
(`datasets_build.arc`): same checks, augmentation, splits and on-disk format.

Every pair of a rung is distinct from every other of the rung, of its own task or another, under the ARC augmentation
group (a dihedral transform and a colour map with black fixed: `hrm_reason.tasks.arc.pair_key`): no test pair is a
demonstration, turned or recoloured. Each task draws from its own random stream (seed, role, index); the set of pairs
already drawn is what links them, so a rung is one deterministic function of the seed, the counts and the split.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from datasets_build.options import ARC_RUNG_FAMILIES
from hrm_reason.tasks.arc import pair_key, task_json
from hrm_reason.tasks.dihedral import TRANSFORM_NAMES, dihedral_transform

RUNG_VERSION = "1"
MIN_SIDE, MAX_SIDE = 3, 10  # input grid sides; outputs (a bar, a crop) may be smaller
DEMOS, TESTS = (3, 4), (1, 2)  # demonstration and test pairs per task, inclusive ranges
MAX_TRIES = 2000  # draws per pair before the generator is called broken
STREAM_RUNG = 4  # after datasets_build.arc's augment (1), translate (2) and subset (3) streams
ROLE_CODES = {"training": 0, "evaluation": 1}
ROLE_PREFIX = {"training": "train", "evaluation": "eval"}
COLLECTION = "arc-rung"
DIRECTIONS = ("down", "up", "left", "right")
_TURNS = {"down": 0, "up": 2, "left": 1, "right": 3}  # np.rot90 turns after which the direction points down

Grid = np.ndarray
Params = dict[str, Any]
Pair = tuple[Grid, Grid]
Role = Literal["training", "evaluation"]
Split = Literal["protocol", "new-tasks", "new-families"]


# ------------------------------------------------------------------------------------------------------- helpers


def _int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """Uniform in lo..hi, both included."""
    return int(rng.integers(lo, hi + 1))


def _shape(rng: np.random.Generator, lo: int = MIN_SIDE) -> tuple[int, int]:
    return _int(rng, lo, MAX_SIDE), _int(rng, lo, MAX_SIDE)


def _colours(rng: np.random.Generator, k: int, exclude: Sequence[int] = ()) -> list[int]:
    """k distinct colours of 1..9 (0, black, is the background), none of `exclude`."""
    pool = [c for c in range(1, 10) if c not in exclude]
    return [int(c) for c in rng.choice(pool, size=k, replace=False)]


def _scatter(rng: np.random.Generator, shape: tuple[int, int], colours: Sequence[int], density: float) -> Grid:
    """Each cell one of `colours` with probability `density`, else background."""
    if not colours:
        return np.zeros(shape, dtype=np.uint8)
    cells = rng.choice(np.array(colours, dtype=np.uint8), size=shape)
    return np.where(rng.random(shape) < density, cells, 0).astype(np.uint8)


def _along(grid: Grid, direction: str, down: Callable[[Grid], Grid]) -> Grid:
    """`down` (a rule written for the direction "down") applied in `direction`: turn, apply, turn back."""
    k = _TURNS[direction]
    return np.ascontiguousarray(np.rot90(down(np.rot90(grid, k)), -k))


def _changes(params: Params, x: Grid, y: Grid) -> bool:
    """The default `keep`: the rule changes the grid."""
    return x.shape != y.shape or not np.array_equal(x, y)


def enclosed(free: np.ndarray) -> np.ndarray:
    """Cells of `free` that no 4-connected path of free cells joins to the border."""
    h, w = free.shape
    reached = np.zeros_like(free)
    stack = [(i, j) for i in range(h) for j in range(w) if free[i, j] and (i in (0, h - 1) or j in (0, w - 1))]
    for i, j in stack:
        reached[i, j] = True
    while stack:
        i, j = stack.pop()
        for a, b in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
            if 0 <= a < h and 0 <= b < w and free[a, b] and not reached[a, b]:
                reached[a, b] = True
                stack.append((a, b))
    return free & ~reached


def components(mask: np.ndarray) -> int:
    """4-connected components of `mask`."""
    h, w = mask.shape
    seen = np.zeros_like(mask)
    count = 0
    for i0 in range(h):
        for j0 in range(w):
            if not mask[i0, j0] or seen[i0, j0]:
                continue
            count += 1
            seen[i0, j0] = True
            stack = [(i0, j0)]
            while stack:
                i, j = stack.pop()
                for a, b in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
                    if 0 <= a < h and 0 <= b < w and mask[a, b] and not seen[a, b]:
                        seen[a, b] = True
                        stack.append((a, b))
    return count


# ------------------------------------------------------------------------------------------------------ families


@dataclass(frozen=True)
class Family:
    name: str
    doc: str  # one line: the rule and its parameters (docs/data.md lists them)
    params: Callable[[np.random.Generator], Params]
    sample: Callable[[Params, np.random.Generator], Grid]
    rule: Callable[[Params, Grid], Grid]
    keep: Callable[[Params, Grid, Grid], bool] = _changes


# geometry: one fixed dihedral map of the whole grid.
def _geometry_params(rng: np.random.Generator) -> Params:
    t = _int(rng, 1, 7)
    return {"transform": t, "name": TRANSFORM_NAMES[t]}


def _geometry_sample(p: Params, rng: np.random.Generator) -> Grid:
    return _scatter(rng, _shape(rng), _colours(rng, _int(rng, 2, 4)), rng.uniform(0.3, 0.8))


def _geometry_rule(p: Params, x: Grid) -> Grid:
    return np.ascontiguousarray(dihedral_transform(x, p["transform"]))


def _asymmetric(p: Params, x: Grid, y: Grid) -> bool:
    """An input with no symmetry of its own: then one pair alone tells the map (two maps that agree on x differ by a
    symmetry of x)."""
    return not any(g.shape == x.shape and np.array_equal(g, x) for g in (dihedral_transform(x, s) for s in range(1, 8)))


# colour_map: a fixed permutation, with no fixed colour, of 2-4 colours; the others stay.
def _colour_map_params(rng: np.random.Generator) -> Params:
    source = _colours(rng, _int(rng, 2, 4))
    while True:
        target = [int(c) for c in rng.permutation(source)]
        if all(a != b for a, b in zip(source, target)):
            return {"from": source, "to": target}


def _colour_map_sample(p: Params, rng: np.random.Generator) -> Grid:
    mapped = p["from"]
    others = _colours(rng, _int(rng, 0, 2), exclude=mapped)
    grid = _scatter(rng, _shape(rng), mapped + others, rng.uniform(0.4, 0.9))
    cells = rng.choice(grid.size, size=len(mapped), replace=False)  # every mapped colour shows in every input
    grid.reshape(-1)[cells] = mapped
    return grid


def _colour_map_rule(p: Params, x: Grid) -> Grid:
    table = np.arange(10, dtype=np.uint8)
    table[p["from"]] = p["to"]
    return table[x]


# gravity: the cells of one colour fall in a direction until a cell of another colour or the border stops them.
def _gravity_params(rng: np.random.Generator) -> Params:
    return {"colour": _int(rng, 1, 9), "direction": DIRECTIONS[_int(rng, 0, 3)]}


def _gravity_sample(p: Params, rng: np.random.Generator) -> Grid:
    c = p["colour"]
    grid = _scatter(rng, _shape(rng), _colours(rng, _int(rng, 1, 2), exclude=[c]), rng.uniform(0.05, 0.25))
    grid[(grid == 0) & (rng.random(grid.shape) < rng.uniform(0.15, 0.35))] = c
    return grid


def _gravity_rule(p: Params, x: Grid) -> Grid:
    c = p["colour"]

    def fall(g: Grid) -> Grid:
        out = np.where(g == c, 0, g).astype(np.uint8)
        h, w = g.shape
        for j in range(w):
            floor = h - 1  # where the next falling cell of this column lands
            for i in range(h - 1, -1, -1):
                if g[i, j] == c:
                    out[floor, j] = c
                    floor -= 1
                elif g[i, j] != 0:
                    floor = i - 1
        return out

    return _along(x, p["direction"], fall)


# move: every cell of one colour shifted by a fixed vector, cells leaving the grid dropped; they cover what they land
# on and leave background behind.
def _move_params(rng: np.random.Generator) -> Params:
    while True:
        dr, dc = _int(rng, -3, 3), _int(rng, -3, 3)
        if (dr, dc) != (0, 0):
            return {"colour": _int(rng, 1, 9), "vector": [dr, dc]}


def _move_sample(p: Params, rng: np.random.Generator) -> Grid:
    c = p["colour"]
    grid = _scatter(rng, _shape(rng, 4), _colours(rng, _int(rng, 1, 2), exclude=[c]), rng.uniform(0.0, 0.15))
    h, w = grid.shape
    for _ in range(_int(rng, 1, 3)):
        bh, bw = _int(rng, 1, 3), _int(rng, 1, 3)
        r0, c0 = _int(rng, 0, h - bh), _int(rng, 0, w - bw)
        shape = rng.random((bh, bw)) < 0.7
        shape.reshape(-1)[_int(rng, 0, bh * bw - 1)] = True
        grid[r0 : r0 + bh, c0 : c0 + bw][shape] = c
    return grid


def _move_rule(p: Params, x: Grid) -> Grid:
    c, (dr, dc) = p["colour"], p["vector"]
    out = np.where(x == c, 0, x).astype(np.uint8)
    rows, cols = np.nonzero(x == c)
    rows, cols = rows + dr, cols + dc
    inside = (rows >= 0) & (rows < x.shape[0]) & (cols >= 0) & (cols < x.shape[1])
    out[rows[inside], cols[inside]] = c
    return out


def _move_keeps_some(p: Params, x: Grid, y: Grid) -> bool:
    return _changes(p, x, y) and bool((y == p["colour"]).any())


# fill: background regions enclosed by other cells (not joined to the border by background) get one colour.
def _fill_params(rng: np.random.Generator) -> Params:
    wall, fill = _colours(rng, 2)
    return {"wall": wall, "fill": fill}


def _fill_sample(p: Params, rng: np.random.Generator) -> Grid:
    grid = np.zeros(_shape(rng, 5), dtype=np.uint8)
    h, w = grid.shape
    for _ in range(_int(rng, 1, 3)):  # hollow rectangles, at least 3x3
        bh, bw = _int(rng, 3, min(6, h)), _int(rng, 3, min(6, w))
        r0, c0 = _int(rng, 0, h - bh), _int(rng, 0, w - bw)
        box = grid[r0 : r0 + bh, c0 : c0 + bw]
        box[[0, -1], :] = p["wall"]
        box[:, [0, -1]] = p["wall"]
    grid[(grid == 0) & (rng.random(grid.shape) < rng.uniform(0.0, 0.1))] = p["wall"]
    return grid


def _fill_rule(p: Params, x: Grid) -> Grid:
    out = x.copy()
    out[enclosed(x == 0)] = p["fill"]
    return out


# count: a bar, 1 x k or k x 1, of the colour counted, k the number of its objects (4-connected groups of cells).
def _count_params(rng: np.random.Generator) -> Params:
    return {"colour": _int(rng, 1, 9), "orientation": ("row", "column")[_int(rng, 0, 1)]}


def _count_sample(p: Params, rng: np.random.Generator) -> Grid:
    c = p["colour"]
    grid = np.zeros(_shape(rng, 4), dtype=np.uint8)
    h, w = grid.shape
    for _ in range(_int(rng, 1, 6)):
        for _ in range(50):  # objects 1x1 to 2x2 (an L when a corner is left out), a cell apart from the others
            bh, bw = _int(rng, 1, 2), _int(rng, 1, 2)
            r0, c0 = _int(rng, 0, h - bh), _int(rng, 0, w - bw)
            if (grid[max(r0 - 1, 0) : r0 + bh + 1, max(c0 - 1, 0) : c0 + bw + 1] == c).any():
                continue
            shape = np.ones((bh, bw), dtype=bool)
            if bh == bw == 2 and rng.random() < 0.5:
                shape.reshape(-1)[_int(rng, 0, 3)] = False
            grid[r0 : r0 + bh, c0 : c0 + bw][shape] = c
            break
    others = _colours(rng, _int(rng, 1, 2), exclude=[c])
    noise = _scatter(rng, grid.shape, others, rng.uniform(0.05, 0.2))
    return np.where(grid == 0, noise, grid).astype(np.uint8)


def _count_rule(p: Params, x: Grid) -> Grid:
    k = components(x == p["colour"])
    return np.full((1, k) if p["orientation"] == "row" else (k, 1), p["colour"], dtype=np.uint8)


def _count_some(p: Params, x: Grid, y: Grid) -> bool:
    return y.size > 0


# crop: the output is the bounding box of the cells of one colour (with whatever else lies inside it).
def _crop_params(rng: np.random.Generator) -> Params:
    return {"colour": _int(rng, 1, 9)}


def _crop_sample(p: Params, rng: np.random.Generator) -> Grid:
    c = p["colour"]
    grid = _scatter(rng, _shape(rng, 5), _colours(rng, _int(rng, 1, 3), exclude=[c]), rng.uniform(0.2, 0.6))
    h, w = grid.shape
    bh, bw = _int(rng, 2, min(5, h - 1)), _int(rng, 2, min(5, w - 1))
    r0, c0 = _int(rng, 0, h - bh), _int(rng, 0, w - bw)
    shape = rng.random((bh, bw)) < 0.5
    shape[0, _int(rng, 0, bw - 1)] = shape[-1, _int(rng, 0, bw - 1)] = True  # the object spans its box
    shape[_int(rng, 0, bh - 1), 0] = shape[_int(rng, 0, bh - 1), -1] = True
    grid[r0 : r0 + bh, c0 : c0 + bw][shape] = c
    return grid


def _crop_rule(p: Params, x: Grid) -> Grid:
    rows, cols = np.nonzero(x == p["colour"])
    return x[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1].copy()


# ray: every cell of one colour sends a ray of another colour in a direction, over background, until a non-background
# cell of the input or the border.
def _ray_params(rng: np.random.Generator) -> Params:
    source, ray = _colours(rng, 2)
    return {"source": source, "ray": ray, "direction": DIRECTIONS[_int(rng, 0, 3)]}


def _ray_sample(p: Params, rng: np.random.Generator) -> Grid:
    s = p["source"]
    grid = _scatter(rng, _shape(rng), _colours(rng, 1, exclude=[s, p["ray"]]), rng.uniform(0.05, 0.2))
    free = np.flatnonzero(grid == 0)
    grid.reshape(-1)[rng.choice(free, size=min(_int(rng, 1, 4), free.size), replace=False)] = s
    return grid


def _ray_rule(p: Params, x: Grid) -> Grid:
    def shoot(g: Grid) -> Grid:
        out = g.copy()
        for i, j in zip(*np.nonzero(g == p["source"])):
            k = i + 1
            while k < g.shape[0] and g[k, j] == 0:
                out[k, j] = p["ray"]
                k += 1
        return out

    return _along(x, p["direction"], shoot)


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "geometry",
            "a fixed dihedral map of the grid (transform 1..7: rot90, rot180, rot270, fliplr, flipud, transpose, "
            "anti-transpose)",
            _geometry_params,
            _geometry_sample,
            _geometry_rule,
            _asymmetric,
        ),
        Family(
            "colour_map",
            "a fixed permutation with no fixed point of 2-4 colours (from -> to); other colours stay",
            _colour_map_params,
            _colour_map_sample,
            _colour_map_rule,
        ),
        Family(
            "gravity",
            "cells of a colour fall in a direction (down, up, left, right) until another cell or the border",
            _gravity_params,
            _gravity_sample,
            _gravity_rule,
        ),
        Family(
            "move",
            "every cell of a colour shifted by a fixed vector (-3..3 each way), clipped at the border",
            _move_params,
            _move_sample,
            _move_rule,
            _move_keeps_some,
        ),
        Family(
            "fill",
            "background regions enclosed by walls of a colour filled with another colour",
            _fill_params,
            _fill_sample,
            _fill_rule,
        ),
        Family(
            "count",
            "a 1 x k (row) or k x 1 (column) bar of a colour, k the number of its objects (4-connected)",
            _count_params,
            _count_sample,
            _count_rule,
            _count_some,
        ),
        Family(
            "crop",
            "the bounding box of the cells of a colour",
            _crop_params,
            _crop_sample,
            _crop_rule,
        ),
        Family(
            "ray",
            "every cell of a source colour sends a ray of another colour in a direction until a non-background cell",
            _ray_params,
            _ray_sample,
            _ray_rule,
        ),
    )
}
# The options model (pydantic only) restates the names for --held-out-families and its help.
assert tuple(FAMILIES) == ARC_RUNG_FAMILIES, "datasets_build/options.py ARC_RUNG_FAMILIES"


# --------------------------------------------------------------------------------------------------------- tasks


@dataclass
class RungTask:
    name: str
    family: str
    params: Params
    role: Role
    train: list[Pair]
    test: list[Pair]

    def to_json(self) -> dict[str, Any]:
        """ARC's task JSON layout; the family and parameters under "rung", which the ARC reader ignores."""
        return {**task_json(self.train, self.test), "rung": {"family": self.family, "params": self.params}}


def split_families(split: Split, held_out: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The families of the training tasks and of the evaluation tasks. Under new-families the held-out families give
    the evaluation tasks and no training task; under protocol and new-tasks they give no task at all, so that tasks of
    them generated apart (`generate(..., "new-families", held_out)`, same seed) are new families to a model trained on
    the build (the ARC rung study, docs/results.md)."""
    if split != "new-families" and not held_out:
        return list(FAMILIES), list(FAMILIES)
    unknown = sorted(set(held_out) - set(FAMILIES))
    if unknown or not held_out or set(held_out) == set(FAMILIES):
        raise ValueError(f"held-out families {list(held_out)}: need some but not all of {list(FAMILIES)}")
    kept = [f for f in FAMILIES if f not in held_out]
    return kept, ([f for f in FAMILIES if f in held_out] if split == "new-families" else kept)


def make_task(name: str, family: str, role: Role, rng: np.random.Generator, seen: set[bytes]) -> RungTask:
    """One task: its rule's parameters, then its pairs, each new to `seen` (the keys of every pair drawn so far, which
    it extends); the demonstrations' outputs are not all one grid."""
    fam = FAMILIES[family]
    params = fam.params(rng)
    n_demo, n_test = _int(rng, *DEMOS), _int(rng, *TESTS)
    pairs: list[Pair] = []
    while len(pairs) < n_demo + n_test:
        for _ in range(MAX_TRIES):
            x = fam.sample(params, rng)
            y = fam.rule(params, x)
            if not fam.keep(params, x, y):
                continue
            if len(pairs) == n_demo - 1 and all(b.shape == y.shape and np.array_equal(b, y) for _, b in pairs):
                continue
            key = pair_key(x, y)
            if key not in seen:
                break
        else:
            raise RuntimeError(f"arc rung: no new {family} pair in {MAX_TRIES} draws (task {name})")
        assert MIN_SIDE <= min(x.shape) and max(x.shape + y.shape) <= MAX_SIDE and min(y.shape) >= 1, (family, x, y)
        seen.add(key)
        pairs.append((x, y))
    return RungTask(name, family, params, role, pairs[:n_demo], pairs[n_demo:])


def generate(
    seed: int, train_tasks: int, eval_tasks: int, split: Split = "protocol", held_out: Sequence[str] = ()
) -> list[RungTask]:
    """The rung's tasks: training tasks, then evaluation tasks, each role's families taken in turn (task i of a role
    is of its family i mod their number). Task i of a role draws from the stream (seed, role, i)."""
    families = dict(zip(("training", "evaluation"), split_families(split, held_out)))
    seen: set[bytes] = set()
    tasks = []
    for role, n in (("training", train_tasks), ("evaluation", eval_tasks)):
        fams = families[role]
        for i in range(n):
            family = fams[i % len(fams)]
            rng = np.random.default_rng([seed, STREAM_RUNG, ROLE_CODES[role], i])
            tasks.append(make_task(f"{ROLE_PREFIX[role]}-{i:04d}-{family}", family, role, rng, seen))  # type: ignore[arg-type]
    return tasks


def describe(tasks: Sequence[RungTask], split: Split, held_out: Sequence[str]) -> dict[str, Any]:
    """The builder record's source_detail: the generator, the families of each role and every task's rule."""
    train_families, eval_families = split_families(split, held_out)
    return {
        "generator": "datasets_build.arc_rung",
        "version": RUNG_VERSION,
        "split": split,
        "families": {name: f.doc for name, f in FAMILIES.items()},
        "training_families": train_families,
        "evaluation_families": eval_families,
        "held_out_families": list(held_out) if split == "new-families" else [],
        "input_sides": [MIN_SIDE, MAX_SIDE],
        "rules": {t.name: {"family": t.family, "params": t.params} for t in tasks},
    }


def tasks_json(tasks: Sequence[RungTask]) -> str:
    """Every task as one JSON text, {name: task} in generation order (what "same seed, same bytes" compares)."""
    return json.dumps({t.name: t.to_json() for t in tasks}, separators=(",", ":"))


def write_task_files(root: Path, tasks: Sequence[RungTask]) -> Path:
    """The tasks as ARC task files, `root/arc-rung/{training,evaluation}/NAME.json`: `hrm build-data arc --source json
    root/arc-rung --strict` (or without --strict) reads them back as the same tasks."""
    folder = Path(root) / COLLECTION
    for t in tasks:
        path = folder / t.role / f"{t.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(t.to_json(), separators=(",", ":")) + "\n")
    return folder
