"""build_mask: the three kinds, padding, the cached (q_len < kv_len) case and the SDPA fast paths."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hrm_reason.errors import UserError
from hrm_reason.models.masks import build_mask


def dense_mask(mask: torch.Tensor | None, is_causal: bool, batch: int, q_len: int, kv_len: int) -> torch.Tensor:
    """Materialise build_mask's `(attn_mask, is_causal)` as a bool (batch, 1, q_len, kv_len) tensor."""
    if mask is not None:
        return mask.expand(batch, 1, q_len, kv_len)
    if is_causal:
        past = kv_len - q_len
        allowed = torch.arange(kv_len)[None, :] <= torch.arange(past, kv_len)[:, None]
        return allowed[None, None].expand(batch, 1, q_len, kv_len)
    return torch.ones(batch, 1, q_len, kv_len, dtype=torch.bool)


def _dense(kind, q_len, kv_len=None, batch=1, **kw):
    kv_len = q_len if kv_len is None else kv_len
    mask, is_causal = build_mask(kind, q_len, kv_len, **kw)
    return dense_mask(mask, is_causal, batch, q_len, kv_len)


def _brute_force(tt: torch.Tensor, pad: torch.Tensor, q_len: int) -> torch.Tensor:
    """allowed(b, i, j) = pad(b, j) and (j <= i or (tt[b, i] == 1 and tt[b, j] == 1)), queries = last q_len."""
    b, n = tt.shape
    out = torch.zeros(b, 1, q_len, n, dtype=torch.bool)
    for bi in range(b):
        for qi in range(q_len):
            i = n - q_len + qi
            for j in range(n):
                out[bi, 0, qi, j] = bool(pad[bi, j]) and (j <= i or (tt[bi, i] == 1 and tt[bi, j] == 1))
    return out


def test_prefix_with_all_zero_token_types_is_causal():
    tt = torch.zeros(3, 7, dtype=torch.long)
    mask, is_causal = build_mask("prefix", 7, token_type_ids=tt)
    assert mask is None and is_causal  # the is_causal fast path
    causal = torch.tril(torch.ones(7, 7, dtype=torch.bool))
    assert torch.equal(_dense("prefix", 7, token_type_ids=tt, batch=3), causal.expand(3, 1, 7, 7))
    assert torch.equal(_dense("causal", 7, batch=3), causal.expand(3, 1, 7, 7))


def test_prefix_block_is_bidirectional_and_response_is_causal():
    tt = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0], [1, 0, 1, 0, 0, 0]])  # last row: non-contiguous block
    m = _dense("prefix", 6, token_type_ids=tt, batch=3)
    for b, plen in ((0, 3), (1, 5)):
        assert m[b, 0, :plen, :plen].all()  # bidirectional over the prefix
        assert not m[b, 0, :plen, plen:].any()  # the prefix never sees the response
        for i in range(plen, 6):
            assert m[b, 0, i, : i + 1].all() and not m[b, 0, i, i + 1 :].any()  # response: causal
    assert m[2, 0, 0, 2] and m[2, 0, 2, 0] and not m[2, 0, 1, 2]  # all type-1 tokens form one block
    assert torch.equal(m, _brute_force(tt, torch.ones_like(tt), 6))


def test_random_prefix_padding_and_cache_offsets_match_the_formula():
    g = torch.Generator().manual_seed(0)
    for q_len, kv_len in ((9, 9), (3, 9), (1, 9)):
        tt = torch.randint(0, 2, (4, kv_len), generator=g)
        pad = torch.rand(4, kv_len, generator=g) > 0.3
        pad[:, -1] = True
        got = _dense("prefix", q_len, kv_len, batch=4, token_type_ids=tt, attention_mask=pad.long())
        assert torch.equal(got, _brute_force(tt, pad, q_len))
        got_causal = _dense("causal", q_len, kv_len, batch=4, attention_mask=pad.long())
        assert torch.equal(got_causal, _brute_force(torch.zeros_like(tt), pad, q_len))


def test_cached_causal_rows_are_the_last_rows_of_the_full_mask():
    full = _dense("causal", 8)
    for q_len in (1, 3):
        assert torch.equal(_dense("causal", q_len, 8), full[:, :, -q_len:])


def test_bidirectional_and_padding():
    assert build_mask("bidirectional", 5) == (None, False)
    pad = torch.tensor([[1, 1, 1, 0, 0]])
    m = _dense("bidirectional", 5, attention_mask=pad)
    assert torch.equal(m[0, 0], pad.bool().expand(5, 5))


def test_fast_path_and_materialised_mask_give_the_same_attention():
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(3, 2, 2, 6, 8, generator=g).unbind(0)
    mask, is_causal = build_mask("causal", 6)
    fast = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    dense = F.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask(mask, is_causal, 2, 6, 6))
    torch.testing.assert_close(fast, dense, atol=1e-6, rtol=0)


def test_matches_transformers_prefix_overlay():
    masking_utils = pytest.importorskip("transformers.masking_utils")
    tt = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0]])
    pad = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]])
    block = torch.where(tt == 1, 0, -1)
    fn = masking_utils.or_masks(masking_utils.causal_mask_function, masking_utils.blockwise_overlay(block))
    ref = masking_utils.sdpa_mask(
        batch_size=3, q_length=6, kv_length=6, mask_function=fn, attention_mask=pad.bool(), allow_is_causal_skip=False
    )
    assert torch.equal(_dense("prefix", 6, batch=3, token_type_ids=tt, attention_mask=pad), ref)


def test_bad_shapes_are_user_errors():
    with pytest.raises(UserError, match="token_type_ids"):
        build_mask("prefix", 4, token_type_ids=torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(UserError, match="mask kind"):
        build_mask("sliding", 4)  # type: ignore[arg-type]
