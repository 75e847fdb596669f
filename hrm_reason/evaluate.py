"""Evaluation with an inference-time segment budget: accuracy after every segment m = 1..mmax, and the ACT result.

mmax may exceed the trained halt_max_steps (the paper's inference-time scaling). ACT halting at inference: an example
stops at the first segment where q_halt > q_continue, or at mmax.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from tqdm import tqdm

from hrm_reason.data import PuzzleSplit, eval_batches
from hrm_reason.losses import IGNORE_LABEL_ID, LOSS_FUNCTIONS, LossType


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
) -> EvalResult:
    was_training = model.training
    model.eval()
    exact = torch.zeros(mmax, dtype=torch.float64)
    token = torch.zeros(mmax, dtype=torch.float64)
    act_exact = act_segments = lm_loss = q_acc = 0.0
    count = 0
    total = split.num_examples if max_examples is None else min(max_examples * len(split.sets), split.num_examples)
    bar = tqdm(total=total, desc=f"eval (mmax={mmax})", unit="ex", disable=not progress, leave=False, dynamic_ncols=True)
    for _set_name, batch in eval_batches(split, global_batch_size, rank, world_size, max_examples):
        batch = {k: v.to(device) for k, v in batch.items()}
        labels = batch["labels"]
        mask = labels != IGNORE_LABEL_ID
        n_valid = mask.sum(-1)
        valid = n_valid > 0
        act_done = torch.zeros_like(valid)
        carry = model.initial_carry(batch)
        for m in range(mmax):
            carry, out = model(carry, batch, halt_max_steps=mmax)
            correct = mask & (out["logits"].argmax(-1) == labels)
            seq_correct = correct.sum(-1) == n_valid
            exact[m] += (valid & seq_correct).sum().item()
            token[m] += torch.where(valid, correct.sum(-1) / n_valid.clamp_min(1), 0).sum().item()
            halt_now = valid & ~act_done & ((out["q_halt_logits"] > out["q_continue_logits"]) | (m == mmax - 1))
            act_exact += (halt_now & seq_correct).sum().item()
            act_segments += halt_now.sum().item() * (m + 1)
            act_done |= halt_now
        token_loss = LOSS_FUNCTIONS[loss_type](out["logits"], labels)
        lm_loss += torch.where(valid, token_loss.sum(-1) / n_valid.clamp_min(1), 0).sum().item()
        q_acc += (valid & ((out["q_halt_logits"] >= 0) == seq_correct)).sum().item()
        count += int(valid.sum().item())
        bar.update(int(valid.sum().item()))
    bar.close()
    model.train(was_training)

    if world_size > 1:
        stats = torch.cat([exact, token, torch.tensor([act_exact, act_segments, lm_loss, q_acc, count], dtype=torch.float64)]).to(device)
        torch.distributed.all_reduce(stats)
        stats = stats.cpu()
        exact, token = stats[:mmax], stats[mmax : 2 * mmax]
        act_exact, act_segments, lm_loss, q_acc, count = stats[2 * mmax :].tolist()
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
    )


def format_table(result: EvalResult) -> str:
    lines = [f"{'segments':>8}  {'exact':>8}  {'token':>8}"]
    for m in range(result.mmax):
        lines.append(f"{m + 1:>8}  {result.exact_accuracy[m]:>8.4f}  {result.token_accuracy[m]:>8.4f}")
    lines.append(
        f"ACT (halt when q_halt > q_continue, cap {result.mmax}): exact {result.act_exact_accuracy:.4f}, "
        f"mean segments {result.act_mean_segments:.2f}  [{result.count} examples]"
    )
    return "\n".join(lines)
