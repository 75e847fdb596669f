"""Maze builder: generated mazes meet their definition, pair draws are uniform, augmentation keeps optimal paths
optimal, the split is strict, builds are deterministic, CSV rows are checked, CLI errors are one line.

Checks use code written here (plain BFS, the path definition spelled out, exact all-pairs distances), not the
builder's helpers.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from datasets_build import maze as M
from datasets_build import sources
from hrm_reason.data.puzzle import load_split
from hrm_reason.errors import UserError
from hrm_reason.tasks.dihedral import inverse_dihedral_transform
from hrm_reason.tasks.maze import pack_rows
from tests.helpers import fake_hub, ref_distances, run_hrm, write_csv_file

REPO = Path(__file__).resolve().parents[2]
WALL, OPEN, START, GOAL, PATH = 1, 2, 3, 4, 5
CHARS = {1: "#", 2: " ", 3: "S", 4: "G", 5: "o"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach the network: the `auto` source must see offline mode."""
    monkeypatch.setenv("HRM_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


# ------------------------------------------------------------------------------------------- independent helpers


def shortest(grid: np.ndarray) -> int:
    return int(ref_distances(grid != WALL, [tuple(np.argwhere(grid == START)[0])])[tuple(np.argwhere(grid == GOAL)[0])])


def is_optimal_label(grid: np.ndarray, label: np.ndarray) -> bool:
    """The label is the maze with the d - 1 cells of an S-G walk through open cells marked 'o'."""
    d = shortest(grid)
    marked = label == PATH
    if d < 1 or not np.array_equal(np.where(marked, OPEN, label), grid) or marked.sum() != d - 1:
        return False
    route = ref_distances(marked | (grid == START) | (grid == GOAL), [tuple(np.argwhere(grid == START)[0])])
    return route[tuple(np.argwhere(grid == GOAL)[0])] >= 0


def build(tmp: Path, name: str = "ds", **kw) -> Path:
    kw.setdefault("source", "generate")
    kw.setdefault("size", 9)
    return M.build_maze(M.MazeBuildOptions(out=tmp / name, **kw))


def load(out: Path, split: str) -> dict[str, np.ndarray]:
    return {
        k: np.load(out / split / f"all__{k}.npy")
        for k in ("inputs", "labels", "puzzle_identifiers", "puzzle_indices", "group_indices")
    }


def builder(out: Path, split: str) -> dict:
    return json.loads((out / split / "dataset.json").read_text())["builder"]


# --------------------------------------------------------------------------------------------------- generator


@pytest.mark.parametrize("size,min_path,density", [(9, 27, (0.3, 0.5)), (12, 30, (0.2, 0.45)), (30, 110, (0.3, 0.5))])
def test_generated_mazes_meet_their_definition(size: int, min_path: int, density: tuple[float, float]) -> None:
    grids = np.concatenate(
        [M.generate_chunk(7, "train", c, size, min_path, density).grids for c in range(2 if size < 30 else 3)]
    )
    assert len(grids) >= 3
    labels, d = M.label_paths(grids)
    lo, hi = M.wall_count_range(size, density)
    for grid, label, moves in zip(grids, labels, d):
        assert (grid == START).sum() == 1 and (grid == GOAL).sum() == 1
        assert set(np.unique(grid)) <= {WALL, OPEN, START, GOAL}
        assert lo <= (grid == WALL).sum() <= hi
        assert shortest(grid) == moves >= min_path  # S and G connected, far enough apart
        assert is_optimal_label(grid, label)


def test_lehnert_wall_counts_at_30x30() -> None:
    """Lehnert et al.: randint(N // 10 * 3, N // 10 * 5) walls; the same range here for N = 900."""
    assert M.wall_count_range(30, M.LEHNERT_WALL_DENSITY) == (900 // 10 * 3, 900 // 10 * 5)
    assert M.default_min_path(30) == 110 and M.default_min_path(9) == 27


def test_screen_finds_exactly_the_layouts_with_a_far_pair_and_pairs_are_drawn_from_all_of_them() -> None:
    """Exact all-pairs distances by plain BFS from every open cell, on 6x6 layouts."""
    size, m = 6, 9
    rng = np.random.default_rng(0)
    n = 300
    walls = rng.integers(8, 16, size=n)
    order = np.argsort(rng.random((n, size * size)), axis=1)
    is_wall = np.zeros((n, size * size), dtype=bool)
    is_wall[np.arange(n)[:, None], order] = np.arange(size * size)[None, :] < walls[:, None]
    passable = ~is_wall.reshape(n, size, size)
    certified = M._screen(pack_rows(passable), order, walls, size, m)
    far_pairs = []
    for b in range(n):
        opens = [tuple(x) for x in np.argwhere(passable[b])]
        dist = {s: ref_distances(passable[b], [s]) for s in opens}
        far_pairs.append({(s, g) for s in opens for g in opens if dist[s][g] >= m})
    has = np.array([len(p) > 0 for p in far_pairs])
    assert has.sum() > 10 and (~has).sum() > 10
    assert np.array_equal(certified, has)
    keep = np.flatnonzero(certified)
    starts, goals, totals = M._draw_pairs(pack_rows(passable[keep]), size, m, np.random.default_rng(1))
    for b, s, g, total in zip(keep, starts, goals, totals):
        assert ((s // size, s % size), (g // size, g % size)) in far_pairs[b]
        assert total == len(far_pairs[b])


def test_pair_draw_is_uniform_over_far_pairs() -> None:
    size, m = 5, 6
    grid = np.zeros((size, size), dtype=bool)
    grid[1, 1:4] = grid[3, 1:4] = True  # walls: a ring of open cells around two bars
    passable = ~grid
    opens = [tuple(x) for x in np.argwhere(passable)]
    far = {(s, g) for s in opens for g in opens if ref_distances(passable, [s])[g] >= m}
    draws = 12 * len(far) * 10
    starts, goals, totals = M._draw_pairs(
        np.repeat(pack_rows(passable[None]), draws, axis=0), size, m, np.random.default_rng(2)
    )
    assert (totals == len(far)).all()
    counts = Counter(((s // size, s % size), (g // size, g % size)) for s, g in zip(starts, goals))
    assert set(counts) == far
    expected = draws / len(far)
    chi2 = sum((counts[p] - expected) ** 2 / expected for p in far)
    assert chi2 < len(far) + 5 * np.sqrt(2 * len(far))  # about 5 standard deviations above the mean of chi2(k-1)


def test_too_high_min_path_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--min-path 60: only 0 of"):
        build(tmp_path, "hard", size=6, min_path=60, train_size=2, test_size=2)
    assert not (tmp_path / "hard").exists()


# ------------------------------------------------------------------------------------------------- augmentation


def test_dihedral_images_of_an_optimal_path_are_optimal_paths(tmp_path: Path) -> None:
    out = build(tmp_path, size=8, min_path=16, train_size=5, test_size=3, aug=True)
    a = load(out, "train")
    inputs, labels = a["inputs"].reshape(-1, 8, 8), a["labels"].reshape(-1, 8, 8)
    assert inputs.shape[0] == 40 and np.array_equal(a["group_indices"], np.arange(0, 41, 8))
    for g in range(5):
        base_x, base_y = inputs[8 * g], labels[8 * g]
        for t in range(8):
            x, y = inputs[8 * g + t], labels[8 * g + t]
            assert is_optimal_label(x, y)  # still a shortest path of the transformed maze
            assert shortest(x) == shortest(base_x)
            assert np.array_equal(inverse_dihedral_transform(x, t), base_x)
            assert np.array_equal(inverse_dihedral_transform(y, t), base_y)
        assert len({inputs[8 * g + t].tobytes() for t in range(8)}) > 1
    assert load(out, "test")["inputs"].shape[0] == 3  # test is never augmented


# ------------------------------------------------------------------------------------------ format and determinism


def test_metadata_statistics_and_strict_split(tmp_path: Path) -> None:
    out = build(tmp_path, size=9, train_size=20, test_size=8, seed=2)
    assert json.loads((out / "identifiers.json").read_text()) == ["<blank>"]
    for split, n in (("train", 20), ("test", 8)):
        raw = json.loads((out / split / "dataset.json").read_text())
        assert (
            raw["seq_len"],
            raw["vocab_size"],
            raw["pad_id"],
            raw["ignore_label_id"],
            raw["num_puzzle_identifiers"],
        ) == (81, 6, 0, 0, 1)
        assert (raw["total_groups"], raw["mean_puzzle_examples"], raw["sets"]) == (n, 1.0, ["all"])
        a = load(out, split)
        assert a["inputs"].shape == a["labels"].shape == (n, 81) and a["inputs"].dtype == np.uint8
        assert np.array_equal(a["puzzle_identifiers"], np.zeros(n)) and np.array_equal(
            a["puzzle_indices"], np.arange(n + 1)
        )
        b = raw["builder"]
        assert b["name"] == "maze" and b["counts"]["mazes"] == n and b["min_path_moves"] == 27
        lengths = [shortest(x.reshape(9, 9)) for x in a["inputs"]]
        stats = b["statistics"]
        assert stats["path_length_moves"]["histogram"] == {str(v): c for v, c in sorted(Counter(lengths).items())}
        density = (a["inputs"] == WALL).mean(axis=1)
        assert stats["wall_density"]["mean"] == pytest.approx(density.mean(), abs=1e-4)
        assert sum(stats["wall_density"]["histogram"].values()) == n
        gen = b["source_detail"][f"{split}_generation"]
        assert gen["layouts_kept"] == n + gen["duplicates_dropped"] and gen["layouts_drawn"] % M.CHUNK == 0
    assert load_split(out, "test").metadata.builder["name"] == "maze"
    keys = {
        split: {M.canonical_key(x.reshape(9, 9)) for x in load(out, split)["inputs"]} for split in ("train", "test")
    }
    assert len(keys["train"]) == 20 and len(keys["test"]) == 8 and not keys["train"] & keys["test"]


def test_tiny_mazes_repeat_and_the_split_stays_strict(tmp_path: Path) -> None:
    """4x4 with 4 walls and paths of 6 moves: about 1000 distinct mazes, so repeats (up to symmetry) really occur."""
    out = build(tmp_path, size=4, min_path=6, wall_density="0.25", train_size=60, test_size=30)
    tr = {M.canonical_key(x.reshape(4, 4)) for x in load(out, "train")["inputs"]}
    te = {M.canonical_key(x.reshape(4, 4)) for x in load(out, "test")["inputs"]}
    assert len(tr) == 60 and len(te) == 30 and not tr & te
    assert builder(out, "train")["source_detail"]["test_generation"]["duplicates_dropped"] > 0


def test_more_mazes_than_a_small_size_holds_stop_with_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4x4 with paths of 10 moves: a few dozen distinct mazes. Asking for 1000 used to draw 20 million layouts; it stops
    once STALL_REPEATS passing layouts in a row were all repeats, saying how many it found."""
    monkeypatch.setattr(M, "STALL_REPEATS", 300)
    with pytest.raises(UserError) as e:
        build(tmp_path, size=4, train_size=1000, test_size=5, workers=1)
    text = str(e.value)
    assert "\n" not in text
    head = re.fullmatch(r"--train-size 1000: found only (\d+) distinct train 4x4 mazes \(path >= 10 moves.*", text)
    assert head is not None and 10 < int(head[1]) < 1000, text
    assert re.search(r"the last (30\d) that passed all repeats", text) and "lower --train-size or --min-path" in text
    # the test split counts its own mazes, besides those train took
    with pytest.raises(
        UserError, match=r"^--test-size 1000: found only \d+ distinct test 4x4 mazes besides the 20 of train"
    ):
        build(tmp_path, size=4, train_size=20, test_size=1000, workers=1)
    assert not (tmp_path / "ds").exists()


def test_subsample_size_above_the_train_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^--subsample-size 13: more than the 12 training mazes of --train-size 12;"):
        build(tmp_path, train_size=12, test_size=2, subsample_size=13)
    with pytest.raises(UserError, match=r"--train-size 1000 \(the default of --source generate\)"):
        build(tmp_path, subsample_size=5000)
    assert not (tmp_path / "ds").exists()


def test_rebuild_is_byte_identical_and_seed_matters(tmp_path: Path) -> None:
    kw = {"size": 8, "min_path": 14, "train_size": 12, "test_size": 5, "aug": True, "subsample_size": 10}
    a, b, c = build(tmp_path, "a", seed=3, **kw), build(tmp_path, "b", seed=3, **kw), build(tmp_path, "c", seed=4, **kw)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert len(files) == 19  # 13 of the original format, and val/: test/ again
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert (a / "train/all__inputs.npy").read_bytes() != (c / "train/all__inputs.npy").read_bytes()
    # the test split does not depend on the train size (separate random streams)
    d = build(tmp_path, "d", seed=3, **{**kw, "train_size": 7, "subsample_size": 7})
    assert (a / "test/all__inputs.npy").read_bytes() == (d / "test/all__inputs.npy").read_bytes()


def test_existing_output_needs_overwrite(tmp_path: Path) -> None:
    out = build(tmp_path, train_size=3, test_size=2)
    with pytest.raises(UserError, match="--overwrite"):
        build(tmp_path, train_size=3, test_size=2)
    build(tmp_path, train_size=4, test_size=2, overwrite=True)
    assert json.loads((out / "train" / "dataset.json").read_text())["total_groups"] == 4


# ---------------------------------------------------------------------------------------------------- sources


def to_text(tokens: np.ndarray) -> str:
    return "".join(CHARS[int(t)] for t in tokens.reshape(-1))


def write_csv(path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    write_csv_file(path, ["source", "question", "answer", "rating"], rows)


@pytest.fixture(scope="module")
def real_rows() -> list[tuple[str, str, str, str]]:
    """CSV rows in the published layout (30x30 '# SGo' text; rating = shortest path in moves, as we assume)."""
    grids = np.concatenate([M.generate_chunk(11, "train", c, 30, 110, (0.3, 0.5)).grids for c in range(4)])[:8]
    labels, d = M.label_paths(grids)
    return [(f"gen{k}", to_text(x), to_text(y), str(int(n))) for k, (x, y, n) in enumerate(zip(grids, labels, d))]


def test_csv_source_builds(tmp_path: Path, real_rows: list) -> None:
    write_csv(tmp_path / "csv" / "train.csv", real_rows[:6])
    write_csv(tmp_path / "csv" / "test.csv", real_rows[6:])
    out = build(tmp_path, source="csv", csv_dir=tmp_path / "csv", size=None, aug=True)
    a = load(out, "train")
    assert a["inputs"].shape == (48, 900)
    first = np.array([{"#": WALL, " ": OPEN, "S": START, "G": GOAL}[ch] for ch in real_rows[0][1]])
    assert np.array_equal(a["inputs"][0], first)
    b = builder(out, "test")
    assert b["source"] == "csv" and b["counts"]["mazes"] == 2 and b["grid_size"] == 30
    assert b["statistics"]["csv_rating"]["equals_path_moves"] == 2
    # --min-path filters by the BFS length; --train-size caps rows (seeded)
    cut = min(
        sorted(int(r[3]) for r in real_rows[:6])[3], max(int(r[3]) for r in real_rows[6:])
    )  # keeps >= 3 train, >= 1 test
    out2 = build(tmp_path, "cut", source="csv", csv_dir=tmp_path / "csv", size=None, min_path=cut, train_size=2)
    assert load(out2, "train")["inputs"].shape[0] == 2
    assert all(shortest(x.reshape(30, 30)) >= cut for x in load(out2, "train")["inputs"])


def test_auto_uses_the_hub_through_an_injected_download(
    tmp_path: Path, real_rows: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, part in (("train.csv", real_rows[:6]), ("test.csv", real_rows[6:])):
        write_csv(tmp_path / "csv" / name, part)
    fake_hub(monkeypatch, tmp_path / "csv")
    out = M.build_maze(M.MazeBuildOptions(out=tmp_path / "hf", source="auto", test_size=1), hub_probe=lambda: True)
    b = builder(out, "test")
    assert (b["source"], b["source_detail"], b["counts"]["mazes"]) == (
        "hf",
        {"repo": M.HF_REPO, "revision": "abc123"},
        1,
    )


def test_auto_falls_back_to_generate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub(monkeypatch, None)
    out = M.build_maze(
        M.MazeBuildOptions(out=tmp_path / "fb", size=None, train_size=2, test_size=1), hub_probe=lambda: True
    )
    assert builder(out, "train")["source"] == "generate" and builder(out, "train")["grid_size"] == 30
    with pytest.raises(UserError, match="could not download"):  # an explicit --source hf does not fall back
        M.build_maze(M.MazeBuildOptions(out=tmp_path / "hf", source="hf"), hub_probe=lambda: True)
    assert sources.hub_reachable() is False  # HRM_OFFLINE is set by the fixture: no socket is opened
    out = M.build_maze(M.MazeBuildOptions(out=tmp_path / "auto", size=9, train_size=2, test_size=1))
    assert builder(out, "train")["source"] == "generate"


def _swap(text: str, i: int, ch: str) -> str:
    return text[:i] + ch + text[i + 1 :]


def _cell(i: int) -> str:
    return f"row {i // 30 + 1} column {i % 30 + 1}"


def _bad_row(case: int, q: str, a: str, r: str) -> tuple[str, str, str, str]:
    """One malformed variant of a good row (question, answer, rating) and the message it must produce."""
    o, wall, space = a.index("o"), q.index("#"), q.index(" ")
    cases = [
        (q[:899], a, r, "question has 899 cells, expected 900 (30x30 like line 2)"),
        (q, a[:-1], r, "answer has 899 cells, expected 900"),
        (_swap(q, 5, "x"), _swap(a, 5, "x"), r, f"question has 'x' at {_cell(5)}, expected '#', ' ', 'S' or 'G'"),
        (q, _swap(a, wall, "*"), r, f"answer has '*' at {_cell(wall)}"),
        (q.replace("S", " "), a.replace("S", " "), r, "question has no 'S' (start) cell, expected exactly one"),
        (q.replace("G", " "), a.replace("G", " "), r, "question has no 'G' (goal) cell"),
        (_swap(q, space, "S"), _swap(a, space, "S"), r, "question has 2 'S' (start) cells"),
        (_swap(q, o, "o"), a, r, f"question has 'o' at {_cell(o)}"),  # the question must not show the path
        (q, _swap(a, wall, " "), r, f"answer has ' ' at {_cell(wall)} where the question has '#'"),
        (q, _swap(a, a.index(" "), "o"), r, "answer is not a shortest S-G path (it marks"),  # one cell too many
        (q, _swap(a, o, " "), r, "answer is not a shortest S-G path"),  # a gap
        (q, a, "hard", "rating 'hard' is not a number"),
    ]
    return cases[case]


@pytest.mark.parametrize("case", range(12))
def test_csv_bad_rows_are_one_line_errors_naming_file_and_line(tmp_path: Path, real_rows: list, case: int) -> None:
    rows = list(real_rows[:4])
    src, q, a, r = rows[2]
    q, a, r, message = _bad_row(case, q, a, r)
    rows[2] = (src, q, a, r)
    write_csv(tmp_path / "train.csv", rows)
    with pytest.raises(UserError) as e:
        M.read_maze_csv(tmp_path / "train.csv")
    text = str(e.value)
    assert "\n" not in text and "train.csv line 4: " in text and message in text, text


def test_csv_files_of_different_sizes_and_wrong_options(tmp_path: Path, real_rows: list) -> None:
    write_csv(tmp_path / "csv" / "train.csv", real_rows[:3])
    small = M.generate_chunk(0, "test", 0, 9, 20, (0.3, 0.5)).grids[:2]
    labels, d = M.label_paths(small)
    write_csv(
        tmp_path / "csv" / "test.csv",
        [(f"s{k}", to_text(x), to_text(y), str(n)) for k, (x, y, n) in enumerate(zip(small, labels, d))],
    )
    with pytest.raises(UserError, match="test.csv line 2: question has 81 cells, expected 900"):
        build(tmp_path, source="csv", csv_dir=tmp_path / "csv", size=None)
    with pytest.raises(UserError, match="--size 9: .*train.csv holds 30x30 mazes"):
        build(tmp_path, source="csv", csv_dir=tmp_path / "csv", size=9)
    with pytest.raises(UserError, match="--wall-density: only used with --source generate"):
        build(tmp_path, source="csv", csv_dir=tmp_path / "csv", wall_density="0.4")
    with pytest.raises(UserError, match="--size 9: --source hf holds 30x30"):
        build(tmp_path, source="hf", size=9)
    with pytest.raises(UserError, match="--csv-dir"):
        build(tmp_path, source="csv", size=None)
    with pytest.raises(UserError, match="file not found"):
        build(tmp_path, source="csv", csv_dir=tmp_path / "nothing", size=None)
    assert not (tmp_path / "ds").exists()


# --------------------------------------------------------------------------------------------------------- CLI


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return run_hrm("build-data", "maze", *args, cwd=REPO, offline=True)


def test_cli_errors_are_one_line_and_a_build_prints_a_summary(tmp_path: Path, real_rows: list) -> None:
    rows = list(real_rows[:3])
    rows[1] = (rows[1][0], rows[1][1].replace("G", " "), rows[1][2].replace("G", " "), rows[1][3])
    write_csv(tmp_path / "bad" / "train.csv", rows)
    write_csv(tmp_path / "bad" / "test.csv", real_rows[3:5])
    cases = [
        (
            ["--source", "csv", "--csv-dir", str(tmp_path / "bad"), "--out", str(tmp_path / "o1")],
            "train.csv line 3: question has no 'G'",
        ),
        (["--wall-density", "0.7-0.2", "--out", str(tmp_path / "o2")], "--wall-density 0.7-0.2"),
        (["--size", "100", "--out", str(tmp_path / "o3")], "--size 100"),
        (["--size", "6", "--min-path", "60", "--out", str(tmp_path / "o5")], "--min-path 60"),
    ]
    for args, needle in cases:
        res = run_cli(*args)
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert lines and lines[-1].startswith("error:") and needle in lines[-1], res.stderr
        assert "Traceback" not in res.stderr + res.stdout
    assert not any(tmp_path.glob("o*"))
    res = run_cli("--size", "7", "--train-size", "6", "--test-size", "2", "--aug", "--out", str(tmp_path / "cli"))
    assert res.returncode == 0, res.stderr
    last = res.stdout.strip().splitlines()[-1]
    assert (
        last.startswith(f"wrote {tmp_path / 'cli'}: 7x7, train 6 mazes / 48 examples (path ")
        and "test 2 mazes / 2 examples" in last
    )
