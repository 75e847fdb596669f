"""The registered baselines: each model's defining property, the shared ACT loop, EMA, the time budget, and that every
model trains through `train()` and evaluates through `evaluate()`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.func import functional_call

import hrm_reason.train.act as train_module
from hrm_reason.checkpoint import STATE, find_checkpoint, load_checkpoint, read_weights
from hrm_reason.config import load_config
from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import evaluate
from hrm_reason.evaluate.run import load_model_for_eval
from hrm_reason.models.act import act_loss
from hrm_reason.models.registry import arch_config, build_model
from hrm_reason.models.transformer import Transformer
from hrm_reason.models.trm import TRM, TRMBlock
from hrm_reason.models.unitf import UniTF
from hrm_reason.train.ema import EMA, LIVE_WEIGHTS
from hrm_reason.train.loop import train
from tests.helpers import (
    assert_same_trajectory,
    output_tensors,
    puzzle_batch,
    read_metrics,
    rewind,
    tiny_config,
    write_original_layout,
)

CPU = torch.device("cpu")
REPO = Path(__file__).resolve().parents[2]


def meta(vocab: int = 6, seq_len: int = 16, identifiers: int = 3) -> PuzzleDatasetMetadata:
    return PuzzleDatasetMetadata.of_shape(seq_len, vocab, identifiers)


def small(name: str, **overrides) -> torch.nn.Module:
    fields = dict(name=name, hidden_size=32, num_heads=2, halt_max_steps=4, halt_exploration_prob=0.0)
    fields.update(
        {"hrm": dict(H_layers=1, L_layers=1), "transformer": dict(num_layers=2), "trm": dict(L_layers=1)}.get(name, {})
    )
    fields.update(overrides)
    return build_model(arch_config(fields), meta(), CPU, seed=0)


def fresh_carry(core, n: int = 4):
    return core.reset_carry(torch.ones(n, dtype=torch.bool), core.empty_carry(n, CPU))


def one_segment(
    model: torch.nn.Module, module: torch.nn.Module
) -> tuple[dict[str, torch.Tensor], Any, torch.Tensor, list[bool], dict[str, torch.Tensor]]:
    """One segment of the model's core in eval mode from a fresh carry: (batch, carry, logits, whether each application
    of `module` kept its gradient, the gradient of mean(logits^2) on `module`'s weights)."""
    core = model.inner
    calls: list[bool] = []
    hook = module.register_forward_hook(lambda m, inp, out: calls.append(out.requires_grad))
    model.eval()
    b = puzzle_batch()
    carry = fresh_carry(core)
    logits = core(carry, b).logits
    hook.remove()
    logits.square().mean().backward()
    got = {name: p.grad.clone() for name, p in module.named_parameters()}
    core.zero_grad()
    return b, carry, logits, calls, got


def copies_of(module: torch.nn.Module, count: int) -> list[dict[str, torch.Tensor]]:
    """Independent leaf copies of a module's weights: one per application, so each application's gradient is seen."""
    return [{k: v.detach().clone().requires_grad_(True) for k, v in module.named_parameters()} for _ in range(count)]


# --- transformer -------------------------------------------------------------------------------------------------


def test_transformer_applies_each_layer_once_per_segment_with_full_gradient() -> None:
    model = small("transformer", num_layers=5)
    assert isinstance(model, Transformer)
    core = model.inner
    assert len(core.layers) == 5
    assert arch_config({"name": "transformer"}).num_layers == 8  # default num_layers: HRM's H_layers + L_layers blocks
    calls: list[tuple[int, bool]] = []
    for i, layer in enumerate(core.layers):
        layer.register_forward_hook(lambda m, inp, out, i=i: calls.append((i, out.requires_grad)))
    model.eval()
    b = puzzle_batch()
    carry = fresh_carry(core)
    segment = core(carry, b)
    new_carry, logits = segment.carry, segment.logits
    assert calls == [(i, True) for i in range(5)]  # each layer once, in order, all differentiated

    # The same numbers by hand: z_init + x through the stack, LM head after the prefix.
    z = carry.z + core.input_embeddings(b["inputs"], b["puzzle_identifiers"])
    for layer in core.layers:
        z = layer(z, core.cos_sin())
    torch.testing.assert_close(logits, core.lm_head(z)[:, core.puzzle_emb_len :])
    torch.testing.assert_close(new_carry.z, z.detach())
    logits.square().mean().backward()
    for layer in core.layers:
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters())

    # The same blocks as HRM: equal parameter count at the same settings.
    hrm = small("hrm", H_layers=2, L_layers=3)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in hrm.parameters())


