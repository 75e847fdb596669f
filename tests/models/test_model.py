"""The HRM model: sizes, one-step gradient, ACT halting, exploration, reset and Q targets."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pytest
import torch
import yaml

from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.models import registry
from hrm_reason.models.act import act_loss
from hrm_reason.models.hrm import HRM, HRMConfig
from hrm_reason.models.layers import swiglu_intermediate_size, trunc_normal_init_
from hrm_reason.models.registry import arch_config, build_model
from tests.helpers import puzzle_batch, tiny_hrm

CPU = torch.device("cpu")


def meta(vocab: int, seq_len: int) -> PuzzleDatasetMetadata:
    return PuzzleDatasetMetadata.of_shape(seq_len, vocab)


@pytest.mark.parametrize("vocab,seq_len,expected", [(11, 81, 27_275_266), (12, 900, 27_276_290), (6, 900, 27_270_146)])
def test_paper_parameter_count(vocab: int, seq_len: int, expected: int) -> None:
    with torch.device("meta"):
        model = HRM(HRMConfig(seq_len=seq_len, vocab_size=vocab, num_puzzle_identifiers=1))
    assert sum(p.numel() for p in model.parameters()) == expected
    assert swiglu_intermediate_size(512, 4) == 1536
    # The puzzle table is a buffer (saved, not counted), H_init/L_init are fixed buffers.
    assert "inner.puzzle_emb.weights" in model.state_dict() and "inner.H_init" in model.state_dict()


def test_trunc_normal_has_requested_std() -> None:
    x = trunc_normal_init_(torch.empty(200_000), std=0.5, generator=torch.Generator().manual_seed(0))
    assert abs(x.std().item() - 0.5) < 0.005
    assert x.abs().max().item() <= 2 * 0.5 / math.sqrt(0.7737) + 1e-6  # truncated at 2 "corrected" sigmas


def test_gradient_reaches_only_last_L_and_H_applications() -> None:
    model = tiny_hrm()
    model.train()
    calls: list[tuple[str, bool]] = []
    model.inner.L_level.register_forward_hook(lambda m, i, o: calls.append(("L", o.requires_grad)))
    model.inner.H_level.register_forward_hook(lambda m, i, o: calls.append(("H", o.requires_grad)))
    b = puzzle_batch()
    carry = model.empty_carry(b)
    carry, out = model(carry, b)
    # First call: the main segment (H_cycles*L_cycles L's and H_cycles H's), then the Q-target segment (all no-grad).
    H, L = model.config.H_cycles, model.config.L_cycles
    main = calls[: H * L + H]
    assert [c[0] for c in main] == (["L"] * L + ["H"]) * H
    assert [c[1] for c in main] == [False] * (H * L + H - 2) + [True, True]
    assert not any(c[1] for c in calls[H * L + H :])
    assert len(calls) == 2 * (H * L + H)

    loss, _ = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, "stablemax_cross_entropy")
    loss.backward()
    inner = model.inner
    for p in [inner.embed_tokens.weight, inner.lm_head.weight, inner.q_head.weight, inner.q_head.bias]:
        assert p.grad is not None and p.grad.abs().sum() > 0
    for p in inner.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
    assert inner.puzzle_emb.local_weights.grad.abs().sum() > 0
    assert not inner.H_init.requires_grad and not inner.L_init.requires_grad
    assert not carry.inner_carry.z_H.requires_grad and not carry.inner_carry.z_L.requires_grad


def test_one_step_gradient_matches_manual_computation() -> None:
    """With H=L=2 the segment runs L, L, H, L without gradient, then L and H with it; the weights' gradient is that of
    the last two applications alone."""
    model = tiny_hrm(H_cycles=2, L_cycles=2)
    model.eval()
    b = puzzle_batch()
    carry = model.inner.reset_carry(torch.ones(4, dtype=torch.bool), model.inner.empty_carry(4, CPU))
    logits = model.inner(carry, b).logits
    logits.float().square().mean().backward()
    got = model.inner.L_level.layers[0].mlp.down_proj.weight.grad.clone()
    model.zero_grad()

    inner = model.inner
    cos_sin = inner.rotary_emb()
    x = inner.input_embeddings(b["inputs"], b["puzzle_identifiers"])
    with torch.no_grad():
        z_H, z_L = carry.z_H, carry.z_L
        z_L = inner.L_level(z_L, z_H + x, cos_sin)
        z_L = inner.L_level(z_L, z_H + x, cos_sin)
        z_H = inner.H_level(z_H, z_L, cos_sin)
        z_L = inner.L_level(z_L, z_H + x, cos_sin)
    z_L = inner.L_level(z_L, z_H + x, cos_sin)
    z_H = inner.H_level(z_H, z_L, cos_sin)
    inner.lm_head(z_H)[:, inner.puzzle_emb_len :].float().square().mean().backward()
    torch.testing.assert_close(got, inner.L_level.layers[0].mlp.down_proj.weight.grad)


def test_halting_follows_q_head_in_training_and_budget_in_eval() -> None:
    model = tiny_hrm(halt_max_steps=4)
    b = puzzle_batch()
    model.train()
    with torch.no_grad():
        model.inner.q_head.bias.copy_(torch.tensor([5.0, -5.0]))  # q_halt > q_continue everywhere
    carry, _ = model(model.empty_carry(b), b)
    assert carry.halted.all() and (carry.steps == 1).all()

    with torch.no_grad():
        model.inner.q_head.bias.copy_(torch.tensor([-5.0, 5.0]))  # never asks to halt
    carry = model.empty_carry(b)
    for step in range(1, 5):
        carry, _ = model(carry, b)
        assert (carry.steps == step).all()
        assert carry.halted.all() == (step == 4)

    model.eval()
    with torch.no_grad():
        model.inner.q_head.bias.copy_(torch.tensor([5.0, -5.0]))
    carry = model.empty_carry(b)
    for step in range(1, 7):
        carry, _ = model(carry, b, halt_max_steps=6)
        assert carry.halted.all() == (step == 6)


def test_exploration_delays_halting_to_min_halt_steps() -> None:
    model = tiny_hrm(halt_max_steps=5, halt_exploration_prob=1.0)
    model.train()
    with torch.no_grad():
        model.inner.q_head.bias.copy_(torch.tensor([5.0, -5.0]))  # would halt at once without exploration
    b = puzzle_batch(n=64)
    g = torch.Generator().manual_seed(1)
    carry = model.empty_carry(b)
    halt_step = torch.zeros(64, dtype=torch.int32)
    for _ in range(5):
        carry, _ = model(carry, b, generator=g)
        halt_step = torch.where((halt_step == 0) & carry.halted, carry.steps, halt_step)
    assert (halt_step >= 2).all() and (halt_step <= 5).all()
    assert len(set(halt_step.tolist())) >= 3  # min-halt steps are drawn from [2, halt_max_steps]


def test_halted_rows_are_reset_and_refilled() -> None:
    model = tiny_hrm(halt_max_steps=3)
    model.train()
    b1, b2 = puzzle_batch(seed=1), puzzle_batch(seed=2)
    carry, _ = model(model.empty_carry(b1), b1)
    carry.halted = torch.tensor([True, False, True, False])
    z_H_before = carry.inner_carry.z_H.clone()
    reset = model.inner.reset_carry(carry.halted, carry.inner_carry)
    assert torch.equal(reset.z_H[0], model.inner.H_init.expand_as(reset.z_H[0]))
    assert torch.equal(reset.z_L[2], model.inner.L_init.expand_as(reset.z_L[2]))
    assert torch.equal(reset.z_H[1], z_H_before[1])
    new, _ = model(carry, b2)
    for k in b1:
        assert torch.equal(new.current_data[k][0], b2[k][0]) and torch.equal(new.current_data[k][2], b2[k][2])
        assert torch.equal(new.current_data[k][1], b1[k][1]) and torch.equal(new.current_data[k][3], b1[k][3])
    assert new.steps.tolist() == [1, 2, 1, 2]


def continue_above_halt(model: HRM) -> HRM:
    """`model` in training mode with q_continue = q_halt + 1 everywhere: a max over the two picks q_continue, so a
    target that must read q_halt alone on the last segment shows whether it does."""
    model.train()
    with torch.no_grad():
        model.inner.q_head.weight.normal_(0, 1.0)
        model.inner.q_head.weight[1] = model.inner.q_head.weight[0]
        model.inner.q_head.bias.copy_(torch.tensor([0.0, 1.0]))
    return model


def test_q_target_is_next_segments_q_values() -> None:
    model = continue_above_halt(tiny_hrm(halt_max_steps=2))
    b = puzzle_batch(n=16)
    carry = model.empty_carry(b)
    for step in (1, 2):
        carry, out = model(carry, b)
        with torch.no_grad():
            following = model.inner(carry.inner_carry, carry.current_data)
        nh, nc = following.q_halt, following.q_continue
        expected = torch.sigmoid(nh) if step == 2 else torch.sigmoid(torch.maximum(nh, nc))
        torch.testing.assert_close(out.target_q_continue, expected)


def test_next_segment_q_target_trains_last_steps_prediction_with_this_steps_values() -> None:
    """q_target=next_segment: no extra forward; the continue loss of a step is the BCE between the Q head applied to the
    previous segment's carried z_H and sigmoid(max(q_halt, q_continue)) of this segment, on rows that went on; its
    gradient reaches the Q head and nothing else."""
    model = tiny_hrm(halt_max_steps=4, q_target="next_segment")
    model.train()
    with torch.no_grad():
        model.inner.q_head.weight.normal_(0, 1.0)
        model.inner.q_head.bias.copy_(torch.tensor([0.0, 0.5]))
    b = puzzle_batch(n=8)
    carry, out = model(model.empty_carry(b), b)
    assert not out.target_q_continue_mask.any()  # the first segment continues nothing
    previous = carry
    previous.halted = torch.arange(8) % 3 == 0  # some rows start a new example, the others go on
    calls = []
    hook = model.inner.register_forward_hook(lambda *_: calls.append(1))
    carry, out = model(previous, b)
    hook.remove()
    assert len(calls) == 1  # one segment, no extra forward for the target
    went_on = ~previous.halted
    assert went_on.any() and torch.equal(out.target_q_continue_mask, went_on)
    with torch.no_grad():
        prediction = model.inner.q_head(previous.inner_carry.z_H[:, 0])[:, 1]
        target = torch.sigmoid(torch.maximum(out.q_halt_logits, out.q_continue_logits))
    assert not carry.steps.eq(4).any()  # no row is at its forced last segment yet
    expected = torch.nn.functional.binary_cross_entropy_with_logits(prediction, target, reduction="none")[went_on].sum()
    _, m = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, "softmax_cross_entropy")
    torch.testing.assert_close(m["q_continue_loss"], expected)

    model.zero_grad()
    outputs = dataclasses.replace(out, logits=out.logits.detach(), q_halt_logits=out.q_halt_logits.detach())
    total, _ = act_loss(outputs, carry.current_data["labels"], carry.halted, carry.steps, "softmax_cross_entropy")
    total.backward()
    with_grad = {name for name, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert with_grad == {"inner.q_head.weight", "inner.q_head.bias"}


def test_next_segment_target_on_the_forced_last_segment_is_q_halt_alone() -> None:
    """As with extra_forward: when the segment the target is read from is the last one allowed, continuing is no choice,
    so the previous continue prediction is trained towards sigmoid(q_halt), not sigmoid(max(q_halt, q_continue))."""
    model = continue_above_halt(tiny_hrm(halt_max_steps=2, q_target="next_segment", halt_exploration_prob=0.0))
    b = puzzle_batch(n=8)
    carry, _ = model(model.empty_carry(b), b)
    carry, out = model(carry, b)
    assert carry.steps.eq(2).all() and out.target_q_continue_mask.all()
    torch.testing.assert_close(out.target_q_continue, torch.sigmoid(out.q_halt_logits))
    assert not torch.allclose(out.target_q_continue, torch.sigmoid(out.q_continue_logits))


def test_build_model_is_seeded_and_leaves_global_rng_alone() -> None:
    arch = arch_config(dict(hidden_size=32, num_heads=2, H_layers=1, L_layers=1))
    state = torch.random.get_rng_state()
    a = build_model(arch, meta(6, 16), CPU, seed=3)
    b = build_model(arch, meta(6, 16), CPU, seed=3)
    c = build_model(arch, meta(6, 16), CPU, seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.inner.lm_head.weight, c.inner.lm_head.weight)
    assert a.inner.forward_dtype == torch.float32  # never bf16 on CPU


def test_rotary_embedding_matches_rotate_half_definition() -> None:
    """RoPE pairs channel i with i + D/2 and rotates the pair by position * theta^(-2i/D); inner products of rotated
    vectors then depend only on the distance between positions."""
    from hrm_reason.models.layers import RotaryEmbedding, apply_rotary_pos_emb

    dim, seq, base = 8, 5, 10000.0
    x = torch.randn(2, 3, seq, dim, generator=torch.Generator().manual_seed(0))
    got = apply_rotary_pos_emb(x, *RotaryEmbedding(dim, seq, base)())
    expected = torch.empty_like(x)
    half = dim // 2
    for pos in range(seq):
        for i in range(half):
            angle = torch.tensor(pos * base ** (-2 * i / dim), dtype=torch.float64)
            c, s = torch.cos(angle).float(), torch.sin(angle).float()
            a, b = x[..., pos, i], x[..., pos, i + half]
            expected[..., pos, i] = a * c - b * s
            expected[..., pos, i + half] = b * c + a * s
    torch.testing.assert_close(got, expected)

    q, k = torch.randn(dim).expand(seq, dim), torch.randn(dim).expand(seq, dim)
    rq, rk = (apply_rotary_pos_emb(t, *RotaryEmbedding(dim, seq, base)()) for t in (q, k))
    torch.testing.assert_close(rq[3] @ rk[1], rq[4] @ rk[2])


# --- every registered model: its own options only ------------------------------------------------------------------


def test_every_model_declares_a_foreign_option(model_name: str) -> None:
    """Its SPEC names an option (`foreign_option`) that another registered model reads and it does not."""
    key = registry.model_spec(model_name).foreign_option.partition("=")[0]
    assert key not in registry.model_spec(model_name).config.model_fields
    assert any(key in registry.model_spec(other).config.model_fields for other in registry.models())


def test_an_option_of_another_model_is_a_one_line_error(
    model_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hrm train` of the model's tiny config (SPEC.tiny) with an option of another model (SPEC.foreign_option): one
    line naming the key, the models that read it, in the registry's order, and this model."""
    import cli

    spec = registry.model_spec(model_name)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({"arch": {"name": model_name, **spec.tiny}}))
    option = f"arch.{spec.foreign_option}"
    monkeypatch.setattr(sys, "argv", ["hrm", "train", "--config", str(config), option, "data_path=/nonexistent"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    key = spec.foreign_option.partition("=")[0]
    owners = [other for other in registry.models() if key in registry.model_spec(other).config.model_fields]
    message = f"{key} is an option of {', '.join(owners)}, not {model_name}"
    assert err.startswith("error: ") and f"field 'arch.{key}': {message}" in err, err
