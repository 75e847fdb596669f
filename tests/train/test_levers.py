"""The training levers of docs/training.md "Levers": augmentation drawn on the fly, the depth curriculum, segment
loss weighting and the LR schedules; each off by default, each exact on resume."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from datasets_build.sudoku import canonical_key
from hrm_reason.checkpoint import find_checkpoint, saved_model_config
from hrm_reason.config import TrainConfig, dotted_keys, load_config
from hrm_reason.data.puzzle import PuzzleSplit, TrainSampler, load_split
from hrm_reason.errors import UserError
from hrm_reason.models import hrm as hrm_module
from hrm_reason.models.act import act_loss
from hrm_reason.models.hrm import HRM, HRMConfig, hrm_flops
from hrm_reason.models.trm import TRM, TRMConfig
from hrm_reason.tasks.augment import DihedralSymmetry, SudokuSymmetry, train_augmentation
from hrm_reason.tasks.dihedral import dihedral_transform
from hrm_reason.tasks.sudoku import is_valid_solution
from hrm_reason.train.curriculum import DepthStage, depth_at, flops_at_depth, segment_weights, train_flops
from hrm_reason.train.loop import run_progress, train
from hrm_reason.train.optim import cosine_schedule_with_warmup, lr_at
from tests.helpers import (
    assert_same_trajectory,
    output_tensors,
    read_metrics,
    rewind,
    tiny_config,
    write_original_layout,
)


@pytest.fixture(scope="module")
def sudoku_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 4x4 test layout with the Sudoku builder's record, so that augment=symmetry knows its group."""
    root = write_original_layout(tmp_path_factory.mktemp("data") / "sudoku4")
    for split in ("train", "test"):
        meta = json.loads((root / split / "dataset.json").read_text())
        meta["builder"] = {"name": "sudoku", "box": "2x2"}
        (root / split / "dataset.json").write_text(json.dumps(meta))
    return root


def _values(tokens: torch.Tensor) -> np.ndarray:
    return tokens.numpy().reshape(-1, 4, 4) - 1


def _keys(batch: dict[str, torch.Tensor]) -> list[bytes]:
    return [canonical_key(q, a, 2, 2) for q, a in zip(_values(batch["inputs"]), _values(batch["labels"]))]


# ------------------------------------------------------------------------------------------- augmentation on the fly


def test_sudoku_symmetry_keeps_pairs_valid_and_equivalent(sudoku_data: Path) -> None:
    split = load_split(sudoku_data, "train")
    augment = train_augmentation("symmetry", split)
    plain = list(TrainSampler(split, 8, 2, seed=3).batches(0))
    augmented = list(TrainSampler(split, 8, 2, seed=3, augment=augment).batches(0))
    changed = 0
    for a, b in zip(plain, augmented):
        puzzles, solutions = _values(b["inputs"]), _values(b["labels"])
        for q, s in zip(puzzles, solutions):
            assert is_valid_solution(s, 2, 2)
            assert ((q == 0) | (q == s)).all()  # every given is the solution's digit
        # The same examples are drawn (own random stream), each mapped by a group element: equal canonical forms.
        assert _keys(a) == _keys(b)
        assert (b["labels"] != -100).all() and b["puzzle_identifiers"].equal(a["puzzle_identifiers"])
        changed += int((a["inputs"] != b["inputs"]).any(1).sum())
    assert changed > 0.8 * sum(len(a["inputs"]) for a in plain)


