"""Model FLOPs from the config and the shapes, for `hrm bench`'s MFU: each model's count (its module's `SPEC.flops`) is
built from these pieces.

A multiply-add counts 2. Counted is what is computed, gradient-free passes included: matrix products (projections,
attention scores and values over all keys, as torch's flop counter counts SDPA, causal or not) and the output heads.
Embeddings, norms, rotary and element-wise work are left out (they are not matmuls). A backward costs 2x the forward
of what carries gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hrm_reason.models.layers import swiglu_intermediate_size


@dataclass(frozen=True)
class ACTFlops:
    """FLOPs per example of an ACT puzzle model."""

    train_step: float  # one training segment: forward, backward, and the Q target's extra segment if any
    segment: float  # one evaluation segment (forward only)

    @classmethod
    def of(cls, config: Any, segment: float, backward: float) -> ACTFlops:
        """With q_target extra_forward, training runs one more segment for the Q-continue target."""
        target = segment if getattr(config, "q_target", "none") == "extra_forward" and config.halt_max_steps > 1 else 0
        return cls(train_step=float(segment + backward + target), segment=float(segment))


@dataclass(frozen=True)
class LMFlops:
    """FLOPs per token of a language-model head, for windows of `seq_len` tokens."""

    train_step: float  # forward with labels and backward
    forward: float  # forward without labels (evaluation)


def linear(d_in: int, d_out: int) -> int:
    return 2 * d_in * d_out


def attention(d_qk: int, d_v: int, keys: int) -> int:
    """Scores q.k over `keys` keys and the weighted sum of values, per query token."""
    return 2 * keys * (d_qk + d_v)


def swiglu(d: int, inter: int) -> int:
    return linear(d, 2 * inter) + linear(inter, d)


def block_flops(config: Any, positions: int) -> int:
    """One puzzle block (fused QKV, output projection, SwiGLU, attention over `positions`) on every position."""
    d = config.hidden_size
    per_token = linear(d, 3 * d) + linear(d, d) + swiglu(d, swiglu_intermediate_size(d, config.expansion))
    return (per_token + attention(d, d, positions)) * positions


def head_flops(config: Any) -> int:
    """The LM head on the grid positions (the Q head, hidden x 2 per example, is left out)."""
    return linear(config.hidden_size, config.vocab_size) * config.seq_len


def causal_block_flops(d: int, inter: int, keys: int) -> int:
    """One pre- or post-norm causal block per token: fused QKV, output projection, SwiGLU, attention."""
    return linear(d, 3 * d) + linear(d, d) + swiglu(d, inter) + attention(d, d, keys)
