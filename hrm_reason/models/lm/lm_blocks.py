"""Pieces shared by HRM-LM and its controls UniTF-LM and Transformer-LM (docs/models.md §HRM-LM): the post-norm
`CausalAttnBlock` with learnable RMSNorm scales, a per-call KV cache and next-token CE.

The block is the HRM-LM paper's Eq. 8: fused W_qkv (d x 3d), W_o, RoPE, a SwiGLU of width exactly 4d, and two
RMSNorms with learnable scales (post-norm), no biases: 16d^2 + 2d parameters.

Cache: every attention *call* that processes a token keeps its own K/V (a recurrent model calls one block many times
per token with different inputs), so a cache is a list of slots filled in call order; HRM-LM uses S*(M+N)+1 of them.
"""

from __future__ import annotations

import contextlib
import math
from typing import Annotated

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from torch import nn

from hrm_reason.errors import UserError
from hrm_reason.limits import ARCH_SEED, EPS, HEADS, INIT_STD, POSITIONS, ROPE_THETA, VOCAB, WIDTH
from hrm_reason.models.layers import Attention, RMSNorm, RotaryEmbedding, SwiGLU
from hrm_reason.models.lm.head import LMHead, LMOutput


def rope_heads(cls: type, num_heads: int, info: ValidationInfo) -> int:
    """A config validator of num_heads: hidden_size splits into num_heads heads of an even size (RoPE)."""
    d = info.data.get("hidden_size")
    if d is not None and (d % num_heads or (d // num_heads) % 2):
        raise ValueError(f"hidden_size {d} must be num_heads ({num_heads}) x an even head size (RoPE)")
    return num_heads


class CausalAttnLMConfig(BaseModel):
    """The fields HRM-LM, UniTF-LM and Transformer-LM share: the CausalAttnBlock's sizes, init, RoPE, seed."""

    model_config = ConfigDict(extra="forbid")

    name: str  # the registry name; each head fixes it
    # Each numeric field bounded in its annotation (hrm_reason/limits.py, each bound with its reason).
    vocab_size: Annotated[int, VOCAB]
    hidden_size: Annotated[int, WIDTH] = Field(256, ge=2)  # d (HRM-LM paper: 4096)
    num_heads: Annotated[int, HEADS] = 4  # h (HRM-LM paper: 16, so d_k = 256)
    init_std: Annotated[float, INIT_STD] = 0.02
    rms_norm_eps: Annotated[float, EPS] = 1e-5
    rope_theta: Annotated[float, ROPE_THETA] = 10000.0
    max_seq_len: Annotated[int, POSITIONS] = 1024  # RoPE table length (context + generated tokens)
    seed: Annotated[int, ARCH_SEED] = 0  # the weight init's generator

    _heads_divide = field_validator("num_heads")(rope_heads)


# --- small modules ------------------------------------------------------------------------------------------------


class KVCache:
    """K/V of every attention call, one slot per call in call order, plus how many tokens they hold.

    Immutable from the caller's view: a forward builds a new cache, so an old one can be reused (e.g. to branch)."""

    def __init__(
        self, keys: list[torch.Tensor] | None = None, values: list[torch.Tensor] | None = None, seq_len: int = 0
    ) -> None:
        self.keys = keys if keys is not None else []
        self.values = values if values is not None else []
        self.seq_len = seq_len

    def __len__(self) -> int:
        return len(self.keys)


class CacheCursor:
    """Walks the slots of `past` during one forward and collects the extended K/V into a new cache."""

    def __init__(self, past: KVCache | None) -> None:
        self.past = past if past is not None else KVCache()
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    @property
    def past_len(self) -> int:
        return self.past.seq_len

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this call's new K/V (B, h, n, d_h) to its slot and return the full K/V to attend over."""
        slot = len(self.keys)
        if self.past.seq_len:
            k = torch.cat((self.past.keys[slot], k), dim=2)
            v = torch.cat((self.past.values[slot], v), dim=2)
        self.keys.append(k)
        self.values.append(v)
        return k, v

    def finish(self, new_tokens: int) -> KVCache:
        return KVCache(self.keys, self.values, self.past.seq_len + new_tokens)


def check_cache(past: KVCache | None, expected_slots: int, head: str) -> None:
    if past is None:
        return
    if not isinstance(past, KVCache):
        raise UserError(f"{head}: past_key_values must be the KVCache this head returned, got {type(past).__name__}")
    if past.seq_len and len(past) != expected_slots:
        raise UserError(
            f"{head}: past_key_values holds {len(past)} attention slots, this config makes {expected_slots}"
        )


def check_causal_only(token_type_ids: torch.Tensor | None, head: str) -> None:
    """HRM-LM, UniTF-LM and Transformer-LM are purely causal; a bidirectional prefix is hrm_text's."""
    if token_type_ids is not None and bool((token_type_ids != 0).any()):
        raise UserError(f"{head}: token_type_ids must be all 0 (causal only); prefix-LM masking is the hrm_text head's")


def rope_slice(
    cos_sin: tuple[torch.Tensor, torch.Tensor], start: int, n: int, max_seq_len: int, head: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables for absolute positions start..start+n-1 (start = tokens already in the cache)."""
    if start + n > max_seq_len:
        raise UserError(
            f"{head}: {start + n} positions exceed max_seq_len={max_seq_len}; raise max_seq_len in the config"
        )
    cos, sin = cos_sin
    return cos[start : start + n], sin[start : start + n]


class CausalLMHead(LMHead):
    """HRM-LM, UniTF-LM and Transformer-LM: causal only, a KVCache with one slot per attention call, RoPE at the
    cache's offset.

    A head implements `run(input_ids, labels, rope, cursor)`: its recurrence from the ids to the LMOutput, given the
    RoPE tables of these positions and the cache cursor (None without a cache).

    The tied embedding and readout, the RoPE tables and the seeded init are built here once: a head builds its own
    modules in `build(config)` (between the embedding and the readout, so state-dict order and the default-init draws
    stay as they were) and draws their weights in `init_weights(generator)`, after the embedding's N(0, init_std)."""

    def __init__(self, config: CausalAttnLMConfig) -> None:
        super().__init__(config)
        d, V = config.hidden_size, config.vocab_size
        with global_rng_untouched():  # throwaway default inits; the real ones come from the seeded generator below
            self.embed_tokens = nn.Embedding(V, d)
            self.build(config)
            self.lm_head = nn.Linear(d, V, bias=False)
        self.lm_head.weight = self.embed_tokens.weight  # weight-tied readout
        self.rotary = RotaryEmbedding(d // config.num_heads, config.max_seq_len, config.rope_theta)
        generator = torch.Generator().manual_seed(config.seed)
        normal_(self.embed_tokens.weight, config.init_std, generator)
        self.init_weights(generator)

    def build(self, config: CausalAttnLMConfig) -> None:
        raise NotImplementedError

    def init_weights(self, generator: torch.Generator) -> None:
        raise NotImplementedError

    def decode(self, input_ids, token_type_ids, labels, past_key_values: KVCache | None, use_cache: bool) -> LMOutput:
        c = self.config
        check_causal_only(token_type_ids, c.name)
        check_cache(past_key_values, c.block_calls, c.name)
        cursor = CacheCursor(past_key_values) if (use_cache or past_key_values is not None) else None
        start = cursor.past_len if cursor is not None else 0
        rope = rope_slice(self.rotary(), start, input_ids.shape[1], c.max_seq_len, c.name)
        out = self.run(input_ids, labels, rope, cursor)
        out.past_key_values = cursor.finish(input_ids.shape[1]) if (cursor is not None and use_cache) else None
        return out


# --- the block ----------------------------------------------------------------------------------------------------


class CausalAttnBlock(nn.Module):
    """Post-norm block (Eq. 8): x' = RMSNorm_g1(x + Attn(x)); x'' = RMSNorm_g2(x' + SwiGLU(x'))."""

    def __init__(self, d: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.attn = Attention(d, num_heads, causal=True)
        self.norm1 = RMSNorm(d, eps)
        self.mlp = SwiGLU(d, 4 * d, up_first=True)
        self.norm2 = RMSNorm(d, eps)

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: CacheCursor | None = None
    ) -> torch.Tensor:
        x = self.norm1(x + self.attn(x, rope, cache))
        return self.norm2(x + self.mlp(x))

    def linear_weights(self) -> list[torch.Tensor]:
        return [
            self.attn.qkv_proj.weight,
            self.attn.o_proj.weight,
            self.mlp.up_gate_proj.weight,
            self.mlp.down_proj.weight,
        ]

    def init_(self, std: float, generator: torch.Generator) -> None:
        """N(0, std) for the matrices, 1 for the norm scales."""
        for w in self.linear_weights():
            normal_(w, std, generator)
        with torch.no_grad():
            self.norm1.weight.fill_(1.0)
            self.norm2.weight.fill_(1.0)


# --- seeded init -------------------------------------------------------------------------------------------------


def width_corrected_std(init_std: float, c: float, applications: int, d: int) -> float:
    """The HRM-LM paper's UniTF init, init_std / sqrt(c * applications * d / 4096): its HRM-LM init (init_std /
    sqrt(M)) at d = 4096 and c = 1, carried to other widths (docs/models.md)."""
    return init_std / math.sqrt(c * applications * d / 4096)


def global_rng_untouched() -> contextlib.AbstractContextManager:
    """Submodule constructors draw throwaway default inits from the global RNG (of the default device); this keeps
    the caller's stream as it was. The real weights then come from a seeded generator (`normal_`)."""
    device = torch.get_default_device()
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


def normal_(tensor: torch.Tensor, std: float, generator: torch.Generator, truncate: float | None = None) -> None:
    """Fill `tensor` with N(0, std^2) (or TN(0, std^2, [-truncate*std, truncate*std])) drawn on the CPU from
    `generator`, so the same seed gives the same weights on every device. Meta tensors (shape-only models, e.g. to
    count parameters at paper sizes) are left as they are."""
    if tensor.is_meta:
        return
    sample = torch.empty(tensor.shape, dtype=torch.float32, device="cpu")
    if truncate is None:
        sample.normal_(0.0, std, generator=generator)
    else:
        nn.init.trunc_normal_(sample, 0.0, std, -truncate * std, truncate * std, generator=generator)
    with torch.no_grad():
        tensor.copy_(sample)
