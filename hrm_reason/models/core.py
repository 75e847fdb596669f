"""What every non-HRM puzzle core shares with HRM: the input embedding, the output heads and the fixed initial states.

The recipe is HRM's (models/hrm.py): token embeddings scaled by sqrt(D), a sparse puzzle embedding on prefix positions,
RoPE or learned positions, an untied LM head read after the prefix, a Q head on position 0 initialised to "never
halt". Keeping it identical keeps the comparison about the recurrence only ("same data, loss and puzzle embedding").
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict
from torch import nn

from hrm_reason.models.layers import CastedEmbedding, CastedLinear, RotaryEmbedding, trunc_normal_init_
from hrm_reason.models.sparse_embedding import SparsePuzzleEmbedding

Batch = dict[str, torch.Tensor]


class PuzzleCoreConfig(BaseModel):
    """Fields of every core; the models add their own (the registry fills them from the flat ArchConfig)."""

    model_config = ConfigDict(extra="forbid")

    # From the dataset.
    seq_len: int
    vocab_size: int
    num_puzzle_identifiers: int

    hidden_size: int = 512
    num_heads: int = 8
    expansion: float = 4.0
    pos_encodings: Literal["rope", "learned", "none"] = "rope"
    puzzle_emb_ndim: int = 512
    puzzle_emb_len: int = 1  # prefix positions; the puzzle embedding fills the first, the rest stay zero
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    halt_max_steps: int = 16
    halt_exploration_prob: float = 0.1
    q_target: Literal["extra_forward", "next_segment", "none"] = "extra_forward"
    forward_dtype: Literal["float32", "bfloat16"] = "float32"


class PuzzleCore(nn.Module):
    """Base of a core: subclasses build their layers and implement `forward(carry, batch)`.

    `carry_cls` is a dataclass of [B, positions, D] tensors, one per recurrent state; each state `s` has a fixed
    (untrained) initial vector `s_init` written into a row when it takes a new example. `output_state` is the state
    the heads read. `q_outputs`: 2 (halt and continue logits) or 1 (halt only; continue is reported as 0, so the
    wrapper's rule q_halt > q_continue becomes q_halt > 0).
    """

    def __init__(self, config: PuzzleCoreConfig, carry_cls: type, output_state: str, q_outputs: int = 2) -> None:
        super().__init__()
        if config.puzzle_emb_len * config.hidden_size < config.puzzle_emb_ndim:
            raise ValueError(f"puzzle_emb_len {config.puzzle_emb_len} positions cannot hold puzzle_emb_ndim {config.puzzle_emb_ndim}")
        self.config = config
        self.carry_cls = carry_cls
        self.state_names = [f.name for f in dataclasses.fields(carry_cls)]
        self.output_state = output_state
        self.forward_dtype = getattr(torch, config.forward_dtype)
        self.embed_scale = math.sqrt(config.hidden_size)
        embed_init_std = 1.0 / self.embed_scale

        self.embed_tokens = CastedEmbedding(config.vocab_size, config.hidden_size, embed_init_std, self.forward_dtype)
        self.lm_head = CastedLinear(config.hidden_size, config.vocab_size, bias=False)
        self.q_head = CastedLinear(config.hidden_size, q_outputs, bias=True)

        self.puzzle_emb_len = config.puzzle_emb_len
        if config.puzzle_emb_ndim > 0:
            self.puzzle_emb = SparsePuzzleEmbedding(config.num_puzzle_identifiers, config.puzzle_emb_ndim, 0.0, self.forward_dtype)

        self.full_len = config.seq_len + self.puzzle_emb_len
        if config.pos_encodings == "rope":
            self.rotary_emb = RotaryEmbedding(config.hidden_size // config.num_heads, self.full_len, config.rope_theta)
        elif config.pos_encodings == "learned":
            self.embed_pos = CastedEmbedding(self.full_len, config.hidden_size, embed_init_std, self.forward_dtype)

        for name in self.state_names:
            self.register_buffer(f"{name}_init", trunc_normal_init_(torch.empty(config.hidden_size, dtype=self.forward_dtype), std=1))

        # Q starts near "never halt" (sigmoid(-5) ~ 0.007), as HRM.
        with torch.no_grad():
            self.q_head.weight.zero_()
            self.q_head.bias.fill_(-5)

    def cos_sin(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        return self.rotary_emb() if self.config.pos_encodings == "rope" else None

    def input_embeddings(self, inputs: torch.Tensor, puzzle_identifiers: torch.Tensor) -> torch.Tensor:
        """[B, puzzle_emb_len + seq_len, D]: puzzle embedding (zero-padded over the prefix), then the tokens."""
        embedding = self.embed_tokens(inputs.long())
        if self.puzzle_emb_len > 0:
            if self.config.puzzle_emb_ndim > 0:
                prefix = self.puzzle_emb(puzzle_identifiers.long())
            else:
                prefix = embedding.new_zeros(embedding.shape[0], 0)
            prefix = F.pad(prefix, (0, self.puzzle_emb_len * self.config.hidden_size - prefix.shape[-1]))
            embedding = torch.cat((prefix.view(-1, self.puzzle_emb_len, self.config.hidden_size), embedding), dim=-2)
        if self.config.pos_encodings == "learned":
            embedding = 0.707106781 * (embedding + self.embed_pos.weight.to(self.forward_dtype))
        return self.embed_scale * embedding

    def empty_carry(self, batch_size: int, device: torch.device) -> Any:
        shape = (batch_size, self.full_len, self.config.hidden_size)
        return self.carry_cls(**{name: torch.empty(shape, dtype=self.forward_dtype, device=device) for name in self.state_names})

    def reset_carry(self, reset: torch.Tensor, carry: Any) -> Any:
        flag = reset.view(-1, 1, 1)
        return self.carry_cls(**{name: torch.where(flag, getattr(self, f"{name}_init"), getattr(carry, name)) for name in self.state_names})

    def q_features(self, carry: Any) -> torch.Tensor:
        """What the Q head reads: position 0 of the output state."""
        return getattr(carry, self.output_state)[:, 0]

    def heads(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """(logits over the grid positions, (q_halt, q_continue)) from the output state."""
        logits = self.lm_head(hidden_states)[:, self.puzzle_emb_len :]
        q_logits = self.q_head(hidden_states[:, 0]).float()
        q_halt = q_logits[..., 0]
        q_continue = q_logits[..., 1] if q_logits.shape[-1] > 1 else torch.zeros_like(q_halt)
        return logits, (q_halt, q_continue)
