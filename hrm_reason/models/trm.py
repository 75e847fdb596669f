"""The Tiny Recursive Model (TRM, Jolicoeur-Martineau 2025): one small network, an answer y and a latent z.

One call is one supervision step (segment). It runs T = H_cycles recursions; each recursion updates z n = L_cycles
times from (z, y, x) and then y once from (y, z), all with the same `L_layers`-block network (the input x is what
tells the two jobs apart). The first T-1 recursions run without gradient, the last one with full backpropagation
through its n+1 network applications (no one-step approximation). (y, z) are carried, detached, to the next segment.
The Q head reads y and is trained by BCE towards "the answer is exactly right"; a row halts when q_halt > 0, with
no continue logit, no Q-learning target and no extra forward (TRM's default `no_ACT_continue`). The MLP variant
(`mlp_t`) mixes positions with a SwiGLU across the sequence instead of attention, for fixed-size grids.
EMA of the weights is a training setting (`ema` in the train config, hrm_reason/ema.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from hrm_reason.models.act import ACTModel
from hrm_reason.models.core import Batch, PuzzleCore, PuzzleCoreConfig
from hrm_reason.models.layers import Attention, SwiGLU, rms_norm


class TRMConfig(PuzzleCoreConfig):
    H_cycles: int = 3  # T
    L_cycles: int = 6  # n
    L_layers: int = 2
    mlp_t: bool = False
    puzzle_emb_len: int = 16
    q_target: Literal["none"] = "none"


@dataclass
class TRMCarry:
    y: torch.Tensor  # the current answer (z_H in the TRM code)
    z: torch.Tensor  # the latent reasoning state (z_L)


class TRMBlock(nn.Module):
    """Post-norm block: a position-mixing sublayer (attention, or a SwiGLU across positions), then a channel SwiGLU."""

    def __init__(self, config: TRMConfig) -> None:
        super().__init__()
        self.mlp_t = config.mlp_t
        if config.mlp_t:
            self.token_mlp = SwiGLU(config.seq_len + config.puzzle_emb_len, config.expansion)
        else:
            self.self_attn = Attention(config.hidden_size, config.num_heads, causal=False)
        self.mlp = SwiGLU(config.hidden_size, config.expansion)
        self.norm_eps = config.rms_norm_eps

    def forward(self, hidden_states: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        if self.mlp_t:
            # As the TRM code: on [B, D, L], so the residual's RMSNorm runs over positions.
            h = hidden_states.transpose(1, 2)
            hidden_states = rms_norm(h + self.token_mlp(h), self.norm_eps).transpose(1, 2)
        else:
            hidden_states = rms_norm(hidden_states + self.self_attn(hidden_states, cos_sin), self.norm_eps)
        return rms_norm(hidden_states + self.mlp(hidden_states), self.norm_eps)


class TRMNet(nn.Module):
    """The one network: net(h, injection) = blocks(h + injection)."""

    def __init__(self, config: TRMConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(TRMBlock(config) for _ in range(config.L_layers))

    def forward(self, hidden_states: torch.Tensor, injection: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        hidden_states = hidden_states + injection
        for layer in self.layers:
            hidden_states = layer(hidden_states, cos_sin)
        return hidden_states


class TRMCore(PuzzleCore):
    def __init__(self, config: TRMConfig) -> None:
        super().__init__(config, TRMCarry, output_state="y", q_outputs=1)
        self.net = TRMNet(config)

    def latent_recursion(
        self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        for _ in range(self.config.L_cycles):
            z = self.net(z, y + x, cos_sin)
        y = self.net(y, z, cos_sin)
        return y, z

    def forward(self, carry: TRMCarry, batch: Batch) -> tuple[TRMCarry, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        cos_sin = self.cos_sin()
        x = self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])
        y, z = carry.y, carry.z
        with torch.no_grad():
            for _ in range(self.config.H_cycles - 1):
                y, z = self.latent_recursion(x, y, z, cos_sin)
        y, z = self.latent_recursion(x, y, z, cos_sin)
        logits, q = self.heads(y)
        return TRMCarry(y=y.detach(), z=z.detach()), logits, q


class TRM(ACTModel):
    def __init__(self, config: TRMConfig) -> None:
        super().__init__(config, TRMCore(config))
