"""HRM-LM, UniTF-LM and Transformer-LM heads (docs/models.md §HRM-LM, §UniTF-LM, §Transformer-LM): parameter counts, gradient schedule, passes, fusion, causality, cache."""

from __future__ import annotations

import math

import pydantic
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hrm_reason.errors import UserError
from hrm_reason.losses import next_token_ce
from hrm_reason.models.lm.hrm_lm import HRMLM, HRMLMConfig
from hrm_reason.models.lm.lm_blocks import CausalAttnBlock, normal_
from hrm_reason.models.lm.transformer_lm import TransformerLM, TransformerLMConfig
from hrm_reason.models.lm.unitf_lm import UniTFLM, UniTFLMConfig
from tests.reference import (
    causal_attn_block_param_count,
    hrm_lm_param_count,
    transformer_lm_param_count,
    unitf_lm_param_count,
)

V = 23


def tiny_hrm(**overrides) -> HRMLM:
    fields = dict(vocab_size=V, hidden_size=16, num_heads=2, N=2, T=2, K=2, max_seq_len=32)
    return HRMLM(HRMLMConfig(**{**fields, **overrides}))


def tiny_unitf(**overrides) -> UniTFLM:
    fields = dict(vocab_size=V, hidden_size=16, num_heads=2, M=4, K=2, max_seq_len=32)
    return UniTFLM(UniTFLMConfig(**{**fields, **overrides}))


def tiny_transformer(**overrides) -> TransformerLM:
    fields = dict(vocab_size=V, hidden_size=16, num_heads=2, num_layers=3, max_seq_len=32)
    return TransformerLM(TransformerLMConfig(**{**fields, **overrides}))


def ids(batch: int = 2, n: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (batch, n), generator=torch.Generator().manual_seed(seed))


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # parameters() yields a tied tensor once


# --- parameter counts (A.8) -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("V_, d", [(17, 8), (50, 32), (101, 48)])
def test_param_count_formulas_match_modules(V_: int, d: int) -> None:
    for ctx_norm in (True, False):
        for out_proj in (True, False):
            model = HRMLM(
                HRMLMConfig(vocab_size=V_, hidden_size=d, num_heads=2, fast_ctx_norm=ctx_norm, out_proj=out_proj)
            )
            assert n_params(model) == hrm_lm_param_count(V_, d, fast_ctx_norm=ctx_norm, out_proj=out_proj)
    assert hrm_lm_param_count(V_, d) == V_ * d + 61 * d * d + 23 * d + 3  # the paper's closed form, both flags on
    assert n_params(UniTFLM(UniTFLMConfig(vocab_size=V_, hidden_size=d, num_heads=2))) == unitf_lm_param_count(V_, d)
    for L in (1, 3):  # T-L: tied embedding plus L independent blocks
        transformer = nn.ModuleList([nn.Embedding(V_, d), *(CausalAttnBlock(d, 2, 1e-5) for _ in range(L))])
        assert n_params(transformer) == transformer_lm_param_count(V_, d, L)
        head = TransformerLM(TransformerLMConfig(vocab_size=V_, hidden_size=d, num_heads=2, num_layers=L))
        assert n_params(head) == transformer_lm_param_count(V_, d, L)


def test_param_count_formulas_reproduce_paper_sizes() -> None:
    gpt2 = 50257
    assert causal_attn_block_param_count(4096) == 268_443_648  # Eq. 28's own figure (its "14d^2" is a slip)
    assert hrm_lm_param_count(gpt2, 4096) == 1_229_357_059  # the paper's exact total
    assert [round(hrm_lm_param_count(gpt2, d) / 1e6) for d in (2048, 5120)] == [359, 1857]
    assert [round(transformer_lm_param_count(gpt2, 4096, L) / 1e5) / 10 for L in (2, 4, 12)] == [742.7, 1279.6, 3427.2]
    assert [round(transformer_lm_param_count(gpt2, 4096, L) / 1e6) for L in (2, 4, 12)] == [743, 1280, 3427]
    assert [round(unitf_lm_param_count(gpt2, d) / 1e6) for d in (4096, 5760, 7296)] == [474, 820, 1218]


