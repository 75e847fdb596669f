"""Attention masks for PyTorch SDPA, shared by the puzzle model and the language-model heads.

One function, `build_mask`, turns a mask *kind* plus optional per-token inputs into what
`F.scaled_dot_product_attention` takes: a boolean `attn_mask` of shape (batch, 1, q_len, kv_len), True where a query may
attend to a key, or `None` with an `is_causal` flag when no mask needs to be materialised (the fast path, which lets
SDPA pick its fused kernels).

Kinds:
- "bidirectional": every query sees every key (the puzzle HRM).
- "causal": query i sees keys j <= i (absolute positions; with a KV cache the queries are the *last* q_len positions).
- "prefix": PrefixLM, as `transformers`' HrmText builds it: all tokens with token_type_ids == 1 form ONE bidirectional
  block (even when they are not contiguous), every other position is causal:
  allowed(b, i, j) = [j <= i] or [tt[b, i] == 1 and tt[b, j] == 1].

An optional 2-D padding `attention_mask` (1 = real token) over the keys is ANDed in. A query row with no allowed key
(a left-padding position under a causal mask) is left empty: torch SDPA returns zeros there, as in `transformers`.
"""

from __future__ import annotations

from typing import Literal

import torch

from hrm_reason.errors import UserError

MaskKind = Literal["bidirectional", "causal", "prefix"]


def build_mask(
    kind: MaskKind,
    q_len: int,
    kv_len: int | None = None,
    *,
    token_type_ids: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor | None, bool]:
    """Return `(attn_mask, is_causal)` for SDPA.

    q_len: number of queries, which sit at the last q_len of the kv_len positions (kv_len defaults to q_len; with a KV
    cache of P tokens, kv_len = P + q_len). token_type_ids: (batch, kv_len), only read for kind="prefix".
    attention_mask: (batch, kv_len) padding mask over keys, 1/True = real token.
    """
    kv_len = q_len if kv_len is None else kv_len
    if kv_len < q_len:
        raise ValueError(f"kv_len ({kv_len}) must be >= q_len ({q_len})")
    if kind not in ("bidirectional", "causal", "prefix"):
        raise UserError(f"mask kind must be 'bidirectional', 'causal' or 'prefix', got {kind!r}")
    for name, t in (("token_type_ids", token_type_ids), ("attention_mask", attention_mask)):
        if t is not None and (t.ndim != 2 or t.shape[1] != kv_len):
            raise UserError(f"{name} must have shape (batch, {kv_len}), got {tuple(t.shape)}")
    if device is None:
        ref = attention_mask if attention_mask is not None else token_type_ids
        device = ref.device if ref is not None else "cpu"
    past = kv_len - q_len

    padding = None if attention_mask is None or bool(attention_mask.bool().all()) else attention_mask.bool()
    prefix = None
    if kind == "prefix" and token_type_ids is not None and bool((token_type_ids == 1).any()):
        prefix = token_type_ids == 1

    if padding is None and prefix is None:
        if kind == "bidirectional":
            return None, False
        # Causal: SDPA's is_causal is top-left aligned, right only when queries and keys coincide; one query
        # (cached decoding) sees every key anyway.
        if q_len == kv_len:
            return None, True
        if q_len == 1:
            return None, False

    q_pos = torch.arange(past, kv_len, device=device)
    k_pos = torch.arange(kv_len, device=device)
    if kind == "bidirectional":
        mask = torch.ones(1, 1, q_len, kv_len, dtype=torch.bool, device=device)
    else:
        mask = (k_pos[None, :] <= q_pos[:, None])[None, None]  # (1, 1, q, kv)
    if prefix is not None:
        block = prefix[:, past:, None] & prefix[:, None, :]  # (b, q, kv): both ends in the prefix block
        mask = mask | block[:, None]
    if padding is not None:
        mask = mask & padding[:, None, None, :]
    batch = next((t.shape[0] for t in (attention_mask, token_type_ids) if t is not None), 1)
    return mask.expand(batch, 1, q_len, kv_len), False
