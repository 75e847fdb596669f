"""The two controls of HRM's claims: a transformer of HRM's blocks, and flat shared-weight iteration (UniTF).

Both use HRM's block (post-norm attention + SwiGLU), HRM's input embedding and heads (models/core.py) and HRM's ACT
loop (models/act.py), so that against HRM only the recurrence differs.

- `transformer`: the direct-prediction baseline of the HRM paper. Per segment the carried state plus the input goes
  once through `num_layers` stacked blocks, every one with gradient. With halt_max_steps=1 it is one pass from a fixed
  state (direct prediction); with halt_max_steps > 1 it trains with deep supervision and ACT as HRM does (the ARC Prize
  analysis's ablation), which tells the effect of the outer loop apart from that of the hierarchy.
- `unitf`: one block applied M = unitf_steps times per segment with the same weights, the input added before every
  application, no H/L levels (the HRM-LM paper's Universal-Transformer control). Only the last K = unitf_grad_steps
  applications carry gradient (the paper's K-step window; all of them by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from hrm_reason.models.act import ACTModel, Batch, PrefixConfig
from hrm_reason.models.core import PuzzleCore
from hrm_reason.models.flops import ACTFlops, block_flops, head_flops
from hrm_reason.models.hrm import HRMBlock

QTarget = Literal["extra_forward", "next_segment"]


class TransformerConfig(PrefixConfig):
    name: Literal["transformer"] = "transformer"
    num_layers: int = Field(8, ge=1, description="blocks stacked (8: HRM's H_layers + L_layers)")
    q_target: QTarget = "extra_forward"


class UniTFConfig(PrefixConfig):
    name: Literal["unitf"] = "unitf"
    unitf_steps: int = Field(
        8, ge=1, description="applications of its one shared block per segment (the HRM-LM paper's M)"
    )
    unitf_grad_steps: int | None = Field(
        None,
        ge=1,
        description="only the last K applications carry gradient (the HRM-LM paper's K-step window); None: all",
    )
    q_target: QTarget = "extra_forward"

    @model_validator(mode="after")
    def _window(self) -> UniTFConfig:
        if self.unitf_grad_steps is not None and self.unitf_grad_steps > self.unitf_steps:
            raise ValueError(f"unitf_grad_steps {self.unitf_grad_steps} exceeds unitf_steps {self.unitf_steps}")
        return self


@dataclass
class LatentCarry:
    z: torch.Tensor


class TransformerCore(PuzzleCore):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config, LatentCarry, output_state="z")
        self.register_initial_states()
        self.layers = nn.ModuleList(HRMBlock(config) for _ in range(config.num_layers))

    def forward(
        self, carry: LatentCarry, batch: Batch
    ) -> tuple[LatentCarry, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        cos_sin = self.cos_sin()
        z = carry.z + self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])
        for layer in self.layers:
            z = layer(z, cos_sin)
        return self.segment_result(z=z)


class UniTFCore(PuzzleCore):
    def __init__(self, config: UniTFConfig) -> None:
        super().__init__(config, LatentCarry, output_state="z")
        self.register_initial_states()
        self.block = HRMBlock(config)

    def forward(
        self, carry: LatentCarry, batch: Batch
    ) -> tuple[LatentCarry, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        cos_sin = self.cos_sin()
        x = self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])
        M = self.config.unitf_steps
        K = self.config.unitf_grad_steps or M
        z = carry.z
        with torch.no_grad():
            for _ in range(M - K):
                z = self.block(z + x, cos_sin)
        for _ in range(K):
            z = self.block(z + x, cos_sin)
        return self.segment_result(z=z)


class Transformer(ACTModel):
    core = TransformerCore


class UniTF(ACTModel):
    core = UniTFCore


def transformer_flops(config: TransformerConfig) -> ACTFlops:
    """Every block once per segment, all with gradient."""
    segment = config.num_layers * block_flops(config, config.seq_len + config.prefix_len) + head_flops(config)
    return ACTFlops.of(config, segment=segment, backward=2 * segment)


def unitf_flops(config: UniTFConfig) -> ACTFlops:
    """unitf_steps applications of the block, the last unitf_grad_steps of them with gradient."""
    block, head = block_flops(config, config.seq_len + config.prefix_len), head_flops(config)
    K = config.unitf_grad_steps or config.unitf_steps
    return ACTFlops.of(config, segment=config.unitf_steps * block + head, backward=2 * (K * block + head))
