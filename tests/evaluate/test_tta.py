"""Test-time compute (hrm_reason/evaluate/tta.py): every task's transforms and their inverses, voting, noise, the blank
puzzle identifier, the equality of the plain trajectory with `evaluate`, and `hrm eval --tta/--samples` end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import cli
from datasets_build import maze as MB
from datasets_build import sudoku as SB
from hrm_reason.data.puzzle import eval_batches, load_split
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import MAX_MMAX, check_mmax, evaluate
from hrm_reason.evaluate.tta import (
    MAX_SAMPLES,
    MAX_TRAJECTORIES,
    TestTimeEval,
    TestTimeOptions,
    answer_hash,
    carry_row_bytes,
    choose,
    fit_batch,
    fit_to_group,
    predict,
    trajectories,
)
from hrm_reason.models.registry import build_model
from hrm_reason.tasks import arc, maze, sudoku, task_transforms
from hrm_reason.tasks.dihedral import DihedralTransforms
from hrm_reason.train.loop import train
from tests.helpers import on_cpu, tiny_config, write_original_layout
from tests.reference import augment_grid

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def sudoku_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tt") / "sudoku"
    return SB.build_sudoku(SB.SudokuBuildOptions(out=out, source="generate", box="2x2", train_size=16, test_size=12))


@pytest.fixture(scope="module")
def maze_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tt") / "maze"
    return MB.build_maze(MB.MazeBuildOptions(out=out, source="generate", size=9, train_size=4, test_size=12, seed=1))


@pytest.fixture(scope="module")
def trained(sudoku_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny HRM trained for a few steps on the Sudoku set."""
    run_dir = tmp_path_factory.mktemp("tt") / "run"
    config = tiny_config(sudoku_data, run_dir, "epochs=4", "eval_interval=4", "global_batch_size=8")
    return train(config, progress=False)


def tiny_model(data: Path, name: str = "hrm", identifiers: int = 1) -> torch.nn.Module:
    config = tiny_config(data, Path("unused"), f"arch.name={name}")
    metadata = load_split(data, "test").metadata.model_copy(update={"num_puzzle_identifiers": identifiers})
    model = build_model(config.arch, metadata, CPU, seed=0)
    with torch.no_grad():  # a Q head that reads the state (a fresh one is constant: weights 0, bias -5)
        weight = model.inner.q_head.weight
        weight.copy_(torch.randn(weight.shape, generator=torch.Generator().manual_seed(0)))
    return model.eval()


def first_batch(data: Path, size: int = 6) -> dict[str, torch.Tensor]:
    return next(eval_batches(load_split(data, "test"), size))[1]


# ------------------------------------------------------------------------------------------------- transforms


def arc_canvases(rng: np.random.Generator, count: int, size: int) -> np.ndarray:
    """Canvases of random grids of random shapes at the top-left, as the ARC builder lays out a test split."""
    rows = []
    for _ in range(count):
        h, w = rng.integers(1, size + 1, size=2)
        grid = rng.integers(0, 10, size=(h, w)).astype(np.uint8)
        rows.append(arc.encode_pairs([(grid, grid)], [(0, arc.IDENTITY_COLOURS)], size, None)[0][0])
    return np.stack(rows)


@pytest.mark.parametrize("task", ["sudoku2x2", "sudoku2x3", "sudoku3x3", "maze", "arc"])
def test_transform_then_inverse_is_the_identity_on_tokens(task: str) -> None:
    rng = np.random.default_rng(7)
    for draw in range(20):
        if task.startswith("sudoku"):
            r, c = sudoku.BOXES[task.removeprefix("sudoku")]
            tf, n = sudoku.SudokuTransforms(r, c), r * c
            tokens = rng.integers(0, n + 2, size=(9, n * n))  # any tokens, PAD and blank included
        elif task == "maze":
            tf = DihedralTransforms(7)
            tokens = rng.integers(0, maze.VOCAB_SIZE, size=(9, 49))
        else:
            tf = arc.ArcTransforms(8)
            tokens = arc_canvases(rng, 9, 8)
        for element in tf.draw(np.random.default_rng(draw), tokens.shape[0], 4):
            moved = tf.apply(tokens, element)
            assert moved.shape == tokens.shape
            np.testing.assert_array_equal(tf.invert(moved, element), tokens)
        assert any(not np.array_equal(tf.apply(tokens, e), tokens) for e in tf.draw(rng, tokens.shape[0], 3))