def test_transformer_direct_prediction_is_one_segment_from_the_fixed_state() -> None:
    """halt_max_steps=1: every row halts after its one segment in training and the next call starts from z_init, so the
    prediction does not depend on what came before; no Q-continue target."""
    model = small("transformer", halt_max_steps=1)
    model.train()
    b = puzzle_batch(8)
    carry, out = model(model.empty_carry(b), b)
    assert carry.halted.all() and (carry.steps == 1).all() and out.target_q_continue is None
    _, again = model(carry, b)
    torch.testing.assert_close(again.logits, out.logits)


# --- UniTF -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("M,K", [(4, 2), (3, None)])
def test_unitf_applies_one_shared_block_M_times(M: int, K: int | None) -> None:
    """One block's weights serve all M applications; the gradient of those weights is the sum of the gradients of the
    last K applications (computed here with a separate copy of the weights for each) and none of the earlier ones."""
    model = small("unitf", unitf_steps=M, unitf_grad_steps=K)
    assert isinstance(model, UniTF)
    core = model.inner
    block_params = {n for n, _ in core.named_parameters() if n.startswith("block.")}
    io_params = {"embed_tokens.weight", "lm_head.weight", "q_head.weight", "q_head.bias"}
    assert {n for n, _ in core.named_parameters()} == block_params | io_params  # exactly one block
    b, carry, logits, calls, got = one_segment(model, core.block)
    K_eff = K or M
    assert calls == [False] * (M - K_eff) + [True] * K_eff

    x = core.input_embeddings(b["inputs"], b["puzzle_identifiers"])
    cos_sin = core.cos_sin()
    z = carry.z
    with torch.no_grad():
        for _ in range(M - K_eff):
            z = core.block(z + x, cos_sin)
    copies = copies_of(core.block, K_eff)
    for weights in copies:
        z = functional_call(core.block, weights, (z + x, cos_sin))
    manual_logits = core.lm_head(z)[:, core.puzzle_emb_len :]
    torch.testing.assert_close(manual_logits, logits)
    manual_logits.square().mean().backward()
    for name in got:
        assert all(c[name].grad.abs().sum() > 0 for c in copies)  # every differentiated application contributes
        torch.testing.assert_close(got[name], sum(c[name].grad for c in copies))