def test_modules_at_paper_sizes_have_the_paper_counts() -> None:
    """Shape-only (meta) modules at the paper's sizes, so the real code, not just the formula, gives the totals."""
    with torch.device("meta"):
        hrm = {
            d: n_params(HRMLM(HRMLMConfig(vocab_size=50257, hidden_size=d, num_heads=16))) for d in (2048, 4096, 5120)
        }
        unitf = {
            d: n_params(UniTFLM(UniTFLMConfig(vocab_size=50257, hidden_size=d, num_heads=16)))
            for d in (4096, 5760, 7296)
        }
        t_l4 = n_params(
            nn.ModuleList([nn.Embedding(50257, 4096), *(CausalAttnBlock(4096, 16, 1e-5) for _ in range(4))])
        )
    assert hrm[4096] == 1_229_357_059
    assert {d: round(n / 1e6) for d, n in hrm.items()} == {2048: 359, 4096: 1229, 5120: 1857}
    assert {d: round(n / 1e6) for d, n in unitf.items()} == {4096: 474, 5760: 820, 7296: 1218}
    assert round(t_l4 / 1e6) == 1280


# --- gradient schedule (A.6) ----------------------------------------------------------------------------------------


def record_calls(model: HRMLM) -> list[tuple[str, bool, tuple, torch.Tensor]]:
    """(module, grad enabled, inputs, output) for every L_net / H_net call, in call order."""
    calls: list[tuple[str, bool, tuple, torch.Tensor]] = []
    for name in ("L_net", "H_net"):
        getattr(model, name).register_forward_hook(
            lambda mod, args, out, name=name: calls.append((name, torch.is_grad_enabled(), args, out))
        )
    return calls


