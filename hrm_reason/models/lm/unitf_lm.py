"""UniTF-LM (docs/models.md §UniTF-LM): the HRM-LM paper's flat control, one shared CausalAttnBlock applied M times.

h^0 = W_emb[x]; h^i = Block(h^{i-1}); logits = h^M W_emb^T. No input encoder, gates, fusion or slow module, so the
parameter count is exactly Vd + 16d^2 + 2d. Same K-step gradient window as HRM-LM.

Choices where the paper is silent or inconsistent:
- Re-adding e at every step is not stated; `reinject_input` (default off, the paper's reading) gives
  h^0 = 0, h^i = Block(h^{i-1} + e), whose first step equals the default's; it costs no parameters.
- Init: sigma = init_std / sqrt(c*M*d/4096) for the block (the width-corrected formula) with c = init_c = 2, the
  safety factor of the paper's later runs (c = 1 is the formula as first written, c = 4 its "v4").
- Confound kept on purpose: with K < M and no re-injection, W_emb gets no gradient through the input path, only
  through the tied head. Set K = M or reinject_input = True to remove it.
- The reported plateau values disagree (6.403 vs 6.673 at d=4096; "five runs" are four): no code depends on them.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Annotated, Literal

import torch

from hrm_reason.limits import CYCLES, GRAD_STEPS, INIT_C
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


class UniTFLMConfig(CausalAttnLMConfig):
    """K is the number of the M block applications that carry gradient."""

    name: Literal["unitf_lm"] = "unitf_lm"
    M: Annotated[int, CYCLES] = 12  # applications of the shared block
    K: Annotated[int, GRAD_STEPS] = 2  # gradient window: the last K of the M applications carry gradient (K >= M: all)
    reinject_input: bool = False
    init_c: Annotated[float, INIT_C] = 2.0  # safety factor c of the width-corrected block init

    @property
    def block_calls(self) -> int:
        return self.M


class UniTFLM(CausalLMHead):
    def build(self, config: UniTFLMConfig) -> None:
        self.block = CausalAttnBlock(config.hidden_size, config.num_heads, config.rms_norm_eps)  # theta_U

    def init_weights(self, generator: torch.Generator) -> None:
        self.block.init_(self.block_init_std(), generator)

    def block_init_std(self) -> float:
        c = self.config
        return width_corrected_std(c.init_std, c.init_c, c.M, c.hidden_size)

    def run(self, input_ids: torch.Tensor, labels, rope, cursor: CacheCursor | None) -> LMOutput:
        """M applications of the block; the plain next-token CE is the loss."""
        c = self.config
        e = self.embed_tokens(input_ids)
        h = torch.zeros_like(e) if c.reinject_input else e
        K0 = max(0, c.M - c.K)
        for i in range(1, c.M + 1):
            with torch.no_grad() if i <= K0 else nullcontext():
                h = self.block(h + e if c.reinject_input else h, rope, cursor)
        return LMOutput(logits=self.lm_head(h))


def unitf_lm_flops(config: UniTFLMConfig, seq_len: int) -> LMFlops:
    """Per token: M applications of the block and the tied head; a backward covers the last K and the head."""
    d = config.hidden_size
    block, head = causal_block_flops(d, 4 * d, seq_len), linear(d, config.vocab_size)
    forward = config.M * block + head
    return LMFlops(train_step=float(forward + 2 * (min(config.K, config.M) * block + head)), forward=float(forward))


SPEC = ModelSpec(
    family="lm",
    config=UniTFLMConfig,
    model=UniTFLM,
    flops=unitf_lm_flops,
    tiny={"hidden_size": 32, "num_heads": 2, "M": 3, "K": 2, "max_seq_len": 64},
    foreign_option="N=2",
)