# --- TRM ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mlp_t", [False, True])
def test_trm_backpropagates_through_the_whole_last_recursion_and_nothing_before(mlp_t: bool) -> None:
    T, n = 3, 2
    model = small(
        "trm",
        H_cycles=T,
        L_cycles=n,
        L_layers=2,
        mlp_t=mlp_t,
        pos_encodings="none" if mlp_t else "rope",
        puzzle_emb_len=2,
    )
    assert isinstance(model, TRM)
    core = model.inner
    b, carry, logits, calls, got = one_segment(model, core.net)
    assert calls == [False] * ((T - 1) * (n + 1)) + [True] * (n + 1)

    x = core.input_embeddings(b["inputs"], b["puzzle_identifiers"]).detach()
    cos_sin = core.cos_sin()

    def unrolled(differentiated_recursions: int) -> list[dict[str, torch.Tensor]]:
        """Net applications in TRM's order, each of the last recursions with its own weight copy; returns the copies."""
        y, z = carry.y, carry.z
        with torch.no_grad():
            for _ in range(T - differentiated_recursions):
                for _ in range(n):
                    z = core.net(z, y + x, cos_sin)
                y = core.net(y, z, cos_sin)
        copies = copies_of(core.net, differentiated_recursions * (n + 1))
        it = iter(copies)
        for _ in range(differentiated_recursions):
            for _ in range(n):
                z = functional_call(core.net, next(it), (z, y + x, cos_sin))
            y = functional_call(core.net, next(it), (y, z, cos_sin))
        out = core.lm_head(y)[:, core.puzzle_emb_len :]
        torch.testing.assert_close(out, logits)
        out.square().mean().backward()
        return copies

    last = unrolled(1)
    for name in got:
        assert all(c[name].grad.abs().sum() > 0 for c in last)  # all n+1 applications of the last recursion
        torch.testing.assert_close(got[name], sum(c[name].grad for c in last))
    # Backprop through all T recursions would give another gradient: the check above tells them apart.
    full = unrolled(T)
    name = "layers.0.mlp.down_proj.weight"
    assert not torch.allclose(got[name], sum(c[name].grad for c in full))


def test_trm_halts_on_q_halt_alone_without_extra_forward() -> None:
    model = small("trm", H_cycles=2, L_cycles=2, L_layers=1, puzzle_emb_len=1, halt_max_steps=4)
    core = model.inner
    assert core.q_head.weight.shape == (1, 32)  # one logit: halt
    calls = []
    core.register_forward_hook(lambda *_: calls.append(1))
    model.train()
    b = puzzle_batch(8)
    with torch.no_grad():
        core.q_head.bias.fill_(0.5)  # q_halt > 0 everywhere
    carry, out = model(model.empty_carry(b), b)
    assert len(calls) == 1 and carry.halted.all()
    assert torch.equal(out.q_continue_logits, torch.zeros(8)) and not any(
        k.startswith("target") for k in output_tensors(out)
    )
    loss, m = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, "softmax_cross_entropy")
    assert "q_continue_loss" not in m
    torch.testing.assert_close(loss, m["lm_loss"] + 0.5 * m["q_halt_loss"])
    with torch.no_grad():
        core.q_head.bias.fill_(-0.5)
    carry = model.empty_carry(b)
    for step in range(1, 5):
        carry, _ = model(carry, b)
        assert carry.halted.all() == (step == 4)


def test_trm_token_mlp_mixes_positions_and_paper_sizes() -> None:
    config = build_model(
        arch_config(dict(name="trm", hidden_size=32, num_heads=2, mlp_t=True, pos_encodings="none", puzzle_emb_len=3)),
        meta(),
        CPU,
        seed=0,
    ).config
    block = TRMBlock(config)
    h = torch.randn(2, 19, 32)
    jac = torch.autograd.functional.jacobian(lambda v: block(v, None)[0, 5], h)  # output at position 5
    assert jac[:, 0, 7].abs().sum() > 0 and jac[:, 1].abs().sum() == 0  # other positions matter, other examples do not
    assert block.token_mlp.gate_up_proj.weight.shape[1] == 19  # the SwiGLU runs across the 16 + 3 positions

    def count(**arch) -> int:
        with torch.device("meta"):
            model = build_model(
                arch_config(dict(name="trm", L_layers=2, puzzle_emb_len=16, **arch)),
                meta(12, 81, 1),
                torch.device("meta"),
                0,
            )
        return sum(p.numel() for p in model.parameters())

    # The TRM paper's sizes (6.83M attention, 5.03M MLP on Sudoku, counted from the TRM code; one q logit here).
    assert count() == 2 * 3_407_872 + 2 * 12 * 512 + 513
    assert count(mlp_t=True, pos_encodings="none") == 2 * (148_992 + 2_359_296) + 2 * 12 * 512 + 513


