"""Evaluation with an inference-time segment budget: accuracy after every segment m = 1..mmax, and the ACT result.

mmax may exceed the trained halt_max_steps (the paper's inference-time scaling), up to MAX_MMAX. ACT halting at
inference: an example stops at the first segment where q_halt > q_continue, or at mmax.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

from hrm_reason.data.puzzle import PuzzleSplit, eval_batches
from hrm_reason.errors import UserError
from hrm_reason.limits import MMAX
from hrm_reason.losses import IGNORE_LABEL_ID, LOSS_FUNCTIONS, LossType
from hrm_reason.models.act import ACTOutput
from hrm_reason.runtime.logs import progress_bar
from hrm_reason.tasks.base import SegmentMetric

# Segments `hrm eval` and `hrm solve` run at most. Every segment is one forward pass over every puzzle (every
# trajectory, with test-time compute), and the evaluation keeps sums and a table row per segment: --mmax 10^9 first
# asked for 16 GB of sums, then for 10^9 forward passes per batch. 1,024 is 64 times the default halt_max_steps (16).
MAX_MMAX = MMAX.high  # hrm_reason/limits.py: the flag checks it as it is parsed


def check_mmax(mmax: int, halt_max_steps: int | None = None) -> None:
    """A one-line UserError naming --mmax when it is outside 1..MAX_MMAX."""
    if not 1 <= mmax <= MAX_MMAX:
        trained = f"; this model was trained with halt_max_steps {halt_max_steps}" if halt_max_steps else ""
        raise UserError(
            f"--mmax {mmax}: expected 1 to {MAX_MMAX} segments (each runs the model on every puzzle{trained}; "
            "docs/commands.md)"
        )


class SegmentSource(Protocol):
    """Runs a batch's segments in its own way and yields the plain trajectory's outputs (evaluate/tta.py
    TestTimeEval); its `result` joins the eval result's extra under "test_time"."""

    def segments(
        self, model: nn.Module, batch: dict[str, torch.Tensor], mmax: int, key: Sequence[int]
    ) -> Iterator[ACTOutput]: ...

    def result(self, world_size: int) -> dict[str, Any]: ...


def plain_segments(model: nn.Module, batch: dict[str, torch.Tensor], mmax: int) -> Iterator[ACTOutput]:
    carry = model.empty_carry(batch)
    for _ in range(mmax):
        carry, out = model(carry, batch, halt_max_steps=mmax)
        yield out


@dataclass
class EvalResult:
    count: int
    mmax: int
    exact_accuracy: list[float]  # index m-1: after m segments
    token_accuracy: list[float]
    act_exact_accuracy: float
    act_mean_segments: float
    lm_loss: float  # after mmax segments, per-sequence mean token loss averaged over sequences
    q_halt_accuracy: float  # after mmax segments
    extra: dict[str, Any] = field(default_factory=dict)  # SegmentMetric results, by name
    provenance: dict[str, Any] | None = None  # hrm eval: what was evaluated, on what, by what (evaluate/run.py)

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    split: PuzzleSplit,
    mmax: int,
    global_batch_size: int,
    device: torch.device,
    loss_type: LossType = "stablemax_cross_entropy",
    max_examples: int | None = None,
    rank: int = 0,
    world_size: int = 1,
    progress: bool = True,
    metrics: Sequence[SegmentMetric] = (),
    test_time: SegmentSource | None = None,
) -> EvalResult:
    was_training = model.training
    model.eval()
    # Sums kept on the device and read once at the end: no host sync per segment.
    # Rows: exact and token accuracy per segment; then ACT exact, ACT segments, lm loss, q_halt accuracy, count.
    sums = torch.zeros(2 * mmax + 5, dtype=torch.float64, device=device)
    total = split.num_examples if max_examples is None else min(max_examples * len(split.sets), split.num_examples)
    bar = progress_bar(total=total, desc=f"eval (mmax={mmax})", unit="ex", enabled=progress, leave=False)
    batches = eval_batches(split, global_batch_size, rank, world_size, max_examples)
    for number, (_set_name, batch) in enumerate(batches):
        batch = {k: v.to(device) for k, v in batch.items()}
        labels = batch["labels"]
        mask = labels != IGNORE_LABEL_ID
        n_valid = mask.sum(-1)
        valid = n_valid > 0
        act_done = torch.zeros_like(valid)
        outputs = (
            plain_segments(model, batch, mmax)
            if test_time is None
            else test_time.segments(model, batch, mmax, (rank, number))
        )
        for m, out in enumerate(outputs):
            preds = out.logits.argmax(-1)
            for metric in metrics:
                metric.update(m, preds, out, batch, valid)
            correct = mask & (preds == labels)
            seq_correct = correct.sum(-1) == n_valid
            sums[m] += (valid & seq_correct).sum()
            sums[mmax + m] += torch.where(valid, correct.sum(-1) / n_valid.clamp_min(1), 0).sum()
            halt_now = valid & ~act_done & ((out.q_halt_logits > out.q_continue_logits) | (m == mmax - 1))
            sums[2 * mmax] += (halt_now & seq_correct).sum()
            sums[2 * mmax + 1] += halt_now.sum() * (m + 1)
            act_done |= halt_now
        token_loss = LOSS_FUNCTIONS[loss_type](out.logits, labels)
        sums[2 * mmax + 2] += torch.where(valid, token_loss.sum(-1) / n_valid.clamp_min(1), 0).sum()
        sums[2 * mmax + 3] += (valid & ((out.q_halt_logits >= 0) == seq_correct)).sum()
        sums[2 * mmax + 4] += valid.sum()
        bar.update(min(batch["inputs"].shape[0], bar.total - bar.n))  # padded rows are not examples
    bar.close()
    model.train(was_training)

    extra: dict[str, Any] = {}
    for metric in metrics:
        extra.update(metric.result(world_size))
    if test_time is not None:
        extra["test_time"] = test_time.result(world_size)
    if world_size > 1:
        torch.distributed.all_reduce(sums)
    sums = sums.cpu()
    exact, token = sums[:mmax], sums[mmax : 2 * mmax]
    act_exact, act_segments, lm_loss, q_acc, count = sums[2 * mmax :].tolist()
    count = int(count)
    d = max(count, 1)
    return EvalResult(
        count=count,
        mmax=mmax,
        exact_accuracy=(exact / d).tolist(),
        token_accuracy=(token / d).tolist(),
        act_exact_accuracy=act_exact / d,
        act_mean_segments=act_segments / d,
        lm_loss=lm_loss / d,
        q_halt_accuracy=q_acc / d,
        extra=extra,
    )


def format_table(result: EvalResult) -> str:
    columns = {name: v for name, v in result.extra.items() if isinstance(v, list) and len(v) == result.mmax}
    width = max([8, *(len(name) for name in columns)])
    lines = [f"{'segments':>8}  {'exact':>8}  {'token':>8}" + "".join(f"  {name:>{width}}" for name in columns)]
    for m in range(result.mmax):
        extra = "".join(f"  {v[m]:>{width}.4f}" for v in columns.values())
        lines.append(f"{m + 1:>8}  {result.exact_accuracy[m]:>8.4f}  {result.token_accuracy[m]:>8.4f}{extra}")
    lines.append(
        f"ACT (halt when q_halt > q_continue, cap {result.mmax}): exact {result.act_exact_accuracy:.4f}, "
        f"mean segments {result.act_mean_segments:.2f}  [{result.count} examples]"
    )
    lines += [f"{name}: {v:.4f}" for name, v in result.extra.items() if isinstance(v, float)]
    return "\n".join(lines)
