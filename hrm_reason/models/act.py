"""The ACT spine of every puzzle model: the config fields they share, HRM's outer loop (deep supervision over a
persistent carry, Q-head halting, exploration, the Q-continue target) and the ACT loss, with one typed output between
them. HRM, the transformer and UniTF baselines and TRM train exactly alike through it and differ only in their core
(the recurrence, models/core.py). A core without a continue logit (TRM, `q_target` "none") reports q_continue = 0, so
a row halts when q_halt > 0 and the loss has no continue term (docs/models.md §ACT).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn

from hrm_reason.limits import (
    EPS,
    EXPANSION,
    HEADS,
    POSITIONS,
    PREFIX,
    PUZZLE_EMB,
    PUZZLES,
    ROPE_THETA,
    SEGMENTS,
    VOCAB,
    WIDTH,
)
from hrm_reason.losses import IGNORE_LABEL_ID, LOSS_FUNCTIONS
from hrm_reason.models.spec import FamilySpec
from hrm_reason.runtime.device import compute_dtype

# The ACT family (models/registry.py `families`): evaluated per segment, no text generation.
FAMILY = FamilySpec(segments=True, generates=False)

Batch = dict[str, torch.Tensor]
# Where the Q-continue target of a model that has one comes from (docs/models.md, "The Q-continue target").
QTarget = Literal["extra_forward", "next_segment"]


class LossConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: Literal["ACTLossHead", "losses@ACTLossHead"] = "ACTLossHead"
    loss_type: Literal["stablemax_cross_entropy", "softmax_cross_entropy"] = "stablemax_cross_entropy"


class ACTConfig(BaseModel):
    """The options every ACT puzzle model reads; each model's config adds its own (models/hrm.py, transformer.py,
    unitf.py, trm.py). seq_len, vocab_size and num_puzzle_identifiers come from the dataset (registry.build_model)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str
    # Each numeric field bounded in its annotation (hrm_reason/limits.py, each bound with its reason).
    seq_len: Annotated[int, POSITIONS] | None = Field(None, description="from the dataset")
    vocab_size: Annotated[int, VOCAB] | None = Field(None, description="from the dataset")
    num_puzzle_identifiers: Annotated[int, PUZZLES] | None = Field(None, description="from the dataset")

    hidden_size: Annotated[int, WIDTH] = 512
    num_heads: Annotated[int, HEADS] = 8
    expansion: Annotated[float, EXPANSION] = 4.0
    pos_encodings: Literal["rope", "learned", "none"] = Field("rope", description="none: not for hrm")
    puzzle_emb_ndim: Annotated[int, PUZZLE_EMB] | None = Field(None, description="None: hidden_size")
    rms_norm_eps: Annotated[float, EPS] = 1e-5
    rope_theta: Annotated[float, ROPE_THETA] = 10000.0
    halt_max_steps: Annotated[int, SEGMENTS] = 16
    halt_exploration_prob: float = Field(0.1, ge=0, le=1)
    forward_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="bf16 on CUDA (auto, bfloat16), fp32 on a CPU"
    )
    loss: LossConfig = LossConfig()

    @property
    def depth(self) -> tuple[int, int] | None:
        """(H_cycles, L_cycles) of a model whose segment recurses that deep (HRM, TRM), which a depth curriculum may
        change per call (`ACTModel.forward`'s `cycles`); None for a model without such a depth."""
        return None

    @model_validator(mode="after")
    def _heads_divide(self) -> ACTConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} must be divisible by num_heads {self.num_heads}")
        if self.pos_encodings == "rope" and (self.hidden_size // self.num_heads) % 2:
            # RoPE rotates pairs of channels: an odd head size fails inside the first forward, not here.
            raise ValueError(
                f"arch.hidden_size {self.hidden_size} / arch.num_heads {self.num_heads} gives an odd head size "
                f"{self.hidden_size // self.num_heads}; RoPE (arch.pos_encodings=rope) needs an even one"
            )
        return self

    def resolved(self, sizes: dict[str, int], device: torch.device) -> ACTConfig:
        """This config with the dataset's sizes, the compute dtype of `device` and every None default filled: what
        the model reads and what its checkpoints record."""
        dtype = compute_dtype(self.forward_dtype, device)  # fp32 on a CPU, whatever was asked (the one policy)
        update = {**sizes, "forward_dtype": dtype, "puzzle_emb_ndim": self.emb_ndim}
        return self.model_copy(update=update | self._resolved_defaults())

    def _resolved_defaults(self) -> dict[str, Any]:
        return {}

    @property
    def emb_ndim(self) -> int:
        return self.hidden_size if self.puzzle_emb_ndim is None else self.puzzle_emb_ndim

    @property
    def prefix_len(self) -> int:
        """Positions before the grid that hold the puzzle embedding: as many as it fills."""
        return -(self.emb_ndim // -self.hidden_size)

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32 if self.forward_dtype == "auto" else getattr(torch, self.forward_dtype)


class PrefixConfig(ACTConfig):
    """The options of the models other than HRM: how many prefix positions the puzzle embedding gets."""

    puzzle_emb_len: Annotated[int, PREFIX] | None = Field(
        None,
        description="prefix positions; the puzzle embedding fills the first, the others are zero "
        "'registers' (TRM: 16); None: ceil(puzzle_emb_ndim / hidden_size), as hrm",
    )

    @model_validator(mode="after")
    def _prefix_holds_embedding(self) -> PrefixConfig:
        if self.puzzle_emb_len is not None and self.puzzle_emb_len * self.hidden_size < self.emb_ndim:
            raise ValueError(
                f"puzzle_emb_len {self.puzzle_emb_len} positions of hidden_size {self.hidden_size} "
                f"cannot hold puzzle_emb_ndim {self.emb_ndim}"
            )
        return self

    def _resolved_defaults(self) -> dict[str, Any]:
        return {"puzzle_emb_len": self.prefix_len}

    @property
    def prefix_len(self) -> int:
        return -(self.emb_ndim // -self.hidden_size) if self.puzzle_emb_len is None else self.puzzle_emb_len


@dataclass
class ACTOutput:
    """One segment's outputs. The Q-continue target exists in training only: with q_target extra_forward from one
    more segment; with next_segment from this segment, for the previous segment's prediction (recomputed from the
    carried state) on the rows that went on (`target_q_continue_mask`)."""

    logits: torch.Tensor  # [B, seq_len, vocab]
    q_halt_logits: torch.Tensor  # [B]
    q_continue_logits: torch.Tensor  # [B]; 0 for a core without a continue logit
    target_q_continue: torch.Tensor | None = None
    target_q_continue_mask: torch.Tensor | None = None
    q_continue_prediction: torch.Tensor | None = None


@dataclass
class Carry:
    inner_carry: Any  # the core's recurrent state (a dataclass of tensors)
    steps: torch.Tensor  # int32 [B]: segments run on the current example
    halted: torch.Tensor  # bool [B]: the slot takes a new example on the next call
    current_data: Batch


class ACTModel(nn.Module):
    """One call = one segment; halted rows are reset and refilled from the incoming batch.

    `config` needs halt_max_steps, halt_exploration_prob and q_target. A model names the class of its core as
    `inner_class`; the core built from the config is `inner` (a models/core.py `PuzzleCore`, compiled alone by
    `hrm train compile=true`; `inner` is the name the original code's checkpoints give its parameters)."""

    inner_class: type[nn.Module]

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.inner = self.inner_class(config)

    @property
    def puzzle_emb(self) -> nn.Module | None:
        return getattr(self.inner, "puzzle_emb", None)

    def empty_carry(self, batch: Batch) -> Carry:
        """The carry before the first call: every row halted and empty, so that the call resets it to the initial
        states and fills it with its example of `batch`."""
        batch_size, device = batch["inputs"].shape[0], batch["inputs"].device
        return Carry(
            inner_carry=self.inner.empty_carry(batch_size, device),
            steps=torch.zeros(batch_size, dtype=torch.int32, device=device),
            halted=torch.ones(batch_size, dtype=torch.bool, device=device),  # everything is reset on the first call
            current_data={k: torch.empty_like(v) for k, v in batch.items()},
        )

    def started_carry(self, batch: Batch) -> Carry:
        """The carry after the first call's reset: every row holds its example and the initial states, so a change
        made to the state now (test-time noise) reaches the first segment (`forward` resets only halted rows)."""
        carry = self.empty_carry(batch)
        return Carry(
            inner_carry=self.inner.reset_carry(carry.halted, carry.inner_carry),
            steps=carry.steps,
            halted=torch.zeros_like(carry.halted),
            current_data=batch,
        )

    def compile_core(self) -> None:
        """torch.compile the recurrent core in place: parameter names, hence checkpoints, are unchanged; the ACT
        bookkeeping around the core stays eager."""
        self.inner.compile()

    def forward(
        self,
        carry: Carry,
        batch: Batch,
        generator: torch.Generator | None = None,
        halt_max_steps: int | None = None,
        cycles: tuple[int, int] | None = None,
    ) -> tuple[Carry, ACTOutput]:
        """`halt_max_steps` overrides the configured cap (evaluation with a larger segment budget, mmax); `cycles`
        (H_cycles, L_cycles) the depth of a core that has them (HRM, TRM: the depth curriculum, train/curriculum.py)."""
        max_steps = self.config.halt_max_steps if halt_max_steps is None else halt_max_steps
        depth = {} if cycles is None else {"cycles": cycles}
        previous_inner = carry.inner_carry
        inner_carry = self.inner.reset_carry(carry.halted, carry.inner_carry)
        steps = torch.where(carry.halted, 0, carry.steps)
        data = {
            k: torch.where(carry.halted.view((-1,) + (1,) * (batch[k].ndim - 1)), batch[k], v)
            for k, v in carry.current_data.items()
        }

        segment = self.inner(inner_carry, data, **depth)
        inner_carry, q_halt, q_continue = segment.carry, segment.q_halt, segment.q_continue
        out = ACTOutput(logits=segment.logits, q_halt_logits=q_halt, q_continue_logits=q_continue)

        with torch.no_grad():
            steps = steps + 1
            is_last_step = steps >= max_steps
            halted = is_last_step
            # Evaluation always runs the full budget, so all rows of a batch halt together.
            if self.training and max_steps > 1:
                halted = halted | (q_halt > q_continue)
                explore = (
                    torch.rand(q_halt.shape, generator=generator, device=q_halt.device)
                    < self.config.halt_exploration_prob
                )
                min_halt = torch.randint(
                    2, max_steps + 1, steps.shape, generator=generator, device=steps.device, dtype=steps.dtype
                )
                halted = halted & (steps >= explore * min_halt)

                if self.config.q_target == "extra_forward":
                    # Q-learning target from one more segment on the new state (no replay buffer, no target network).
                    following = self.inner(inner_carry, data, **depth)
                    out.target_q_continue = torch.sigmoid(
                        torch.where(
                            is_last_step, following.q_halt, torch.maximum(following.q_halt, following.q_continue)
                        )
                    )
                elif self.config.q_target == "next_segment":
                    # This segment's Q values are the target of the previous step's continue prediction, on rows that
                    # went on; that prediction is recomputed from the carried state (its gradient reaches the Q head only).
                    # On the forced last segment continuing is not an option: the target is q_halt alone, as with
                    # extra_forward (docs/models.md, "The Q-continue target").
                    out.target_q_continue = torch.sigmoid(
                        torch.where(is_last_step, q_halt, torch.maximum(q_halt, q_continue))
                    )
                    out.target_q_continue_mask = ~carry.halted
        if out.target_q_continue_mask is not None:
            features = torch.where(out.target_q_continue_mask.view(-1, 1), self.inner.q_features(previous_inner), 0)
            out.q_continue_prediction = self.inner.q_head(features).float()[..., 1]

        return Carry(inner_carry, steps, halted, data), out


def act_loss(
    out: ACTOutput,
    labels: torch.Tensor,
    halted: torch.Tensor,
    steps: torch.Tensor,
    loss_type: str,
    segment_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Total loss = lm + 0.5 * (q_halt + q_continue), each summed over the batch; plus summed metrics.

    lm is the per-sequence mean token loss summed over sequences; q_halt is trained towards "this segment's answer is
    exactly right"; q_continue towards the bootstrapped target computed by the model. Metrics count halted rows only.
    `segment_weights` ([B], from curriculum.segment_weights) scale each row's lm and q_halt terms, the supervision of
    the segment it is at; the logged losses stay unweighted.
    """
    mask = labels != IGNORE_LABEL_ID
    loss_counts = mask.sum(-1)
    divisor = loss_counts.clamp_min(1).unsqueeze(-1)

    with torch.no_grad():
        is_correct = mask & (out.logits.argmax(-1) == labels)
        seq_is_correct = is_correct.sum(-1) == loss_counts
        valid = halted & (loss_counts > 0)
        metrics = {
            "count": valid.sum(),
            "accuracy": torch.where(valid, (is_correct.float() / divisor).sum(-1), 0).sum(),
            "exact_accuracy": (valid & seq_is_correct).sum(),
            "q_halt_accuracy": (valid & ((out.q_halt_logits >= 0) == seq_is_correct)).sum(),
            "steps": torch.where(valid, steps, 0).sum(),
        }

    token_loss = LOSS_FUNCTIONS[loss_type](out.logits, labels) / divisor
    lm_loss = token_loss.sum()
    q_halt_loss = F.binary_cross_entropy_with_logits(
        out.q_halt_logits, seq_is_correct.to(out.q_halt_logits.dtype), reduction="sum"
    )
    metrics.update(lm_loss=lm_loss.detach(), q_halt_loss=q_halt_loss.detach())
    if segment_weights is None:
        total = lm_loss + 0.5 * q_halt_loss
    else:
        lm_rows = token_loss.sum(-1)
        q_halt_rows = F.binary_cross_entropy_with_logits(
            out.q_halt_logits, seq_is_correct.to(out.q_halt_logits.dtype), reduction="none"
        )
        total = (segment_weights.to(lm_rows.dtype) * lm_rows).sum() + 0.5 * (
            segment_weights.to(q_halt_rows.dtype) * q_halt_rows
        ).sum()
    if out.target_q_continue is None:
        return total, metrics
    if out.target_q_continue_mask is not None:  # next_segment: last step's continue prediction, on rows that went on
        terms = F.binary_cross_entropy_with_logits(out.q_continue_prediction, out.target_q_continue, reduction="none")
        q_continue_loss = torch.where(out.target_q_continue_mask, terms, 0).sum()
    else:
        q_continue_loss = F.binary_cross_entropy_with_logits(
            out.q_continue_logits, out.target_q_continue, reduction="sum"
        )
    metrics["q_continue_loss"] = q_continue_loss.detach()
    return total + 0.5 * q_continue_loss, metrics
