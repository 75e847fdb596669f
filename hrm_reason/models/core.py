"""What every puzzle core shares: HRM's input embedding, output heads and fixed initial states.

The recipe is the original HRM's: token embeddings scaled by sqrt(D), a sparse puzzle embedding on prefix positions,
RoPE or learned positions, an untied LM head read after the prefix, a Q head on position 0 initialised to "never
halt". HRM (models/hrm.py), the baselines (transformer.py, unitf.py) and TRM (trm.py) only add their recurrence, so a comparison
between them is about the recurrence alone ("same data, loss and puzzle embedding").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from hrm_reason.models.act import ACTConfig
from hrm_reason.models.layers import CastedEmbedding, CastedLinear, RotaryEmbedding, trunc_normal_init_
from hrm_reason.models.sparse_embedding import SparsePuzzleEmbedding

CosSin = tuple[torch.Tensor, torch.Tensor] | None


class CoreOutput(NamedTuple):
    """One segment of a core (`PuzzleCore.forward`, read by `ACTModel.forward`)."""

    carry: Any  # the states for the next segment, detached (the core's `carry_cls`)
    logits: torch.Tensor  # [B, seq_len, vocab]: the LM head over the grid positions
    q_halt: torch.Tensor  # [B], float32
    q_continue: torch.Tensor  # [B], float32; 0 for a core without a continue logit


@dataclass
class LatentCarry:
    """The carry of a core with one state (the transformer and UniTF baselines)."""

    z: torch.Tensor


class PuzzleCore(nn.Module):
    """Base of a core: subclasses build their layers, call `register_initial_states()` and implement
    `forward(carry, batch) -> CoreOutput`, ending with `return self.segment_result(**states)`.

    `carry_cls` is a dataclass of [B, positions, D] tensors, one per recurrent state; each state has a fixed
    (untrained) initial vector, the buffer `<state>_init` without a leading "z_" (HRM's names H_init and L_init),
    written into a row when it takes a new example. `output_state` is the state the heads read. `q_outputs`: 2 (halt
    and continue logits) or 1 (halt only; continue is reported as 0, so the ACT rule q_halt > q_continue becomes
    q_halt > 0).
    """

    def __init__(self, config: ACTConfig, carry_cls: type, output_state: str, q_outputs: int = 2) -> None:
        super().__init__()
        self.config = config
        self.carry_cls = carry_cls
        self.state_names = [f.name for f in dataclasses.fields(carry_cls)]
        self.output_state = output_state
        self.forward_dtype = config.dtype
        self.embed_scale = math.sqrt(config.hidden_size)
        embed_init_std = 1.0 / self.embed_scale

        self.embed_tokens = CastedEmbedding(config.vocab_size, config.hidden_size, embed_init_std, self.forward_dtype)
        self.lm_head = CastedLinear(config.hidden_size, config.vocab_size, bias=False)
        self.q_head = CastedLinear(config.hidden_size, q_outputs, bias=True)

        self.puzzle_emb_len = config.prefix_len
        if config.emb_ndim > 0:
            self.puzzle_emb = SparsePuzzleEmbedding(
                config.num_puzzle_identifiers, config.emb_ndim, 0.0, self.forward_dtype
            )

        self.full_len = config.seq_len + self.puzzle_emb_len
        if config.pos_encodings == "rope":
            self.rotary_emb = RotaryEmbedding(config.hidden_size // config.num_heads, self.full_len, config.rope_theta)
        elif config.pos_encodings == "learned":
            self.embed_pos = CastedEmbedding(self.full_len, config.hidden_size, embed_init_std, self.forward_dtype)

        # Q starts near "never halt" (sigmoid(-5) ~ 0.007) so that early training is not cut short.
        with torch.no_grad():
            self.q_head.weight.zero_()
            self.q_head.bias.fill_(-5)

    def init_name(self, state: str) -> str:
        return f"{state.removeprefix('z_')}_init"

    def register_initial_states(self) -> None:
        for name in self.state_names:
            vector = trunc_normal_init_(torch.empty(self.config.hidden_size, dtype=self.forward_dtype), std=1)
            self.register_buffer(self.init_name(name), vector)

    def cos_sin(self) -> CosSin:
        return self.rotary_emb() if self.config.pos_encodings == "rope" else None

    def input_embeddings(self, inputs: torch.Tensor, puzzle_identifiers: torch.Tensor) -> torch.Tensor:
        """[B, puzzle_emb_len + seq_len, D]: puzzle embedding (zero-padded over the prefix), then the tokens."""
        embedding = self.embed_tokens(inputs.long())
        if self.puzzle_emb_len > 0:
            if self.config.emb_ndim > 0:
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
        return self.carry_cls(
            **{name: torch.empty(shape, dtype=self.forward_dtype, device=device) for name in self.state_names}
        )

    def reset_carry(self, reset: torch.Tensor, carry: Any) -> Any:
        flag = reset.view(-1, 1, 1)
        return self.carry_cls(
            **{
                name: torch.where(flag, getattr(self, self.init_name(name)), getattr(carry, name))
                for name in self.state_names
            }
        )

    def q_features(self, carry: Any) -> torch.Tensor:
        """What the Q head reads: position 0 (the puzzle-embedding slot) of the output state."""
        return getattr(carry, self.output_state)[:, 0]

    def heads(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """(logits over the grid positions, (q_halt, q_continue)) from the output state."""
        logits = self.lm_head(hidden_states)[:, self.puzzle_emb_len :]
        q_logits = self.q_head(hidden_states[:, 0]).float()
        q_halt = q_logits[..., 0]
        q_continue = q_logits[..., 1] if q_logits.shape[-1] > 1 else torch.zeros_like(q_halt)
        return logits, (q_halt, q_continue)

    def segment_result(self, **states: torch.Tensor) -> CoreOutput:
        """The end of every core's forward: the carry of the states (detached: the next segment starts without
        gradient), and the heads read from the output state."""
        logits, (q_halt, q_continue) = self.heads(states[self.output_state])
        carry = self.carry_cls(**{name: state.detach() for name, state in states.items()})
        return CoreOutput(carry, logits, q_halt, q_continue)


class ReasoningModule(nn.Module):
    """A stack of blocks whose input is the state plus an additive injection: HRM's H and L modules, TRM's net."""

    def __init__(self, layers: list[nn.Module]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, hidden_states: torch.Tensor, injection: torch.Tensor, cos_sin: CosSin) -> torch.Tensor:
        hidden_states = hidden_states + injection
        for layer in self.layers:
            hidden_states = layer(hidden_states, cos_sin)
        return hidden_states
