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

import torch
from torch import nn

from hrm_reason.models.act import ACTModel
from hrm_reason.models.core import Batch, PuzzleCore, PuzzleCoreConfig
from hrm_reason.models.hrm import HRMBlock


class TransformerConfig(PuzzleCoreConfig):
    num_layers: int = 8


class UniTFConfig(PuzzleCoreConfig):
    unitf_steps: int = 8
    unitf_grad_steps: int | None = None  # None: every application


@dataclass
class LatentCarry:
    z: torch.Tensor


class TransformerCore(PuzzleCore):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config, LatentCarry, output_state="z")
        self.layers = nn.ModuleList(HRMBlock(config) for _ in range(config.num_layers))  # type: ignore[arg-type]

    def forward(self, carry: LatentCarry, batch: Batch) -> tuple[LatentCarry, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        cos_sin = self.cos_sin()
        z = carry.z + self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])
        for layer in self.layers:
            z = layer(z, cos_sin)
        logits, q = self.heads(z)
        return LatentCarry(z=z.detach()), logits, q


class UniTFCore(PuzzleCore):
    def __init__(self, config: UniTFConfig) -> None:
        super().__init__(config, LatentCarry, output_state="z")
        if config.unitf_grad_steps is not None and not 1 <= config.unitf_grad_steps <= config.unitf_steps:
            raise ValueError(f"unitf_grad_steps {config.unitf_grad_steps} must be in 1..unitf_steps ({config.unitf_steps})")
        self.block = HRMBlock(config)  # type: ignore[arg-type]

    def forward(self, carry: LatentCarry, batch: Batch) -> tuple[LatentCarry, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
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
        logits, q = self.heads(z)
        return LatentCarry(z=z.detach()), logits, q


class Transformer(ACTModel):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config, TransformerCore(config))


class UniTF(ACTModel):
    def __init__(self, config: UniTFConfig) -> None:
        super().__init__(config, UniTFCore(config))
