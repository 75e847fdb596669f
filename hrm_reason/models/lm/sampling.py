"""Text generation with any LM head: greedy, temperature and top-k sampling from an explicit seeded generator.

A head with `supports_cache` is run once over the prompt and then one token at a time from its cache; otherwise the
whole sequence is recomputed for every new token. Both give the same tokens (the heads' tests check that cached
logits equal recomputed ones). With `prefix=True` the prompt is a bidirectional prefix (token_type_ids = 1, HRM-Text's
PrefixLM) and generated tokens are causal, in both modes.
"""

from __future__ import annotations

import torch
from torch import nn

from hrm_reason.errors import UserError


def sample_next(
    logits: torch.Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None
) -> torch.Tensor:
    """Next ids [batch] from last-position logits [batch, vocab]; temperature <= 0 is greedy (argmax)."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(
    model: nn.Module,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool | None = None,
    eos_id: int | None = None,
    prefix: bool = False,
) -> torch.Tensor:
    """The prompt [batch, T] followed by up to `max_new_tokens` generated ids; stops early once every row has emitted
    `eos_id`. use_cache None: the head's KV cache when it has one."""
    if input_ids.ndim != 2 or input_ids.shape[1] < 1:
        raise UserError(f"the prompt must hold at least one token per row (got shape {tuple(input_ids.shape)})")
    if top_k is not None and top_k < 1:
        raise UserError(f"--top-k {top_k}: expected 1 or more")
    supports = bool(getattr(model, "supports_cache", False))
    use_cache = supports if use_cache is None else use_cache
    if use_cache and not supports:
        raise UserError(f"{type(model).__name__} has no KV cache (supports_cache is False)")
    was_training = model.training
    model.eval()
    ids, past = input_ids, None
    prompt_types = torch.ones_like(input_ids) if prefix else None
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    try:
        for _ in range(max_new_tokens):
            if use_cache and past is not None:
                out = model(ids[:, -1:], past_key_values=past, use_cache=True)
            else:
                types = None
                if prompt_types is not None:  # prompt bidirectional, generated tokens causal
                    types = torch.cat([prompt_types, torch.zeros_like(ids[:, input_ids.shape[1] :])], dim=1)
                out = (
                    model(ids, token_type_ids=types, use_cache=use_cache)
                    if use_cache
                    else model(ids, token_type_ids=types)
                )
            if use_cache:
                past = out.past_key_values
            nxt = sample_next(out.logits[:, -1, :], temperature, top_k, generator)
            if eos_id is not None:
                nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
                done |= nxt == eos_id
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            if eos_id is not None and bool(done.all()):
                break
    finally:
        model.train(was_training)
    return ids
