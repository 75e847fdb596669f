"""Evaluation of an LM head trained PrefixLM on puzzles (hrm_reason/data/prefix_lm.py has the layout): greedy decoding
of the solution, exact and token accuracy, and the teacher-forced response CE."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hrm_reason.data.prefix_lm import PuzzleLayout, PuzzleLMData, forward_sequences, response_grid, uses_prefix
from hrm_reason.errors import UserError
from hrm_reason.losses import IGNORE_LABEL_ID
from hrm_reason.models.lm.sampling import generate
from hrm_reason.runtime.device import autocast_context
from hrm_reason.runtime.logs import progress_bar


@torch.no_grad()
def greedy_decode(
    model: nn.Module, prompt_ids: torch.Tensor, layout: PuzzleLayout, use_cache: bool | None = None
) -> torch.Tensor:
    """Argmax decoding of the L solution cells from the prompt (puzzle + SEP) [batch, L + 1]; returns [batch, L].
    use_cache None: the head's KV cache when it has one (equal to recomputation; tested)."""
    if prompt_ids.shape[1] != layout.prefix_len:
        raise UserError(f"the prompt must hold puzzle + SEP = {layout.prefix_len} tokens, got {prompt_ids.shape[1]}")
    out = generate(
        model, prompt_ids, layout.puzzle_len, temperature=0.0, use_cache=use_cache, prefix=uses_prefix(model)
    )
    return response_grid(out, layout)


@dataclass
class PuzzleLMEvalResult:
    count: int  # examples with at least one scored cell
    exact_accuracy: float  # greedy decoding, every scored cell right
    token_accuracy: float  # greedy decoding, per-example fraction of scored cells right, averaged
    ce: float  # teacher-forced response cross-entropy, nats per scored cell
    seconds: float
    examples_per_s: float
    provenance: dict[str, Any] | None = None  # hrm eval: what was evaluated, on what, by what (evaluate/run.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self) -> dict[str, float]:
        """eval/* keys named as the puzzle trainer names them (eval/exact_accuracy, eval/accuracy)."""
        return {
            "eval/count": self.count,
            "eval/exact_accuracy": self.exact_accuracy,
            "eval/accuracy": self.token_accuracy,
            "eval/ce": self.ce,
            "eval/examples_per_s": self.examples_per_s,
        }


def score(preds: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(valid, exact, token fraction) per example, from predicted cells and scored labels [batch, L] (-100 ignored)."""
    mask = labels != IGNORE_LABEL_ID
    n_valid = mask.sum(-1)
    correct = (mask & (preds == labels)).sum(-1)
    return n_valid > 0, correct == n_valid, correct / n_valid.clamp_min(1)


@torch.no_grad()
def evaluate_puzzle_lm(
    model: nn.Module,
    data: PuzzleLMData,
    batch_size: int,
    device: torch.device | str,
    max_examples: int | None = None,
    use_cache: bool | None = None,
    progress: bool = False,
    forward_dtype: str = "auto",
) -> PuzzleLMEvalResult:
    """Exact and token accuracy of greedy decoding (with the KV cache where the head has one) and the teacher-forced
    response CE on the test split."""
    device = torch.device(device)
    was_training = model.training
    model.eval()
    layout = data.layout
    exact = token = ce_sum = 0.0
    count = cells = examples = 0
    start = time.perf_counter()
    bar = progress_bar(
        total=data.num_test_examples(max_examples),
        desc="eval (greedy)",
        unit="ex",
        enabled=progress,
        leave=False,
    )
    try:
        for seqs in data.test_batches(batch_size, max_examples):
            seqs = seqs.to(device)
            with autocast_context(device, forward_dtype):
                logits = forward_sequences(model, seqs).logits
                preds = greedy_decode(model, seqs.input_ids[:, : layout.prefix_len], layout, use_cache)
            targets = seqs.labels[:, 1:].reshape(-1)
            ce_sum += F.cross_entropy(
                logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                targets,
                ignore_index=IGNORE_LABEL_ID,
                reduction="sum",
            ).item()
            cells += int((targets != IGNORE_LABEL_ID).sum())
            valid, seq_exact, frac = score(preds, response_grid(seqs.labels, layout))
            exact += float((valid & seq_exact).sum())
            token += float(torch.where(valid, frac, 0.0).sum())
            count += int(valid.sum())
            examples += seqs.input_ids.shape[0]
            bar.update(seqs.input_ids.shape[0])
    finally:
        bar.close()
        model.train(was_training)
    if examples == 0:
        raise UserError(f"{data.path}: the test split has no examples to evaluate")
    seconds = time.perf_counter() - start
    d = max(count, 1)
    return PuzzleLMEvalResult(
        count=count,
        exact_accuracy=exact / d,
        token_accuracy=token / d,
        ce=ce_sum / max(cells, 1),
        seconds=seconds,
        examples_per_s=examples / max(seconds, 1e-9),
    )


def format_puzzle_result(result: PuzzleLMEvalResult) -> str:
    return "\n".join(
        [
            f"examples            {result.count}",
            f"exact accuracy      {result.exact_accuracy:.4f}   (greedy decoding, whole solution right)",
            f"token accuracy      {result.token_accuracy:.4f}",
            f"response CE         {result.ce:.4f} nats/cell (teacher-forced)",
            f"examples/s          {result.examples_per_s:.1f}",
        ]
    )
