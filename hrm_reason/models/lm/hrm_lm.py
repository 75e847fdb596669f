"""HRM-LM (arXiv 2604.14442; docs/models.md §HRM-LM): a causal LM built from three shared post-norm attention blocks.

An input encoder (theta_I) runs once: x~ = CausalAttnBlock(W_emb[x]). Then, per supervision pass s = 1..S, a fast
module L (theta_L) updates z_L at every step i = 1..M and a slow module H (theta_H) updates z_H when i % T == 0
(M = N*T), each by a gated convex combination z <- g*z + (1-g)*alpha*(Block(c W_in) W_out), which keeps the state
bounded. Only the last K steps of a pass carry gradient (truncated BPTT); the states are detached between passes and
the loss is the mean over passes. The output fuses RMSNorm'd z_H, z_L and x~ with a softmax gate and reads out through
the tied embedding; -lambda*H(mean gate) keeps the gate from collapsing onto one source.

Inconsistencies of the paper (docs/models.md §HRM-LM) and how this file resolves them:
1. Eq. 28 says a block has 14d^2+2d parameters; its own 268,443,648 is 16d^2+2d: we build 16d^2+2d (FFN exactly 4d).
2. Eq. 12 has no norm on c but P_L has 3d spare, P_out a spare d x d: flags fast_ctx_norm and out_proj (default on).
3. Eq. 23 averages the S pass losses while the S-ablation blames "summed" gradients: we average (Eq. 23, Alg. 2).
4. One base config is reported as 4.226/4.220/4.177/4.202 (and 4.308): no code depends on it; we compare relatively.
5. EqualParam's LR is given three ways (4e-4, 1.5e-4, 4.08e-5): the model sets no LR; presets pick one and say which.
6. Tables 12/20 quote HRM CE from other experiments: reporting only, no effect on the model.
7. UniTF d=4096 is 6.403 vs 6.673 and "five runs" are four: reporting only (UniTF is in unitf_lm.py).
8. Table 22 labels the K=2 result as K/M=67%: our K is the step count itself; default K=2 of M=12 (17%).
9. EqualFLOPs' S(M+2K)C rule does not hold for its configs: we count block calls, S*(M+N)+1 (`block_calls`).
10. KV cache counted as M slots: every attention call caches, so S*(M+N)+1 slots, which is what we store.
11. Weight-memory claims mix bf16 and fp32: we state parameter counts only (Vd + 61d^2 + 23d + 3), never bytes.
12. The stated slow-down varies (2-5x): no claim here; the latency model is the block-call count.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Annotated, Literal

import torch
from torch import nn

from hrm_reason.limits import CYCLES, GRAD_STEPS, INIT_C, LOSS_WEIGHT
from hrm_reason.losses import next_token_ce
from hrm_reason.models.flops import LMFlops, causal_block_flops, linear
from hrm_reason.models.layers import CastedLinear, RMSNorm
from hrm_reason.models.lm.head import LMOutput
from hrm_reason.models.lm.lm_blocks import (
    CacheCursor,
    CausalAttnBlock,
    CausalAttnLMConfig,
    CausalLMHead,
    normal_,
    width_corrected_std,
)
from hrm_reason.models.spec import ModelSpec


class HRMLMConfig(CausalAttnLMConfig):
    """K: only the last K of the M steps of a pass carry gradient (K >= M: all). init_std: the embedding, theta_I,
    gates and projections; the theta_L/theta_H blocks use init_std/sqrt(M) (A.9, set at d = 4096), or with `init_c`
    the width-corrected init_std/sqrt(c*M*d/4096) of UniTF-LM, which equals A.9's at d = 4096 and c = 1 and carries it
    to other widths (docs/models.md §HRM-LM). seed: the weight init and the frozen z^0 prototypes."""

    name: Literal["hrm_lm"] = "hrm_lm"
    N: Annotated[int, CYCLES] = 4  # slow-module firings per pass
    T: Annotated[int, CYCLES] = 3  # fast steps per slow firing; M = N*T steps per pass
    S: Annotated[int, CYCLES] = 1  # supervision passes (S > 1 hurt in the ablation)
    K: Annotated[int, GRAD_STEPS] = 2  # gradient window: only the last K of the M steps carry gradient (K >= M: all)
    fast_ctx_norm: bool = True  # RMSNorm over the fast context [z_L; z_H; x~] (P_L's unexplained 3d)
    out_proj: bool = True  # d x d projection of the fused output before the tied head (P_out's unexplained d^2)
    entropy_weight: Annotated[float, LOSS_WEIGHT] = 1e-2  # lambda of -lambda*H(w_bar); not given by the paper
    init_c: Annotated[float, INIT_C] | None = None  # None: A.9's block init; c: the width-corrected one (see above)

    @property
    def M(self) -> int:
        return self.N * self.T

    @property
    def block_calls(self) -> int:
        """Attention-block calls per token per forward: S*(M+N) recurrent ones plus the input encoder."""
        return self.S * (self.M + self.N) + 1


class GatedModule(nn.Module):
    """One gated recurrent module (fast L: Eqs. 12-15; slow H: Eqs. 17-20).

    c = [z; others...] (RMSNorm'd if ctx_norm), g = sigmoid(c W_g), h = Block(c W_in),
    z <- g*z + (1-g) * alpha * (h W_out): a convex combination, so |z| stays within max(|z|, alpha |h W_out|)."""

    def __init__(self, d: int, num_sources: int, num_heads: int, eps: float, ctx_norm: bool) -> None:
        super().__init__()
        self.ctx_norm = RMSNorm(num_sources * d, eps) if ctx_norm else None
        self.W_g = CastedLinear(num_sources * d, d, bias=False)
        self.W_in = CastedLinear(num_sources * d, d, bias=False)
        self.block = CausalAttnBlock(d, num_heads, eps)
        self.W_out = CastedLinear(d, d, bias=False)
        self.alpha = nn.Parameter(torch.tensor(0.1))

    def forward(
        self,
        z: torch.Tensor,
        others: tuple[torch.Tensor, ...],
        rope: tuple[torch.Tensor, torch.Tensor],
        cache: CacheCursor | None = None,
    ) -> torch.Tensor:
        c = torch.cat((z, *others), dim=-1)
        if self.ctx_norm is not None:
            c = self.ctx_norm(c)
        g = torch.sigmoid(self.W_g(c))
        h = self.block(self.W_in(c), rope, cache)
        return g * z + (1 - g) * self.alpha.to(z.dtype) * self.W_out(h)


class OutputFusion(nn.Module):
    """w = softmax([h_H; h_L; h_I] W_og / tau) per token; h_out = w1 h_H + w2 h_L + w3 h_I (Eq. 24), then the
    optional d x d projection. tau = exp(log_tau) keeps the learned temperature positive; log_tau starts at 0."""

    def __init__(self, d: int, eps: float, out_proj: bool) -> None:
        super().__init__()
        self.norm_H = RMSNorm(d, eps)
        self.norm_L = RMSNorm(d, eps)
        self.norm_I = RMSNorm(d, eps)
        self.W_og = CastedLinear(3 * d, 3, bias=False)
        self.log_tau = nn.Parameter(torch.tensor(0.0))
        self.out_proj = CastedLinear(d, d, bias=False) if out_proj else None

    def forward(self, z_H: torch.Tensor, z_L: torch.Tensor, x_tilde: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (h_out (B, n, d), w (B, n, 3) in the order H, L, I)."""
        h = torch.stack((self.norm_H(z_H), self.norm_L(z_L), self.norm_I(x_tilde)), dim=-2)  # (B, n, 3, d)
        w = torch.softmax(self.W_og(h.flatten(-2)).float() * torch.exp(-self.log_tau.float()), dim=-1)
        h_out = torch.einsum("bnk,bnkd->bnd", w.to(h.dtype), h)
        if self.out_proj is not None:
            h_out = self.out_proj(h_out)
        return h_out, w


def fusion_entropy(w: torch.Tensor) -> torch.Tensor:
    """H(w_bar) of the fusion weights averaged over batch and tokens: the marginal gate, at most ln 3."""
    w_bar = w.float().mean(dim=(0, 1))
    return -(w_bar * w_bar.log()).sum()


class HRMLM(CausalLMHead):
    def build(self, config: HRMLMConfig) -> None:
        d, eps = config.hidden_size, config.rms_norm_eps
        self.input_block = CausalAttnBlock(d, config.num_heads, eps)  # theta_I
        self.L_net = GatedModule(d, 3, config.num_heads, eps, ctx_norm=config.fast_ctx_norm)  # theta_L
        self.H_net = GatedModule(d, 2, config.num_heads, eps, ctx_norm=True)  # theta_H
        self.fusion = OutputFusion(d, eps, out_proj=config.out_proj)
        # Fixed start states z_H^0, z_L^0 ~ TN(0, 1, [-2, 2]): buffers, frozen, saved with the weights.
        self.z_H0 = nn.Buffer(torch.empty(d))
        self.z_L0 = nn.Buffer(torch.empty(d))

    def init_weights(self, generator: torch.Generator) -> None:
        """N(0, 0.02) for theta_I, gates and projections; N(0, 0.02/sqrt(M)) for the matrices of the shared recurrent
        blocks (or its width-corrected form, `init_c`); norm scales 1, alpha 0.1, log tau 0."""
        c = self.config
        std, M = c.init_std, c.M
        block_std = std / math.sqrt(M) if c.init_c is None else width_corrected_std(std, c.init_c, M, c.hidden_size)
        self.input_block.init_(std, generator)
        for module in (self.L_net, self.H_net):
            module.block.init_(block_std, generator)
            for lin in (module.W_g, module.W_in, module.W_out):
                normal_(lin.weight, std, generator)
        normal_(self.fusion.W_og.weight, std, generator)
        if self.fusion.out_proj is not None:
            normal_(self.fusion.out_proj.weight, std, generator)
        normal_(self.z_H0, 1.0, generator, truncate=2.0)  # TN(0, 1, [-2, 2]): variance 0.774, |z^0| ~ sqrt(0.774 d)
        normal_(self.z_L0, 1.0, generator, truncate=2.0)
        with torch.no_grad():
            for module in (self.L_net, self.H_net):
                if module.ctx_norm is not None:
                    module.ctx_norm.weight.fill_(1.0)
                module.alpha.fill_(0.1)
            for norm in (self.fusion.norm_H, self.fusion.norm_L, self.fusion.norm_I):
                norm.weight.fill_(1.0)
            self.fusion.log_tau.fill_(0.0)

    def encode(
        self, input_ids: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: CacheCursor | None = None
    ) -> torch.Tensor:
        """x~ = CausalAttnBlock(W_emb[x]; theta_I), built once (with gradient) and shared by all steps and passes."""
        return self.input_block(self.embed_tokens(input_ids), rope, cache)

    def initial_state(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (*input_ids.shape, self.config.hidden_size)
        return self.z_H0.expand(shape), self.z_L0.expand(shape)

    def one_pass(
        self,
        x_tilde: torch.Tensor,
        z_H: torch.Tensor,
        z_L: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        cache: CacheCursor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Algorithm 3: M steps; L every step, H (with the just-updated z_L) when i % T == 0; steps 1..M-K no_grad."""
        c = self.config
        K0 = max(0, c.M - c.K)
        for i in range(1, c.M + 1):
            with torch.no_grad() if i <= K0 else nullcontext():
                z_L = self.L_net(z_L, (z_H, x_tilde), rope, cache)
                if i % c.T == 0:
                    z_H = self.H_net(z_H, (z_L,), rope, cache)
        return z_H, z_L

    def run(self, input_ids: torch.Tensor, labels, rope, cursor: CacheCursor | None) -> LMOutput:
        """S passes; the loss is the mean over passes of CE - entropy_weight * H(fusion weights)."""
        c = self.config
        x_tilde = self.encode(input_ids, rope, cursor)
        z_H, z_L = self.initial_state(input_ids)
        pass_losses: list[torch.Tensor] = []
        metrics: dict[str, torch.Tensor] = {}
        for s in range(c.S):
            z_H, z_L = self.one_pass(x_tilde, z_H, z_L, rope, cursor)
            if labels is not None or s == c.S - 1:  # without labels only the last pass is read (inference uses it)
                h_out, w = self.fusion(z_H, z_L, x_tilde)
                logits = self.lm_head(h_out)
            if labels is not None:
                ce = next_token_ce(logits, labels)
                entropy = fusion_entropy(w)
                pass_losses.append(ce - c.entropy_weight * entropy)
                metrics = {"ce": ce.detach(), "fusion_entropy": entropy.detach()}
                metrics.update({f"w_{k}": v.detach() for k, v in zip("HLI", w.float().mean(dim=(0, 1)).unbind())})
            z_H, z_L = z_H.detach(), z_L.detach()  # sg() between passes (Eq. 22)

        loss = torch.stack(pass_losses).mean() if pass_losses else None  # Eq. 23: (1/S) sum_s L_s
        return LMOutput(logits=logits, loss=loss, metrics=metrics)


def hrm_lm_flops(config: HRMLMConfig, seq_len: int) -> LMFlops:
    """Per token: the input block once, then per pass M L-steps and N H-steps (gates, projections, block) and the
    fused readout; a backward covers the input block and the last K steps of every pass and the readouts."""
    d, V = config.hidden_size, config.vocab_size
    block = causal_block_flops(d, 4 * d, seq_len)
    L_step = 2 * linear(3 * d, d) + block + linear(d, d)
    H_step = 2 * linear(2 * d, d) + block + linear(d, d)
    readout = linear(3 * d, 3) + (linear(d, d) if config.out_proj else 0) + linear(d, V)
    window = min(config.K, config.M)
    steps_with_grad = (
        window * L_step + sum(1 for i in range(config.M - window + 1, config.M + 1) if i % config.T == 0) * H_step
    )
    one_pass = config.M * L_step + config.N * H_step
    train = block + config.S * (one_pass + readout) + 2 * (block + config.S * (steps_with_grad + readout))
    return LMFlops(train_step=float(train), forward=float(block + config.S * one_pass + readout))


SPEC = ModelSpec(
    family="lm",
    config=HRMLMConfig,
    model=HRMLM,
    flops=hrm_lm_flops,
    tiny={"hidden_size": 32, "num_heads": 2, "N": 2, "T": 2, "K": 2, "max_seq_len": 64},
    foreign_option="M=3",
)
