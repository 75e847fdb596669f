"""The flat-iteration control of HRM's claims: UniTF, one block applied M = unitf_steps times per segment with the
same weights, the input added before every application, no H/L levels (the HRM-LM paper's Universal-Transformer
control). Only the last K = unitf_grad_steps applications carry gradient (the paper's K-step window; all of them by
default).

Like the transformer control (models/transformer.py) it uses HRM's block, input embedding, heads (models/core.py) and
ACT loop (models/act.py), so that against HRM only the recurrence differs. This file is a complete model: its config,
its core, its model class, its FLOP count and its registry entry (`SPEC`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import torch
from pydantic import Field, model_validator

from hrm_reason.limits import CYCLES
from hrm_reason.models.act import ACTModel, Batch, PrefixConfig, QTarget
from hrm_reason.models.core import CoreOutput, LatentCarry, PuzzleCore
from hrm_reason.models.flops import ACTFlops, block_flops, head_flops
from hrm_reason.models.hrm import HRMBlock
from hrm_reason.models.spec import ModelSpec


class UniTFConfig(PrefixConfig):
    name: Literal["unitf"] = "unitf"
    unitf_steps: Annotated[int, CYCLES] = Field(
        8, description="applications of its one shared block per segment (the HRM-LM paper's M)"
    )
    unitf_grad_steps: Annotated[int, CYCLES] | None = Field(
        None,
        description="only the last K applications carry gradient (the HRM-LM paper's K-step window); None: all",
    )
    q_target: QTarget = "extra_forward"

    @model_validator(mode="after")
    def _window(self) -> UniTFConfig:
        if self.unitf_grad_steps is not None and self.unitf_grad_steps > self.unitf_steps:
            raise ValueError(f"unitf_grad_steps {self.unitf_grad_steps} exceeds unitf_steps {self.unitf_steps}")
        return self


class UniTFCore(PuzzleCore):
    def __init__(self, config: UniTFConfig) -> None:
        super().__init__(config, LatentCarry, output_state="z")
        self.register_initial_states()
        self.block = HRMBlock(config)

    def forward(self, carry: LatentCarry, batch: Batch) -> CoreOutput:
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


class UniTF(ACTModel):
    inner_class = UniTFCore


def unitf_flops(config: UniTFConfig) -> ACTFlops:
    """unitf_steps applications of the block, the last unitf_grad_steps of them with gradient."""
    block, head = block_flops(config, config.seq_len + config.prefix_len), head_flops(config)
    K = config.unitf_grad_steps or config.unitf_steps
    return ACTFlops.of(config, segment=config.unitf_steps * block + head, backward=2 * (K * block + head))


SPEC = ModelSpec(
    family="act",
    config=UniTFConfig,
    model=UniTF,
    flops=unitf_flops,
    tiny={"hidden_size": 32, "num_heads": 2, "unitf_steps": 2},
    foreign_option="mlp_t=true",
)