@pytest.mark.parametrize(
    "K, L_grad_steps, H_grad_steps",
    [(2, {11, 12}, {12}), (4, {9, 10, 11, 12}, {9, 12}), (12, set(range(1, 13)), {3, 6, 9, 12})],
)
def test_k_step_window_schedule(K: int, L_grad_steps: set[int], H_grad_steps: set[int]) -> None:
    model = tiny_hrm(N=4, T=3, K=K)  # M = 12
    calls = record_calls(model)
    x = ids()
    model(x, labels=x).loss.backward()
    L_calls = [c for c in calls if c[0] == "L_net"]
    H_calls = [c for c in calls if c[0] == "H_net"]
    assert [c[1] for c in L_calls] == [i in L_grad_steps for i in range(1, 13)]
    assert [c[1] for c in H_calls] == [i in H_grad_steps for i in (3, 6, 9, 12)]
    # Call order: H fires right after the L step i with i % T == 0 and reads that just-updated z_L (A.4); L reads
    # the current z_H and x~ (A.3).
    assert [c[0] for c in calls] == (["L_net"] * 3 + ["H_net"]) * 4
    for j, (_, _, (z_H, (z_L,), *_), _) in enumerate(H_calls):
        assert z_L is L_calls[3 * j + 2][3]
        if j:
            assert z_H is H_calls[j - 1][3]
        else:
            assert torch.equal(z_H, model.z_H0.expand_as(z_H))
    for i, (_, _, (z_L, (z_H, x_tilde), *_), _) in enumerate(L_calls):
        if i:
            assert z_L is L_calls[i - 1][3]
        if i >= 3:
            assert z_H is H_calls[i // 3 - 1][3]
        assert x_tilde is L_calls[0][2][1][1]
    # States from before the window carry no graph; those inside it do.
    assert [c[3].requires_grad for c in L_calls] == [i in L_grad_steps for i in range(1, 13)]


def test_no_gradient_reaches_states_before_the_window() -> None:
    x = ids()
    grads = {}
    for K in (2, 12):
        model = tiny_hrm(N=4, T=3, K=K)
        model.z_H0.requires_grad_(True)
        model.z_L0.requires_grad_(True)
        model(x, labels=x).loss.backward()
        grads[K] = (model.z_H0.grad, model.z_L0.grad, model.H_net.block.attn.qkv_proj.weight.grad)
    assert grads[2][0] is None and grads[2][1] is None  # the start state is only used under no_grad
    assert grads[2][2] is not None and grads[2][2].abs().sum() > 0  # the H call at step 12 does carry gradient
    assert grads[12][0].abs().sum() > 0 and grads[12][1].abs().sum() > 0  # control: with K = M it reaches z^0


def test_window_changes_gradients_not_values() -> None:
    x = ids()
    a, b = tiny_hrm(N=4, T=3, K=2), tiny_hrm(N=4, T=3, K=12)
    b.load_state_dict(a.state_dict())
    out_a, out_b = a(x, labels=x), b(x, labels=x)
    torch.testing.assert_close(out_a.logits, out_b.logits, rtol=0, atol=1e-6)
    out_a.loss.backward()
    out_b.loss.backward()
    w_a, w_b = a.L_net.W_in.weight.grad, b.L_net.W_in.weight.grad
    assert not torch.allclose(w_a, w_b)


# --- the gated modules and the block (A.1, A.3, A.4) ----------------------------------------------------------------


def test_gated_updates_follow_the_equations() -> None:
    model = tiny_hrm()
    gen = torch.Generator().manual_seed(2)
    z_L, z_H, x_tilde = (torch.randn(2, 6, 16, generator=gen) for _ in range(3))
    rope = tuple(t[:6] for t in model.rotary())
    with torch.no_grad():
        for module, alpha in ((model.L_net, 0.37), (model.H_net, -0.2)):
            module.alpha.fill_(alpha)
            module.ctx_norm.weight.copy_(0.5 + torch.rand(module.ctx_norm.weight.shape, generator=gen))
        for module, z, others in ((model.L_net, z_L, (z_H, x_tilde)), (model.H_net, z_H, (z_L,))):
            c = torch.cat((z, *others), -1)
            c = c / torch.sqrt(c.pow(2).mean(-1, keepdim=True) + 1e-5) * module.ctx_norm.weight  # one norm over 3d / 2d
            g = torch.sigmoid(c @ module.W_g.weight.T)
            h = module.block(c @ module.W_in.weight.T, rope)
            expected = g * z + (1 - g) * module.alpha * (h @ module.W_out.weight.T)  # g -> 1 keeps the old state
            torch.testing.assert_close(module(z, others, rope), expected, rtol=1e-5, atol=1e-6)


def test_causal_attn_block_is_post_norm_with_4d_swiglu() -> None:
    d, h, n = 16, 2, 5
    block = CausalAttnBlock(d, h, 1e-5)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for norm in (block.norm1, block.norm2):
            norm.weight.copy_(0.5 + torch.rand(d, generator=gen))
    x = torch.randn(1, n, d, generator=gen)
    cos, sin = (t[:n] for t in tiny_hrm().rotary())

    def rope(t: torch.Tensor) -> torch.Tensor:  # rotate-half RoPE, written out (sin_signed holds -sin | sin)
        t1, t2 = t.chunk(2, dim=-1)
        sin_half = sin[:, sin.shape[-1] // 2 :]
        return t * cos + torch.cat((-t2, t1), dim=-1) * torch.cat((sin_half, sin_half), dim=-1)

    def rms(t: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
        return t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * gamma

    q, k, v = (x @ block.attn.qkv_proj.weight.T).split(d, dim=-1)
    q, k, v = (t.view(1, n, h, d // h).transpose(1, 2) for t in (q, k, v))
    scores = rope(q) @ rope(k).transpose(-1, -2) / math.sqrt(d // h)
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(1, n, d) @ block.attn.o_proj.weight.T
    x1 = rms(x + a, block.norm1.weight)
    W1, W2 = block.mlp.up_gate_proj.weight.chunk(2, dim=0)  # each 4d x d
    assert W1.shape == (4 * d, d) and block.mlp.down_proj.weight.shape == (d, 4 * d)
    x2 = rms(x1 + ((x1 @ W1.T) * F.silu(x1 @ W2.T)) @ block.mlp.down_proj.weight.T, block.norm2.weight)
    torch.testing.assert_close(block(x, (cos, sin)), x2, rtol=1e-5, atol=1e-5)


# --- supervision passes (A.5) ---------------------------------------------------------------------------------------


def manual_pass_losses(model: HRMLM, x: torch.Tensor) -> list[torch.Tensor]:
    """Algorithm 2 written out from the model's parts: x~ once, S passes from detached states, L_s = CE - lambda H."""
    lam = model.config.entropy_weight
    rope = tuple(t[: x.shape[1]] for t in model.rotary())
    x_tilde = model.encode(x, rope)
    z_H, z_L = model.initial_state(x)
    losses = []
    for _ in range(model.config.S):
        z_H, z_L = model.one_pass(x_tilde, z_H, z_L, rope)
        h_out, w = model.fusion(z_H, z_L, x_tilde)
        w_bar = w.mean(dim=(0, 1))
        losses.append(next_token_ce(h_out @ model.embed_tokens.weight.T, x) + lam * (w_bar * w_bar.log()).sum())
        z_H, z_L = z_H.detach(), z_L.detach()
    return losses


def test_supervision_passes_average_the_losses() -> None:
    x = ids()
    model = tiny_hrm(S=2, entropy_weight=0.3)
    with torch.no_grad():  # larger injections so that the second pass moves the output visibly
        model.L_net.alpha.fill_(1.0)
        model.H_net.alpha.fill_(1.0)
    losses = manual_pass_losses(model, x)
    out = model(x, labels=x)
    assert abs(losses[0] - losses[1]) > 1e-3  # so the mean differs from either pass alone and from their sum
    torch.testing.assert_close(out.loss, (losses[0] + losses[1]) / 2, rtol=0, atol=1e-6)
    # metrics["ce"] is the plain CE of the returned (last-pass) logits, which inference (no labels) returns too
    torch.testing.assert_close(out.metrics["ce"], next_token_ce(out.logits, x))
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits, out.logits, rtol=0, atol=1e-6)


def test_state_is_detached_between_passes() -> None:
    """With K = M, z^0 gets gradient only through pass 1, so S = 2 halves the S = 1 gradient (mean over passes)."""
    x = ids()
    one, two = tiny_hrm(S=1, K=4), tiny_hrm(S=2, K=4)  # M = 4
    two.load_state_dict(one.state_dict())
    grads = []
    for model in (one, two):
        model.z_L0.requires_grad_(True)
        model(x, labels=x).loss.backward()
        grads.append(model.z_L0.grad)
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[1], grads[0] / 2, rtol=1e-4, atol=1e-7)


# --- output fusion and tied logits (A.7) ----------------------------------------------------------------------------


def test_fusion_weights_entropy_and_tied_logits() -> None:
    x = ids()
    model = tiny_hrm(entropy_weight=0.5)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # make every scale distinct so a swapped norm or a missing temperature shows
        model.fusion.log_tau.fill_(0.7)
        for norm in (model.fusion.norm_H, model.fusion.norm_L, model.fusion.norm_I):
            norm.weight.copy_(0.5 + torch.rand(norm.weight.shape, generator=gen))
    seen = {}
    model.fusion.register_forward_hook(lambda mod, args, out: seen.update(args=args, out=out))
    out = model(x, labels=x)

    z_H, z_L, x_tilde = seen["args"]
    f = model.fusion

    def rms(z: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
        return z / torch.sqrt(z.pow(2).mean(-1, keepdim=True) + model.config.rms_norm_eps) * gamma

    h_H, h_L, h_I = rms(z_H, f.norm_H.weight), rms(z_L, f.norm_L.weight), rms(x_tilde, f.norm_I.weight)
    w = torch.softmax(torch.cat((h_H, h_L, h_I), -1) @ f.W_og.weight.T / math.exp(0.7), dim=-1)
    h_out = (w[..., :1] * h_H + w[..., 1:2] * h_L + w[..., 2:] * h_I) @ f.out_proj.weight.T
    torch.testing.assert_close(seen["out"][1], w, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(seen["out"][0], h_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.logits, h_out @ model.embed_tokens.weight.T, rtol=1e-5, atol=1e-5)

    w_bar = w.mean(dim=(0, 1))
    entropy = -(w_bar * w_bar.log()).sum()
    assert 0 < entropy <= math.log(3) + 1e-6
    torch.testing.assert_close(out.metrics["fusion_entropy"], entropy.detach())
    torch.testing.assert_close(out.loss - out.metrics["ce"], -0.5 * entropy.detach(), rtol=1e-5, atol=1e-6)

    assert model.lm_head.weight is model.embed_tokens.weight
    out.loss.backward()
    assert model.fusion.log_tau.grad.abs() > 0 and model.fusion.W_og.weight.grad.abs().sum() > 0


def test_flags_and_start_states() -> None:
    model = tiny_hrm(fast_ctx_norm=False, out_proj=False)
    assert model.L_net.ctx_norm is None and model.fusion.out_proj is None
    assert model.H_net.ctx_norm is not None  # Eq. 17 always normalizes c_H
    state = model.state_dict()
    assert "z_H0" in state and "z_L0" in state  # frozen buffers, saved, not trained
    assert all(p is not model.z_H0 and p is not model.z_L0 for p in model.parameters())
    assert model.z_H0.abs().max() <= 2 and model.z_L0.abs().max() <= 2 and not torch.equal(model.z_H0, model.z_L0)
    # TN(0, 1, [-2, 2]) is the plain truncation (variance 0.774, so |z^0| ~ 56 at d = 4096), not a rescaled one
    z = torch.empty(100_000)
    normal_(z, 1.0, torch.Generator().manual_seed(0), truncate=2.0)
    assert z.abs().max() <= 2 and z.var().item() == pytest.approx(0.774, abs=0.01)


def test_init_is_seeded_scaled_and_leaves_global_rng_alone() -> None:
    rng = torch.random.get_rng_state()
    a, b, c = (
        tiny_hrm(hidden_size=64, N=4, T=3),
        tiny_hrm(hidden_size=64, N=4, T=3),
        tiny_hrm(hidden_size=64, N=4, T=3, seed=1),
    )
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    assert not torch.equal(a.z_L0, c.z_L0)
    assert a.input_block.attn.qkv_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert a.L_net.block.attn.qkv_proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(12), rel=0.05)  # A.9
    assert a.L_net.W_g.weight.std().item() == pytest.approx(0.02, rel=0.05)
    u = tiny_unitf(hidden_size=64, M=12)
    assert u.block.mlp.up_gate_proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(2 * 12 * 64 / 4096), rel=0.05)
    # init_c: the recurrent blocks take UniTF-LM's width-corrected std; nothing else changes, draw for draw.
    w = tiny_hrm(hidden_size=64, N=4, T=3, init_c=2.0)
    wide = 0.02 / math.sqrt(2 * 12 * 64 / 4096)
    assert w.L_net.block.attn.qkv_proj.weight.std().item() == pytest.approx(wide, rel=0.05)
    assert w.H_net.block.mlp.down_proj.weight.std().item() == pytest.approx(wide, rel=0.05)
    for name, tensor in a.state_dict().items():
        assert torch.equal(tensor, w.state_dict()[name]) == ("_net.block." not in name or "norm" in name), name


# --- causality and cache (both heads) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [lambda: tiny_hrm(S=2), lambda: tiny_unitf(), lambda: tiny_unitf(reinject_input=True), lambda: tiny_transformer()],
)
def test_changing_a_token_leaves_earlier_logits_unchanged(make) -> None:
    model = make()
    x = ids(n=10)
    y = x.clone()
    y[:, 5] = (y[:, 5] + 1) % V
    with torch.no_grad():
        a, b = model(x).logits, model(y).logits
    torch.testing.assert_close(a[:, :5], b[:, :5], rtol=0, atol=1e-6)
    assert (a[:, 5:] - b[:, 5:]).abs().amax(dim=-1).min() > 1e-6  # every later position does see the change


@pytest.mark.parametrize(
    "make, slots",
    [(lambda: tiny_hrm(S=2, N=2, T=2), 2 * (4 + 2) + 1), (lambda: tiny_unitf(M=4), 4), (lambda: tiny_transformer(), 3)],
)
def test_cached_decoding_equals_full_recompute(make, slots: int) -> None:
    model = make()
    x = ids(n=12)
    with torch.no_grad():
        full = model(x).logits
        out = model(x[:, :4], use_cache=True)
        assert len(out.past_key_values) == slots and out.past_key_values.seq_len == 4
        pieces, cache = [out.logits], out.past_key_values
        for start, stop in [(4, 5), (5, 8), (8, 9), (9, 10), (10, 12)]:  # one token at a time, and chunks (offset mask)
            out = model(x[:, start:stop], past_key_values=cache, use_cache=True)
            pieces.append(out.logits)
            cache = out.past_key_values
    assert cache.seq_len == 12
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-5)


def test_cache_and_input_errors_are_user_errors() -> None:
    model, x = tiny_hrm(), ids()
    with torch.no_grad():
        zeros = model(x, token_type_ids=torch.zeros_like(x)).logits
        torch.testing.assert_close(zeros, model(x).logits, rtol=0, atol=0)
        with pytest.raises(UserError, match="token_type_ids"):
            model(x, token_type_ids=torch.ones_like(x))
        with pytest.raises(UserError, match="max_seq_len"):
            model(ids(n=33))
        cache = tiny_unitf()(x, use_cache=True).past_key_values
        with pytest.raises(UserError, match="past_key_values"):
            model(x[:, :1], past_key_values=cache, use_cache=True)
    with pytest.raises(pydantic.ValidationError, match="num_heads"):
        HRMLMConfig(vocab_size=V, hidden_size=18, num_heads=4)
    with pytest.raises(pydantic.ValidationError, match="num_heads"):
        UniTFLMConfig(vocab_size=V, hidden_size=12, num_heads=4)  # head size 3 is odd: no RoPE
    with pytest.raises(pydantic.ValidationError):
        HRMLMConfig(vocab_size=V, bogus=1)


# --- UniTF specifics (A.10) -----------------------------------------------------------------------------------------


def test_unitf_window_and_reinjection() -> None:
    model = tiny_unitf(M=12, K=2)
    flags: list[bool] = []
    model.block.register_forward_hook(lambda mod, args, out: flags.append(torch.is_grad_enabled()))
    x = ids()
    out = model(x, labels=x)
    assert flags == [False] * 10 + [True] * 2
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1)))
    h = model.embed_tokens(x)  # A.10 written out: h^0 = e, h^i = Block(h^{i-1}), logits = h^M E^T
    for _ in range(12):
        h = model.block(h, _rope(model, x))
    torch.testing.assert_close(out.logits, h @ model.embed_tokens.weight.T, rtol=1e-5, atol=1e-5)
    # With one step, re-injection (h^0 = 0, h^1 = Block(0 + e)) equals the paper's h^1 = Block(e).
    plain, reinject = tiny_unitf(M=1, K=1), tiny_unitf(M=1, K=1, reinject_input=True)
    reinject.load_state_dict(plain.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(plain(x).logits, reinject(x).logits, rtol=0, atol=0)
        # and with more steps they differ (e is added again from step 2 on)
        plain3, reinject3 = tiny_unitf(M=3, K=3), tiny_unitf(M=3, K=3, reinject_input=True)
        reinject3.load_state_dict(plain3.state_dict())
        assert not torch.allclose(plain3(x).logits, reinject3(x).logits)
    assert model.lm_head.weight is model.embed_tokens.weight


# --- Transformer-LM: UniTF-LM unshared ------------------------------------------------------------------------------


def test_transformer_lm_with_every_layer_one_block_is_unitf_lm_with_full_gradient() -> None:
    """Loaded with UniTF-LM's one block in each of its L layers, the stack computes UniTF-LM's M = L applications with
    K = M: the same logits and loss, an embedding gradient equal to UniTF-LM's and layer gradients that sum to its
    block's (the shared block's gradient is the sum over its applications)."""
    unitf, stack, x = tiny_unitf(M=3, K=3), tiny_transformer(num_layers=3), ids()
    stack.embed_tokens.load_state_dict(unitf.embed_tokens.state_dict())
    for layer in stack.layers:
        layer.load_state_dict(unitf.block.state_dict())
    a, b = unitf(x, labels=x), stack(x, labels=x)
    torch.testing.assert_close(b.logits, a.logits, rtol=0, atol=0)
    torch.testing.assert_close(b.loss, next_token_ce(b.logits, x))
    a.loss.backward()
    b.loss.backward()
    torch.testing.assert_close(stack.embed_tokens.weight.grad, unitf.embed_tokens.weight.grad)
    for name, shared in unitf.block.named_parameters():
        per_layer = [dict(layer.named_parameters())[name].grad for layer in stack.layers]
        assert all(g is not None and g.abs().sum() > 0 for g in per_layer)  # full backprop: every layer learns
        torch.testing.assert_close(sum(per_layer), shared.grad, rtol=1e-5, atol=1e-6)


def test_transformer_lm_init_is_seeded_distinct_per_layer_and_width_corrected() -> None:
    rng = torch.random.get_rng_state()
    a, b, c = (
        tiny_transformer(hidden_size=64, num_layers=4),
        tiny_transformer(hidden_size=64, num_layers=4),
        tiny_transformer(hidden_size=64, num_layers=4, seed=1),
    )
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    assert not torch.equal(a.layers[0].attn.qkv_proj.weight, c.layers[0].attn.qkv_proj.weight)
    first, last = a.layers[0].mlp.up_gate_proj.weight, a.layers[3].mlp.up_gate_proj.weight
    assert not torch.equal(first, last)  # each layer its own draw
    std = 0.02 / math.sqrt(2 * 4 * 64 / 4096)  # UniTF-LM's formula with M read as L (docs/models.md)
    assert torch.cat([first, last]).std().item() == pytest.approx(std, rel=0.05)
    assert a.lm_head.weight is a.embed_tokens.weight


def _rope(model: UniTFLM, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(t[: x.shape[1]] for t in model.rotary())  # type: ignore[return-value]
