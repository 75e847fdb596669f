"""Gated DeltaNet recurrence with HAM's fit error, in pure PyTorch: a sequential reference and a chunked form.

Per head the state S is d_k x d_v (the transformers/FLA convention). For every position t:

    S      <- exp(g_t) * S                      (decay; g_t <= 0)
    kv_mem  = S^T k_t                           (what the memory predicts for k_t)
    e_t     = 1 - cos(kv_mem, v_t)              (HAM's routing score, in [0, 2]; decay does not change a cosine)
    S      <- S + k_t (beta_t (v_t - kv_mem))^T (delta rule)
    o_t     = S^T q_t * scale

The sequential loop is the ground truth (and what decoding runs one token at a time). The chunked form computes the
same thing C positions at a time: inside a chunk the delta-rule writes satisfy a unit lower-triangular system
(I + A) Delta = beta * (V - diag(gamma) K S_0), solved with `solve_triangular` (the WY/UT idea, derived here from the
unrolled recurrence), so only T / C steps run in Python. The fit error is rebuilt from the chunk-start state plus the
intra-chunk writes: kv_mem = diag(gamma) K S_0 + strict_lower(Gamma * K K^T) Delta. Neither form lets gradient flow
into the fit error: routing is a discrete decision.

`flash-linear-attention` is an optional GPU extra: recurrence "fla" calls it when installed; its kernels do not
compute the fit error, so HAM only uses it with a learned router.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
from typing import Literal

import torch
import torch.nn.functional as F

from hrm_reason.errors import UserError
from hrm_reason.models.layers import wide

FIT_ERROR_EPS = 1e-6


def fit_error(kv_mem: torch.Tensor, v: torch.Tensor, eps: float = FIT_ERROR_EPS) -> torch.Tensor:
    """1 - <kv_mem, v> / (|kv_mem| |v| + eps) over the last dim; 1 where the memory is empty (S = 0)."""
    dot = (kv_mem * v).sum(-1)
    return 1.0 - dot / (kv_mem.norm(dim=-1) * v.norm(dim=-1) + eps)


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 64,
    recurrence: Literal["chunk", "sequential", "fla"] = "chunk",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The recurrence in any of its forms. q, k: [B, H, T, d_k]; v: [B, H, T, d_v]; g (log decay), beta: [B, H, T].

    Returns (o [B, H, T, d_v], final state [B, H, d_k, d_v], fit error [B, H, T] without gradient; None for fla).
    The pure-PyTorch forms (sequential: the reference loop; chunk: chunk_size positions per Python step) run outside
    autocast, so that bf16 autocast cannot lower their precision, and compute in fp32 (fp64 inputs stay fp64); o comes
    back in the input dtype.
    """
    if recurrence == "fla":
        return (*_fla(q, k, v, g, beta, scale, initial_state), None)
    with torch.autocast(q.device.type, enabled=False):
        dtype = v.dtype
        q, k, v, g, beta = (wide(x) for x in (q, k, v, g, beta))
        B, H, _, dk = k.shape
        S = q.new_zeros(B, H, dk, v.shape[-1]) if initial_state is None else wide(initial_state)
        if recurrence == "sequential":
            o, S, e = _sequential(q, k, v, g, beta, scale, S)
        else:
            o, S, e = _chunk(q, k, v, g, beta, scale, S, chunk_size)
        return o.to(dtype), S, e


sequential_gated_delta_rule = functools.partial(gated_delta_rule, recurrence="sequential")
chunk_gated_delta_rule = functools.partial(gated_delta_rule, recurrence="chunk")


def _sequential(q, k, v, g, beta, scale: float, S: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reference loop from state S, on `gated_delta_rule`'s widened inputs: one position at a time."""
    B, H, T, _ = k.shape
    dv = v.shape[-1]
    outs, errs = [], []
    for t in range(T):
        S = S * g[:, :, t, None, None].exp()
        kv_mem = torch.einsum("bhkv,bhk->bhv", S, k[:, :, t])
        errs.append(fit_error(kv_mem.detach(), v[:, :, t].detach()))
        delta = beta[:, :, t, None] * (v[:, :, t] - kv_mem)
        S = S + torch.einsum("bhk,bhv->bhkv", k[:, :, t], delta)
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, :, t]) * scale)
    o = torch.stack(outs, dim=2) if T else q.new_zeros(B, H, 0, dv)
    e = torch.stack(errs, dim=2) if T else q.new_zeros(B, H, 0)
    return o, S, e