# --- configs and checkpoints -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides,fragment",
    [
        (["arch.mlp_t=true"], "mlp_t is an option of trm, not hrm"),
        (
            ["arch.name=transformer", "arch.mlp_t=true", "arch.pos_encodings=none"],
            "mlp_t is an option of trm, not transformer",
        ),
        (["arch.pos_encodings=none"], "not hrm"),
        (["arch.puzzle_emb_len=4"], "not hrm"),
        (["arch.name=unitf", "arch.unitf_steps=2", "arch.unitf_grad_steps=3"], "exceeds unitf_steps"),
        (["arch.name=trm", "arch.mlp_t=true"], "no attention for rope"),
        (
            [
                "arch.name=trm",
                "arch.hidden_size=64",
                "arch.num_heads=2",
                "arch.puzzle_emb_len=1",
                "arch.puzzle_emb_ndim=128",
            ],
            "cannot hold",
        ),
        (["arch.name=mamba"], "arch.name"),
    ],
)
def test_options_of_other_models_are_one_line_errors(overrides: list[str], fragment: str) -> None:
    with pytest.raises(UserError, match=fragment) as e:
        load_config(None, overrides)
    assert "\n" not in str(e.value)


def test_quick_configs_have_about_hrms_parameter_count() -> None:
    def count(name: str) -> int:
        cfg = load_config(REPO / "configs" / name)
        with torch.device("meta"):
            model = build_model(cfg.arch, meta(6, 16, 1), torch.device("meta"), 0)
        return sum(p.numel() for p in model.parameters())

    hrm = count("sudoku_quick.yaml")
    counts = {
        name: count(name)
        for name in (
            "transformer_quick.yaml",
            "transformer_direct_quick.yaml",
            "unitf_quick.yaml",
            "trm_quick.yaml",
            "trm_att_quick.yaml",
        )
    }
    assert all(abs(c / hrm - 1) < 0.05 for c in counts.values()), (hrm, counts)
    quick = {name: load_config(REPO / "configs" / name) for name in ("sudoku_quick.yaml", *counts)}
    same = {
        (c.data_path, c.global_batch_size, c.max_steps, c.epochs, c.lr, c.lr_warmup_steps, c.weight_decay)
        for c in quick.values()
    }
    assert len(same) == 1  # same data and budget


# --- training and evaluation through the common code ---------------------------------------------------------------


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("data") / "sudoku4")


ARCHS = {
    "transformer": ["arch.name=transformer"],
    "unitf": ["arch.name=unitf", "arch.unitf_steps=3", "arch.unitf_grad_steps=2"],
    "trm": ["arch.name=trm", "arch.H_cycles=2", "arch.L_cycles=2", "arch.L_layers=1", "arch.puzzle_emb_len=2"],
    "trm_mlp": [
        "arch.name=trm",
        "arch.H_cycles=2",
        "arch.L_cycles=2",
        "arch.L_layers=1",
        "arch.mlp_t=true",
        "arch.pos_encodings=none",
    ],
}


@pytest.mark.parametrize("arch", list(ARCHS))
def test_each_model_trains_and_evaluates(arch: str, data: Path, tmp_path: Path) -> None:
    run = train(
        tiny_config(data, tmp_path / "run", "epochs=8", "eval_interval=4", "lr=3e-3", *ARCHS[arch]), progress=False
    )
    records = read_metrics(run)
    losses = [r["train/lm_loss"] for r in records if "train/lm_loss" in r]
    assert len(losses) == 24 and sum(losses[-4:]) < sum(losses[:4])
    assert [r["step"] for r in records if "eval/exact_accuracy" in r] == [12, 24]

    model, config, split, device = load_model_for_eval(run, None, None, "cpu")
    assert config.arch.name == arch.removesuffix("_mlp")
    result = evaluate(model, split, 2 * config.arch.halt_max_steps, 8, device, progress=False)
    assert result.count == 16 and len(result.exact_accuracy) == 6
    assert 1 <= result.act_mean_segments <= 6
    assert len({round(a, 6) for a in result.token_accuracy}) > 1  # the carried state changes the answer

    # A checkpoint of one model never loads into another.
    hrm = build_model(
        arch_config(dict(hidden_size=32, num_heads=2, H_layers=1, L_layers=1, halt_max_steps=3)), split.metadata, CPU, 0
    )
    with pytest.raises(UserError, match="another config"):
        load_checkpoint(hrm, find_checkpoint(run))


