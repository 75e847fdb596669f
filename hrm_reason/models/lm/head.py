"""How every language-model head is called and what it returns, shaped like a `transformers` causal LM so callers
need not care which head they hold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from hrm_reason.losses import next_token_ce
from hrm_reason.models.spec import FamilySpec

# The language-model family (models/registry.py `families`): heads that generate text, not evaluated per segment.
FAMILY = FamilySpec(segments=False, generates=True)


@dataclass
class LMOutput:
    logits: torch.Tensor  # (batch, seq, vocab)
    loss: torch.Tensor | None = None  # next-token CE over labels != -100, plus the head's own auxiliary terms
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # detached scalars to log ("ce" is the plain CE)
    past_key_values: Any = None  # the head's cache after this call (use_cache=True)


class LMHead(nn.Module):
    """Base of every language-model head: the call (transformers' causal-LM keywords) and the loss, declared once.

    A head implements `decode(input_ids, token_type_ids, labels, past_key_values, use_cache, **extra)`, returning its
    logits, metrics and cache. A head with a loss of its own (HRM-LM: the mean over passes with a fusion-entropy term)
    sets it there; otherwise the loss is the plain next-token CE over the labels, also logged as the metric "ce"."""

    supports_cache = True

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config

    def compile_core(self) -> None:
        """torch.compile the head in place (parameter names unchanged)."""
        self.compile()

    def post_step(self) -> None:
        """Called after every optimizer step; a head with state of its own updates it here (HAM's threshold
        controller)."""

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        past_key_values: Any = None,
        use_cache: bool = False,
        **extra: Any,
    ) -> LMOutput:
        """input_ids (batch, seq). token_type_ids: 1 = bidirectional prefix (hrm_text only), 0 = causal. labels:
        unshifted, -100 ignored; logits[:, t] predict labels[:, t + 1]. past_key_values: the cache this head returned
        from a call with use_cache=True."""
        out = self.decode(input_ids, token_type_ids, labels, past_key_values, use_cache, **extra)
        if labels is not None and out.loss is None:
            out.loss = next_token_ce(out.logits, labels)
            out.metrics["ce"] = out.loss.detach()
        return out
