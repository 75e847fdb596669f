"""The direct-prediction control of HRM's claims: a transformer of HRM's blocks (the HRM paper's baseline).

It uses HRM's block (post-norm attention + SwiGLU), HRM's input embedding and heads (models/core.py) and HRM's ACT
loop (models/act.py), so that against HRM only the recurrence differs. Per segment the carried state plus the input
goes once through `num_layers` stacked blocks, every one with gradient. With halt_max_steps=1 it is one pass from a
fixed state (direct prediction); with halt_max_steps > 1 it trains with deep supervision and ACT as HRM does (the ARC
Prize analysis's ablation), which tells the effect of the outer loop apart from that of the hierarchy. Its sibling
control, flat shared-weight iteration, is models/unitf.py.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from torch import nn

from hrm_reason.limits import LAYERS
from hrm_reason.models.act import ACTModel, Batch, PrefixConfig, QTarget
from hrm_reason.models.core import CoreOutput, LatentCarry, PuzzleCore
from hrm_reason.models.flops import ACTFlops, block_flops, head_flops
from hrm_reason.models.hrm import HRMBlock
from hrm_reason.models.spec import ModelSpec


class TransformerConfig(PrefixConfig):
    name: Literal["transformer"] = "transformer"
    num_layers: Annotated[int, LAYERS] = Field(8, description="blocks stacked (8: HRM's H_layers + L_layers)")
    q_target: QTarget = "extra_forward"


class TransformerCore(PuzzleCore):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config, LatentCarry, output_state="z")
        self.register_initial_states()
        self.layers = nn.ModuleList(HRMBlock(config) for _ in range(config.num_layers))

    def forward(self, carry: LatentCarry, batch: Batch) -> CoreOutput:
        cos_sin = self.cos_sin()
        z = carry.z + self.input_embeddings(batch["inputs"], batch["puzzle_identifiers"])
        for layer in self.layers:
            z = layer(z, cos_sin)
        return self.segment_result(z=z)


class Transformer(ACTModel):
    inner_class = TransformerCore


def transformer_flops(config: TransformerConfig) -> ACTFlops:
    """Every block once per segment, all with gradient."""
    segment = config.num_layers * block_flops(config, config.seq_len + config.prefix_len) + head_flops(config)
    return ACTFlops.of(config, segment=segment, backward=2 * segment)


SPEC = ModelSpec(
    family="act",
    config=TransformerConfig,
    model=Transformer,
    flops=transformer_flops,
    tiny={"hidden_size": 32, "num_heads": 2, "num_layers": 2},
    foreign_option="H_cycles=7",
)
