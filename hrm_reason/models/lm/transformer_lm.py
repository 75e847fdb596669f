"""Transformer-LM (docs/models.md §Transformer-LM): the plain baseline of the language-model comparison, `num_layers`
distinct CausalAttnBlocks applied once each.

h^0 = W_emb[x]; h^i = Block_i(h^{i-1}); logits = h^L W_emb^T. It is UniTF-LM with its M applications of one block
unshared: the same post-norm block, tied embedding and readout, RoPE, cache and init, and full backpropagation (a
feed-forward stack has no recurrence to truncate). So the three heads differ only in what the HRM-LM paper is about:
HRM-LM (gated slow and fast modules) against flat iteration (UniTF-LM) against no iteration at all (this head).
Parameters: Vd + L(16d^2 + 2d); at d = 128 and L = 4, 1.08M against HRM-LM's 1.04M at d = 128.

Init (the papers give none for this baseline): sigma = init_std / sqrt(c*L*d/4096) for the blocks, UniTF-LM's
width-corrected formula with its M applications read as L layers, so that neither head starts from a different scale.
"""

from __future__ import annotations

from typing import Annotated, Literal

import torch
from torch import nn

from hrm_reason.limits import INIT_C, LAYERS
from hrm_reason.models.flops import LMFlops, causal_block_flops, linear
from hrm_reason.models.lm.head import LMOutput
from hrm_reason.models.lm.lm_blocks import (
    CacheCursor,
    CausalAttnBlock,
    CausalAttnLMConfig,
    CausalLMHead,
    width_corrected_std,
)
from hrm_reason.models.spec import ModelSpec


class TransformerLMConfig(CausalAttnLMConfig):
    name: Literal["transformer_lm"] = "transformer_lm"
    num_layers: Annotated[int, LAYERS] = 4  # L distinct blocks, each applied once
    init_c: Annotated[float, INIT_C] = 2.0  # safety factor c of the width-corrected block init (as UniTF-LM's)

    @property
    def block_calls(self) -> int:
        return self.num_layers


class TransformerLM(CausalLMHead):
    def build(self, config: TransformerLMConfig) -> None:
        self.layers = nn.ModuleList(
            CausalAttnBlock(config.hidden_size, config.num_heads, config.rms_norm_eps) for _ in range(config.num_layers)
        )

    def init_weights(self, generator: torch.Generator) -> None:
        c = self.config
        std = width_corrected_std(c.init_std, c.init_c, c.num_layers, c.hidden_size)
        for block in self.layers:
            block.init_(std, generator)

    def run(self, input_ids: torch.Tensor, labels, rope, cursor: CacheCursor | None) -> LMOutput:
        """One pass through the stack; the plain next-token CE is the loss."""
        h = self.embed_tokens(input_ids)
        for block in self.layers:
            h = block(h, rope, cursor)
        return LMOutput(logits=self.lm_head(h))


def transformer_lm_flops(config: TransformerLMConfig, seq_len: int) -> LMFlops:
    """Per token: every block and the tied head once; the backward covers all of it."""
    d = config.hidden_size
    forward = config.num_layers * causal_block_flops(d, 4 * d, seq_len) + linear(d, config.vocab_size)
    return LMFlops(train_step=float(3 * forward), forward=float(forward))


SPEC = ModelSpec(
    family="lm",
    config=TransformerLMConfig,
    model=TransformerLM,
    flops=transformer_lm_flops,
    tiny={"hidden_size": 32, "num_heads": 2, "num_layers": 2, "max_seq_len": 64},
    foreign_option="M=2",
)