def test_sudoku_symmetry_of_rectangular_boxes_keeps_the_box_shape() -> None:
    r, c = 2, 3  # 6x6 boards with 2-row x 3-column boxes: no transpose
    n = r * c
    grid = np.array([[(c * (i % r) + i // r + j) % n + 1 for j in range(n)] for i in range(n)])
    assert is_valid_solution(grid, r, c)
    rng = np.random.default_rng(0)
    puzzles = np.where(rng.random((64, n, n)) < 0.5, 0, grid).reshape(64, -1) + 1
    labels = np.broadcast_to(grid.reshape(1, -1) + 1, puzzles.shape).astype(np.int32)
    q, a = SudokuSymmetry(r, c)(np.random.default_rng(1), puzzles.astype(np.int32), labels, slice(0, 64), 64)
    assert q.dtype == np.int32 and q.shape == puzzles.shape
    for qi, ai, pi in zip(q, a, puzzles):
        assert is_valid_solution(ai.reshape(n, n) - 1, r, c)
        assert ((qi == 1) | (qi == ai)).all() and (qi == 1).sum() == (pi == 1).sum()
    assert len({row.tobytes() for row in a}) > 32  # fresh elements per example


def test_maze_symmetry_applies_one_dihedral_map_to_input_and_label() -> None:
    rng = np.random.default_rng(0)
    inputs = rng.integers(1, 6, (40, 25)).astype(np.int32)
    labels = rng.integers(1, 6, (40, 25)).astype(np.int32)
    rows = slice(10, 30)  # this process's share of a global batch of 40
    q, a = DihedralSymmetry(5)(np.random.default_rng(7), inputs[rows], labels[rows], rows, 40)
    tids = np.random.default_rng(7).integers(0, 8, 40)[rows]
    for t, qi, ai, i, l in zip(tids, q, a, inputs[rows], labels[rows]):
        assert np.array_equal(qi.reshape(5, 5), dihedral_transform(i.reshape(5, 5), t))
        assert np.array_equal(ai.reshape(5, 5), dihedral_transform(l.reshape(5, 5), t))
    assert len(set(tids.tolist())) > 4


def test_generated_maze_symmetry_relabels_by_the_generators_rule(tmp_path: Path) -> None:
    """A generated maze's label is one of its shortest paths, picked by a rule that prefers directions: mapping the
    label with the maze would make the target of an input depend on the draw. The augmented label is the generator's
    label of the mapped maze, so equal inputs get equal targets, and it is still a shortest path."""
    from datasets_build.maze import MazeBuildOptions, build_maze
    from hrm_reason.tasks.maze import label_paths, optimal_path_correct

    out = build_maze(MazeBuildOptions(out=tmp_path / "m", source="generate", size=6, train_size=64, test_size=4))
    split = load_split(out, "train")
    inputs, labels = (getattr(split.sets["all"], k).astype(np.int32) for k in ("inputs", "labels"))
    augment = train_augmentation("symmetry", split)
    assert isinstance(augment, DihedralSymmetry) and augment.relabel
    assert np.array_equal(label_paths(inputs.reshape(-1, 6, 6))[0].reshape(inputs.shape), labels)  # the stored rule
    q, a = augment(np.random.default_rng(3), inputs, labels, slice(0, 64), 64)
    tids = np.random.default_rng(3).integers(0, 8, 64)
    mapped = np.stack([dihedral_transform(l.reshape(6, 6), t).reshape(-1) for t, l in zip(tids, labels)])
    assert np.array_equal(
        q, np.stack([dihedral_transform(i.reshape(6, 6), t).reshape(-1) for t, i in zip(tids, inputs)])
    )
    assert q.dtype == a.dtype == np.int32
    assert np.array_equal(a, label_paths(q.reshape(-1, 6, 6))[0].reshape(q.shape))
    assert np.array_equal(a[tids == 0], labels[tids == 0])
    assert optimal_path_correct(torch.from_numpy(q).view(-1, 6, 6), torch.from_numpy(a).view(-1, 6, 6)).all()
    assert optimal_path_correct(torch.from_numpy(q).view(-1, 6, 6), torch.from_numpy(mapped).view(-1, 6, 6)).all()
    assert (a != mapped).any(1).sum() > 8  # ties: most 6x6 mazes have several shortest paths
    # A maze set with labels of unknown rule (the paper's CSV) keeps its mapped labels.
    csv = split.metadata.model_copy(update={"builder": {**split.metadata.builder, "source": "csv"}})
    plain = train_augmentation("symmetry", dataclasses.replace(split, metadata=csv))
    assert isinstance(plain, DihedralSymmetry) and not plain.relabel
    assert np.array_equal(plain(np.random.default_rng(3), inputs, labels, slice(0, 64), 64)[1], mapped)


def test_augmented_batches_are_seeded_resumable_and_split_over_ranks(sudoku_data: Path) -> None:
    split = load_split(sudoku_data, "train")
    augment = train_augmentation("symmetry", split)

    def inputs(seed: int, start: int = 0, rank: int = 0, world: int = 1) -> list[torch.Tensor]:
        sampler = TrainSampler(split, 8, 2, seed=seed, rank=rank, world_size=world, augment=augment)
        return [b["inputs"] for b in sampler.batches(1, start)]

    full = inputs(5)
    assert all(a.equal(b) for a, b in zip(full, inputs(5)))
    assert not all(a.equal(b) for a, b in zip(full, inputs(6)))
    assert all(a.equal(b) for a, b in zip(full[3:], inputs(5, start=3)))  # a resume mid-iteration
    halves = zip(inputs(5, rank=0, world=2), inputs(5, rank=1, world=2))
    assert all(torch.cat(h).equal(b) for h, b in zip(halves, full))


def test_augment_off_is_the_identity_and_unknown_tasks_are_one_line_errors(sudoku_data: Path, tmp_path: Path) -> None:
    split = load_split(sudoku_data, "train")
    where = str(split.path / "dataset.json")
    assert train_augmentation("none", split) is None

    def with_metadata(**update: object) -> PuzzleSplit:
        return dataclasses.replace(split, metadata=split.metadata.model_copy(update=update))

    with pytest.raises(UserError, match=r"^augment=symmetry: .*builder 'arc'.*sudoku and maze") as e:
        train_augmentation("symmetry", with_metadata(builder={"name": "arc"}))
    assert "\n" not in str(e.value) and where in str(e.value)
    with pytest.raises(UserError, match="not a square grid"):
        train_augmentation("symmetry", with_metadata(seq_len=12, builder={"name": "maze"}))
    with pytest.raises(UserError, match="field 'augment'"):
        tiny_config(sudoku_data, tmp_path / "r", "augment=on")


# ---------------------------------------------------------------------------------------------- depth curriculum


def _hrm(**overrides: int) -> HRM:
    cfg = dict(seq_len=16, vocab_size=6, num_puzzle_identifiers=3, hidden_size=32, num_heads=2, H_layers=1, L_layers=1)
    cfg |= dict(halt_max_steps=3, halt_exploration_prob=0.0, puzzle_emb_ndim=32) | overrides
    torch.manual_seed(0)
    return HRM(HRMConfig(**cfg))


def _trm(**overrides: int) -> TRM:
    cfg = dict(seq_len=16, vocab_size=6, num_puzzle_identifiers=3, hidden_size=32, num_heads=2, L_layers=1)
    cfg |= dict(halt_max_steps=3, puzzle_emb_ndim=32, pos_encodings="rope") | overrides
    torch.manual_seed(0)
    return TRM(TRMConfig(**cfg))


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "inputs": torch.randint(1, 6, (4, 16), generator=g, dtype=torch.int32),
        "labels": torch.randint(2, 6, (4, 16), generator=g, dtype=torch.int32),
        "puzzle_identifiers": torch.randint(0, 3, (4,), generator=g, dtype=torch.int32),
    }


@pytest.mark.parametrize("make", [_hrm, _trm], ids=["hrm", "trm"])
def test_cycles_per_call_equal_a_model_built_at_that_depth(make) -> None:
    """Two ACT segments (carry, Q target and gradients) at depth (1, 2) of a (3, 3) model are those of the same weights
    built with H_cycles=1, L_cycles=2."""
    deep, shallow = make(H_cycles=3, L_cycles=3), make(H_cycles=1, L_cycles=2)
    shallow.load_state_dict(deep.state_dict())
    results = []
    for model, cycles in ((deep, (1, 2)), (shallow, None)):
        model.train()
        carry = model.empty_carry(_batch())
        total = 0
        for seed in range(2):
            b = _batch(seed)
            carry, out = model(carry, b, generator=torch.Generator().manual_seed(seed), cycles=cycles)
            loss, _ = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, "stablemax_cross_entropy")
            total = total + loss
        total.backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        results.append((output_tensors(out), carry.steps, vars(carry.inner_carry), grads))
    (out_a, steps_a, state_a, grad_a), (out_b, steps_b, state_b, grad_b) = results
    assert steps_a.equal(steps_b) and sorted(grad_a) == sorted(grad_b) and len(grad_a) > 5
    for a, b in ((out_a, out_b), (state_a, state_b), (grad_a, grad_b)):
        for k in a:
            torch.testing.assert_close(a[k], b[k], msg=k)
    # Not a no-op: the full depth gives other logits.
    with torch.no_grad():
        at = {c: deep(deep.empty_carry(_batch()), _batch(), cycles=c)[1].logits for c in (None, (1, 2))}
    assert not torch.allclose(at[None], at[(1, 2)])


def test_shallow_segment_keeps_the_one_step_gradient() -> None:
    """At depth (2, 1) the segment runs L, H without gradient, then L and H with it (tests/models/test_model.py at full
    depth)."""
    model = _hrm(H_cycles=3, L_cycles=3)
    model.train()
    calls: list[tuple[str, bool]] = []
    model.inner.L_level.register_forward_hook(lambda m, i, o: calls.append(("L", o.requires_grad)))
    model.inner.H_level.register_forward_hook(lambda m, i, o: calls.append(("H", o.requires_grad)))
    b = _batch()
    carry, out = model(model.empty_carry(b), b, cycles=(2, 1))
    main, target = calls[:4], calls[4:]
    assert main == [("L", False), ("H", False), ("L", True), ("H", True)]
    assert [c[0] for c in target] == ["L", "H", "L", "H"] and not any(c[1] for c in target)  # the Q target: same depth
    out.logits.float().square().mean().backward()
    assert model.inner.H_level.layers[0].mlp.down_proj.weight.grad.abs().sum() > 0
    assert not carry.inner_carry.z_H.requires_grad


def test_depth_stages_and_their_flops() -> None:
    stages = [DepthStage(until=0.3, H_cycles=1, L_cycles=1), DepthStage(until=0.6, H_cycles=2, L_cycles=1)]
    assert [depth_at(stages, p) for p in (0.0, 0.29, 0.3, 0.59, 0.6, 0.99)] == [
        (1, 1),
        (1, 1),
        (2, 1),
        (2, 1),
        None,
        None,
    ]
    config = _hrm(H_cycles=2, L_cycles=2).config
    full, shallow = flops_at_depth(config), flops_at_depth(config, (1, 1))
    assert full == hrm_flops(config) and shallow == hrm_flops(config.model_copy(update={"H_cycles": 1, "L_cycles": 1}))
    assert shallow.train_step < flops_at_depth(config, (2, 1)).train_step < full.train_step
    # 10 steps: 3 at (1, 1) (progress 0, 0.1, 0.2), 3 at (2, 1), 4 at full depth.
    want = 3 * shallow.train_step + 3 * flops_at_depth(config, (2, 1)).train_step + 4 * full.train_step
    assert train_flops(config, stages, 10) == pytest.approx(want)
    assert train_flops(config, stages, 10, steps=4) == pytest.approx(
        3 * shallow.train_step + flops_at_depth(config, (2, 1)).train_step
    )
    assert train_flops(config, [], 10) == pytest.approx(10 * full.train_step)


@pytest.mark.parametrize(
    "override,match",
    [
        (
            "depth_curriculum=[{until: 0.6, H_cycles: 1, L_cycles: 1}, {until: 0.3, H_cycles: 1, L_cycles: 2}]",
            "increase",
        ),
        ("depth_curriculum=[{until: 1.5, H_cycles: 1, L_cycles: 1}]", "less than 1"),
        ("depth_curriculum=[{until: 0.5, H_cycles: 0, L_cycles: 1}]", "H_cycles"),
        ("depth_curriculum=[{until: 0.5, H_cycles: 1}]", "L_cycles"),
        ("segment_loss_decay=0", "segment_loss_decay"),
        ("lr_schedule=step", "lr_schedule"),
    ],
)
def test_bad_lever_values_are_one_line_errors(override: str, match: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=match) as e:
        tiny_config(tmp_path, tmp_path / "r", override)
    assert "\n" not in str(e.value)


def test_levers_of_other_models_are_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="depth_curriculum: arch 'transformer' has no H_cycles"):
        tiny_config(
            tmp_path,
            tmp_path / "r",
            "arch.name=transformer",
            "depth_curriculum=[{until: 0.5, H_cycles: 1, L_cycles: 1}]",
        )
    lm = [f"data_path={tmp_path}", "arch.name=hrm_lm", "max_steps=500"]
    with pytest.raises(UserError, match="augment is an option of the ACT puzzle models"):
        load_config(None, [*lm, "augment=symmetry"])


def test_run_with_every_lever_switches_depth_on_time_and_resumes_exactly(
    sudoku_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int] | None] = []
    forward = hrm_module.HRMCore.forward

    def spy(self, carry, batch, cycles=None):  # type: ignore[no-untyped-def]
        if torch.is_grad_enabled():  # the segment, not the Q target's extra one
            seen.append(cycles)
        return forward(self, carry, batch, cycles)

    monkeypatch.setattr(hrm_module.HRMCore, "forward", spy)
    overrides = (
        "checkpoint_every_steps=4",
        "arch.halt_exploration_prob=0.5",
        "augment=symmetry",
        "depth_curriculum=[{until: 0.25, H_cycles: 1, L_cycles: 1}, {until: 0.5, H_cycles: 2, L_cycles: 1}]",
        "segment_loss_decay=0.7",
        "lr_schedule=linear",
        "lr_min_ratio=0.1",
    )
    full = train(tiny_config(sudoku_data, tmp_path / "full", *overrides), progress=False)
    # 4 epochs * 24 groups / batch 8 = 12 steps: 3 shallow, 3 medium, 6 at the model's own (2, 2).
    assert seen == [(1, 1)] * 3 + [(2, 1)] * 3 + [None] * 6
    a = read_metrics(full)
    logged = [(r["train/H_cycles"], r["train/L_cycles"]) for r in a if "train/H_cycles" in r]
    assert logged == [(1, 1)] * 3 + [(2, 1)] * 3 + [(2, 2)] * 6
    lrs = [r["train/lr"] for r in a if "train/lr" in r]
    assert lrs[-1] == pytest.approx(1e-3 * 0.1) and lrs[5] > lrs[8]  # linear decay to lr_min_ratio

    cut = rewind(full, tmp_path / "cut", 4)
    resumed = train(tiny_config(sudoku_data, cut, *overrides), resume=True, progress=False)
    assert_same_trajectory(full, resumed)
    # training FLOPs count every step at its own depth
    config = HRMConfig(**saved_model_config(find_checkpoint(full)))
    stages = [DepthStage(until=0.25, H_cycles=1, L_cycles=1), DepthStage(until=0.5, H_cycles=2, L_cycles=1)]
    per_example = train_flops(config, stages, 12)
    assert [r["train_flops"] for r in a if "eval/exact_accuracy" in r][-1] == pytest.approx(per_example * 8)