def _chunk(
    q, k, v, g, beta, scale: float, S: torch.Tensor, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Same results as `_sequential`, C = chunk_size positions per Python step.

    A length that C does not divide is padded at the end with k = v = q = 0, g = 0, beta = 0: a padded step leaves
    the state unchanged, so the final state is exact, and the padded outputs are dropped.
    """
    B, H, T, _ = k.shape
    dv = v.shape[-1]
    C = chunk_size
    pad = (-T) % C
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    n = (T + pad) // C
    q, k, v = (x.reshape(B, H, n, C, x.shape[-1]) for x in (q, k, v))
    g, beta = (x.reshape(B, H, n, C) for x in (g, beta))

    G = g.cumsum(-1)  # log of the decay from the chunk start to each position (inclusive)
    gamma = G.exp()
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = lower.clone().fill_diagonal_(False)
    # Gamma[r, j] = exp(G_r - G_j) for j <= r (decay from write j to read r); masked before exp so it never overflows.
    Gamma = (G[..., :, None] - G[..., None, :]).masked_fill(~lower, float("-inf")).exp()
    KK = k @ k.transpose(-1, -2)
    A = (beta[..., :, None] * Gamma * KK).masked_fill(~strict, 0.0)
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    I_plus_A = eye + A
    # Delta = U - W S_0 with U = (I+A)^-1 (beta V), W = (I+A)^-1 (beta gamma K): all chunks at once.
    U = torch.linalg.solve_triangular(I_plus_A, beta[..., None] * v, upper=False, unitriangular=True)
    W = torch.linalg.solve_triangular(I_plus_A, (beta * gamma)[..., None] * k, upper=False, unitriangular=True)
    QK = (q @ k.transpose(-1, -2)) * Gamma  # Gamma is zero above the diagonal: causal within the chunk
    decay_to_end = (G[..., -1:] - G).exp()  # exp(G_C - G_j)

    outs, errs = [], []
    for c in range(n):
        delta = U[:, :, c] - W[:, :, c] @ S
        gk = gamma[:, :, c, :, None] * k[:, :, c]
        outs.append(((gamma[:, :, c, :, None] * q[:, :, c]) @ S + QK[:, :, c] @ delta) * scale)
        with torch.no_grad():
            kv_mem = gk @ S + (Gamma[:, :, c] * KK[:, :, c]).masked_fill(~strict, 0.0) @ delta
            errs.append(fit_error(kv_mem, v[:, :, c]))
        S = gamma[:, :, c, -1, None, None] * S + (decay_to_end[:, :, c, :, None] * k[:, :, c]).transpose(-1, -2) @ delta
    o = torch.stack(outs, dim=2).reshape(B, H, n * C, dv)[:, :, :T]
    e = torch.stack(errs, dim=2).reshape(B, H, n * C)[:, :, :T]
    return o, S, e


def fla_available() -> bool:
    return importlib.util.find_spec("fla") is not None


def _fla(q, k, v, g, beta, scale: float, initial_state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """o and final state from `flash-linear-attention` (CUDA only; no fit error). Same [B, H, T, d] layout as above.

    FLA's argument order changed across versions, so it is called with keywords after checking its signature."""
    if not fla_available():
        raise UserError(
            "recurrence 'fla' needs the optional package flash-linear-attention (pip install 'hrm-reason[fla]')"
        )
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk

    params = inspect.signature(fla_chunk).parameters
    kwargs = dict(
        q=q.transpose(1, 2),
        k=k.transpose(1, 2),
        v=v.transpose(1, 2),
        g=g.transpose(1, 2),
        beta=beta.transpose(1, 2),
        scale=scale,
        initial_state=initial_state,
        output_final_state=True,
    )
    missing = [name for name in kwargs if name not in params]
    if missing:
        raise UserError(f"the installed flash-linear-attention's chunk_gated_delta_rule lacks arguments {missing}")
    if "head_first" in params:
        kwargs["head_first"] = False
    o, state = fla_chunk(**kwargs)
    return o.transpose(1, 2), state
