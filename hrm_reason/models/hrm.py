"""The Hierarchical Reasoning Model (HRM ACT v1): two recurrent transformer modules, H (slow) and L (fast).

This file holds the whole recurrence: the config, the post-norm block, the H and L modules and one segment of their
updates (`HRMCore.forward`), the model, its FLOP count, the original code's weight names and its registry entry
(`SPEC`). One call of
`HRM.forward` is one ACT segment. Inside a segment L runs L_cycles times per H update, H runs H_cycles times, and only
the last L and the last H application carry gradient (the one-step gradient approximation). The state (z_H, z_L) is
carried detached from segment to segment: deep supervision.

Reading order: this file, then what it shares with TRM and the baselines (the same ACT loop and heads, so parity with
the original code is checked once): models/core.py (`PuzzleCore`: input embedding, LM and Q heads, initial states;
`ReasoningModule`), models/act.py (`ACTModel.forward`: the ACT outer loop, Q-learning halting and its target;
`act_loss`), models/layers.py (attention, SwiGLU, RMSNorm, RoPE). docs/models.md §Reading HRM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch
from pydantic import Field, field_validator

from hrm_reason.limits import CYCLES, LAYERS
from hrm_reason.models.act import ACTConfig, ACTModel, Batch, QTarget
from hrm_reason.models.core import CoreOutput, CosSin, PuzzleCore, ReasoningModule
from hrm_reason.models.flops import ACTFlops, block_flops, head_flops
from hrm_reason.models.layers import Attention, SwiGLU, rms_norm, swiglu_intermediate_size
from hrm_reason.models.spec import ModelSpec


class HRMConfig(ACTConfig):
    name: Literal["hrm"] = "hrm"
    H_cycles: Annotated[int, CYCLES] = Field(2, description="H updates per segment")
    L_cycles: Annotated[int, CYCLES] = Field(2, description="L updates per H update")
    H_layers: Annotated[int, LAYERS] = Field(4, description="blocks of the H module")
    L_layers: Annotated[int, LAYERS] = Field(4, description="blocks of the L module")
    q_target: QTarget = Field(
        "extra_forward",
        description="extra_forward: the original's extra no-grad segment for the Q-continue target; next_segment: the "
        "target comes one step later from the next segment's own forward (about a third less compute per step)",
    )

    @property
    def depth(self) -> tuple[int, int]:
        return self.H_cycles, self.L_cycles

    @field_validator("pos_encodings")
    @classmethod
    def _positions(cls, v: str) -> str:
        if v == "none":
            raise ValueError("pos_encodings none is an option of transformer, unitf and trm, not hrm")
        return v


@dataclass
class InnerCarry:
    z_H: torch.Tensor
    z_L: torch.Tensor


class HRMBlock(torch.nn.Module):
    """Post-norm transformer block: h = norm(h + attn(h)); h = norm(h + mlp(h))."""

    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.self_attn = Attention(config.hidden_size, config.num_heads, causal=False)
        self.mlp = SwiGLU(config.hidden_size, swiglu_intermediate_size(config.hidden_size, config.expansion))
        self.norm_eps = config.rms_norm_eps

    def forward(self, hidden_states: torch.Tensor, cos_sin: CosSin) -> torch.Tensor:
        hidden_states = rms_norm(hidden_states + self.self_attn(hidden_states, cos_sin), self.norm_eps)
        return rms_norm(hidden_states + self.mlp(hidden_states), self.norm_eps)


class HRMCore(PuzzleCore):
    def __init__(self, config: HRMConfig) -> None:
        super().__init__(config, InnerCarry, output_state="z_H")
        self.H_level = ReasoningModule([HRMBlock(config) for _ in range(config.H_layers)])
        self.L_level = ReasoningModule([HRMBlock(config) for _ in range(config.L_layers)])
        self.register_initial_states()

    def forward(self, carry: InnerCarry, batch: Batch, cycles: tuple[int, int] | None = None) -> CoreOutput:
        """`cycles` (H_cycles, L_cycles) overrides the configured depth for this call (the depth curriculum)."""
        cos_sin = self.cos_sin()
        x = self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])

        H_cycles, L_cycles = cycles or (self.config.H_cycles, self.config.L_cycles)
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
        return self.segment_result(z_H=z_H, z_L=z_L)


class HRM(ACTModel):
    """HRM ACT v1: the H/L core inside the shared ACT loop (models/act.py); one call = one segment."""

    inner_class = HRMCore


def hrm_flops(config: HRMConfig) -> ACTFlops:
    """Per segment H_cycles * L_cycles applications of L and H_cycles of H; the backward covers the last of each."""
    block = block_flops(config, config.seq_len + config.prefix_len)
    L_app, H_app, head = config.L_layers * block, config.H_layers * block, head_flops(config)
    segment = config.H_cycles * config.L_cycles * L_app + config.H_cycles * H_app + head
    return ACTFlops.of(config, segment=segment, backward=2 * (L_app + H_app + head))


def from_original_weights(weights: dict[str, Any]) -> dict[str, Any]:
    """The original code's tensor names (`[_orig_mod.]model.inner.embed_tokens.embedding_weight`, ...) to ours."""
    return {
        key.removeprefix("_orig_mod.").removeprefix("model.").replace(".embedding_weight", ".weight"): value
        for key, value in weights.items()
    }


SPEC = ModelSpec(
    family="act",
    config=HRMConfig,
    model=HRM,
    flops=hrm_flops,
    tiny=dict(hidden_size=32, num_heads=2, H_layers=1, L_layers=1, H_cycles=2, L_cycles=2),
    foreign_option="unitf_steps=3",
    adapter=from_original_weights,
)
