"""Sudoku builder: generator correctness, augmentation, strict split, determinism, CSV checks, CLI errors.

Checks that matter use independent code written here (a naive solver, a brute-force orbit over the whole 4x4 group,
an inverse of each augmentation), not the builder's own helpers.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from datasets_build import sources
from datasets_build import sudoku as S
from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.tasks import sudoku as T
from tests.helpers import fake_hub, run_hrm, write_csv_file

REPO = Path(__file__).resolve().parents[2]
BOXES = [(2, 2), (2, 3), (3, 3)]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach the network: the `auto` source must see offline mode."""
    monkeypatch.setenv("HRM_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


# ------------------------------------------------------------------------------------------- independent helpers


def units(r: int, c: int) -> list[list[tuple[int, int]]]:
    n = r * c
    rows = [[(i, j) for j in range(n)] for i in range(n)]
    cols = [[(i, j) for i in range(n)] for j in range(n)]
    boxes = [[(b * r + i, s * c + j) for i in range(r) for j in range(c)] for b in range(c) for s in range(r)]
    return rows + cols + boxes


def valid_grid(grid: np.ndarray, r: int, c: int) -> bool:
    n = r * c
    g = np.asarray(grid).reshape(n, n)
    return all(sorted(int(g[p]) for p in u) == list(range(1, n + 1)) for u in units(r, c))


def consistent(puzzle: np.ndarray, solution: np.ndarray) -> bool:
    p, s = np.asarray(puzzle).reshape(-1), np.asarray(solution).reshape(-1)
    return bool(np.all((p == 0) | (p == s)))


def count_solutions(puzzle: np.ndarray, r: int, c: int, limit: int = 2) -> int:
    """Plain backtracking, first empty cell, no propagation: slow but obviously right (4x4 and 6x6)."""
    n = r * c
    g = np.asarray(puzzle).reshape(n, n).astype(int).tolist()

    def ok(i: int, j: int, d: int) -> bool:
        if d in g[i] or any(g[k][j] == d for k in range(n)):
            return False
        bi, bj = i // r * r, j // c * c
        return all(g[bi + a][bj + b] != d for a in range(r) for b in range(c))

    def rec() -> int:
        for i in range(n):
            for j in range(n):
                if g[i][j] == 0:
                    total = 0
                    for d in range(1, n + 1):
                        if ok(i, j, d):
                            g[i][j] = d
                            total += rec()
                            g[i][j] = 0
                            if total >= limit:
                                return total
                    return total
        return 1

    return rec()


def structured_perms(groups: int, size: int) -> list[list[int]]:
    """Every permutation that shuffles `groups` blocks of `size` lines and the lines inside each block."""
    return [
        [b * size + within[k][j] for k, b in enumerate(order) for j in range(size)]
        for order in itertools.permutations(range(groups))
        for within in itertools.product(itertools.permutations(range(size)), repeat=groups)
    ]


def first_occurrence(grid: np.ndarray) -> tuple[int, ...]:
    names: dict[int, int] = {0: 0}
    return tuple(names.setdefault(int(v), len(names)) for v in grid.reshape(-1))


def orbit(puzzle: np.ndarray, r: int, c: int) -> set[tuple[int, ...]]:
    """All images of a puzzle under the full group, digits named by first occurrence (which absorbs relabelling)."""
    n = r * c
    p = np.asarray(puzzle).reshape(n, n)
    out = set()
    for t in (False, True) if r == c else (False,):
        g = p.T if t else p
        for rows in structured_perms(c, r):
            for cols in structured_perms(r, c):
                out.add(first_occurrence(g[np.ix_(rows, cols)]))
    return out


def invert(tf: S.GridTransforms, b: int, grid: np.ndarray) -> np.ndarray:
    """Undo element b of a transform batch: digits, then rows/columns, then the transpose."""
    y = np.argsort(tf.digit_map[b])[grid]
    x = y[np.argsort(tf.row_perm[b])][:, np.argsort(tf.col_perm[b])]
    return x.T if tf.transpose[b] else x


def build(tmp: Path, name: str = "ds", **kw) -> Path:
    kw.setdefault("source", "generate")
    return S.build_sudoku(S.SudokuBuildOptions(out=tmp / name, **kw))


def load(out: Path, split: str) -> dict[str, np.ndarray]:
    return {
        k: np.load(out / split / f"all__{k}.npy")
        for k in ("inputs", "labels", "puzzle_identifiers", "puzzle_indices", "group_indices")
    }


# --------------------------------------------------------------------------------------------------- generator


@pytest.mark.parametrize("r,c,count", [(2, 2, 30), (2, 3, 12), (3, 3, 4)])
def test_generated_puzzles_have_a_unique_solution(r: int, c: int, count: int) -> None:
    rng = np.random.default_rng(7)
    for _ in range(count):
        g = S.generate_puzzle(rng, r, c)
        assert valid_grid(g.solution, r, c)
        assert consistent(g.puzzle, g.solution)
        if r * c <= 6:
            assert count_solutions(g.puzzle, r, c) == 1
        sols, _ = T.solve(g.puzzle, r, c, limit=2)
        assert len(sols) == 1 and np.array_equal(sols[0].reshape(-1), g.solution)
        assert g.rating == T.rate_puzzle(g.puzzle, r, c) >= 0


def test_generated_4x4_puzzles_are_minimal() -> None:
    rng = np.random.default_rng(3)
    for _ in range(10):
        g = S.generate_puzzle(rng, 2, 2)
        for cell in np.flatnonzero(g.puzzle):
            weaker = g.puzzle.copy()
            weaker[cell] = 0
            assert count_solutions(weaker, 2, 2) >= 2


@pytest.mark.parametrize("r,c,min_givens", [(2, 2, 9), (2, 3, 18)])
def test_min_givens_adds_solution_clues_to_the_same_minimal_puzzle(r: int, c: int, min_givens: int) -> None:
    for seed in range(8):
        minimal = S.generate_puzzle(np.random.default_rng(seed), r, c)
        easier = S.generate_puzzle(np.random.default_rng(seed), r, c, min_givens)
        assert np.array_equal(easier.solution, minimal.solution)
        kept = minimal.puzzle != 0
        assert np.array_equal(easier.puzzle[kept], minimal.puzzle[kept])  # the minimal clues stay
        assert np.count_nonzero(easier.puzzle) == max(min_givens, int(kept.sum()))
        assert consistent(easier.puzzle, easier.solution) and count_solutions(easier.puzzle, r, c) == 1
        assert easier.rating == T.rate_puzzle(easier.puzzle, r, c)


def test_min_givens_bad_values_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^--min-givens 36: a 6x6 puzzle has 36 cells"):
        S.build_sudoku(S.SudokuBuildOptions(out=tmp_path / "a", source="generate", box="2x3", min_givens=36))
    with pytest.raises(UserError, match=r"^--min-givens 30: only generated puzzles"):
        S.build_sudoku(S.SudokuBuildOptions(out=tmp_path / "b", source="csv", csv_dir=tmp_path, min_givens=30))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_solver_counts_multiple_solutions_and_contradictions() -> None:
    assert len(T.solve(np.zeros(16, dtype=np.uint8), 2, 2, limit=2)[0]) == 2
    clash = np.zeros(16, dtype=np.uint8)
    clash[0] = clash[1] = 1
    assert T.solve(clash, 2, 2)[0] == []


# ------------------------------------------------------------------------------------------------- augmentation


@pytest.mark.parametrize("r,c", BOXES)
def test_transforms_follow_shuffle_sudoku_and_invert_exactly(r: int, c: int) -> None:
    n = r * c
    rng = np.random.default_rng(11)
    g = S.generate_puzzle(rng, r, c)
    sol = g.solution.reshape(n, n)
    tf = S.random_transforms(rng, r, c, 40)
    out = S.apply_transforms(sol, tf)
    if r != c:
        assert not tf.transpose.any()  # a transpose would turn r x c boxes into c x r boxes
    else:
        assert 0 < tf.transpose.sum() < 40
    for b in range(40):
        # the original formula, written out: transpose, new[i, j] = old[row_perm[i], col_perm[j]], map digits (0 fixed)
        x = sol.T if tf.transpose[b] else sol
        expect = tf.digit_map[b][x[tf.row_perm[b]][:, tf.col_perm[b]]]
        assert np.array_equal(out[b], expect)
        assert tf.digit_map[b][0] == 0 and sorted(tf.digit_map[b][1:]) == list(range(1, n + 1))
        assert sorted(tf.row_perm[b]) == list(range(n)) and sorted(tf.col_perm[b]) == list(range(n))
        assert all(len(set(tf.row_perm[b][k * r : (k + 1) * r] // r)) == 1 for k in range(c))  # bands stay whole
        assert all(len(set(tf.col_perm[b][k * c : (k + 1) * c] // c)) == 1 for k in range(r))
        assert valid_grid(out[b], r, c)
        assert np.array_equal(invert(tf, b, out[b]), sol)


@pytest.mark.parametrize("r,c", BOXES)
def test_built_augmented_examples_are_valid_transforms(tmp_path: Path, r: int, c: int) -> None:
    n, num_aug = r * c, 3
    sizes = {(2, 2): (12, 4), (2, 3): (8, 4), (3, 3): (3, 2)}[(r, c)]
    out = build(tmp_path, box=f"{r}x{c}", train_size=sizes[0], test_size=sizes[1], num_aug=num_aug)
    a = load(out, "train")
    inputs, labels = a["inputs"].astype(int) - 1, a["labels"].astype(int) - 1
    assert inputs.shape == (sizes[0] * (1 + num_aug), n * n)
    for k in range(inputs.shape[0]):
        assert valid_grid(labels[k], r, c)
        assert consistent(inputs[k], labels[k])
        assert inputs[k].min() >= 0 and (inputs[k] == 0).any()
    for g in range(sizes[0]):
        lo, hi = a["group_indices"][g], a["group_indices"][g + 1]
        assert hi - lo == 1 + num_aug
        base = S.canonical_key(inputs[lo], labels[lo], r, c)
        for k in range(lo + 1, hi):
            assert S.canonical_key(inputs[k], labels[k], r, c) == base
            if n == 4:
                assert first_occurrence(inputs[k]) in orbit(inputs[lo], r, c)
    t = load(out, "test")
    assert t["inputs"].shape[0] == sizes[1]  # test is never augmented


# ---------------------------------------------------------------------------------------------- canonical form


def _transform(x: np.ndarray, t: bool, rows: np.ndarray, cols: np.ndarray, digits: np.ndarray) -> np.ndarray:
    x = x.T if t else x
    return digits[x[np.ix_(rows, cols)]]


@pytest.mark.parametrize("r,c", BOXES)
def test_canonical_key_is_invariant_under_the_group(r: int, c: int) -> None:
    n = r * c
    rng = np.random.default_rng(5)
    for _ in range(3):
        g = S.generate_puzzle(rng, r, c)
        key = S.canonical_key(g.puzzle, g.solution, r, c)
        for _ in range(6):  # a transform written here, independently of random_transforms
            t = r == c and rng.random() < 0.5
            rows = structured_perms(c, r)[rng.integers(len(structured_perms(c, r)))]
            cols = structured_perms(r, c)[rng.integers(len(structured_perms(r, c)))]
            digits = np.concatenate([[0], rng.permutation(n) + 1])
            moved = [_transform(x.reshape(n, n), t, rows, cols, digits) for x in (g.puzzle, g.solution)]
            assert S.canonical_key(*moved, r, c) == key


def test_canonical_key_matches_brute_force_equivalence_4x4() -> None:
    rng = np.random.default_rng(9)
    gens = [S.generate_puzzle(rng, 2, 2) for _ in range(60)]
    keys = [S.canonical_key(g.puzzle, g.solution, 2, 2) for g in gens]
    reps = [min(orbit(g.puzzle, 2, 2)) for g in gens]
    assert len(set(reps)) > 5  # several classes, so "different" is exercised
    for i, j in itertools.combinations(range(len(gens)), 2):
        assert (keys[i] == keys[j]) == (reps[i] == reps[j])


def test_canonical_key_matches_brute_force_equivalence_6x6() -> None:
    rng = np.random.default_rng(4)
    gens = [S.generate_puzzle(rng, 2, 3) for _ in range(6)]
    tf = S.random_transforms(rng, 2, 3, 1)
    moved = S.apply_transforms(gens[0].puzzle.reshape(6, 6), tf)[0]  # one equivalent pair
    puzzles = [g.puzzle for g in gens] + [moved]
    sols = [g.solution for g in gens] + [S.apply_transforms(gens[0].solution.reshape(6, 6), tf)[0]]
    keys = [S.canonical_key(p, s, 2, 3) for p, s in zip(puzzles, sols)]
    reps = [min(orbit(p, 2, 3)) for p in puzzles]
    assert reps[0] == reps[-1]
    for i, j in itertools.combinations(range(len(puzzles)), 2):
        assert (keys[i] == keys[j]) == (reps[i] == reps[j])


def test_canonical_key_differs_for_different_9x9_puzzles() -> None:
    rng = np.random.default_rng(2)
    gens = [S.generate_puzzle(rng, 3, 3) for _ in range(4)]
    keys = {S.canonical_key(g.puzzle, g.solution, 3, 3) for g in gens}
    assert len(keys) == 4
    g = gens[0]
    other = g.puzzle.copy()
    other[np.flatnonzero(other == 0)[0]] = g.solution[np.flatnonzero(other == 0)[0]]  # one clue more: not equivalent
    assert S.canonical_key(other, g.solution, 3, 3) != S.canonical_key(g.puzzle, g.solution, 3, 3)


def test_4x4_split_is_strict(tmp_path: Path) -> None:
    out = build(tmp_path, box="2x2", train_size=150, test_size=30, seed=1)
    tr, te = load(out, "train")["inputs"].astype(int) - 1, load(out, "test")["inputs"].astype(int) - 1
    train_classes = {min(orbit(p, 2, 2)) for p in tr}
    test_classes = {min(orbit(p, 2, 2)) for p in te}
    assert len(te) == 30 and len(train_classes) > 3 and test_classes
    assert not train_classes & test_classes
    counts = json.loads((out / "test" / "dataset.json").read_text())["builder"]["counts"]
    assert counts["train_classes"] == len(train_classes) and counts["test_classes"] == len(test_classes)
    assert counts["dropped_for_overlap"] > 0  # 36 classes only: overlap is real at this size and was removed


def all_4x4_grids() -> np.ndarray:
    """Every complete 4x4 Sudoku grid ([288, 16], values 1..4), by plain backtracking."""
    grids: list[np.ndarray] = []
    g = np.zeros((4, 4), dtype=int)

    def fill(i: int) -> None:
        if i == 16:
            grids.append(g.reshape(-1).copy())
            return
        r, c = divmod(i, 4)
        for d in range(1, 5):
            if (
                d not in g[r]
                and d not in g[:, c]
                and d not in g[r // 2 * 2 : r // 2 * 2 + 2, c // 2 * 2 : c // 2 * 2 + 2]
            ):
                g[r, c] = d
                fill(i + 1)
                g[r, c] = 0

    fill(0)
    return np.array(grids)


def test_the_counted_4x4_classes_are_all_there_are() -> None:
    """MINIMAL_PUZZLE_CLASSES and SOLUTION_CLASSES, which the capacity error quotes, by exhaustive enumeration: every
    minimal unique puzzle of one grid per grid class, classes by the brute-force orbit."""
    grids = all_4x4_grids()
    assert len(grids) == 288
    grid_classes: dict[tuple[int, ...], int] = {}
    for i, grid in enumerate(grids):
        grid_classes.setdefault(min(orbit(grid, 2, 2)), i)
    assert len(grid_classes) == S.SOLUTION_CLASSES["2x2"]
    masks = np.arange(1 << 16)
    bit = 1 << np.arange(16)
    classes = set()
    for i in grid_classes.values():
        agree = np.delete(((grids == grids[i]) * bit).sum(axis=1), i)  # cells where another grid agrees with this one
        unique = np.ones(masks.size, dtype=bool)  # givens `mask` single out grid i: no other grid agrees on all of them
        for a in agree:
            unique &= (masks & ~a) != 0
        minimal = unique.copy()
        for cell in range(16):
            minimal &= ((masks >> cell) & 1 == 0) | ~unique[masks & ~(1 << cell)]
        for mask in np.flatnonzero(minimal):
            classes.add(min(orbit(np.where((mask >> np.arange(16)) & 1, grids[i], 0), 2, 2)))
    assert len(classes) == S.MINIMAL_PUZZLE_CLASSES["2x2"]


def test_a_split_that_can_never_fill_stops_with_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """4x4 has 36 minimal classes: with 100000 train places and 10 test places every class goes to train, and the
    generator used to run on for millions of attempts. It stops once no new class came for STALL_ATTEMPTS."""
    monkeypatch.setattr(S, "STALL_ATTEMPTS", 500)
    with pytest.raises(UserError) as e:
        build(tmp_path, box="2x2", train_size=100000, test_size=10, workers=1)
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith("--test-size 10: only 0 test 4x4 puzzles after ")
    assert "all 36 puzzle classes found went to train" in text and "none new came in the last 500 attempts" in text
    attempts = int(text.split(" after ")[1].split(" attempts")[0].replace(",", ""))
    assert attempts < 2000  # the classes are all found within a few hundred attempts
    with pytest.raises(
        UserError,
        match=r"^--train-size 30: only 0 train 4x4 puzzles .* 2 solution classes .* use --strict-split puzzle",
    ):
        build(tmp_path, box="2x2", train_size=30, test_size=3000, strict_split="solution", seed=1, workers=1)
    assert not (tmp_path / "ds").exists()


def test_subsample_size_above_the_train_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^--subsample-size 50: more than the 20 training puzzles of --train-size 20;"):
        build(tmp_path, box="2x2", train_size=20, test_size=5, subsample_size=50)
    with pytest.raises(UserError, match=r"--train-size 1000 \(the default of --source generate\)"):
        build(tmp_path, box="2x2", subsample_size=1001)
    out = build(tmp_path, box="2x2", train_size=20, test_size=5, subsample_size=20)  # all of them: allowed
    assert json.loads((out / "train" / "dataset.json").read_text())["builder"]["counts"]["originals"] == 20


def test_min_difficulty_filters_and_impossible_is_a_user_error(tmp_path: Path) -> None:
    out = build(tmp_path, box="2x3", train_size=6, test_size=3, min_difficulty=1)
    for split in ("train", "test"):
        b = json.loads((out / split / "dataset.json").read_text())["builder"]
        assert b["difficulty"]["min"] >= 1
        inputs = np.load(out / split / "all__inputs.npy").astype(int) - 1
        assert all(T.rate_puzzle(p, 2, 3) >= 1 for p in inputs)
    with pytest.raises(UserError, match="--min-difficulty 5"):
        build(tmp_path, "hard", box="2x2", train_size=5, test_size=5, min_difficulty=5)
    assert not (tmp_path / "hard").exists()


# ------------------------------------------------------------------------------------------ format and determinism


def test_metadata_matches_arrays(tmp_path: Path) -> None:
    out = build(tmp_path, box="2x3", train_size=10, test_size=5, num_aug=2)
    assert json.loads((out / "identifiers.json").read_text()) == ["<blank>"]
    for split, groups, per in (("train", 10, 3), ("test", 5, 1)):
        raw = json.loads((out / split / "dataset.json").read_text())
        meta = PuzzleDatasetMetadata.model_validate(raw)
        a = load(out, split)
        assert (meta.seq_len, meta.vocab_size, meta.pad_id, meta.ignore_label_id, meta.blank_identifier_id) == (
            36,
            8,
            0,
            0,
            0,
        )
        assert (meta.num_puzzle_identifiers, meta.sets, meta.mean_puzzle_examples, meta.total_groups) == (
            1,
            ["all"],
            1.0,
            groups,
        )
        n_ex = groups * per
        assert a["inputs"].shape == a["labels"].shape == (n_ex, 36)
        assert a["inputs"].dtype == np.uint8 and a["puzzle_indices"].dtype == a["group_indices"].dtype == np.int32
        assert np.array_equal(a["puzzle_indices"], np.arange(n_ex + 1))
        assert np.array_equal(a["group_indices"], np.arange(0, n_ex + 1, per))
        assert np.array_equal(a["puzzle_identifiers"], np.zeros(n_ex))
        assert a["inputs"].max() <= 7 and a["labels"].min() >= 2  # tokens: blank 1, digits 2..7; labels never blank
        b = raw["builder"]
        assert b["counts"]["originals"] == groups and b["counts"]["examples"] == n_ex and b["seed"] == 0
        assert sum(b["difficulty"]["histogram"].values()) == groups
    # the project's reader accepts what we wrote
    from hrm_reason.data.puzzle import load_split

    assert load_split(out, "train").num_examples == 30


def test_rebuild_is_byte_identical_and_seed_matters(tmp_path: Path) -> None:
    kw = dict(box="2x3", train_size=12, test_size=6, num_aug=2, subsample_size=10)
    a, b = build(tmp_path, "a", seed=3, **kw), build(tmp_path, "b", seed=3, **kw)
    c = build(tmp_path, "c", seed=4, **kw)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert len(files) == 19  # 13 of the original format, and val/: test/ again
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert (a / "train/all__inputs.npy").read_bytes() != (c / "train/all__inputs.npy").read_bytes()
    assert (a / "test/all__inputs.npy").read_bytes() != (c / "test/all__inputs.npy").read_bytes()


def test_existing_output_needs_overwrite(tmp_path: Path) -> None:
    out = build(tmp_path, box="2x2", train_size=5, test_size=5)
    with pytest.raises(UserError, match="--overwrite"):
        build(tmp_path, box="2x2", train_size=5, test_size=5)
    build(tmp_path, box="2x2", train_size=6, test_size=5, overwrite=True)
    assert json.loads((out / "train" / "dataset.json").read_text())["total_groups"] == 6


# ---------------------------------------------------------------------------------------------------- sources


def write_csv(path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    write_csv_file(path, ["source", "q", "a", "rating"], rows)


@pytest.fixture(scope="module")
def real_rows() -> list[tuple[str, str, str, str]]:
    rng = np.random.default_rng(12)
    out = []
    for k in range(8):
        g = S.generate_puzzle(rng, 3, 3)
        q = "".join("." if v == 0 else str(v) for v in g.puzzle)
        out.append((f"gen{k}", q if k % 2 else q.replace(".", "0"), "".join(map(str, g.solution)), str(g.rating)))
    return out


def test_csv_source_builds(tmp_path: Path, real_rows: list) -> None:
    write_csv(tmp_path / "csv" / "train.csv", real_rows[:6])
    write_csv(tmp_path / "csv" / "test.csv", real_rows[6:])
    out = build(tmp_path, source="csv", csv_dir=tmp_path / "csv", num_aug=1)
    a = load(out, "train")
    assert a["inputs"].shape == (12, 81)
    first = np.array([0 if ch in ".0" else int(ch) for ch in real_rows[0][1]]) + 1
    assert np.array_equal(a["inputs"][0], first)
    b = json.loads((out / "test" / "dataset.json").read_text())["builder"]
    assert b["source"] == "csv" and b["counts"]["originals"] == 2
    ratings = sorted(int(r[3]) for r in real_rows[6:])
    assert b["difficulty"]["min"] == ratings[0] and b["difficulty"]["max"] == ratings[-1]
    # min-difficulty and subsample apply to CSV rows too
    cut = sorted(int(r[3]) for r in real_rows[:6])[3]
    out2 = build(tmp_path, "cut", source="csv", csv_dir=tmp_path / "csv", min_difficulty=cut, subsample_size=2)
    assert np.load(out2 / "train" / "all__inputs.npy").shape[0] == 2


def test_auto_with_csv_dir_and_hf_source_via_injected_download(
    tmp_path: Path, real_rows: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_csv(tmp_path / "csv" / "train.csv", real_rows[:6])
    write_csv(tmp_path / "csv" / "test.csv", real_rows[6:])
    fake_hub(monkeypatch, tmp_path / "csv")
    out = S.build_sudoku(S.SudokuBuildOptions(out=tmp_path / "hf", source="auto", test_size=1), hub_probe=lambda: True)
    b = json.loads((out / "test" / "dataset.json").read_text())["builder"]
    assert (b["source"], b["source_detail"], b["counts"]["originals"]) == (
        "hf",
        {"repo": S.HF_REPO, "revision": "abc123"},
        1,
    )


def test_auto_falls_back_to_generate_when_download_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub(monkeypatch, None)
    out = S.build_sudoku(S.SudokuBuildOptions(out=tmp_path / "fb", train_size=3, test_size=2), hub_probe=lambda: True)
    assert json.loads((out / "train" / "dataset.json").read_text())["builder"]["source"] == "generate"
    with pytest.raises(UserError, match="could not download"):  # an explicit --source hf does not fall back
        S.build_sudoku(S.SudokuBuildOptions(out=tmp_path / "hf", source="hf"), hub_probe=lambda: True)


def test_auto_offline_generates(tmp_path: Path) -> None:
    assert sources.hub_reachable() is False  # HRM_OFFLINE is set by the fixture: no socket is opened
    out = S.build_sudoku(S.SudokuBuildOptions(out=tmp_path / "auto", train_size=4, test_size=2))
    assert json.loads((out / "train" / "dataset.json").read_text())["builder"]["source"] == "generate"


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda q, a: (q[:80], a), "puzzle q has 80 cells, expected 81"),
        (lambda q, a: (q, a[:80]), "answer a has 80 cells"),
        (lambda q, a: (q[:5] + "x" + q[6:], a), "'x' at cell 6"),
        (lambda q, a: (q, a[1] + a[0] + a[2:]), "answer does not solve the puzzle"),
    ],
)
def test_csv_bad_rows_name_file_and_line(tmp_path: Path, real_rows: list, mutate, message: str) -> None:
    rows = list(real_rows[:5])
    src, q, a, rating = rows[3]
    q, a = mutate(q, a)
    if message == "answer does not solve the puzzle" and a[0] == a[1]:
        pytest.skip("swap is a no-op")
    rows[3] = (src, q, a, rating)
    write_csv(tmp_path / "train.csv", rows)
    with pytest.raises(UserError) as e:
        S.read_sudoku_csv(tmp_path / "train.csv")
    text = str(e.value)
    assert "\n" not in text and "train.csv line 5" in text and message in text


def test_csv_answer_contradicting_a_given_is_reported(tmp_path: Path, real_rows: list) -> None:
    src, q, a, rating = real_rows[1]
    i = next(k for k, ch in enumerate(q) if ch not in ".0")
    other = str(int(q[i]) % 9 + 1)
    bad_q = q[:i] + other + q[i + 1 :]  # a given the answer disagrees with
    write_csv(tmp_path / "train.csv", [real_rows[0], (src, bad_q, a, rating)])
    with pytest.raises(
        UserError,
        match=rf"train.csv line 3: answer does not solve the puzzle \(row {i // 9 + 1} column {i % 9 + 1}: given {other}, answer {a[i]}\)",
    ):
        S.read_sudoku_csv(tmp_path / "train.csv")


def test_csv_missing_file_and_wrong_box(tmp_path: Path, real_rows: list) -> None:
    write_csv(tmp_path / "train.csv", real_rows[:2])
    with pytest.raises(UserError, match="test.csv: file not found"):
        build(tmp_path, source="csv", csv_dir=tmp_path)
    with pytest.raises(UserError, match="--box 2x3"):
        build(tmp_path, source="csv", csv_dir=tmp_path, box="2x3")
    with pytest.raises(UserError, match="--csv-dir"):
        build(tmp_path, source="csv")
    assert not (tmp_path / "ds").exists()


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_hrm("build-data", "sudoku", *args, cwd=cwd, timeout=120, offline=True)


def test_cli_errors_are_one_line(tmp_path: Path, real_rows: list) -> None:
    rows = list(real_rows[:4])
    rows[2] = (rows[2][0], rows[2][1][:80], rows[2][2], rows[2][3])
    write_csv(tmp_path / "bad" / "train.csv", rows)
    write_csv(tmp_path / "bad" / "test.csv", real_rows[4:])
    cases = [
        (["--source", "csv", "--csv-dir", str(tmp_path / "bad"), "--out", str(tmp_path / "o1")], "train.csv line 4"),
        (["--box", "4x4", "--out", str(tmp_path / "o2")], "--box"),
        (["--num-aug", "-2", "--out", str(tmp_path / "o3")], "--num-aug"),
        (["--source", "web", "--out", str(tmp_path / "o4")], "--source"),
    ]
    for args, needle in cases:
        res = run_cli(*args, cwd=REPO)
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], res.stderr
        assert "Traceback" not in res.stderr + res.stdout
    assert not any(tmp_path.glob("o*"))


def test_cli_builds_and_prints_summary(tmp_path: Path) -> None:
    res = run_cli(
        "--source",
        "generate",
        "--box",
        "2x2",
        "--train-size",
        "8",
        "--test-size",
        "3",
        "--num-aug",
        "2",
        "--out",
        str(tmp_path / "cli"),
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr
    assert (
        res.stdout.strip().splitlines()[-1]
        == f"wrote {tmp_path / 'cli'}: train 8 puzzles / 24 examples, test 3 puzzles / 3 examples"
    )
    res = run_cli("--source", "generate", "--box", "2x2", "--out", str(tmp_path / "cli"), cwd=REPO)
    assert res.returncode == 2 and "already exists" in res.stderr
