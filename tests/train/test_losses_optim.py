"""Losses and optimizers against their formulas."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from hrm_reason.losses import IGNORE_LABEL_ID, softmax_cross_entropy, stablemax_cross_entropy
from hrm_reason.models.act import ACTOutput, act_loss
from hrm_reason.models.sparse_embedding import SparsePuzzleEmbedding, SparseSignSGD
from hrm_reason.train.optim import AdamAtan2, cosine_schedule_with_warmup


def test_stablemax_cross_entropy_matches_formula() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, size=(3, 5, 7))
    labels = rng.integers(0, 7, size=(3, 5))
    labels[0, 1] = IGNORE_LABEL_ID
    s = np.where(logits < 0, 1 / (1 - logits), logits + 1)
    expected = -np.log(np.take_along_axis(s, np.clip(labels, 0, None)[..., None], -1)[..., 0] / s.sum(-1))
    expected[0, 1] = 0
    got = stablemax_cross_entropy(torch.tensor(logits, dtype=torch.float32), torch.tensor(labels))
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)


def test_softmax_cross_entropy_ignores_positions() -> None:
    logits = torch.randn(2, 4, 5)
    labels = torch.tensor([[1, 2, IGNORE_LABEL_ID, 0], [4, 4, 4, 4]])
    got = softmax_cross_entropy(logits, labels)
    assert got[0, 2] == 0
    torch.testing.assert_close(got[1, 0], -torch.log_softmax(logits[1, 0], -1)[4])


def test_act_loss_normalisation_and_metrics() -> None:
    labels = torch.tensor([[2, 3, IGNORE_LABEL_ID], [2, 2, 2], [IGNORE_LABEL_ID] * 3])
    logits = torch.full((3, 3, 4), -2.0)
    logits[0, 0, 2] = logits[0, 1, 3] = 3.0  # row 0 fully right
    logits[1, 0, 2] = 3.0  # row 1: 1 of 3 right
    outputs = ACTOutput(
        logits=logits,
        q_halt_logits=torch.tensor([1.0, -1.0, 0.5]),
        q_continue_logits=torch.zeros(3),
        target_q_continue=torch.tensor([0.2, 0.7, 0.1]),
    )
    halted = torch.tensor([True, True, True])
    steps = torch.tensor([2, 3, 1], dtype=torch.int32)
    total, m = act_loss(outputs, labels, halted, steps, "stablemax_cross_entropy")

    per_token = stablemax_cross_entropy(logits, labels)
    lm = per_token[0].sum() / 2 + per_token[1].sum() / 3  # per-sequence mean, summed; empty row contributes 0
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    q_halt = bce(
        outputs.q_halt_logits, torch.tensor([1.0, 0.0, 1.0]), reduction="sum"
    )  # the empty row counts as correct
    q_cont = bce(outputs.q_continue_logits, outputs.target_q_continue, reduction="sum")
    torch.testing.assert_close(total, (lm + 0.5 * (q_halt + q_cont)).double())
    assert m["count"] == 2  # the row without labels is excluded from metrics
    assert m["exact_accuracy"] == 1
    assert math.isclose(m["accuracy"].item(), 1.0 + 1 / 3, rel_tol=1e-6)
    assert m["q_halt_accuracy"] == 2 and m["steps"] == 5


def reference_adam_atan2(p, grads, lr, b1, b2, wd):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr / (1 - b1**t) * np.arctan2(m, np.sqrt(v) / np.sqrt(1 - b2**t))
    return p


def test_adam_atan2_matches_original_kernel_formula() -> None:
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=(4, 3))
    grads = [rng.normal(size=(4, 3)) for _ in range(5)]
    param = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    opt = AdamAtan2([param], lr=0.01, betas=(0.9, 0.95), weight_decay=0.1)
    for g in grads:
        param.grad = torch.tensor(g)
        opt.step()
    np.testing.assert_allclose(
        param.detach().numpy(), reference_adam_atan2(p0, grads, 0.01, 0.9, 0.95, 0.1), rtol=1e-10
    )


def test_adam_atan2_state_round_trips() -> None:
    a = torch.nn.Parameter(torch.ones(3))
    opt = AdamAtan2([a], lr=0.1)
    a.grad = torch.tensor([1.0, -2.0, 3.0])
    opt.step()
    b = torch.nn.Parameter(a.detach().clone())
    opt2 = AdamAtan2([b], lr=0.1)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))  # as read back from a checkpoint file
    a.grad = b.grad = torch.tensor([0.5, 0.5, -0.5])
    opt.step()
    opt2.step()
    assert torch.equal(a, b)


def test_sparse_sign_sgd_updates_only_touched_rows() -> None:
    emb = SparsePuzzleEmbedding(5, 3, init_std=0.0, cast_to=torch.float32)
    emb.weights.fill_(1.0)
    emb.train()
    out = emb(torch.tensor([1, 3, 1]))
    (out * torch.tensor([[1.0, -1.0, 0.5], [2.0, 2.0, 2.0], [-3.0, 0.5, 0.5]])).sum().backward()
    opt = SparseSignSGD(emb, lr=0.1, weight_decay=0.5)
    opt.step()
    w = emb.weights
    decayed = 1.0 * (1 - 0.1 * 0.5)
    # Row 1 got grads [1,-1,.5] + [-3,.5,.5] = [-2,-.5,1]: signs -,-,+.
    torch.testing.assert_close(w[1], torch.tensor([decayed + 0.1, decayed + 0.1, decayed - 0.1]))
    torch.testing.assert_close(w[3], torch.full((3,), decayed - 0.1))
    assert torch.equal(w[[0, 2, 4]], torch.ones(3, 3))  # untouched rows are not even decayed
    opt.zero_grad()
    opt.step()  # no gradient: nothing happens
    torch.testing.assert_close(w[3], torch.full((3,), decayed - 0.1))


def test_lr_schedule_warmup_then_cosine() -> None:
    f = lambda s: cosine_schedule_with_warmup(s, 1.0, 10, 110, 0.1)  # noqa: E731
    assert f(1) == 0.1 and f(5) == 0.5 and f(10) == 1.0
    assert math.isclose(f(60), 0.1 + 0.9 * 0.5)
    assert math.isclose(f(110), 0.1)
    assert cosine_schedule_with_warmup(50, 1.0, 10, 110, 1.0) == 1.0  # min ratio 1: constant after warmup