# ------------------------------------------------------------------------------------------ segment loss weighting


def test_segment_weights_follow_decay_and_average_one() -> None:
    steps = torch.tensor([1, 2, 3, 3, 1], dtype=torch.int32)
    assert segment_weights(steps, 1.0, 3).tolist() == [1.0] * 5
    w = segment_weights(torch.arange(1, 4), 0.5, 3)
    torch.testing.assert_close(w, torch.tensor([1.0, 0.5, 0.25], dtype=torch.float64) * 3 / 1.75)
    assert w.mean().item() == pytest.approx(1.0)


@pytest.mark.parametrize("q_target", ["extra_forward", "next_segment"])
def test_weighted_loss_with_decay_one_is_the_loss_and_weights_rows_otherwise(q_target: str) -> None:
    model = _hrm(H_cycles=1, L_cycles=1, q_target=q_target)
    model.train()
    b = _batch()
    carry = model.empty_carry(b)
    carry, _ = model(carry, b)
    carry, out = model(carry, _batch(1))  # a second segment: rows at steps 1 and 2 after the Q head's halting
    args = (out, carry.current_data["labels"], carry.halted, carry.steps, "stablemax_cross_entropy")
    plain, metrics = act_loss(*args)
    ones, metrics_w = act_loss(*args, segment_weights(carry.steps, 1.0, 3))
    torch.testing.assert_close(ones, plain)
    assert all(metrics[k].equal(metrics_w[k]) for k in metrics)
    # Another decay scales exactly the per-row lm and q_halt terms (the continue term stays as it is).
    w = torch.tensor([2.0, 0.0, 1.0, 0.5], dtype=torch.float64)
    weighted, _ = act_loss(*args, w)
    rows = []
    for i in range(4):
        sub = type(out)(**{k: v[i : i + 1] for k, v in output_tensors(out).items()})
        loss_i, m_i = act_loss(sub, args[1][i : i + 1], args[2][i : i + 1], args[3][i : i + 1], args[4])
        rows.append((loss_i, m_i))
    q_continue = metrics.get("q_continue_loss", torch.tensor(0.0))
    want = sum(w[i] * (m["lm_loss"] + 0.5 * m["q_halt_loss"]) for i, (_, m) in enumerate(rows)) + 0.5 * q_continue
    torch.testing.assert_close(weighted.double(), want.double())


