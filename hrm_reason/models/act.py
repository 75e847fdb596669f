"""The ACT wrapper: HRM's outer loop (deep supervision over a persistent carry, Q-head halting, exploration, the
Q-continue target) around any core, so that HRM and the transformer and UniTF baselines train exactly alike and
differ only in the recurrence. `q_target="none"` is TRM's halting: no continue target and no
extra forward; the core reports q_continue = 0, so a row halts when q_halt > 0 and the loss is the BCE of q_halt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from hrm_reason.models.sparse_embedding import SparsePuzzleEmbedding

Batch = dict[str, torch.Tensor]


@dataclass
class Carry:
    inner_carry: Any  # the core's recurrent state (a dataclass of tensors)
    steps: torch.Tensor  # int32 [B]: segments run on the current example
    halted: torch.Tensor  # bool [B]: the slot takes a new example on the next call
    current_data: Batch


class ACTCore(Protocol):
    q_head: nn.Module

    def empty_carry(self, batch_size: int, device: torch.device) -> Any: ...

    def reset_carry(self, reset: torch.Tensor, carry: Any) -> Any: ...

    def q_features(self, carry: Any) -> torch.Tensor: ...

    def __call__(self, carry: Any, batch: Batch) -> tuple[Any, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]: ...


class ACTModel(nn.Module):
    """One call = one segment; halted rows are reset and refilled from the incoming batch.

    `config` needs halt_max_steps, halt_exploration_prob and q_target; `inner` is the core (compiled alone by
    `hrm train compile=true`)."""

    def __init__(self, config: Any, inner: nn.Module) -> None:
        super().__init__()
        self.config = config
        self.inner = inner

    @property
    def puzzle_emb(self) -> SparsePuzzleEmbedding | None:
        return getattr(self.inner, "puzzle_emb", None)

    def initial_carry(self, batch: Batch) -> Carry:
        batch_size, device = batch["inputs"].shape[0], batch["inputs"].device
        return Carry(
            inner_carry=self.inner.empty_carry(batch_size, device),
            steps=torch.zeros(batch_size, dtype=torch.int32, device=device),
            halted=torch.ones(batch_size, dtype=torch.bool, device=device),  # everything is reset on the first call
            current_data={k: torch.empty_like(v) for k, v in batch.items()},
        )

    def forward(
        self, carry: Carry, batch: Batch, generator: torch.Generator | None = None, halt_max_steps: int | None = None
    ) -> tuple[Carry, dict[str, torch.Tensor]]:
        """`halt_max_steps` overrides the configured cap (evaluation with a larger segment budget, mmax)."""
        max_steps = self.config.halt_max_steps if halt_max_steps is None else halt_max_steps
        previous_inner = carry.inner_carry
        inner_carry = self.inner.reset_carry(carry.halted, carry.inner_carry)
        steps = torch.where(carry.halted, 0, carry.steps)
        data = {
            k: torch.where(carry.halted.view((-1,) + (1,) * (batch[k].ndim - 1)), batch[k], v)
            for k, v in carry.current_data.items()
        }

        inner_carry, logits, (q_halt, q_continue) = self.inner(inner_carry, data)
        outputs = {"logits": logits, "q_halt_logits": q_halt, "q_continue_logits": q_continue}

        with torch.no_grad():
            steps = steps + 1
            is_last_step = steps >= max_steps
            halted = is_last_step
            # Evaluation always runs the full budget, so all rows of a batch halt together.
            if self.training and max_steps > 1:
                halted = halted | (q_halt > q_continue)
                explore = torch.rand(q_halt.shape, generator=generator, device=q_halt.device) < self.config.halt_exploration_prob
                min_halt = torch.randint(2, max_steps + 1, steps.shape, generator=generator, device=steps.device, dtype=steps.dtype)
                halted = halted & (steps >= explore * min_halt)

                if self.config.q_target == "extra_forward":
                    # Q-learning target from one more segment on the new state (no replay buffer, no target network).
                    _, _, (next_q_halt, next_q_continue) = self.inner(inner_carry, data)
                    outputs["target_q_continue"] = torch.sigmoid(
                        torch.where(is_last_step, next_q_halt, torch.maximum(next_q_halt, next_q_continue))
                    )
                elif self.config.q_target == "next_segment":
                    # This segment's Q values are the target of the previous step's continue prediction, on rows that
                    # went on; that prediction is recomputed from the carried state (its gradient reaches the Q head only).
                    outputs["target_q_continue"] = torch.sigmoid(torch.maximum(q_halt, q_continue))
                    outputs["target_q_continue_mask"] = ~carry.halted
        if "target_q_continue_mask" in outputs:
            features = torch.where(outputs["target_q_continue_mask"].view(-1, 1), self.inner.q_features(previous_inner), 0)
            outputs["q_continue_prediction"] = self.inner.q_head(features).float()[..., 1]

        return Carry(inner_carry, steps, halted, data), outputs
