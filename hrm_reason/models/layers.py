"""Building blocks of every model: init, RMSNorm, rotary embedding, attention (SDPA), SwiGLU.

Weights are kept in fp32 and cast to the activation dtype at use (as the original HRM does), so the same module runs
in fp32 on a CPU and in bf16 on a GPU without autocast. Only hrm_text has its own copies of these (its weight layout
is `transformers`' HrmText, see models/lm/hrm_text.py).
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from hrm_reason.models.masks import build_mask


def trunc_normal_init_(
    tensor: torch.Tensor,
    std: float = 1.0,
    lower: float = -2.0,
    upper: float = 2.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Truncated normal whose *actual* std equals `std` (JAX-style); torch's trunc_normal_ gives a smaller std."""
    with torch.no_grad():
        if std == 0:
            return tensor.zero_()
        sqrt2 = math.sqrt(2)
        a, b = math.erf(lower / sqrt2), math.erf(upper / sqrt2)
        z = (b - a) / 2
        c = (2 * math.pi) ** -0.5
        pdf_u, pdf_l = c * math.exp(-0.5 * upper**2), c * math.exp(-0.5 * lower**2)
        comp_std = std / math.sqrt(1 - (upper * pdf_u - lower * pdf_l) / z - ((pdf_u - pdf_l) / z) ** 2)
        sample = torch.empty(tensor.shape, dtype=torch.float32, device=tensor.device).uniform_(
            a, b, generator=generator
        )
        sample.erfinv_().mul_(sqrt2 * comp_std).clip_(lower * comp_std, upper * comp_std)
        return tensor.copy_(sample)


def wide(x: torch.Tensor) -> torch.Tensor:
    """x in fp32, or in fp64 if it already is (bf16/fp16 reductions lose too much; fp64 serves exactness tests)."""
    return x if x.dtype == torch.float64 else x.float()


def rms_norm(x: torch.Tensor, eps: float, weight: torch.Tensor | None = None) -> torch.Tensor:
    """RMSNorm computed in fp32 (PyTorch's fused kernel: a third fewer passes over memory on CPU); scale-free (the
    puzzle models) unless a per-channel `weight` is given."""
    return F.rms_norm(wide(x), (x.shape[-1],), None if weight is None else wide(weight), eps).to(x.dtype)


class RMSNorm(nn.Module):
    """RMSNorm with a learnable per-channel scale (the LM heads' blocks), computed in fp32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.eps, self.weight)


class CastedLinear(nn.Module):
    """Linear layer with truncated LeCun-normal init whose weights are cast to the input dtype."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(trunc_normal_init_(torch.empty(out_features, in_features), std=in_features**-0.5))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), bias)


class CastedEmbedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, init_std: float, cast_to: torch.dtype) -> None:
        super().__init__()
        self.cast_to = cast_to
        self.weight = nn.Parameter(trunc_normal_init_(torch.empty(num_embeddings, embedding_dim), std=init_std))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight.to(self.cast_to))


class RotaryEmbedding(nn.Module):
    """cos/sin tables of the rotate-half RoPE convention, fp32, not saved in checkpoints.

    `sin` is stored with the sign of rotate-half folded in (-sin on the first half), so that
    rotate_half(x) * sin == roll(x, D/2) * sin_signed: one copy instead of a negation and a concatenation.
    """

    def __init__(self, dim: int, max_position_embeddings: int, base: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        freqs = torch.outer(torch.arange(max_position_embeddings, dtype=torch.float32), inv_freq)
        self.cos = nn.Buffer(torch.cat((freqs, freqs), dim=-1).cos(), persistent=False)
        self.sin_signed = nn.Buffer(torch.cat((-freqs.sin(), freqs.sin()), dim=-1), persistent=False)

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos, self.sin_signed


def apply_rotary_pos_emb(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin for x [..., S, D], in fp32, cast back (q and k can go through in one call)."""
    dtype = x.dtype
    x = x.float()
    return torch.addcmul(x * cos, torch.roll(x, x.shape[-1] // 2, dims=-1), sin_signed).to(dtype)


class KVSlot(Protocol):
    """One attention call's place in a KV cache (models/lm/lm_blocks.CacheCursor)."""

    @property
    def past_len(self) -> int: ...

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...


class Attention(nn.Module):
    """Multi-head attention with one fused, bias-free QKV projection, through PyTorch SDPA; RoPE on q and k when
    `cos_sin` is given. Causal attention can extend a KV cache (the LM heads), bidirectional attention cannot."""

    def __init__(self, hidden_size: int, num_heads: int, causal: bool = False) -> None:
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.causal = causal
        self.qkv_proj = CastedLinear(hidden_size, 3 * hidden_size, bias=False)
        self.o_proj = CastedLinear(hidden_size, hidden_size, bias=False)

    def forward(
        self,
        hidden_states: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor] | None,
        cache: KVSlot | None = None,
    ) -> torch.Tensor:
        qkv = rearrange(self.qkv_proj(hidden_states), "b s (n h d) -> n b h s d", n=3, h=self.num_heads)
        if cos_sin is not None:
            q, k = apply_rotary_pos_emb(qkv[:2], *cos_sin).unbind(0)
            v = qkv[2]
        else:
            q, k, v = qkv.unbind(0)
        past = 0
        if cache is not None:
            past = cache.past_len
            k, v = cache.extend(k, v)
        if self.causal:  # new query i sits at absolute position past + i
            mask, is_causal = build_mask("causal", q.shape[2], past + q.shape[2], device=q.device)
        else:
            mask, is_causal = None, False
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        return self.o_proj(rearrange(out, "b h s d -> b s (h d)"))


def swiglu_intermediate_size(hidden_size: int, expansion: float) -> int:
    """round(expansion * hidden * 2/3), rounded up to a multiple of 256, as the original."""
    inter = round(expansion * hidden_size * 2 / 3)
    return -(inter // -256) * 256


class SwiGLU(nn.Module):
    """down(SiLU(x W_gate) * x W_up), the gate and up matrices fused in one projection.

    `up_first`: the HRM-LM heads' layout, [W_up; W_gate] stored as `up_gate_proj` (their checkpoints keep their
    weight names); otherwise [W_gate; W_up] as `gate_up_proj` (the original HRM's names)."""

    def __init__(self, hidden_size: int, intermediate_size: int, up_first: bool = False) -> None:
        super().__init__()
        self.up_first = up_first
        fused = CastedLinear(hidden_size, 2 * intermediate_size, bias=False)
        if up_first:
            self.up_gate_proj = fused
        else:
            self.gate_up_proj = fused
        self.down_proj = CastedLinear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.up_first:
            up, gate = self.up_gate_proj(x).chunk(2, dim=-1)
        else:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)