def test_arc_transform_is_the_builders_augmentation_on_the_cropped_grid() -> None:
    rng = np.random.default_rng(3)
    canvases = arc_canvases(rng, 12, 10)
    tf = arc.ArcTransforms(10)
    (ts, colours), *_ = tf.draw(rng, 12, 2)
    moved = tf.apply(canvases, (ts, colours))
    for i in range(12):
        grid = arc.crop(canvases[i].reshape(10, 10))
        want = augment_grid(grid, int(ts[i]), colours[i])
        np.testing.assert_array_equal(arc.crop(moved[i].reshape(10, 10)), want)
        assert colours[i][0] == 0  # black stays black


def test_draws_are_a_prefix_of_larger_draws() -> None:
    """The first k copies do not depend on how many are drawn (one pass at K gives every smaller budget)."""
    for tf in (sudoku.SudokuTransforms(3, 3), DihedralTransforms(5), arc.ArcTransforms(6)):
        small = tf.draw(np.random.default_rng(1), 4, 3)
        large = tf.draw(np.random.default_rng(1), 4, 8)
        tokens = np.random.default_rng(0).integers(0, 6, size=(4, 81 if isinstance(tf, sudoku.SudokuTransforms) else 0))
        if not isinstance(tf, sudoku.SudokuTransforms):
            tokens = arc_canvases(np.random.default_rng(0), 4, 6) if isinstance(tf, arc.ArcTransforms) else tokens
            tokens = tokens if tokens.size else np.random.default_rng(0).integers(0, 6, size=(4, 25))
        for a, b in zip(small, large):
            np.testing.assert_array_equal(tf.apply(tokens, a), tf.apply(tokens, b))


def test_maze_copies_run_through_all_eight_symmetries() -> None:
    elements = DihedralTransforms(5).draw(np.random.default_rng(0), 6, 8)
    assert np.array_equal(np.sort(np.stack(elements), axis=0), np.tile(np.arange(1, 8)[:, None], (1, 6)))


