"""HRM-Text: parity with transformers' HrmTextForCausalLM both ways, the L_bp_cycles gradient schedule, PrefixLM
masking through the model, parameter count, KV cache, loss, and the converter's errors."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from hrm_reason.errors import UserError
from hrm_reason.models.lm.hrm_text import HRMText, HRMTextConfig
from hrm_reason.models.lm.hrm_text_convert import config_to_hf_dict, load_hf_hrm_text, save_hf_hrm_text
from tests.reference import hrm_text_param_count

transformers = pytest.importorskip("transformers")
from transformers import HrmTextConfig, HrmTextForCausalLM  # noqa: E402

ATOL = 1e-5
# Small configs covering: default L_bp_cycles, a custom one, gelu, padding_idx, biases, h*d_h != d, tied embeddings,
# a non-default RoPE base, one H-cycle.
CONFIGS = {
    "default_bp": dict(
        vocab_size=61,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        head_dim=16,
        H_cycles=2,
        L_cycles=2,
        initializer_range=0.05,
    ),
    "bp13_gelu_bias": dict(
        vocab_size=37,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=2,
        head_dim=32,
        H_cycles=2,
        L_cycles=3,
        L_bp_cycles=[1, 3],
        hidden_act="gelu",
        pad_token_id=0,
        attention_bias=True,
        mlp_bias=True,
    ),
    "tied_narrow_heads": dict(
        vocab_size=29,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=3,
        head_dim=8,
        H_cycles=1,
        L_cycles=2,
        tie_word_embeddings=True,
        rope_parameters={"rope_theta": 500.0, "rope_type": "default"},
        initializer_range=0.1,
    ),
}


def _inputs(vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (3, 11), generator=g)
    tt = torch.zeros_like(ids)
    tt[0, :4] = 1
    tt[1, :8] = 1  # row 2 stays all-causal
    return ids, tt


def _hf_model(kw: dict, seed: int = 0) -> HrmTextForCausalLM:
    torch.manual_seed(seed)
    return HrmTextForCausalLM(HrmTextConfig(**kw)).eval()


def _our_model(kw: dict, seed: int = 0) -> HRMText:
    return HRMText(HRMTextConfig(**kw), generator=torch.Generator().manual_seed(seed)).eval()


def _assert_same_logits(hf: HrmTextForCausalLM, ours: HRMText, **extra) -> None:
    ids, tt = _inputs(ours.config.vocab_size)
    with torch.no_grad():
        for token_type_ids in (None, tt):
            ref = hf(input_ids=ids, token_type_ids=token_type_ids, **extra).logits
            got = ours(ids, token_type_ids=token_type_ids, **extra).logits
            assert got.shape == (3, 11, ours.config.vocab_size)
            torch.testing.assert_close(got, ref, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_transformers_checkpoint_reads_to_the_same_logits(name, tmp_path):
    hf = _hf_model(CONFIGS[name])
    hf.save_pretrained(tmp_path / "hf")  # transformers 5.23 writes the fused gqkv_proj layout
    ours = load_hf_hrm_text(tmp_path / "hf").eval()
    assert ours.config.num_layers_per_stack == hf.config.num_layers_per_stack
    assert ours.config.num_hidden_layers == hf.config.num_hidden_layers
    _assert_same_logits(hf, ours)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_our_checkpoint_loads_in_transformers_to_the_same_logits(name, tmp_path):
    ours = _our_model(CONFIGS[name], seed=1)
    with torch.no_grad():
        ours.z_L_init.normal_()  # a non-zero start state (as upstream checkpoints carry) must travel too
    save_hf_hrm_text(ours, tmp_path / "fused")
    save_hf_hrm_text(ours, tmp_path / "split", fused=False)
    for sub in ("fused", "split"):
        hf = HrmTextForCausalLM.from_pretrained(tmp_path / sub).eval()
        assert hf.config.L_bp_cycles == ours.config.L_bp_cycles
        _assert_same_logits(hf, ours)


def test_writer_output_equals_transformers_save_pretrained(tmp_path):
    hf = _hf_model(CONFIGS["bp13_gelu_bias"])
    hf.save_pretrained(tmp_path / "hf")
    save_hf_hrm_text(load_hf_hrm_text(tmp_path / "hf"), tmp_path / "ours")
    ref, got = load_file(tmp_path / "hf" / "model.safetensors"), load_file(tmp_path / "ours" / "model.safetensors")
    assert sorted(got) == sorted(ref)
    assert all(torch.equal(got[k], ref[k]) for k in ref)
    hf_json = json.loads((tmp_path / "hf" / "config.json").read_text())
    our_json = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert {k: v for k, v in hf_json.items() if k in our_json} == {k: hf_json[k] for k in our_json if k in hf_json}


def test_hand_built_legacy_fused_checkpoint_splits_as_gate_q_k_v(tmp_path):
    """A fused checkpoint built here from the module weights in the documented order, not by our writer."""
    hf = _hf_model(CONFIGS["default_bp"], seed=3)
    sd = {k: v.clone() for k, v in hf.state_dict().items()}
    legacy = {}
    for key, t in sd.items():
        if key.endswith("self_attn.q_proj.weight"):
            base = key.removesuffix("self_attn.q_proj.weight")
            legacy[base + "attn.gqkv_proj.weight"] = torch.cat(
                [sd[base + f"self_attn.{n}_proj.weight"] for n in ("gate", "q", "k", "v")]
            )
        elif key.endswith("mlp.gate_proj.weight"):
            base = key.removesuffix("mlp.gate_proj.weight")
            legacy[base + "mlp.gate_up_proj.weight"] = torch.cat([t, sd[base + "mlp.up_proj.weight"]])
        elif key.endswith("self_attn.o_proj.weight"):
            legacy[key.replace("self_attn.o_proj", "attn.o_proj")] = t
        elif not any(
            key.endswith(f"{s}.weight")
            for s in ("self_attn.gate_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.up_proj")
        ):
            legacy[key] = t
    (tmp_path / "legacy").mkdir()
    save_file(legacy, tmp_path / "legacy" / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "legacy" / "config.json").write_text(json.dumps(hf.config.to_dict()))
    _assert_same_logits(hf, load_hf_hrm_text(tmp_path / "legacy").eval())


def test_padding_mask_and_loss_match_transformers(tmp_path):
    hf = _hf_model(CONFIGS["bp13_gelu_bias"], seed=4)
    hf.save_pretrained(tmp_path / "hf")
    ours = load_hf_hrm_text(tmp_path / "hf").eval()
    ids, tt = _inputs(ours.config.vocab_size, seed=5)
    right = torch.ones_like(ids)
    right[0, -3:] = 0
    left = torch.ones_like(ids)
    left[1, :2] = 0
    labels = ids.clone()
    labels[:, :3] = -100
    with torch.no_grad():
        for mask in (right, left):
            ref = hf(input_ids=ids, token_type_ids=tt, attention_mask=mask, labels=labels)
            got = ours(ids, token_type_ids=tt, attention_mask=mask, labels=labels)
            torch.testing.assert_close(got.logits, ref.logits, atol=ATOL, rtol=0)
            torch.testing.assert_close(got.loss, ref.loss, atol=ATOL, rtol=0)
    assert torch.equal(got.metrics["ce"], got.loss)


def _bp_model(L_cycles: int, L_bp_cycles: list[int]) -> HRMText:
    """A one-layer HRM-Text of two H-cycles (vocabulary 17) for the gradient schedule tests."""
    sizes = dict(hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, head_dim=16)
    return HRMText(HRMTextConfig(vocab_size=17, **sizes, H_cycles=2, L_cycles=L_cycles, L_bp_cycles=L_bp_cycles))


def test_L_bp_cycles_gradient_schedule():
    """[2] with H_cycles=2, L_cycles=3 pads to [1, 2]: L calls (0,2), (1,1), (1,2) keep gradients; H always does."""
    model = _bp_model(L_cycles=3, L_bp_cycles=[2]).train()
    calls: list[tuple[str, bool]] = []
    model.L_module.register_forward_pre_hook(lambda m, a: calls.append(("L", torch.is_grad_enabled())))
    model.H_module.register_forward_pre_hook(lambda m, a: calls.append(("H", torch.is_grad_enabled())))
    ids = torch.randint(0, 17, (2, 5))
    model(ids, labels=ids).loss.backward()
    L = [g for kind, g in calls if kind == "L"]
    assert [(h, l) for h in range(2) for l in range(3) if L[h * 3 + l]] == [(0, 2), (1, 1), (1, 2)]
    assert [g for kind, g in calls if kind == "H"] == [True, True]
    assert model.L_module.layers[0].mlp.up_proj.weight.grad is not None


def test_no_L_gradient_when_every_bp_is_zero():
    """bp = 0 everywhere: the L stack gets no gradient at all, while H and the embedding (through z_H) still do."""
    model = _bp_model(L_cycles=2, L_bp_cycles=[0, 0])
    ids = torch.randint(0, 17, (2, 5))
    model(ids, labels=ids).loss.backward()
    assert all(p.grad is None for p in model.L_module.parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.H_module.parameters())
    assert model.embed_tokens.weight.grad.abs().sum() > 0


def test_prefix_masking_through_the_model():
    model = _our_model(CONFIGS["default_bp"], seed=2)
    ids = torch.randint(1, 61, (1, 10), generator=torch.Generator().manual_seed(6))
    tt = torch.zeros_like(ids)
    tt[0, :4] = 1  # prefix 0..3, response 4..9
    with torch.no_grad():
        base = model(ids, token_type_ids=tt).logits
        later = ids.clone()
        later[0, 7] = (later[0, 7] % 60) + 1  # a later response token
        out = model(later, token_type_ids=tt).logits
        torch.testing.assert_close(out[:, :7], base[:, :7], atol=0, rtol=0)
        assert (out[:, 7:] - base[:, 7:]).abs().max() > 1e-4
        pre = ids.clone()
        pre[0, 3] = (pre[0, 3] % 60) + 1  # the last prefix token
        out = model(pre, token_type_ids=tt).logits
        assert (out[:, :3] - base[:, :3]).abs().amax(-1).min() > 1e-4  # every earlier prefix position sees it
        causal = model(pre).logits  # without token_type_ids the same change is invisible to earlier positions
        torch.testing.assert_close(causal[:, :3], model(ids).logits[:, :3], atol=0, rtol=0)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_parameter_count_formula(name):
    model = _our_model(CONFIGS[name])
    assert hrm_text_param_count(model.config) == sum(p.numel() for p in model.parameters())
    torch.manual_seed(0)
    hf = HrmTextForCausalLM(HrmTextConfig(**CONFIGS[name]))  # z_L_init is a frozen Parameter there
    assert hrm_text_param_count(model.config) == sum(p.numel() for p in hf.parameters() if p.requires_grad)


def test_defaults_and_config_round_trip_match_transformers():
    ours, hf = HRMTextConfig(vocab_size=100), HrmTextConfig(vocab_size=100)
    for key, value in config_to_hf_dict(ours).items():
        if key not in ("architectures", "dtype"):
            assert getattr(hf, key) == value, key
    assert HRMTextConfig(**ours.model_dump()) == ours  # (inflated, per-stack) pairs round-trip
    assert ours.L_bp_cycles_padded == [1, 2]


@pytest.mark.parametrize("use_prefix", [False, True])
def test_cached_decoding_equals_full_recompute(use_prefix):
    model = _our_model(CONFIGS["bp13_gelu_bias"], seed=7)
    ids = torch.randint(1, 37, (2, 9), generator=torch.Generator().manual_seed(8))
    plen = 4
    tt = torch.zeros_like(ids)
    if use_prefix:
        tt[:, :plen] = 1
    with torch.no_grad():
        full = model(ids, token_type_ids=tt).logits
        out = model(ids[:, :plen], token_type_ids=tt[:, :plen], use_cache=True)
        steps, cache = [out.logits], out.past_key_values
        for t in range(plen, ids.shape[1]):
            out = model(ids[:, t : t + 1], past_key_values=cache, use_cache=True)
            steps.append(out.logits)
            cache = out.past_key_values
    assert cache.seq_len() == ids.shape[1]
    assert sum(k is not None for k in cache.keys) == model.config.num_cache_slots
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=0)


def test_converter_user_errors(tmp_path):
    hf = _hf_model(CONFIGS["default_bp"])
    hf.save_pretrained(tmp_path / "ok")
    with pytest.raises(UserError, match="config.json"):
        load_hf_hrm_text(tmp_path / "missing")
    (tmp_path / "noweights").mkdir()
    (tmp_path / "noweights" / "config.json").write_text((tmp_path / "ok" / "config.json").read_text())
    with pytest.raises(UserError, match="model.safetensors"):
        load_hf_hrm_text(tmp_path / "noweights")
    raw = json.loads((tmp_path / "ok" / "config.json").read_text())
    (tmp_path / "ok" / "config.json").write_text(json.dumps({**raw, "model_type": "llama"}))
    with pytest.raises(UserError, match="model_type"):
        load_hf_hrm_text(tmp_path / "ok")
    (tmp_path / "ok" / "config.json").write_text(json.dumps(raw))
    tensors = load_file(tmp_path / "ok" / "model.safetensors")
    save_file({k: v for k, v in tensors.items() if "embed_tokens" not in k}, tmp_path / "ok" / "model.safetensors")
    with pytest.raises(UserError, match="missing tensor.*embed_tokens"):
        load_hf_hrm_text(tmp_path / "ok")
    save_file({**tensors, "model.extra.weight": torch.zeros(2)}, tmp_path / "ok" / "model.safetensors")
    with pytest.raises(UserError, match="unexpected tensor.*model.extra.weight"):
        load_hf_hrm_text(tmp_path / "ok")
    with pytest.raises(UserError, match="already exists"):
        save_hf_hrm_text(_our_model(CONFIGS["default_bp"]), tmp_path / "ok")
