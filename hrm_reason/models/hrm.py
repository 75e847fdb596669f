"""The Hierarchical Reasoning Model (HRM ACT v1): two recurrent transformer modules, H (slow) and L (fast).

One call of `HRM.forward` is one ACT segment. Inside a segment L runs L_cycles times per H update, H runs H_cycles
times, and only the last L and the last H application carry gradient (the one-step gradient approximation). The
state (z_H, z_L) is carried detached from segment to segment: deep supervision. A Q head on the first position
learns when to halt (Q-learning, target from the next segment's Q values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict
from torch import nn

from hrm_reason.models.act import ACTModel, Carry  # noqa: F401  (Carry: part of this module's API)
from hrm_reason.models.layers import Attention, CastedEmbedding, CastedLinear, RotaryEmbedding, SwiGLU, rms_norm, trunc_normal_init_
from hrm_reason.models.sparse_embedding import SparsePuzzleEmbedding

Batch = dict[str, torch.Tensor]


class HRMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # From the dataset.
    seq_len: int
    vocab_size: int
    num_puzzle_identifiers: int

    hidden_size: int = 512
    num_heads: int = 8
    expansion: float = 4.0
    H_cycles: int = 2
    L_cycles: int = 2
    H_layers: int = 4
    L_layers: int = 4
    pos_encodings: Literal["rope", "learned"] = "rope"
    puzzle_emb_ndim: int = 512
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    halt_max_steps: int = 16
    halt_exploration_prob: float = 0.1
    q_target: Literal["extra_forward", "next_segment"] = "extra_forward"
    forward_dtype: Literal["float32", "bfloat16"] = "float32"


@dataclass
class InnerCarry:
    z_H: torch.Tensor
    z_L: torch.Tensor


class HRMBlock(nn.Module):
    """Post-norm transformer block: h = norm(h + attn(h)); h = norm(h + mlp(h))."""

    def __init__(self, config: HRMConfig) -> None:
        super().__init__()
        self.self_attn = Attention(config.hidden_size, config.num_heads, causal=False)
        self.mlp = SwiGLU(config.hidden_size, config.expansion)
        self.norm_eps = config.rms_norm_eps

    def forward(self, hidden_states: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        hidden_states = rms_norm(hidden_states + self.self_attn(hidden_states, cos_sin), self.norm_eps)
        return rms_norm(hidden_states + self.mlp(hidden_states), self.norm_eps)


class ReasoningModule(nn.Module):
    """A stack of blocks whose input is the state plus an additive injection."""

    def __init__(self, config: HRMConfig, num_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(HRMBlock(config) for _ in range(num_layers))

    def forward(self, hidden_states: torch.Tensor, injection: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        hidden_states = hidden_states + injection
        for layer in self.layers:
            hidden_states = layer(hidden_states, cos_sin)
        return hidden_states


class HRMInner(nn.Module):
    def __init__(self, config: HRMConfig) -> None:
        super().__init__()
        self.config = config
        self.forward_dtype = getattr(torch, config.forward_dtype)
        self.embed_scale = math.sqrt(config.hidden_size)
        embed_init_std = 1.0 / self.embed_scale

        self.embed_tokens = CastedEmbedding(config.vocab_size, config.hidden_size, embed_init_std, self.forward_dtype)
        self.lm_head = CastedLinear(config.hidden_size, config.vocab_size, bias=False)
        self.q_head = CastedLinear(config.hidden_size, 2, bias=True)

        self.puzzle_emb_len = -(config.puzzle_emb_ndim // -config.hidden_size)
        if config.puzzle_emb_ndim > 0:
            self.puzzle_emb = SparsePuzzleEmbedding(config.num_puzzle_identifiers, config.puzzle_emb_ndim, 0.0, self.forward_dtype)

        full_len = config.seq_len + self.puzzle_emb_len
        if config.pos_encodings == "rope":
            self.rotary_emb = RotaryEmbedding(config.hidden_size // config.num_heads, full_len, config.rope_theta)
        else:
            self.embed_pos = CastedEmbedding(full_len, config.hidden_size, embed_init_std, self.forward_dtype)

        self.H_level = ReasoningModule(config, config.H_layers)
        self.L_level = ReasoningModule(config, config.L_layers)

        # Fixed (untrained) initial states, broadcast to every position on reset.
        self.H_init = nn.Buffer(trunc_normal_init_(torch.empty(config.hidden_size, dtype=self.forward_dtype), std=1))
        self.L_init = nn.Buffer(trunc_normal_init_(torch.empty(config.hidden_size, dtype=self.forward_dtype), std=1))

        # Q starts near "never halt" (sigmoid(-5) ~ 0.007) so that early training is not cut short.
        with torch.no_grad():
            self.q_head.weight.zero_()
            self.q_head.bias.fill_(-5)

    def input_embeddings(self, inputs: torch.Tensor, puzzle_identifiers: torch.Tensor) -> torch.Tensor:
        embedding = self.embed_tokens(inputs.long())
        if self.config.puzzle_emb_ndim > 0:
            puzzle = self.puzzle_emb(puzzle_identifiers.long())
            pad = self.puzzle_emb_len * self.config.hidden_size - puzzle.shape[-1]
            if pad > 0:
                puzzle = F.pad(puzzle, (0, pad))
            embedding = torch.cat((puzzle.view(-1, self.puzzle_emb_len, self.config.hidden_size), embedding), dim=-2)
        if self.config.pos_encodings == "learned":
            embedding = 0.707106781 * (embedding + self.embed_pos.weight.to(self.forward_dtype))
        return self.embed_scale * embedding

    def empty_carry(self, batch_size: int, device: torch.device) -> InnerCarry:
        shape = (batch_size, self.config.seq_len + self.puzzle_emb_len, self.config.hidden_size)
        return InnerCarry(
            z_H=torch.empty(shape, dtype=self.forward_dtype, device=device),
            z_L=torch.empty(shape, dtype=self.forward_dtype, device=device),
        )

    def reset_carry(self, reset: torch.Tensor, carry: InnerCarry) -> InnerCarry:
        flag = reset.view(-1, 1, 1)
        return InnerCarry(z_H=torch.where(flag, self.H_init, carry.z_H), z_L=torch.where(flag, self.L_init, carry.z_L))

    def q_features(self, carry: InnerCarry) -> torch.Tensor:
        """The Q head reads z_H at the first position (the puzzle-embedding slot)."""
        return carry.z_H[:, 0]

    def forward(self, carry: InnerCarry, batch: Batch) -> tuple[InnerCarry, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        cos_sin = self.rotary_emb() if self.config.pos_encodings == "rope" else None
        x = self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])

        H_cycles, L_cycles = self.config.H_cycles, self.config.L_cycles
        with torch.no_grad():
            z_H, z_L = carry.z_H, carry.z_L
            for h in range(H_cycles):
                for l in range(L_cycles):
                    if not (h == H_cycles - 1 and l == L_cycles - 1):
                        z_L = self.L_level(z_L, z_H + x, cos_sin)
                if h != H_cycles - 1:
                    z_H = self.H_level(z_H, z_L, cos_sin)

        # One-step gradient: only the last L and H applications are differentiated.
        z_L = self.L_level(z_L, z_H + x, cos_sin)
        z_H = self.H_level(z_H, z_L, cos_sin)

        logits = self.lm_head(z_H)[:, self.puzzle_emb_len :]
        q_logits = self.q_head(z_H[:, 0]).float()
        return InnerCarry(z_H=z_H.detach(), z_L=z_L.detach()), logits, (q_logits[..., 0], q_logits[..., 1])


class HRM(ACTModel):
    """HRM ACT v1: the H/L core inside the shared ACT loop (models/act.py); one call = one segment."""

    def __init__(self, config: HRMConfig) -> None:
        super().__init__(config, HRMInner(config))
