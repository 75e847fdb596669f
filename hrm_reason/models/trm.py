"""The Tiny Recursive Model (TRM, Jolicoeur-Martineau 2025): one small network, an answer y and a latent z.

One call is one supervision step (segment). It runs T = H_cycles recursions; each recursion updates z n = L_cycles
times from (z, y, x) and then y once from (y, z), all with the same `L_layers`-block network (the input x is what
tells the two jobs apart). The first T-1 recursions run without gradient, the last one with full backpropagation
through its n+1 network applications (no one-step approximation). (y, z) are carried, detached, to the next segment.
The Q head reads y and is trained by BCE towards "the answer is exactly right"; a row halts when q_halt > 0, with
no continue logit, no Q-learning target and no extra forward (TRM's default `no_ACT_continue`). The MLP variant
(`mlp_t`) mixes positions with a SwiGLU across the sequence instead of attention, for fixed-size grids.
EMA of the weights is a training setting (`ema` in the train config, hrm_reason/train/ema.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from hrm_reason.limits import CYCLES, LAYERS
from hrm_reason.models.act import ACTModel, Batch, PrefixConfig
from hrm_reason.models.core import CoreOutput, CosSin, PuzzleCore, ReasoningModule
from hrm_reason.models.flops import ACTFlops, block_flops, head_flops, swiglu
from hrm_reason.models.layers import Attention, SwiGLU, rms_norm, swiglu_intermediate_size
from hrm_reason.models.spec import ModelSpec
from hrm_reason.models.trm_original import from_original_weights


class TRMConfig(PrefixConfig):
    name: Literal["trm"] = "trm"
    H_cycles: Annotated[int, CYCLES] = Field(
        2, description="recursions T per segment, all but the last without gradient"
    )
    L_cycles: Annotated[int, CYCLES] = Field(2, description="z updates n per recursion")
    L_layers: Annotated[int, LAYERS] = Field(4, description="blocks of its one network")
    mlp_t: bool = Field(
        False, description="a SwiGLU across positions in place of attention (TRM-MLP, fixed-size grids)"
    )

    @property
    def depth(self) -> tuple[int, int]:
        return self.H_cycles, self.L_cycles

    @model_validator(mode="after")
    def _mlp_positions(self) -> TRMConfig:
        if self.mlp_t and self.pos_encodings == "rope":
            raise ValueError(
                "mlp_t has no attention for rope to act on: use pos_encodings none (as TRM-MLP) or learned"
            )
        return self

    @property
    def q_target(self) -> Literal["none"]:
        """TRM halts on q_halt > 0 with no continue target (docs/models.md §TRM)."""
        return "none"


@dataclass
class TRMCarry:
    y: torch.Tensor  # the current answer (z_H in the TRM code)
    z: torch.Tensor  # the latent reasoning state (z_L)


class TRMBlock(nn.Module):
    """Post-norm block: a position-mixing sublayer (attention, or a SwiGLU across positions), then a channel SwiGLU."""

    def __init__(self, config: TRMConfig) -> None:
        super().__init__()
        self.mlp_t = config.mlp_t
        positions = config.seq_len + config.prefix_len
        if config.mlp_t:
            self.token_mlp = SwiGLU(positions, swiglu_intermediate_size(positions, config.expansion))
        else:
            self.self_attn = Attention(config.hidden_size, config.num_heads, causal=False)
        self.mlp = SwiGLU(config.hidden_size, swiglu_intermediate_size(config.hidden_size, config.expansion))
        self.norm_eps = config.rms_norm_eps

    def forward(self, hidden_states: torch.Tensor, cos_sin: CosSin) -> torch.Tensor:
        if self.mlp_t:
            # As the TRM code: on [B, D, L], so the residual's RMSNorm runs over positions.
            h = hidden_states.transpose(1, 2)
            hidden_states = rms_norm(h + self.token_mlp(h), self.norm_eps).transpose(1, 2)
        else:
            hidden_states = rms_norm(hidden_states + self.self_attn(hidden_states, cos_sin), self.norm_eps)
        return rms_norm(hidden_states + self.mlp(hidden_states), self.norm_eps)


class TRMCore(PuzzleCore):
    def __init__(self, config: TRMConfig) -> None:
        super().__init__(config, TRMCarry, output_state="y", q_outputs=1)
        self.register_initial_states()
        self.net = ReasoningModule([TRMBlock(config) for _ in range(config.L_layers)])  # net(h, injection)

    def latent_recursion(
        self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, cos_sin: CosSin, L_cycles: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        for _ in range(L_cycles):
            z = self.net(z, y + x, cos_sin)
        y = self.net(y, z, cos_sin)
        return y, z

    def forward(self, carry: TRMCarry, batch: Batch, cycles: tuple[int, int] | None = None) -> CoreOutput:
        """`cycles` (H_cycles, L_cycles) overrides the configured depth for this call (the depth curriculum)."""
        H_cycles, L_cycles = cycles or (self.config.H_cycles, self.config.L_cycles)
        cos_sin = self.cos_sin()
        x = self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])
        y, z = carry.y, carry.z
        with torch.no_grad():
            for _ in range(H_cycles - 1):
                y, z = self.latent_recursion(x, y, z, cos_sin, L_cycles)
        y, z = self.latent_recursion(x, y, z, cos_sin, L_cycles)
        return self.segment_result(y=y, z=z)


class TRM(ACTModel):
    inner_class = TRMCore


def trm_flops(config: TRMConfig) -> ACTFlops:
    """H_cycles recursions of L_cycles + 1 network applications; the last recursion carries gradient. TRM-MLP mixes
    positions with a SwiGLU over the sequence (per channel) in place of attention."""
    positions = config.seq_len + config.prefix_len
    if config.mlp_t:
        d = config.hidden_size
        block = (
            swiglu(positions, swiglu_intermediate_size(positions, config.expansion)) * d
            + swiglu(d, swiglu_intermediate_size(d, config.expansion)) * positions
        )
    else:
        block = block_flops(config, positions)
    recursion = (config.L_cycles + 1) * config.L_layers * block
    head = head_flops(config)
    return ACTFlops.of(config, segment=config.H_cycles * recursion + head, backward=2 * (recursion + head))


SPEC = ModelSpec(
    family="act",
    config=TRMConfig,
    model=TRM,
    flops=trm_flops,
    tiny={"hidden_size": 32, "num_heads": 2, "L_layers": 1, "H_cycles": 2, "L_cycles": 2},
    foreign_option="q_target=next_segment",
    adapter=from_original_weights,  # the original TRM code's checkpoints (models/trm_original.py)
)