# --------------------------------------------------------------------------------------------------- LR schedules


def test_lr_schedules() -> None:
    args = (1.0, 10, 110, 0.1)
    for step in (1, 5, 10, 40, 110):
        assert lr_at("cosine", step, *args) == cosine_schedule_with_warmup(step, *args)
        assert lr_at("constant", step, *args) == min(1.0, step / 10)
    assert [lr_at("linear", s, *args) for s in (5, 10, 60, 110, 120)] == pytest.approx([0.5, 1.0, 0.55, 0.1, 0.1])


def test_curriculum_progress_follows_the_schedule_measure(sudoku_data: Path, tmp_path: Path) -> None:
    by_steps = tiny_config(sudoku_data, tmp_path / "r")
    by_time = tiny_config(sudoku_data, tmp_path / "r", "max_seconds=10", "schedule_over=seconds")
    assert run_progress(by_steps, 3, 12, train_seconds=9.0) == 0.25
    assert run_progress(by_time, 3, 12, train_seconds=9.0) == 0.9  # the time budget is ahead of the step count
    assert run_progress(by_time, 6, 12, train_seconds=1.0) == 0.5


# --------------------------------------------------------------------------------------------- the lever study


LEVERS_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "levers.sh"


def _lever_arms() -> dict[str, str]:
    listed = subprocess.run(["bash", str(LEVERS_SCRIPT), "--list"], check=True, capture_output=True, text=True).stdout
    return dict(line.split("|", 1) for line in listed.splitlines())


