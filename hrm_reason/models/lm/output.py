"""What every language-model head returns, shaped like a `transformers` causal-LM output so callers need not care
which head they hold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class LMOutput:
    logits: torch.Tensor  # (batch, seq, vocab)
    loss: torch.Tensor | None = None  # next-token CE over labels != -100, plus the head's own auxiliary terms
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # detached scalars to log ("ce" is the plain CE)
    past_key_values: Any = None  # the head's cache after this call (use_cache=True)
