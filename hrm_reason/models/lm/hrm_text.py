"""HRM-Text: the autoregressive language-model variant of HRM, interchangeable with `transformers`' HrmTextForCausalLM.

Two stacks of pre-norm decoder layers (L fast, H slow) are reused in a nested recurrence (docs/models.md §HRM-Text):

    z_H = embed(ids) * embedding_scale          # the input enters only here ("no_x")
    z_L = z_L_init                              # a frozen vector
    for h in range(H_cycles):
        for l in range(L_cycles):
            z_L = L_module(z_L + z_H)           # under no_grad unless l >= L_cycles - bp[h]
        z_H = H_module(z_H + z_L)               # always with gradient
    logits = lm_head(z_H)                       # untied; z_H is already final-normed by the H stack

Attention is PrefixLM (tokens with token_type_ids == 1 form one bidirectional block, the rest is causal) with a
sigmoid output gate of one value per head per channel, RMSNorm has no scale, the MLP is SwiGLU. Field names, parameter
names (with a "model." prefix for all but lm_head) and numerics follow transformers 5.23, so that
`hrm_text_convert.py` moves weights across unchanged and the logits agree to fp32 rounding.
That checkpoint layout is why this head keeps its own attention, MLP and decoder layer instead of the shared ones
of models/layers.py.

Resolved inconsistencies (docs/models.md §HRM-Text):
- L_bp_cycles is indexed by H-cycle and left-padded with 1s to length H_cycles (transformers 5.23 code), not to
  L_cycles as the doc and the config docstring still say; the default [2] becomes [1, 2].
- The L_bp_cycles no_grad schedule applies in train and eval mode alike, as in transformers (it changes no value).
- num_hidden_layers is the per-stack count on first construction and is rewritten to the number of cache slots
  (num_layers_per_stack * H_cycles * (L_cycles + 1)), exactly as HrmTextConfig does, so configs round-trip.
- Init follows transformers (normal(0, initializer_range) for every Linear and the embedding, z_L_init = 0), not the
  upstream truncated normal; z_L_init is a frozen buffer here (a frozen Parameter in transformers), so it is saved
  and converted but is not counted among the parameters.
- The doc's "per-head" output gate is elementwise, one sigmoid per head per channel, as the transformers code has it.
- Position ids are always past_length + arange(seq), also under padding (transformers' forward does the same).
- vocab_size has no default (every head of this repo gets it from its tokenizer), unlike HrmTextConfig's 151808.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import torch
import torch.nn.functional as F
from einops import rearrange
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn

from hrm_reason.errors import UserError
from hrm_reason.limits import (
    CYCLES,
    EMBEDDING_SCALE,
    EPS,
    HEADS,
    LAYERS,
    POSITIONS,
    STACK_SLOTS,
    TOKEN_ID,
    VOCAB,
    WIDTH,
)
from hrm_reason.models.flops import LMFlops, attention, linear
from hrm_reason.models.layers import RotaryEmbedding, apply_rotary_pos_emb, rms_norm
from hrm_reason.models.lm.head import LMHead, LMOutput
from hrm_reason.models.lm.hrm_text_names import rename_hf_weights
from hrm_reason.models.masks import build_mask
from hrm_reason.models.spec import ModelSpec

ACTIVATIONS = {
    "silu": F.silu,
    "swish": F.silu,
    "gelu": F.gelu,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


class HRMTextConfig(BaseModel):
    """`transformers.HrmTextConfig`'s fields and defaults, plus the registry name."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["hrm_text"] = "hrm_text"
    # Each numeric field bounded in its annotation (hrm_reason/limits.py, each bound with its reason) but bos_token_id
    # and eos_token_id, which nothing reads.
    vocab_size: Annotated[int, VOCAB]
    hidden_size: Annotated[int, WIDTH] = 1536
    intermediate_size: Annotated[int, WIDTH] = 4096
    num_hidden_layers: Annotated[int, STACK_SLOTS] = 16  # per stack when num_layers_per_stack is None (then rewritten)
    num_attention_heads: Annotated[int, HEADS] = 12
    head_dim: Annotated[int, WIDTH] = 128
    hidden_act: Literal["silu", "swish", "gelu", "gelu_pytorch_tanh", "relu"] = "silu"
    max_position_embeddings: Annotated[int, POSITIONS] = 2048
    initializer_range: float = Field(0.02, ge=0.0, le=1.0)
    rms_norm_eps: Annotated[float, EPS] = 1e-6
    use_cache: bool = True
    pad_token_id: Annotated[int, TOKEN_ID] | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    tie_word_embeddings: bool = False
    rope_parameters: dict[str, Any] | None = None  # {"rope_theta": 10000.0, "rope_type": "default"}
    attention_bias: bool = False
    attention_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    mlp_bias: bool = False
    H_cycles: Annotated[int, CYCLES] = 2
    L_cycles: Annotated[int, CYCLES] = 3
    L_bp_cycles: list[int] | None = None  # None -> [2]
    embedding_scale: Annotated[float, EMBEDDING_SCALE] | None = None  # None -> 1 / initializer_range
    prefix_lm: bool = True
    num_layers_per_stack: Annotated[int, LAYERS] | None = None  # set from num_hidden_layers on first construction

    @model_validator(mode="after")
    def _fill_derived(self) -> HRMTextConfig:
        """The same defaulting as HrmTextConfig.__post_init__, so a dumped config reloads to itself."""
        if self.L_bp_cycles is None:
            self.L_bp_cycles = [2]
        if any(b < 0 for b in self.L_bp_cycles):
            raise ValueError(f"L_bp_cycles entries must be >= 0, got {self.L_bp_cycles}")
        if self.embedding_scale is None:
            if self.initializer_range == 0:
                raise ValueError("embedding_scale must be set when initializer_range is 0")
            self.embedding_scale = 1.0 / self.initializer_range
            if (why := EMBEDDING_SCALE.problem(self.embedding_scale)) is not None:
                raise ValueError(f"arch.embedding_scale {self.embedding_scale:g} (1 / arch.initializer_range): {why}")
        if self.num_layers_per_stack is None:
            if (why := LAYERS.problem(self.num_hidden_layers)) is not None:  # one stack's layers, built as given
                raise ValueError(f"arch.num_hidden_layers {self.num_hidden_layers} (layers per stack): {why}")
            self.num_layers_per_stack = self.num_hidden_layers
            self.num_hidden_layers = self.num_layers_per_stack * self.H_cycles * (self.L_cycles + 1)
        if self.rope_parameters is None:
            self.rope_parameters = {"rope_theta": 10000.0, "rope_type": "default"}
        rope_type = self.rope_parameters.get("rope_type", "default")
        if rope_type != "default":
            raise ValueError(f"rope_parameters.rope_type {rope_type!r} is not supported (only 'default')")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        return self

    @property
    def rope_theta(self) -> float:
        return float(self.rope_parameters.get("rope_theta", 10000.0))

    @property
    def L_bp_cycles_padded(self) -> list[int]:
        """bp[h] per H-cycle: transformers 5.23 left-pads with 1s to length H_cycles (docs/models.md §HRM-Text)."""
        raw = list(self.L_bp_cycles)
        return [1] * max(0, self.H_cycles - len(raw)) + raw

    @property
    def num_cache_slots(self) -> int:
        return self.num_layers_per_stack * self.H_cycles * (self.L_cycles + 1)

    def L_grad(self, h: int, l: int) -> bool:
        """Whether the L call (h, l) keeps its graph: only the trailing bp[h] of the L_cycles iterations do."""
        padded = self.L_bp_cycles_padded
        bp = padded[h] if h < len(padded) else 1
        return l >= self.L_cycles - bp


