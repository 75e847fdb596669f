"""Validation of a language-model head: next-token cross-entropy and perplexity over the validation split, tokens/s.

The CE is computed here from the logits (sum over every predicted token, divided by their count), not taken from the
head's own `metrics["ce"]`, so that every head is measured by the same code. Checkpoints load through
`hrm_reason.load`.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hrm_reason.data.text import TokenStream, validation_batches
from hrm_reason.errors import UserError
from hrm_reason.runtime.device import autocast_context
from hrm_reason.runtime.logs import progress_bar


@dataclass
class LMEvalResult:
    ce: float  # mean next-token cross-entropy, nats
    perplexity: float
    tokens: int  # predicted tokens
    seconds: float
    tokens_per_s: float
    metrics: dict[str, float] = field(default_factory=dict)  # the head's own metrics, token-weighted means
    provenance: dict[str, Any] | None = None  # hrm eval: what was evaluated, on what, by what (evaluate/run.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@torch.no_grad()
def evaluate_lm(
    model: nn.Module,
    stream: TokenStream,
    seq_len: int,
    batch_size: int,
    device: torch.device,
    max_tokens: int | None = None,
    progress: bool = False,
    forward_dtype: str = "auto",
) -> LMEvalResult:
    """CE and perplexity over contiguous windows of the stream (up to `max_tokens` predicted tokens)."""
    was_training = model.training
    model.eval()
    ce_sum, tokens = 0.0, 0
    metric_sums: dict[str, float] = {}
    total = len(stream) - 1 if max_tokens is None else min(len(stream) - 1, max_tokens)
    if total < 1:
        raise UserError("the validation split has fewer than 2 tokens: nothing to predict")
    start = time.perf_counter()
    bar = progress_bar(total=total, desc="eval", unit="tok", unit_scale=True, enabled=progress, leave=False)
    try:
        for ids in validation_batches(stream, seq_len, batch_size, max_tokens):
            ids = ids.to(device)
            with autocast_context(device, forward_dtype):
                out = model(ids, labels=ids)
            logits = out.logits[:, :-1].float()
            n = ids[:, 1:].numel()
            ce_sum += F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum"
            ).item()
            tokens += n
            for k, v in out.metrics.items():
                if k != "ce" and isinstance(v, torch.Tensor) and v.numel() == 1:
                    metric_sums[k] = metric_sums.get(k, 0.0) + float(v) * n
            bar.update(n)
    finally:
        bar.close()
        model.train(was_training)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    ce = ce_sum / tokens
    return LMEvalResult(
        ce=ce,
        perplexity=math.exp(min(ce, 700.0)),
        tokens=tokens,
        seconds=seconds,
        tokens_per_s=tokens / max(seconds, 1e-9),
        metrics={k: v / tokens for k, v in metric_sums.items()},
    )


def format_lm_result(result: LMEvalResult) -> str:
    lines = [
        f"validation tokens   {result.tokens}",
        f"cross-entropy       {result.ce:.4f} nats/token",
        f"perplexity          {result.perplexity:.3f}",
        f"tokens/s            {result.tokens_per_s:.0f}",
    ]
    lines += [f"{k:<19} {v:.4f}" for k, v in sorted(result.metrics.items())]
    return "\n".join(lines)