# --- EMA ---------------------------------------------------------------------------------------------------------


def test_ema_update_and_swap() -> None:
    model = small("trm", H_cycles=1, L_cycles=1, L_layers=1, puzzle_emb_len=1)
    ema = EMA(model, 0.9)
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    ema.update(model, 0)
    for n in dict(model.named_parameters()):
        torch.testing.assert_close(ema.shadow[n], 0.9 * start[n] + 0.1 * (start[n] + 1))
    live = {n: p.detach().clone() for n, p in model.named_parameters()}
    with ema.applied(model):
        for n, p in model.named_parameters():
            assert torch.equal(p, ema.shadow[n])
    for n, p in model.named_parameters():
        assert torch.equal(p, live[n])
    assert "inner.puzzle_emb.weights" not in ema.shadow  # buffers are used as they are


def test_ema_warmup_decay_and_its_weight_on_the_initial_weights() -> None:
    model = small("trm", H_cycles=1, L_cycles=1, L_layers=1, puzzle_emb_len=1)
    ema = EMA(model, 0.999, warmup=True)
    assert [ema.decay_at(t) for t in (0, 8, 90)] == pytest.approx([0.1, 0.5, 0.91])
    assert ema.decay_at(10**6) == 0.999 and EMA(model, 0.999).decay_at(0) == 0.999
    # Trained weights held at zero: the average is the initial weights times the product of the decays used.
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    for t in range(50):
        ema.update(model, t)
    init_share = math.prod(ema.decay_at(t) for t in range(50))
    for n, value in start.items():
        torch.testing.assert_close(ema.shadow[n], init_share * value)
    assert init_share < 1e-3  # without warmup: 0.999**50 = 0.95


def test_ema_warmup_needs_ema(data: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="ema_warmup needs ema"):
        tiny_config(data, tmp_path / "run", "ema_warmup=true")