def test_sudoku_transform_keeps_solutions_valid_and_givens_consistent(sudoku_data: Path) -> None:
    s = load_split(sudoku_data, "test").sets["all"]
    inputs, labels = np.asarray(s.inputs), np.asarray(s.labels)
    tf = sudoku.tta_transforms(load_split(sudoku_data, "test").metadata)
    for element in tf.draw(np.random.default_rng(5), len(inputs), 6):
        x, y = tf.apply(inputs, element), tf.apply(labels, element)
        for xi, yi in zip(x, y):
            assert sudoku.is_valid_solution(yi - 1, 2, 2)
            given = xi != sudoku.BLANK
            assert np.array_equal(xi[given], yi[given])  # the moved puzzle's givens are its moved solution's
    big = sudoku.SudokuTransforms(3, 3)
    base = np.array([[(3 * (i % 3) + i // 3 + j) % 9 + 1 for j in range(9)] for i in range(9)])
    assert sudoku.is_valid_solution(base, 3, 3)
    for element in big.draw(np.random.default_rng(2), 1, 10):
        assert sudoku.is_valid_solution(big.apply(base.reshape(1, -1) + 1, element)[0] - 1, 3, 3)


def test_maze_transform_keeps_shortest_paths_shortest(maze_data: Path) -> None:
    s = load_split(maze_data, "test").sets["all"]
    inputs, labels = np.asarray(s.inputs), np.asarray(s.labels)
    tf = maze.tta_transforms(load_split(maze_data, "test").metadata)
    for element in tf.draw(np.random.default_rng(0), len(inputs), 8):
        x = torch.from_numpy(tf.apply(inputs, element).astype(np.int64)).view(-1, 9, 9)
        y = torch.from_numpy(tf.apply(labels, element).astype(np.int64)).view(-1, 9, 9)
        assert bool(maze.optimal_path_correct(x, y).all())


def test_unknown_task_with_tta_is_an_error(tmp_path: Path) -> None:
    from hrm_reason.errors import UserError

    split = load_split(write_original_layout(tmp_path / "d"), "test")
    assert task_transforms(split, 1) is None
    with pytest.raises(UserError, match="--tta 2"):
        task_transforms(split, 2)


# ----------------------------------------------------------------------------------------------------- voting


def test_vote_picks_the_majority_and_breaks_ties_by_mean_confidence() -> None:
    answers = torch.tensor([[1, 1], [2, 2], [2, 2], [3, 3], [1, 1]])  # 5 trajectories of one row
    q = torch.tensor([0.9, 0.2, 0.3, 0.99, 0.1], dtype=torch.float64)
    hashes = answer_hash(answers[:, None, :])  # [5, 1]
    best, confidence = choose(hashes, q[:, None], "vote")
    # answers 1 and 2 both have 2 votes; 1's mean confidence 0.5 beats 2's 0.25; 3 is the most confident but alone
    assert answers[best[0]].tolist() == [1, 1] and float(confidence[0]) == pytest.approx(0.5)
    best, confidence = choose(hashes, q[:, None], "q")
    assert int(best[0]) == 3 and float(confidence[0]) == pytest.approx(0.99)
    three = torch.cat([answers, torch.tensor([[2, 2]])])  # a third vote for 2: the majority wins over confidence
    best, _ = choose(
        answer_hash(three[:, None, :]), torch.cat([q, torch.tensor([0.0], dtype=torch.float64)])[:, None], "vote"
    )
    assert three[best[0]].tolist() == [2, 2]


def test_tensor_vote_agrees_with_arc_ranking_on_random_tables() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 9))
        answers = rng.integers(0, 3, size=(n, 2))
        q = rng.choice([0.1, 0.5, 0.9], size=n)
        table: dict[bytes, list[float]] = {}
        for a, qi in zip(answers, q):
            entry = table.setdefault(a.astype(np.uint8).tobytes(), [0, 0.0])
            entry[0] += 1
            entry[1] += float(qi)
        ranked = arc.rank_candidates(table)
        best, confidence = choose(answer_hash(torch.from_numpy(answers)[:, None]), torch.from_numpy(q)[:, None], "vote")
        top_count, top_q = ranked[0][1], ranked[0][2]
        chosen = answers[int(best[0])].astype(np.uint8).tobytes()
        assert table[chosen][0] == top_count and float(confidence[0]) == pytest.approx(top_q)


# ------------------------------------------------------------------------------------------------- trajectories


def test_plain_options_equal_evaluate_exactly(sudoku_data: Path) -> None:
    """tta 1, samples 1, noise 0 through the test-time path gives evaluate's numbers exactly; so does the (1, 1) corner
    of a larger table (trajectory (0, 0) does not depend on the others)."""
    model, split = tiny_model(sudoku_data), load_split(sudoku_data, "test")
    plain = evaluate(model, split, 3, 5, CPU, progress=False)
    one = evaluate(model, split, 3, 5, CPU, progress=False, test_time=TestTimeEval(TestTimeOptions(), None, 3))
    assert one.exact_accuracy == plain.exact_accuracy and one.token_accuracy == plain.token_accuracy
    assert (one.act_exact_accuracy, one.lm_loss, one.q_halt_accuracy) == (
        plain.act_exact_accuracy,
        plain.lm_loss,
        plain.q_halt_accuracy,
    )
    rows = one.extra["test_time"]["table"]
    assert [r["exact_accuracy"] for r in rows] == pytest.approx(plain.exact_accuracy, abs=1e-12)
    assert one.extra["test_time"]["act"][0]["exact_accuracy"] == pytest.approx(plain.act_exact_accuracy, abs=1e-12)

    options = TestTimeOptions(tta=4, samples=2, noise=0.5, select="vote", seed=3)
    big = evaluate(
        model, split, 3, 5, CPU, progress=False, test_time=TestTimeEval(options, task_transforms(split, 4), 3)
    )
    assert big.exact_accuracy == plain.exact_accuracy and big.lm_loss == plain.lm_loss
    table = {(r["tta"], r["samples"], r["segments"]): r for r in big.extra["test_time"]["table"]}
    assert set(table) == {(a, s, m) for a in (1, 2, 4) for s in (1, 2) for m in (1, 2, 3)}
    assert [table[(1, 1, m)]["exact_accuracy"] for m in (1, 2, 3)] == pytest.approx(plain.exact_accuracy, abs=1e-12)
    assert all(r["total_segments"] == r["tta"] * r["samples"] * r["segments"] for r in table.values())
    # a smaller run is the corner of the larger one
    small_options = TestTimeOptions(tta=2, samples=2, noise=0.5, select="vote", seed=3)
    small = evaluate(
        model, split, 3, 5, CPU, progress=False, test_time=TestTimeEval(small_options, task_transforms(split, 2), 3)
    )
    for r in small.extra["test_time"]["table"]:
        assert r["exact_accuracy"] == table[(r["tta"], r["samples"], r["segments"])]["exact_accuracy"]
        assert r["token_accuracy"] == table[(r["tta"], r["samples"], r["segments"])]["token_accuracy"]


@pytest.mark.parametrize("name", ["hrm", "trm", "transformer", "unitf"])
def test_noise_is_reproducible_for_a_seed_and_differs_across_seeds(sudoku_data: Path, name: str) -> None:
    model, batch = tiny_model(sudoku_data, name), first_batch(sudoku_data)

    def run(seed: int, noise: float, at: str = "every") -> list[torch.Tensor]:
        options = TestTimeOptions(samples=3, noise=noise, noise_at=at, seed=seed)
        return [
            torch.cat([s.q.flatten(), s.preds.flatten().double()]) for s in trajectories(model, batch, 3, options, None)
        ]

    a, b, c = run(1, 0.5), run(1, 0.5), run(2, 0.5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))
    quiet = run(1, 1e-30)  # below float precision: every sample equals the noiseless one
    segs = list(trajectories(model, batch, 3, TestTimeOptions(samples=3, noise=1e-30), None))
    assert all(torch.equal(s.q[0], s.q[k]) for s in segs for k in (1, 2)) and len(quiet) == 3
    noisy = list(trajectories(model, batch, 2, TestTimeOptions(samples=2, noise=0.5), None))
    assert torch.equal(noisy[0].q[0], segs[0].q[0])  # sample 0 has no noise
    assert not torch.equal(noisy[0].q[0], noisy[0].q[1])


def test_initial_noise_only_perturbs_the_first_segment(sudoku_data: Path) -> None:
    """With noise only at the start, a trajectory differs from an 'every' one only after segment 1."""
    model, batch = tiny_model(sudoku_data), first_batch(sudoku_data)
    initial = list(trajectories(model, batch, 2, TestTimeOptions(samples=2, noise=0.5, noise_at="initial"), None))
    every = list(trajectories(model, batch, 2, TestTimeOptions(samples=2, noise=0.5, noise_at="every"), None))
    assert torch.equal(initial[0].q, every[0].q)
    assert not torch.equal(initial[1].q[1], every[1].q[1])


def test_blank_puzzle_id_feeds_identifier_zero(sudoku_data: Path) -> None:
    model, batch = tiny_model(sudoku_data, identifiers=3), first_batch(sudoku_data)
    batch["puzzle_identifiers"] = 1 + torch.arange(batch["inputs"].shape[0], dtype=torch.int32) % 2
    seen: list[torch.Tensor] = []
    hook = model.inner.register_forward_pre_hook(lambda _m, args: seen.append(args[1]["puzzle_identifiers"].clone()))
    try:
        predict(trajectories(model, batch, 2, TestTimeOptions(blank_puzzle_id=True), None), 2, "q")
        assert seen and all(int(ids.abs().sum()) == 0 for ids in seen)
        seen.clear()
        predict(trajectories(model, batch, 2, TestTimeOptions(), None), 2, "q")
        assert all(torch.equal(ids, batch["puzzle_identifiers"]) for ids in seen)
    finally:
        hook.remove()


def test_predict_maps_answers_back_and_reports_act(sudoku_data: Path) -> None:
    model, batch = tiny_model(sudoku_data), first_batch(sudoku_data)
    plain = predict(trajectories(model, batch, 3, TestTimeOptions(), None), 3, "q")
    carry = model.empty_carry(batch)
    for _ in range(3):
        carry, out = model(carry, batch, halt_max_steps=3)
    assert plain.segments.tolist() == [3] * 6 or bool((plain.segments <= 3).all())
    assert plain.preds.shape == batch["inputs"].shape and plain.confidence.shape == (6,)
    split = load_split(sudoku_data, "test")
    options = TestTimeOptions(tta=4, select="vote", seed=1)
    many = predict(trajectories(model, batch, 3, options, task_transforms(split, 4)), 3, options.select)
    assert many.preds.shape == batch["inputs"].shape
    # the answers are in the puzzle's frame: givens predicted right in copy 0 stay in place (the vocabulary agrees)
    assert int(many.preds.max()) < split.metadata.vocab_size


# --------------------------------------------------------------------------------------------------------- CLI


def hrm(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["hrm", *on_cpu(args)])
    code = 0
    try:
        cli.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_eval_flags_end_to_end(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "tt.json"
    args = ["eval", "--run", str(trained), "--mmax", "2", "--quiet", "--device", "cpu", "--json", str(out)]
    code, stdout, err = hrm(
        capsys, monkeypatch, *args, "--tta", "2", "--samples", "2", "--noise", "0.2", "--select", "vote"
    )
    assert code == 0, err
    result = json.loads(out.read_text())
    table = result["extra"]["test_time"]
    assert table["options"]["tta"] == 2 and table["options"]["select"] == "vote" and table["count"] == result["count"]
    assert len(table["table"]) == 2 * 2 * 2 and len(table["act"]) == 4
    corner = [r["exact_accuracy"] for r in table["table"] if r["tta"] == 1 and r["samples"] == 1]
    assert corner == pytest.approx(result["exact_accuracy"], abs=1e-12)
    assert "test-time compute" in stdout and "m x tta x samples" in stdout

    code, _, err = hrm(
        capsys,
        monkeypatch,
        "eval",
        "--run",
        str(trained),
        "--mmax",
        "2",
        "--quiet",
        "--json",
        str(tmp_path / "plain.json"),
    )
    assert code == 0, err
    assert json.loads((tmp_path / "plain.json").read_text())["exact_accuracy"] == result["exact_accuracy"]

    code, _, err = hrm(capsys, monkeypatch, *args[:-1], str(tmp_path / "blank.json"), "--puzzle-id", "blank")
    assert code == 0, err
    assert json.loads((tmp_path / "blank.json").read_text())["extra"]["test_time"]["options"]["blank_puzzle_id"]

    code, stdout, err = hrm(capsys, monkeypatch, "viz", "test-time", str(out), "--out", str(tmp_path / "viz"))
    assert code == 0, err
    png = tmp_path / "viz" / "test_time.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "flags,fragment",
    [
        (["--tta", "0"], "--tta 0"),
        (["--samples", "0"], "--samples 0"),
        (["--samples", "2", "--noise", "-1"], "--noise -1"),
        (["--noise", "0.1"], "--samples 1"),
        (["--samples", "2", "--noise", "0.1", "--noise-at", "sometimes"], "--noise-at"),
        (["--select", "best"], "--select"),
        (["--puzzle-id", "drop"], "--puzzle-id"),
        (["--tta-seed", "-1"], "--tta-seed"),
    ],
)
def test_bad_flag_values_are_one_line(
    trained: Path, flags: list[str], fragment: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = hrm(capsys, monkeypatch, "eval", "--run", str(trained), "--quiet", *flags)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], err


def test_tta_on_a_dataset_without_a_task_is_one_line(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = write_original_layout(tmp_path / "plain")  # 4x4 Sudoku tokens, no builder record
    code, _, err = hrm(
        capsys,
        monkeypatch,
        "eval",
        "--run",
        str(trained),
        "--data",
        str(other),
        "--tta",
        "2",
        "--quiet",
    )
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "builder.name" in lines[0], err


# ----------------------------------------------------------------------------------------------------------- bounds


def test_copies_beyond_the_group_are_capped_with_a_notice() -> None:
    options, notice = fit_to_group(TestTimeOptions(tta=1000), maze.MazeTransforms(9))
    assert options.tta == 8 and notice == "--tta 1000: the maze's symmetry group has 8 elements; using 8"
    options, notice = fit_to_group(TestTimeOptions(tta=8, samples=4), maze.MazeTransforms(9))
    assert options == TestTimeOptions(tta=8, samples=4) and notice is None
    options, notice = fit_to_group(TestTimeOptions(tta=600), sudoku.SudokuTransforms(3, 3))  # 1.2e12 elements
    assert options.tta == 600 and notice is None
    # the plain dihedral maps of a square: 8 elements
    assert fit_to_group(TestTimeOptions(tta=20), DihedralTransforms(5))[0] == TestTimeOptions(tta=8)


@pytest.mark.parametrize(
    ("options", "transforms", "message"),
    [
        (
            TestTimeOptions(tta=100_000),
            sudoku.SudokuTransforms(2, 2),
            "--tta 100000: 3072 trajectories per puzzle (the 4x4 Sudoku's symmetry group has 3072 elements); at most "
            "1024 copies x samples (docs/commands.md)",
        ),
        (
            TestTimeOptions(tta=8, samples=200),
            maze.MazeTransforms(9),
            "--tta 8 x --samples 200: 1600 trajectories per puzzle; at most 1024 copies x samples (docs/commands.md)",
        ),
        (
            TestTimeOptions(tta=1025),
            arc.ArcTransforms(10),
            "--tta 1025: 1025 trajectories per puzzle; at most 1024 copies x samples (docs/commands.md)",
        ),
    ],
)
def test_too_many_trajectories_are_one_line(options: TestTimeOptions, transforms: object, message: str) -> None:
    with pytest.raises(UserError) as e:
        fit_to_group(options, transforms)  # type: ignore[arg-type]
    assert str(e.value) == message


def test_the_bounds_themselves_pass() -> None:
    options = TestTimeOptions(tta=4, samples=MAX_SAMPLES)
    assert options.trajectories == MAX_TRAJECTORIES and fit_to_group(options, maze.MazeTransforms(9))[0] == options
    with pytest.raises(UserError, match=f"--samples {MAX_SAMPLES + 1}: at most {MAX_SAMPLES} trajectories per copy"):
        TestTimeOptions(samples=MAX_SAMPLES + 1)
    check_mmax(MAX_MMAX)
    with pytest.raises(UserError, match=f"--mmax {MAX_MMAX + 1}: expected 1 to {MAX_MMAX} segments.*halt_max_steps 3"):
        check_mmax(MAX_MMAX + 1, 3)


def test_trajectories_refuse_more_than_the_bound_whoever_calls_them(sudoku_data: Path) -> None:
    """The bound holds for callers that skip fit_to_group (the API): nothing is drawn or run past it."""
    options = TestTimeOptions(tta=MAX_TRAJECTORIES + 1)
    with pytest.raises(UserError, match="1025 trajectories; at most 1024"):
        next(trajectories(tiny_model(sudoku_data), first_batch(sudoku_data), 2, options, sudoku.SudokuTransforms(2, 2)))


def test_the_batch_is_cut_to_the_memory_the_carried_states_need() -> None:
    options = TestTimeOptions(tta=8, samples=4)  # 32 trajectories
    assert fit_batch(64, options, row_bytes=1000, free=2 * 32 * 1000 * 64) == (64, None)
    batch, notice = fit_batch(64, options, row_bytes=1000, free=2 * 32 * 1000 * 10 + 1)
    assert batch == 10
    assert notice is not None and notice.startswith("--tta 8 x --samples 4: 10 puzzles per batch instead of 64")
    with pytest.raises(UserError, match="--tta 8 x --samples 4: the carried state of one puzzle's 32 trajectories"):
        fit_batch(64, options, row_bytes=1000, free=2 * 32 * 1000 - 1)


def test_a_rows_carried_state_is_measured_from_the_model(sudoku_data: Path) -> None:
    model = tiny_model(sudoku_data)
    seq_len = load_split(sudoku_data, "test").metadata.seq_len
    carry = model.started_carry(first_batch(sudoku_data, 3))
    state = sum(t.nbytes for t in (carry.inner_carry.z_H, carry.inner_carry.z_L)) // 3
    assert carry_row_bytes(model, seq_len, CPU) == state + 32 * seq_len


@pytest.fixture(scope="module")
def maze_trained(maze_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("tt") / "maze_run"
    return train(tiny_config(maze_data, run_dir, "epochs=2", "eval_interval=2", "global_batch_size=4"), progress=False)


def test_eval_caps_maze_copies_at_the_group_and_runs_them(
    maze_trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["eval", "--run", str(maze_trained), "--mmax", "2", "--quiet", "--json"]
    code, _, err = hrm(capsys, monkeypatch, *args, str(tmp_path / "1000.json"), "--tta", "1000")
    assert code == 0, err
    assert "--tta 1000: the maze's symmetry group has 8 elements; using 8" in err.splitlines()
    code, _, err = hrm(capsys, monkeypatch, *args, str(tmp_path / "8.json"), "--tta", "8")
    assert code == 0 and "using" not in err, err
    capped, eight = (json.loads((tmp_path / f"{k}.json").read_text())["extra"]["test_time"] for k in (1000, 8))
    assert capped["options"]["tta"] == 8 and capped == eight


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--mmax", "1000000000"], "error: --mmax 1000000000: expected 1 to 1,024 (segments"),
        (["--tta", "100000"], "error: --tta 100000: 3072 trajectories per puzzle (the 4x4 Sudoku's symmetry group"),
        (["--samples", "100000"], "error: --samples 100000: expected 1 to 256 (trajectories per copy"),
        (["--device", "tpu"], "error: --device tpu: expected auto, cpu or cuda"),
        (["--device", "cuda:0"], "error: --device cuda:0: expected auto, cpu or cuda"),
    ],
)
def test_huge_values_and_unknown_devices_are_one_line_at_once(
    trained: Path, flags: list[str], line: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = hrm(capsys, monkeypatch, "eval", "--run", str(trained), "--quiet", *flags)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith(line), err


def test_eval_help_keeps_the_shared_options(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval's and solve's flags are rebuilt with the test-time ones: --device keeps its help (and its check), --quiet
    stays one flag."""
    monkeypatch.setenv("COLUMNS", "200")
    for command in ("eval", "solve"):
        _, out, _ = hrm(capsys, monkeypatch, command, "--help")
        assert "auto, cpu or cuda" in out and "--no-quiet" not in out and "Run directory" in out, out


def test_allowed_tokens_give_the_likeliest_of_them(sudoku_data: Path) -> None:
    """hrm solve's `allowed`: each place answers with the likeliest allowed token, the plain argmax where that is
    allowed; the halting head is untouched."""
    model, batch = tiny_model(sudoku_data), first_batch(sudoku_data)
    plain = list(trajectories(model, batch, 2, TestTimeOptions(), None))
    allowed = torch.tensor([1, 3, 4])  # of the tiny Sudoku's 6 token ids
    limited = list(trajectories(model, batch, 2, TestTimeOptions(), None, allowed=allowed))
    model.eval()
    carry = model.started_carry(batch)
    for p, m in zip(plain, limited):
        carry, out = model(carry, batch, halt_max_steps=2)
        assert torch.isin(m.preds, allowed).all()
        expected = allowed[out.logits[..., allowed].argmax(-1)]
        assert torch.equal(m.preds[0], expected)
        inside = torch.isin(p.preds, allowed)
        assert not inside.all()  # the plain argmax leaves the allowed tokens somewhere: the limit is exercised
        assert torch.equal(m.preds[inside], p.preds[inside])
        assert torch.equal(m.q, p.q) and torch.equal(m.halt, p.halt)