@dataclass
class HRMTextCache:
    """Keys and values for each unique attention invocation ("slot"):
    L call (h, l) -> (h * (L_cycles + 1) + l) * n_layers + layer; H call h -> (h * (L_cycles + 1) + L_cycles) * ... ."""

    num_slots: int
    keys: list[torch.Tensor | None] = field(default_factory=list)
    values: list[torch.Tensor | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.keys = self.keys or [None] * self.num_slots
        self.values = self.values or [None] * self.num_slots

    def seq_len(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[-2]

    def update(self, slot: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this call's k, v (batch, heads, new, head_dim) and return everything seen so far."""
        if self.keys[slot] is not None:
            k = torch.cat([self.keys[slot], k], dim=-2)
            v = torch.cat([self.values[slot], v], dim=-2)
        self.keys[slot], self.values[slot] = k, v
        return k, v


class HRMTextAttention(nn.Module):
    """MHA with RoPE and an elementwise sigmoid output gate: o_proj(sigmoid(x W_G) * attn(x)), one gate value per head
    per channel (Qwen3-Next style), so a head can switch off any of its channels per token."""

    def __init__(self, config: HRMTextConfig) -> None:
        super().__init__()
        d, hd = config.hidden_size, config.num_attention_heads * config.head_dim
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.dropout = config.attention_dropout
        self.q_proj = nn.Linear(d, hd, bias=config.attention_bias)
        self.k_proj = nn.Linear(d, hd, bias=config.attention_bias)
        self.v_proj = nn.Linear(d, hd, bias=config.attention_bias)
        self.o_proj = nn.Linear(hd, d, bias=config.attention_bias)
        self.gate_proj = nn.Linear(d, hd, bias=config.attention_bias)

    def forward(
        self,
        x: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        attn_mask: torch.Tensor | None,
        is_causal: bool,
        cache: HRMTextCache | None,
        slot: int,
    ) -> torch.Tensor:
        split = "b s (h d) -> b h s d"
        q = rearrange(self.q_proj(x), split, d=self.head_dim)
        k = rearrange(self.k_proj(x), split, d=self.head_dim)
        v = rearrange(self.v_proj(x), split, d=self.head_dim)
        q, k = apply_rotary_pos_emb(torch.stack([q, k]), *cos_sin).unbind(0)
        if cache is not None:
            k, v = cache.update(slot, k, v)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, dropout_p=self.dropout if self.training else 0.0
        )
        gate = rearrange(self.gate_proj(x), split, d=self.head_dim)
        return self.o_proj(rearrange(torch.sigmoid(gate) * out, "b h s d -> b s (h d)"))


class HRMTextMLP(nn.Module):
    def __init__(self, config: HRMTextConfig) -> None:
        super().__init__()
        d, i = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(d, i, bias=config.mlp_bias)
        self.up_proj = nn.Linear(d, i, bias=config.mlp_bias)
        self.down_proj = nn.Linear(i, d, bias=config.mlp_bias)
        self.act = ACTIVATIONS[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class HRMTextDecoderLayer(nn.Module):
    """Pre-norm (unlike the post-norm puzzle HRM): x + Attn(norm(x)), then x + MLP(norm(x)); norms have no scale."""

    def __init__(self, config: HRMTextConfig) -> None:
        super().__init__()
        self.eps = config.rms_norm_eps
        self.self_attn = HRMTextAttention(config)
        self.mlp = HRMTextMLP(config)

    def forward(self, x: torch.Tensor, cos_sin, attn_mask, is_causal, cache, slot) -> torch.Tensor:
        x = x + self.self_attn(rms_norm(x, self.eps), cos_sin, attn_mask, is_causal, cache, slot)
        return x + self.mlp(rms_norm(x, self.eps))


class HRMTextStack(nn.Module):
    """One module (f_L or f_H): num_layers_per_stack decoder layers and a final (scale-free) norm, so every stack
    output has unit RMS and z_L + z_H stays bounded however many cycles run."""

    def __init__(self, config: HRMTextConfig) -> None:
        super().__init__()
        self.eps = config.rms_norm_eps
        self.layers = nn.ModuleList(HRMTextDecoderLayer(config) for _ in range(config.num_layers_per_stack))

    def forward(self, x: torch.Tensor, cos_sin, attn_mask, is_causal, cache, slot_offset: int) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x, cos_sin, attn_mask, is_causal, cache, slot_offset + i)
        return rms_norm(x, self.eps)


class HRMText(LMHead):
    """HRM-Text causal LM; parameter names mirror HrmTextForCausalLM minus the "model." prefix. The loss is the plain
    next-token CE."""

    def __init__(self, config: HRMTextConfig, generator: torch.Generator | None = None) -> None:
        super().__init__(config)
        c = config
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.L_module = HRMTextStack(c)
        self.H_module = HRMTextStack(c)
        self.z_L_init = nn.Buffer(torch.zeros(c.hidden_size))  # frozen start of z_L (a trained vector upstream)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.rotary = RotaryEmbedding(c.head_dim, c.max_position_embeddings, c.rope_theta)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """transformers' init: normal(0, initializer_range) for Linear and Embedding weights, zero biases, zero padding
        row; the embedding_scale (1/initializer_range by default) then brings embeddings to unit scale."""
        std = self.config.initializer_range
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, std, generator=generator)
                if getattr(module, "bias", None) is not None:
                    module.bias.zero_()
                if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
        self.z_L_init.zero_()

    def new_cache(self) -> HRMTextCache:
        return HRMTextCache(self.config.num_cache_slots)

    def decode(
        self, input_ids, token_type_ids, labels, cache: HRMTextCache | None, use_cache: bool, attention_mask=None
    ) -> LMOutput:
        """token_type_ids are read only on the first (uncached) call, as in transformers, so decoded tokens are
        causal. attention_mask: optional (batch, past + seq) padding mask (a keyword of forward)."""
        c = self.config
        if use_cache and cache is None:
            cache = self.new_cache()
        past = 0 if cache is None else cache.seq_len()
        q_len = input_ids.shape[1]
        if past + q_len > c.max_position_embeddings:
            raise UserError(
                f"sequence length {past + q_len} exceeds max_position_embeddings ({c.max_position_embeddings})"
            )
        if token_type_ids is not None and token_type_ids.shape != input_ids.shape:
            raise UserError(
                f"token_type_ids shape {tuple(token_type_ids.shape)} != input_ids shape {tuple(input_ids.shape)}"
            )

        if not c.prefix_lm and token_type_ids is not None and bool((token_type_ids != 0).any()):
            raise UserError(  # not passed over: the caller asked for a bidirectional prefix this model does not have
                "hrm_text with prefix_lm false is causal only: token_type_ids must be all 0 (a bidirectional prefix, "
                "hrm generate --prefix, needs a model trained with prefix_lm true)"
            )
        z_H = self.embed_tokens(input_ids) * c.embedding_scale
        use_prefix = c.prefix_lm and token_type_ids is not None and past == 0
        attn_mask, is_causal = build_mask(
            "prefix" if use_prefix else "causal",
            q_len,
            past + q_len,
            token_type_ids=token_type_ids if use_prefix else None,
            attention_mask=attention_mask,
            device=z_H.device,
        )
        cos, sin = self.rotary()
        cos_sin = (cos[past : past + q_len].to(z_H.device), sin[past : past + q_len].to(z_H.device))
        z_L = self.z_L_init.to(z_H.dtype).expand_as(z_H)

        per_h = c.L_cycles + 1
        n = c.num_layers_per_stack
        for h in range(c.H_cycles):
            for l in range(c.L_cycles):
                with torch.set_grad_enabled(torch.is_grad_enabled() and c.L_grad(h, l)):
                    z_L = self.L_module(z_L + z_H, cos_sin, attn_mask, is_causal, cache, (h * per_h + l) * n)
            z_H = self.H_module(z_H + z_L, cos_sin, attn_mask, is_causal, cache, (h * per_h + c.L_cycles) * n)

        return LMOutput(logits=self.lm_head(z_H), past_key_values=cache if use_cache else None)


def hrm_text_flops(config: HRMTextConfig, seq_len: int) -> LMFlops:
    """Per token: H_cycles * (L_cycles + 1) stack applications (q, k, v, gate, o projections, attention, MLP) and the
    head; a backward covers the H applications, the L applications L_bp_cycles keeps, and the head."""
    d, hd = config.hidden_size, config.num_attention_heads * config.head_dim
    layer = 4 * linear(d, hd) + linear(hd, d) + attention(hd, hd, seq_len) + 3 * linear(d, config.intermediate_size)
    stack, head = config.num_layers_per_stack * layer, linear(d, config.vocab_size)
    calls = config.H_cycles * (config.L_cycles + 1)
    with_grad = sum(1 + sum(config.L_grad(h, l) for l in range(config.L_cycles)) for h in range(config.H_cycles))
    forward = calls * stack + head
    return LMFlops(train_step=float(forward + 2 * (with_grad * stack + head)), forward=float(forward))


SPEC = ModelSpec(
    family="lm",
    config=HRMTextConfig,
    model=HRMText,
    flops=hrm_text_flops,
    tiny=dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        head_dim=16,
        H_cycles=2,
        L_cycles=2,
        max_position_embeddings=64,
    ),
    foreign_option="router=fit_error",
    adapter=rename_hf_weights,  # transformers' HrmText tensor names (models/lm/hrm_text_names.py)
)
