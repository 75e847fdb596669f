"""HAM-LM: a stack of Hybrid Associative Memory layers (the HAM paper; docs/models.md §HAM).

Each HAM layer runs two memories on the same shared q/k/v projections. A Gated DeltaNet recurrence (the RNN path)
reads every token. Softmax attention (the KV path) keeps only the tokens the RNN predicts badly: those whose routing
score e_t reaches the threshold tau. The score is either the RNN's cosine prediction error (min over RNN heads, so a
token is kept only when every head is surprised) or a learned input router. A synthetic-gradient controller moves
tau so that the KV-cache fraction rho_KV reaches a target; the LM trainer runs it through `post_step()`. The
recurrence is pure PyTorch (gated_delta.py); `flash-linear-attention` is an optional GPU extra, used only if
installed and asked for.

Choices where the paper is silent or inconsistent (one line each):
- tau = s * sigmoid(p_tau), with s = 2 for fit_error and s = 1 for learned routers; the appendix's "tau = sigmoid(p_tau)
  in (0, 1)" contradicts its own scale factor s.
- The synthetic-gradient controller uses gain gamma = 1 and clip c = 1, which the paper leaves open (config fields).
- threshold_mode "global" uses one p_tau per layer, all driven by the global gap from the same init, so they stay
  equal: this is the paper's single global threshold, counted per layer as in its parameter table. "per_layer"
  drives each layer's p_tau by that layer's own gap.
- The threshold's AdamW (lr 2.5e-4, betas (0.9, 0.999), no weight decay) is written out by hand on buffers, so its
  state lives in the checkpoint. p_tau has requires_grad=False: the gradient is injected by hand, never by autograd.
- fit_error uses the RNN-path (post-conv, post-norm) k and v, computed inside the recurrence before the write.
- SiLU follows both depthwise causal convolutions (the Gated DeltaNet convention); the paper does not say.
- RNN-path q/k norms: the table's per-channel weights scale q/k before a per-head L2 normalisation, so |k| = 1 holds
  exactly (delta-rule stability, beta |k|^2 <= 2). RNN-path v and all KV-path q/k/v use per-head RMSNorm with a
  full-width weight. This keeps the table's 2 d_QK + d_V norm parameters per path.
- The learned router's score scales v^KV after the v norm (a norm placed after the scaling would cancel it).
- EDA averages with the previous layer's already-averaged score (a recursion across depth), gamma_l = sigmoid(logit),
  logit init 0. The first layer has no gamma. EDA is only offered for learned routers: fit_error scores carry no
  gradient, so gamma would never learn.
- The deep router is Linear(d, 256)-GELU-Linear(256, 256)-GELU-Linear(256, 1) with biases, then a sigmoid. Only the
  shallow router (d weights, no bias) is in the paper's parameter table.
- Init follows Qwen3-Next: A ~ U(0.01, 16), A_log = log A, dt_bias = 1. Linears use truncated LeCun normal.
- SwiGLU width: the paper's FFN table has d_int = (2/3) r d with r = 15/7, i.e. (10/7) d = 2560 at d = 1792, which
  reproduces its 805M total. (15/7) d = 3840, read elsewhere,; that would give 970M, so it is not used.
- rho_KV counts every position as a token; the LM heads take no padding mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch
import torch.distributed as dist
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn

from hrm_reason.errors import UserError
from hrm_reason.limits import (
    CHUNK,
    CONV,
    EPS,
    KV_SHARE,
    LAYERS,
    POSITIONS,
    ROPE_THETA,
    THRESHOLD_CONTROL,
    THRESHOLD_LR,
    VOCAB,
    WIDTH,
)
from hrm_reason.models.flops import LMFlops, attention, linear, swiglu
from hrm_reason.models.layers import CastedLinear, RMSNorm, RotaryEmbedding, SwiGLU, trunc_normal_init_, wide
from hrm_reason.models.lm.gated_delta import gated_delta_rule
from hrm_reason.models.lm.head import LMHead, LMOutput
from hrm_reason.models.spec import ModelSpec


class HAMLMConfig(BaseModel):
    """HAM-LM sizes. The defaults are a small CPU model that keeps the paper's ratios where integers allow.

    The paper uses d = 1792, d_QK = 1280, d_V = 1920, RNN heads 256/384, KV heads 128/192, SwiGLU 2560, 24 layers.
    """

    model_config = ConfigDict(extra="forbid")

    name: Literal["ham_lm"] = "ham_lm"
    # Each numeric field bounded in its annotation (hrm_reason/limits.py, each bound with its reason) but tau_init (a
    # threshold, checked below) and threshold_freeze_steps (a span of steps: past the run's length tau never moves).
    vocab_size: Annotated[int, VOCAB]
    hidden_size: Annotated[int, WIDTH] = 128
    num_layers: Annotated[int, LAYERS] = 4
    qk_dim: Annotated[int, WIDTH] = 96  # d_QK, shared by both paths (paper: 5/7 d)
    v_dim: Annotated[int, WIDTH] = 144  # d_V (paper: 15/14 d)
    rnn_head_qk_dim: Annotated[int, WIDTH] = 48  # paper 256
    rnn_head_v_dim: Annotated[int, WIDTH] = 72  # paper 384
    kv_head_qk_dim: Annotated[int, WIDTH] = 24  # paper 128
    kv_head_v_dim: Annotated[int, WIDTH] = 36  # paper 192
    # SwiGLU width d_int; None -> round(10/7 d) (expansion r = 15/7 times 2/3)
    intermediate_size: Annotated[int, WIDTH] | None = None
    conv_size: Annotated[int, CONV] = 4
    max_position_embeddings: Annotated[int, POSITIONS] = 4096
    rope_theta: Annotated[float, ROPE_THETA] = 500000.0
    rms_norm_eps: Annotated[float, EPS] = 1e-6
    # Routing.
    router: Literal["fit_error", "input_shallow", "input_deep"] = "fit_error"
    router_hidden: Annotated[int, WIDTH] = 256
    eda: bool = False
    # Threshold tau and its controller.
    threshold_mode: Literal["fixed", "global", "per_layer"] = "global"
    tau_init: float | None = None  # None -> s/2 (p_tau = 0); "fixed" accepts any value (<= 0: all tokens; > s: none)
    kv_target: Annotated[float, KV_SHARE] = 0.5  # f_target, the rho_KV the controller steers to
    threshold_lr: Annotated[float, THRESHOLD_LR] = 2.5e-4
    threshold_betas: tuple[float, float] = (0.9, 0.999)
    threshold_eps: Annotated[float, EPS] = 1e-8
    threshold_gain: Annotated[float, THRESHOLD_CONTROL] = 1.0  # gamma
    threshold_clip: Annotated[float, THRESHOLD_CONTROL] = 1.0  # c
    threshold_freeze_steps: int = Field(0, ge=0)  # the paper freezes p_tau for the first 20k steps
    # Recurrence backend.
    recurrence: Literal["chunk", "sequential", "fla"] = "chunk"
    chunk_size: Annotated[int, CHUNK] = 64

    @model_validator(mode="after")
    def _check(self) -> HAMLMConfig:
        for path in ("rnn", "kv"):
            dk, dv = getattr(self, f"{path}_head_qk_dim"), getattr(self, f"{path}_head_v_dim")
            if self.qk_dim % dk or self.v_dim % dv or self.qk_dim // dk != self.v_dim // dv:
                raise UserError(
                    f"ham_lm: qk_dim/{path}_head_qk_dim and v_dim/{path}_head_v_dim must be equal whole head counts, "
                    f"got {self.qk_dim}/{dk} and {self.v_dim}/{dv}"
                )
        if self.kv_head_qk_dim % 2:
            raise UserError(f"ham_lm: kv_head_qk_dim must be even for RoPE, got {self.kv_head_qk_dim}")
        s = self.score_scale
        if self.tau_init is not None and self.threshold_mode != "fixed" and not 0.0 < self.tau_init < s:
            raise UserError(
                f"ham_lm: a learnable tau_init must lie in (0, {s:g}) for router {self.router}, got {self.tau_init}"
            )
        if self.eda and self.router == "fit_error":
            raise UserError(
                "ham_lm: eda needs a learned router (router input_shallow or input_deep): "
                "fit_error scores carry no gradient"
            )
        if self.recurrence == "fla" and self.router == "fit_error":
            raise UserError(
                "ham_lm: recurrence 'fla' cannot compute the fit error; "
                "use router input_shallow/input_deep or recurrence 'chunk'"
            )
        return self

    @property
    def score_scale(self) -> float:
        """s: the range of the routing score (cosine distance lies in [0, 2], a sigmoid router in (0, 1))."""
        return 2.0 if self.router == "fit_error" else 1.0

    @property
    def num_rnn_heads(self) -> int:
        return self.qk_dim // self.rnn_head_qk_dim

    @property
    def num_kv_heads(self) -> int:
        return self.qk_dim // self.kv_head_qk_dim

    @property
    def ffn_size(self) -> int:
        return self.intermediate_size if self.intermediate_size is not None else round(10 * self.hidden_size / 7)


# ----------------------------------------------------------------------------------------------------------------------
# Pieces


def rms_norm_heads(x: torch.Tensor, weight: torch.Tensor, head_dim: int, eps: float) -> torch.Tensor:
    """RMSNorm over each head's channels of x [..., h * head_dim], in fp32 or wider.

    weight is [head_dim] (shared by the heads) or [h * head_dim] (one per channel)."""
    x = F.rms_norm(wide(x).unflatten(-1, (-1, head_dim)), (head_dim,), eps=eps)
    w = wide(weight)
    return (x * (w if w.numel() == head_dim else w.view(-1, head_dim))).flatten(-2)


def l2_norm_heads(x: torch.Tensor, weight: torch.Tensor, head_dim: int, eps: float) -> torch.Tensor:
    """Per-head L2 normalisation of (weight * x), so every head's vector has unit length."""
    x = (wide(x) * wide(weight)).unflatten(-1, (-1, head_dim))
    return F.normalize(x, dim=-1, eps=eps).flatten(-2)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """RoPE (rotate-half convention of layers.RotaryEmbedding) on x [..., T, D], in fp32 or wider."""
    x = wide(x)
    return x * cos.to(x.dtype) + torch.roll(x, x.shape[-1] // 2, dims=-1) * sin_signed.to(x.dtype)


def sparse_causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    selected: torch.Tensor,
    past_keys: torch.Tensor | None = None,
    past_values: torch.Tensor | None = None,
    past_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Softmax attention of q [B, h, T, d_k] over the *selected* keys at positions <= its own.

    selected [B, T] marks the new tokens kept in the KV set; an unselected token does not see itself. Cached keys
    (past_*, all earlier than the new queries, past_valid [B, N]) are visible where valid. A query with no visible key
    gets 0: such rows are given one dummy key to keep SDPA finite, then zeroed (no NaN in the forward or backward).
    """
    B, _, T, _ = q.shape
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    mask = causal[None] & selected[:, None, :]  # [B, T(query), T(key)]
    if past_keys is not None and past_keys.shape[2] > 0:
        mask = torch.cat([past_valid[:, None, :].expand(B, T, -1), mask], dim=-1)
        k = torch.cat([past_keys, k], dim=2)
        v = torch.cat([past_values, v], dim=2)
    has_key = mask.any(-1)  # [B, T]
    safe = mask | ~has_key[..., None]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe[:, None])
    return out * has_key[:, None, :, None].to(out.dtype)


def pack_selected(
    keys: torch.Tensor, values: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Move each sequence's valid cache entries to the front, in order, and drop columns no sequence uses."""
    n = int(valid.sum(-1).max()) if valid.numel() else 0
    order = torch.argsort((~valid).int(), dim=-1, stable=True)[:, :n]
    idx_k = order[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[-1])
    idx_v = order[:, None, :, None].expand(-1, values.shape[1], -1, values.shape[-1])
    return keys.gather(2, idx_k), values.gather(2, idx_v), valid.gather(1, order)


@dataclass
class HAMLayerCache:
    """Decoding state of one HAM layer."""

    conv_state: torch.Tensor  # [B, d_conv - 1, 2 d_QK + d_V]: the last pre-conv q/k/v (both paths convolve them)
    rnn_state: torch.Tensor  # [B, h_RNN, d_k, d_v]
    kv_keys: torch.Tensor  # [B, h_KV, N, d_k]: rotated keys of the selected tokens only, packed to the front
    kv_values: torch.Tensor  # [B, h_KV, N, d_v]
    kv_valid: torch.Tensor  # [B, N] bool (sequences of a batch keep different numbers of tokens)


@dataclass
class HAMCache:
    layers: list[HAMLayerCache]
    seen_tokens: int


@dataclass
class HAMPaths:
    """Intermediate results of one mixer call (tests compare them with independent computations)."""

    o_rnn: torch.Tensor  # [B, h_RNN, T, d_v]
    o_kv: torch.Tensor  # [B, h_KV, T, d_v]
    q_kv: torch.Tensor  # [B, h_KV, T, d_k] after norm and RoPE
    k_kv: torch.Tensor
    v_kv: torch.Tensor  # after the router scaling (learned routers)
    score: torch.Tensor  # [B, T] aggregated routing score (after EDA)
    selected: torch.Tensor  # [B, T] bool
    cache: HAMLayerCache | None


# ----------------------------------------------------------------------------------------------------------------------
# HAM layer


class HAMMixer(nn.Module):
    """One HAM sequence mixer (Algorithm "HAM Layer Forward")."""

    def __init__(self, config: HAMLMConfig, layer_idx: int) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        d, dqk, dv = config.hidden_size, config.qk_dim, config.v_dim
        h_rnn, h_kv = config.num_rnn_heads, config.num_kv_heads
        conv_channels = 2 * dqk + dv
        # Shared projections, then one depthwise causal convolution per path.
        self.q_proj, self.k_proj, self.v_proj = CastedLinear(d, dqk), CastedLinear(d, dqk), CastedLinear(d, dv)
        bound = config.conv_size**-0.5
        self.conv_rnn = nn.Parameter(torch.empty(conv_channels, 1, config.conv_size).uniform_(-bound, bound))
        self.conv_kv = nn.Parameter(torch.empty(conv_channels, 1, config.conv_size).uniform_(-bound, bound))
        # Per-path q/k/v norm weights (2 d_QK + d_V each).
        self.rnn_qkv_norm = nn.Parameter(torch.ones(conv_channels))
        self.kv_qkv_norm = nn.Parameter(torch.ones(conv_channels))
        # Gated DeltaNet scalars.
        self.a_proj, self.b_proj = CastedLinear(d, h_rnn), CastedLinear(d, h_rnn)
        self.A_log = nn.Parameter(torch.empty(h_rnn).uniform_(0.01, 16.0).log())
        self.dt_bias = nn.Parameter(torch.ones(h_rnn))
        # Token selection.
        if config.router == "input_shallow":
            self.router = CastedLinear(d, 1)
        elif config.router == "input_deep":
            hid = config.router_hidden
            self.router = nn.Sequential(
                CastedLinear(d, hid, bias=True),
                nn.GELU(),
                CastedLinear(hid, hid, bias=True),
                nn.GELU(),
                CastedLinear(hid, 1, bias=True),
            )
        else:
            self.router = None
        self.eda_logit = nn.Parameter(torch.zeros(())) if config.eda and layer_idx > 0 else None
        s = config.score_scale
        if config.threshold_mode == "fixed":
            self.register_buffer("tau_fixed", torch.tensor(s / 2 if config.tau_init is None else config.tau_init))
        else:
            p0 = 0.0 if config.tau_init is None else math.log(config.tau_init / (s - config.tau_init))
            self.p_tau = nn.Parameter(torch.tensor(p0), requires_grad=False)
            self.register_buffer("tau_exp_avg", torch.zeros(()))
            self.register_buffer("tau_exp_avg_sq", torch.zeros(()))
            self.register_buffer("tau_adam_steps", torch.zeros((), dtype=torch.long))
        # Output: gated norm on the RNN path, norm on the KV path, independent per-head sigmoid gates.
        self.rnn_out_norm = nn.Parameter(torch.ones(config.rnn_head_v_dim))
        self.rnn_out_gate = CastedLinear(d, dv)
        self.kv_out_norm = nn.Parameter(torch.ones(config.kv_head_v_dim))
        self.rnn_gate, self.kv_gate = CastedLinear(d, h_rnn), CastedLinear(d, h_kv)
        self.o_proj = CastedLinear(dv, d)

    def tau(self) -> torch.Tensor:
        if self.config.threshold_mode == "fixed":
            return self.tau_fixed
        return self.config.score_scale * torch.sigmoid(self.p_tau)

    @torch.no_grad()
    def threshold_step(self, grad: float) -> None:
        """p_tau.grad = grad, then one AdamW step (weight decay 0) on p_tau, written out on buffers."""
        c = self.config
        b1, b2 = c.threshold_betas
        self.tau_adam_steps += 1
        t = int(self.tau_adam_steps)
        self.tau_exp_avg.mul_(b1).add_((1 - b1) * grad)
        self.tau_exp_avg_sq.mul_(b2).add_((1 - b2) * grad * grad)
        denom = self.tau_exp_avg_sq.sqrt() / math.sqrt(1 - b2**t) + c.threshold_eps
        self.p_tau.sub_(c.threshold_lr / (1 - b1**t) * self.tau_exp_avg / denom)

    def _conv(self, qkv: torch.Tensor, past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Both paths' causal depthwise conv + SiLU of qkv [B, T, C], continuing from the last d_conv - 1 inputs."""
        x = torch.cat([past.to(qkv.dtype), qkv], dim=1)
        xt = x.transpose(1, 2)
        w_rnn, w_kv = self.conv_rnn.to(qkv.dtype), self.conv_kv.to(qkv.dtype)
        rnn = F.silu(F.conv1d(xt, w_rnn, groups=xt.shape[1])).transpose(1, 2)
        kv = F.silu(F.conv1d(xt, w_kv, groups=xt.shape[1])).transpose(1, 2)
        return rnn, kv, x[:, x.shape[1] - (self.config.conv_size - 1) :]

    def paths(
        self,
        x: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        prev_score: torch.Tensor | None,
        cache: HAMLayerCache | None = None,
        use_cache: bool = False,
    ) -> HAMPaths:
        c = self.config
        B, T, _ = x.shape
        dqk, eps = c.qk_dim, c.rms_norm_eps
        h_rnn, h_kv = c.num_rnn_heads, c.num_kv_heads
        qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)
        past_conv = cache.conv_state if cache is not None else qkv.new_zeros(B, c.conv_size - 1, qkv.shape[-1])
        rnn, kv, conv_state = self._conv(qkv, past_conv)

        # RNN path: Gated DeltaNet with the fit error.
        w = self.rnn_qkv_norm
        q_r = l2_norm_heads(rnn[..., :dqk], w[:dqk], c.rnn_head_qk_dim, eps)
        k_r = l2_norm_heads(rnn[..., dqk : 2 * dqk], w[dqk : 2 * dqk], c.rnn_head_qk_dim, eps)
        v_r = rms_norm_heads(rnn[..., 2 * dqk :], w[2 * dqk :], c.rnn_head_v_dim, eps)
        q_r, k_r, v_r = (t.unflatten(-1, (h_rnn, -1)).transpose(1, 2) for t in (q_r, k_r, v_r))
        beta = torch.sigmoid(wide(self.b_proj(x))).transpose(1, 2)
        g = (-wide(self.A_log).exp() * F.softplus(wide(self.a_proj(x)) + wide(self.dt_bias))).transpose(1, 2)
        state = cache.rnn_state if cache is not None else None
        recurrence = "sequential" if c.recurrence == "chunk" and T == 1 else c.recurrence  # one token: the plain loop
        o_rnn, new_state, err = gated_delta_rule(
            q_r, k_r, v_r, g, beta, c.rnn_head_qk_dim**-0.5, state, c.chunk_size, recurrence
        )

        # Routing score and selection (one decision per token, shared by all KV heads).
        if self.router is None:
            score = err.min(dim=1).values  # [B, T]; no gradient
        else:
            with torch.autocast(x.device.type, enabled=False):  # the router is always evaluated in fp32
                score = torch.sigmoid(self.router(wide(x)).squeeze(-1))
        if self.eda_logit is not None and prev_score is not None:
            gamma = torch.sigmoid(wide(self.eda_logit))
            score = gamma * score + (1 - gamma) * prev_score
        selected = score.detach() >= self.tau().detach()

        # KV path: sparse causal softmax attention over the selected tokens.
        w = self.kv_qkv_norm
        q_k = rms_norm_heads(kv[..., :dqk], w[:dqk], c.kv_head_qk_dim, eps)
        k_k = rms_norm_heads(kv[..., dqk : 2 * dqk], w[dqk : 2 * dqk], c.kv_head_qk_dim, eps)
        v_k = rms_norm_heads(kv[..., 2 * dqk :], w[2 * dqk :], c.kv_head_v_dim, eps)
        q_k, k_k, v_k = (t.unflatten(-1, (h_kv, -1)).transpose(1, 2) for t in (q_k, k_k, v_k))
        q_k, k_k = (rotate(t, *cos_sin).to(x.dtype) for t in (q_k, k_k))
        v_k = v_k.to(x.dtype)
        if self.router is not None:
            v_k = v_k * score[:, None, :, None].to(v_k.dtype)  # the router learns through this scaling
        past = (cache.kv_keys, cache.kv_values, cache.kv_valid) if cache is not None else (None, None, None)
        o_kv = sparse_causal_attention(q_k, k_k, v_k, selected, *past)

        new_cache = None
        if use_cache:
            keys, values, valid = k_k.detach(), v_k.detach(), selected
            if cache is not None:
                keys = torch.cat([cache.kv_keys, keys], dim=2)
                values = torch.cat([cache.kv_values, values], dim=2)
                valid = torch.cat([cache.kv_valid, valid], dim=1)
            keys, values, valid = pack_selected(keys, values, valid)
            new_cache = HAMLayerCache(conv_state.detach(), new_state.detach(), keys, values, valid)
        return HAMPaths(o_rnn.to(x.dtype), o_kv.to(x.dtype), q_k, k_k, v_k, score, selected, new_cache)

    def combine(self, x: torch.Tensor, p: HAMPaths) -> torch.Tensor:
        """O = W_o (concat_h(g_RNN * norm(o_RNN) * SiLU(x W_og)) + concat_h(g_KV * norm(o_KV)))."""
        c = self.config
        o_rnn = p.o_rnn.transpose(1, 2).flatten(-2)  # [B, T, d_V]
        o_kv = p.o_kv.transpose(1, 2).flatten(-2)
        o_rnn = rms_norm_heads(o_rnn, self.rnn_out_norm, c.rnn_head_v_dim, c.rms_norm_eps).to(x.dtype) * F.silu(
            self.rnn_out_gate(x)
        )
        o_kv = rms_norm_heads(o_kv, self.kv_out_norm, c.kv_head_v_dim, c.rms_norm_eps).to(x.dtype)
        g_rnn = torch.sigmoid(self.rnn_gate(x)).repeat_interleave(c.rnn_head_v_dim, dim=-1)
        g_kv = torch.sigmoid(self.kv_gate(x)).repeat_interleave(c.kv_head_v_dim, dim=-1)
        return self.o_proj(g_rnn * o_rnn + g_kv * o_kv)

    def forward(self, x: torch.Tensor, *paths_args: Any) -> tuple[torch.Tensor, HAMPaths]:
        """combine(x, paths(x, ...)) and the paths; the arguments after x are `paths`'."""
        p = self.paths(x, *paths_args)
        return self.combine(x, p), p


class HAMBlock(nn.Module):
    """Pre-norm block: x + HAM(norm(x)), then x + SwiGLU(norm(x))."""

    def __init__(self, config: HAMLMConfig, layer_idx: int) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mixer = HAMMixer(config, layer_idx)
        self.mlp_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = SwiGLU(config.hidden_size, config.ffn_size)

    def forward(self, x: torch.Tensor, *paths_args: Any) -> tuple[torch.Tensor, HAMPaths]:
        """The arguments after x are `HAMMixer.paths`'; returns the block output and the mixer's paths."""
        out, paths = self.mixer(self.attn_norm(x), *paths_args)
        x = x + out
        return x + self.mlp(self.mlp_norm(x)), paths


# ----------------------------------------------------------------------------------------------------------------------
# The LM


class HAMLM(LMHead):
    """Embedding, HAM blocks, final norm, untied LM head. Causal only: token_type_ids must be all 0. The loss is the
    plain next-token CE: HAM has no auxiliary loss (tau is trained by the controller, not by backprop)."""

    def __init__(self, config: HAMLMConfig) -> None:
        super().__init__(config)
        d = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, d)
        trunc_normal_init_(self.embed_tokens.weight, std=d**-0.5)
        self.layers = nn.ModuleList(HAMBlock(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(d, config.rms_norm_eps)
        self.lm_head = CastedLinear(d, config.vocab_size)
        self.rotary = RotaryEmbedding(config.kv_head_qk_dim, config.max_position_embeddings, config.rope_theta)
        # Threshold controller bookkeeping: post_step calls so far (checkpointed: the freeze survives a resume) and the
        # per-layer sum over sequences of the KV fraction since the last post_step (transient).
        self.register_buffer("threshold_steps", torch.zeros((), dtype=torch.long))
        self._kv_fraction_sum: torch.Tensor | None = None
        self._kv_sequences = 0

    def decode(self, input_ids, token_type_ids, labels, past_key_values: HAMCache | None, use_cache: bool) -> LMOutput:
        if token_type_ids is not None and bool((token_type_ids != 0).any()):
            raise UserError("ham_lm is causal only: token_type_ids must be all 0 (no bidirectional prefix)")
        B, T = input_ids.shape
        start = past_key_values.seen_tokens if past_key_values is not None else 0
        if start + T > self.config.max_position_embeddings:
            raise UserError(
                f"ham_lm: position {start + T} exceeds max_position_embeddings={self.config.max_position_embeddings}"
            )
        cos, sin = self.rotary()
        cos_sin = (cos[start : start + T], sin[start : start + T])

        x = self.embed_tokens(input_ids)
        score, fractions, layer_caches = None, [], []
        for i, layer in enumerate(self.layers):
            cache = past_key_values.layers[i] if past_key_values is not None else None
            x, paths = layer(x, cos_sin, score, cache, use_cache)
            score = paths.score
            fractions.append(paths.selected.float().mean(-1))  # [B]: T_KV / T of this layer
            layer_caches.append(paths.cache)
        logits = self.lm_head(self.norm(x))

        frac = torch.stack(fractions, dim=-1).detach()  # [B, L]
        if self.training and T > 0:
            self._kv_fraction_sum = (
                frac.sum(0) if self._kv_fraction_sum is None else self._kv_fraction_sum + frac.sum(0)
            )
            self._kv_sequences += B
        metrics = {"rho_kv": frac.mean()}
        for i in range(self.config.num_layers):
            metrics[f"rho_kv/layer{i}"] = frac[:, i].mean()
            metrics[f"tau/layer{i}"] = self.layers[i].mixer.tau().detach().clone()
        new_cache = HAMCache(layer_caches, start + T) if use_cache else None
        return LMOutput(logits=logits, metrics=metrics, past_key_values=new_cache)

    @torch.no_grad()
    def post_step(self) -> None:
        """Threshold update by synthetic gradient, after each optimizer step.

        gap = mean over the sequences seen since the last call of (KV fraction - target); all-reduced across ranks.
        g_synth = clamp(-gain * gap, -c, c) becomes p_tau's gradient for one AdamW step: too many tokens kept
        (gap > 0) gives a negative gradient, so p_tau and tau rise.
        """
        c = self.config
        fraction_sum, n = self._kv_fraction_sum, self._kv_sequences
        self._kv_fraction_sum, self._kv_sequences = None, 0
        if c.threshold_mode == "fixed" or fraction_sum is None:
            return
        totals = torch.cat(
            [fraction_sum.double(), torch.tensor([float(n)], dtype=torch.float64, device=fraction_sum.device)]
        )
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(totals)
        mean_fraction = totals[:-1] / totals[-1]  # [L]
        self.threshold_steps += 1
        if int(self.threshold_steps) <= c.threshold_freeze_steps:
            return
        gaps = mean_fraction - c.kv_target
        if c.threshold_mode == "global":
            gaps = gaps.mean().expand_as(gaps)
        grads = (-c.threshold_gain * gaps).clamp(-c.threshold_clip, c.threshold_clip)
        for layer, grad in zip(self.layers, grads.tolist()):
            layer.mixer.threshold_step(grad)


def ham_lm_flops(config: HAMLMConfig, seq_len: int) -> LMFlops:
    """Per token and layer: the shared and gate projections, both causal convolutions, the chunked Gated DeltaNet
    (intra-chunk products, state reads and writes, and the fit error it also computes), softmax attention over every
    key (an upper bound: only the routed keys count), the SwiGLU; then the head. A backward is 2x all of it."""
    d, dqk, dv, C = config.hidden_size, config.qk_dim, config.v_dim, config.chunk_size
    h_rnn, h_kv = config.num_rnn_heads, config.num_kv_heads
    dk, dvh = config.rnn_head_qk_dim, config.rnn_head_v_dim
    projections = (
        linear(d, 2 * dqk + dv)
        + 2 * linear(d, h_rnn)
        + linear(d, dv)
        + linear(d, h_rnn)
        + linear(d, h_kv)
        + linear(dv, d)
        + (linear(d, 1) if config.router == "input_shallow" else 0)
    )
    if config.router == "input_deep":
        projections += (
            linear(d, config.router_hidden)
            + linear(config.router_hidden, config.router_hidden)
            + linear(config.router_hidden, 1)
        )
    conv = 2 * 2 * (2 * dqk + dv) * config.conv_size
    recurrence = h_rnn * (4 * C * dk + 4 * C * dvh + 8 * dk * dvh) if config.recurrence == "chunk" else 0
    layer = projections + conv + recurrence + attention(dqk, dv, seq_len) + swiglu(d, config.ffn_size)
    forward = config.num_layers * layer + linear(d, config.vocab_size)
    return LMFlops(train_step=float(3 * forward), forward=float(forward))


SPEC = ModelSpec(
    family="lm",
    config=HAMLMConfig,
    model=HAMLM,
    flops=ham_lm_flops,
    tiny=dict(
        hidden_size=32,
        num_layers=1,
        qk_dim=16,
        v_dim=24,
        rnn_head_qk_dim=8,
        rnn_head_v_dim=12,
        kv_head_qk_dim=8,
        kv_head_v_dim=12,
        chunk_size=8,
    ),
    foreign_option="L_bp_cycles=[1]",
)