def _changed_keys(config: dict, base: dict) -> set[str]:
    before = dotted_keys(base)
    return {k for k, v in dotted_keys(config).items() if v != before[k]}


def test_every_lever_arm_changes_exactly_what_it_overrides() -> None:
    """An arm with a misspelt key or a value the run config refuses would fail hours into the study."""

    def examples(config: TrainConfig) -> int:  # 1,000 training groups; each round drops its last partial batch
        per_round = config.eval_interval * 1000 // config.global_batch_size
        return min(config.max_steps, config.epochs // config.eval_interval * per_round) * config.global_batch_size

    arms = _lever_arms()
    assert arms["base"] == "" and len(arms) >= 12
    levers_base = Path(__file__).resolve().parents[2] / "configs" / "levers_base.yaml"
    base = load_config(levers_base, ["eval_interval=4"]).model_dump()
    for arm, overrides in arms.items():
        if arm == "base":
            continue
        config = load_config(levers_base, ["eval_interval=4", *overrides.split()])
        assert _changed_keys(config.model_dump(), base) == {o.split("=", 1)[0] for o in overrides.split()}, arm
        # the examples trained on stay the base's (within 1%), whatever the batch size; an arm named -<N>ep
        # trains N of its 64 epochs
        share = int(short[1]) / 64 if (short := re.search(r"-(\d+)ep$", arm)) else 1.0
        assert examples(config) == pytest.approx(
            share * examples(load_config(levers_base, ["eval_interval=4"])), rel=0.01
        ), arm
    assert any(re.search(r"-\d+ep$", arm) for arm in arms)


def _hard_rung_recipe_and_arms() -> tuple[Path, list[str], dict[str, str]]:
    """The hard rung's HRM config, its recipe (the study's overrides, budget included, and the levers' common
    `next_segment`) and its lever arms, as benchmarks/hard_rung_study.sh runs them."""
    scripts = Path(__file__).resolve().parents[2] / "benchmarks"
    pilot = subprocess.run(
        ["bash", str(scripts / "hard_rung_pilot.sh"), "--list"], check=True, capture_output=True, text=True
    )
    _, _, config, recipe, _ = next(
        line for line in pilot.stdout.splitlines() if line.startswith("sudoku6x6-min|")
    ).split("|")
    listed = subprocess.run(
        ["bash", str(scripts / "hard_rung_study.sh"), "--list-levers"], check=True, capture_output=True, text=True
    ).stdout
    study = [*recipe.split(), "max_seconds=1800", "budget_clock=cpu", "schedule_over=seconds", "max_steps=1000000"]
    arms = dict(line.split("|", 1) for line in listed.splitlines())
    return scripts.parent / config, [*study, "arch.q_target=next_segment"], arms


def test_every_hard_rung_lever_arm_changes_exactly_what_it_overrides() -> None:
    """Issue 46's arms on the hard rung (benchmarks/hard_rung_study.sh --levers): each a valid change of the rung's HRM
    recipe, so that no arm fails half an hour into its run or silently trains the recipe itself."""
    config, recipe, arms = _hard_rung_recipe_and_arms()
    assert {"original", "muon", "cgar", "batch32"} <= set(arms)
    base = load_config(config, recipe).model_dump()
    for arm, overrides in arms.items():
        changed = load_config(config, [*recipe, *overrides.split()]).model_dump()
        assert _changed_keys(changed, base) == {o.split("=", 1)[0] for o in overrides.split()}, arm


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--levers", "muon"], "error: ARM-SEED: muon is not ARM-SEED (e.g. muon-0)"),
        (["--levers", "nope-1"], "error: ARM-SEED: no lever arm nope (best original muon "),
        (["--list-levers"], "error: MODEL-SEED: --list-levers is not MODEL-SEED (e.g. hrm-0)"),
        (["hrm-0", "foo-2"], "error: MODEL-SEED: no model foo (hrm, "),
    ],
)
def test_the_hard_rung_study_refuses_a_misnamed_job_before_building_data(
    tmp_path: Path, args: list[str], error: str
) -> None:
    """A misnamed job stops the study in one line before it builds the rung's data or starts any run."""
    calls = tmp_path / "calls"
    fake = tmp_path / "hrm"
    fake.write_text(f'#!/usr/bin/env bash\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "hard_rung_study.sh"
    run = subprocess.run(
        ["bash", str(script), "sudoku6x6-min", *args],
        env={**os.environ, "HRM": str(fake)},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert run.stderr.startswith(error) and run.stderr.count("\n") == 1, run.stderr
    assert not calls.exists()


@pytest.mark.parametrize(("preset", "paper"), [("sudoku_fast.yaml", "sudoku.yaml"), ("maze_fast.yaml", "maze.yaml")])
def test_a_fast_preset_is_the_paper_recipe_with_the_winners_levers(preset: str, paper: str) -> None:
    """The fast presets (docs/training.md, "The fast presets") are the paper's runs with what the hard rung's winner
    changed against the original's recipe and does not depend on the model's size: its Muon settings, its batch as a
    share of the rung's, and the best recipe's Q target and EMA; an edit of either side breaks the link the docs
    claim."""
    config, recipe, arms = _hard_rung_recipe_and_arms()
    rung = load_config(config, recipe)
    winner = load_config(config, [*recipe, *arms["muon-lr5e-3-batch32"].split()])
    configs = Path(__file__).resolve().parents[2] / "configs"
    paper_config = load_config(configs / paper)
    levers = [
        f"optimizer={winner.optimizer}",
        f"muon_lr={winner.muon_lr}",
        f"global_batch_size={paper_config.global_batch_size * winner.global_batch_size // rung.global_batch_size}",
        f"ema={rung.ema}",
        f"arch.q_target={rung.arch.q_target}",
    ]
    fast = load_config(configs / preset).model_dump()
    assert fast == load_config(configs / paper, levers).model_dump()
    assert _changed_keys(fast, paper_config.model_dump()) == {
        "optimizer",
        "muon_lr",
        "global_batch_size",
        "ema",
        "arch.q_target",
    }
    assert fast["global_batch_size"] == paper_config.global_batch_size // 2


@pytest.mark.parametrize(
    ("preset", "base"), [("quickstart.yaml", "levers_base.yaml"), ("ladder_maze6x6.yaml", "levers_maze6x6_base.yaml")]
)
def test_a_preset_is_its_frozen_base_plus_the_adopted_arm(preset: str, base: str) -> None:
    """A base is a frozen copy of a preset before the lever study; the preset must be that base with the overrides of
    the arm it adopted, or the study's figures stop describing the recipe users run."""
    adopted = _lever_arms()["next-segment-ema0.99-wd1"].split()
    configs = Path(__file__).resolve().parents[2] / "configs"
    preset_config = load_config(configs / preset).model_dump()
    assert preset_config == load_config(configs / base, adopted).model_dump()
    base_config = load_config(configs / base).model_dump()
    assert _changed_keys(preset_config, base_config) == {
        "ema",
        "weight_decay",
        "puzzle_emb_weight_decay",
        "arch.q_target",
    }


def test_lever_study_passes_each_arms_overrides_and_resumes_started_runs(tmp_path: Path) -> None:
    fake = tmp_path / "hrm"
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)

    def levers(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HRM": str(fake)}
        return subprocess.run(
            ["bash", str(LEVERS_SCRIPT), *args], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    run = levers("--seeds", "2", "--runs", "r", "--out", "o", "depth-curriculum", "batch128")
    assert run.returncode == 0, run.stderr
    args = (tmp_path / "r" / "depth-curriculum-seed1.log").read_text().splitlines()
    assert args[:3] == ["train", "-c", "configs/levers_base.yaml"] and "seed=1" in args
    curriculum = next(a for a in args if a.startswith("depth_curriculum="))
    assert load_config(None, [curriculum]).depth_curriculum == [
        DepthStage(until=0.3, H_cycles=1, L_cycles=1),
        DepthStage(until=0.6, H_cycles=2, L_cycles=1),
    ]
    assert {"global_batch_size=128", "max_steps=500", "run_dir=r/batch128-seed0"} <= set(
        (tmp_path / "r" / "batch128-seed0.log").read_text().splitlines()
    )
    out = run.stdout.splitlines()
    assert out[out.index("compare") :] == [
        "compare", "--runs", *(f"r/{arm}-seed{s}" for arm in ("batch128", "depth-curriculum") for s in (0, 1)),
        "--out", "o", "--targets", "0.5,0.8",
    ]  # fmt: skip
    (tmp_path / "r" / "batch128-seed0").mkdir()
    (tmp_path / "r" / "batch128-seed0" / "config.yaml").write_text("")
    rerun = levers("--seeds", "1", "--runs", "r", "batch128")
    assert rerun.returncode == 0, rerun.stderr
    log = (tmp_path / "r" / "batch128-seed0.log").read_text().splitlines()
    assert log[-5:] == ["train", "--run-dir", "r/batch128-seed0", "--resume", "--quiet"]