def test_evaluation_and_checkpoints_use_the_ema_weights(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decay = 0.6
    config = tiny_config(data, tmp_path / "run", "epochs=4", "eval_interval=2", f"ema={decay}", *ARCHS["trm"])
    live_after_step: list[dict[str, torch.Tensor]] = []
    seen_by_eval: list[dict[str, torch.Tensor]] = []
    model_ref: list[torch.nn.Module] = []
    real_step, real_eval = train_module.optimizer_step, train_module.evaluate

    def recording_step(*args, **kwargs):
        real_step(*args, **kwargs)
        live_after_step.append({n: p.detach().clone() for n, p in model_ref[0].named_parameters()})

    def recording_eval(model, *args, **kwargs):
        seen_by_eval.append({n: p.detach().clone() for n, p in model.named_parameters()})
        return real_eval(model, *args, **kwargs)

    real_build = train_module.build_model

    def recording_build(*args, **kwargs):
        model_ref.append(real_build(*args, **kwargs))
        return model_ref[0]

    monkeypatch.setattr(train_module, "optimizer_step", recording_step)
    monkeypatch.setattr(train_module, "evaluate", recording_eval)
    monkeypatch.setattr(train_module, "build_model", recording_build)
    init = {
        n: p.detach().clone() for n, p in build_model(config.arch, meta(6, 16, 1), CPU, config.seed).named_parameters()
    }
    run = train(config, progress=False)

    # By hand: shadow_0 = initial weights, shadow_t = decay * shadow_{t-1} + (1 - decay) * weights after step t.
    expected, shadow = [], init
    for live in live_after_step:
        shadow = {n: decay * shadow[n] + (1 - decay) * live[n] for n in shadow}
        expected.append(shadow)
    assert len(live_after_step) == 12 and len(seen_by_eval) == 2  # evaluations after steps 6 and 12
    for seen, step in zip(seen_by_eval, (6, 12)):
        for n in init:
            torch.testing.assert_close(seen[n], expected[step - 1][n])
        assert not all(torch.allclose(seen[n], live_after_step[step - 1][n]) for n in init)
    ckpt = find_checkpoint(run)
    weights, _ = read_weights(ckpt)
    state = torch.load(ckpt / STATE, weights_only=False)
    for n in init:
        torch.testing.assert_close(weights[n], expected[-1][n])  # hrm eval loads these
        torch.testing.assert_close(state[LIVE_WEIGHTS][n], live_after_step[-1][n])
    assert state["train_seconds"] > 0


@pytest.mark.parametrize("warmup", [False, True])
def test_resume_with_ema_follows_the_same_trajectory(data: Path, tmp_path: Path, warmup: bool) -> None:
    overrides = (
        "epochs=4",
        "eval_interval=2",
        "checkpoint_every_steps=4",
        "ema=0.7",
        f"ema_warmup={str(warmup).lower()}",
        "arch.halt_exploration_prob=0.5",
        *ARCHS["unitf"],
    )
    full = train(tiny_config(data, tmp_path / "full", *overrides), progress=False)
    cut = rewind(full, tmp_path / "cut", 4)
    resumed = train(tiny_config(data, cut, *overrides), resume=True, progress=False)
    assert_same_trajectory(full, resumed)


# --- time budget -------------------------------------------------------------------------------------------------


def test_time_budget_ends_the_run_with_an_evaluation_and_a_checkpoint(data: Path, tmp_path: Path) -> None:
    config = tiny_config(data, tmp_path / "run", "epochs=4", "eval_interval=2", "max_seconds=1e-6")
    run = train(config, progress=False)
    records = read_metrics(run)
    assert [r["step"] for r in records if "train/lm_loss" in r] == [1]  # the first step spends the budget
    assert [r["step"] for r in records if "eval/exact_accuracy" in r] == [1]
    ckpt = find_checkpoint(run)
    assert ckpt.name == "step_1"
    assert torch.load(ckpt / STATE, weights_only=False)["train_seconds"] > 0
    train(config, resume=True, progress=False)  # the budget is spent: no further step
    assert [r["step"] for r in read_metrics(run) if "train/lm_loss" in r] == [1]
    longer = train(config.model_copy(update={"max_seconds": None}), resume=True, progress=False)
    assert find_checkpoint(longer).name == "step_12"


@pytest.mark.parametrize("schedule_over", ["steps", "seconds"])
def test_schedule_over_seconds_completes_the_decay_within_the_time_budget(
    data: Path, tmp_path: Path, schedule_over: str, one_thread: None
) -> None:
    budget = [
        "epochs=1000",
        "eval_interval=1000",
        "max_seconds=1.0",
        "budget_clock=cpu",
        "lr_warmup_steps=0",
        "lr_min_ratio=0.1",
    ]
    run = train(tiny_config(data, tmp_path / "run", *budget, f"schedule_over={schedule_over}"), progress=False)
    lrs = [r["train/lr"] for r in read_metrics(run) if "train/lr" in r]
    assert 4 < len(lrs) < 1000  # stopped by the budget, far inside the 1000-epoch step budget (a loaded machine: few)
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    if schedule_over == "seconds":  # the cosine has (almost) reached its floor when the budget runs out
        assert lrs[0] > 0.95e-3 and lrs[-1] < 0.2e-3
    else:
        assert lrs[-1] > 0.95e-3
