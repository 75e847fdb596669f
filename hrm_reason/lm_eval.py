"""Validation of a language-model head: next-token cross-entropy and perplexity over the validation split, tokens/s.

The CE is computed here from the logits (sum over every predicted token, divided by their count), not taken from the
head's own `metrics["ce"]`, so that every head is measured by the same code. Also: loading the checkpoints that
`hrm train` writes for LM heads (a run directory, a checkpoint directory or its weights file).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from torch import nn
from tqdm import tqdm

from hrm_reason.checkpoint import WEIGHTS, find_checkpoint, load_weights, read_weights
from hrm_reason.errors import UserError
from hrm_reason.lm_config import LMTrainConfig, is_lm_config, load_lm_config
from hrm_reason.lm_data import TokenStream, validation_batches
from hrm_reason.models.registry import build_lm, is_lm_arch


@dataclass
class LMEvalResult:
    ce: float  # mean next-token cross-entropy, nats
    perplexity: float
    tokens: int  # predicted tokens
    seconds: float
    tokens_per_s: float
    metrics: dict[str, float] = field(default_factory=dict)  # the head's own metrics, token-weighted means

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def autocast_context(device: torch.device, forward_dtype: str) -> Any:
    """bf16 autocast on CUDA when asked for (auto), never on CPU (bf16 matmuls there are slow and inexact)."""
    bf16 = forward_dtype == "bfloat16" or (forward_dtype == "auto" and device.type == "cuda")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16 and device.type == "cuda")


@torch.no_grad()
def evaluate_lm(
    model: nn.Module, stream: TokenStream, seq_len: int, batch_size: int, device: torch.device,
    max_tokens: int | None = None, progress: bool = False, forward_dtype: str = "auto",
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
    bar = tqdm(total=total, desc="eval", unit="tok", unit_scale=True, disable=not progress, dynamic_ncols=True, leave=False)
    try:
        for ids in validation_batches(stream, seq_len, batch_size, max_tokens):
            ids = ids.to(device)
            with autocast_context(device, forward_dtype):
                out = model(ids, labels=ids)
            logits = out.logits[:, :-1].float()
            n = ids[:, 1:].numel()
            ce_sum += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum").item()
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
    return LMEvalResult(ce=ce, perplexity=math.exp(min(ce, 700.0)), tokens=tokens, seconds=seconds,
                        tokens_per_s=tokens / max(seconds, 1e-9), metrics={k: v / tokens for k, v in metric_sums.items()})


def format_lm_result(result: LMEvalResult) -> str:
    lines = [
        f"validation tokens   {result.tokens}",
        f"cross-entropy       {result.ce:.4f} nats/token",
        f"perplexity          {result.perplexity:.3f}",
        f"tokens/s            {result.tokens_per_s:.0f}",
    ]
    lines += [f"{k:<19} {v:.4f}" for k, v in sorted(result.metrics.items())]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------- loading


def _saved_model_config(ckpt: Path) -> dict[str, Any] | None:
    """The model config in a safetensors header, without reading the tensors (None for other files)."""
    file = ckpt / WEIGHTS if ckpt.is_dir() else ckpt
    if file.suffix != ".safetensors" or not file.is_file():
        return None
    try:
        with safe_open(str(file), "pt") as f:
            meta = f.metadata() or {}
        return json.loads(meta["model_config"]) if "model_config" in meta else None
    except (SafetensorError, OSError, json.JSONDecodeError):
        return None


def run_config_path(ckpt: Path) -> Path | None:
    """config.yaml of the run a checkpoint belongs to (run/checkpoints/step_N), or beside it."""
    base = ckpt if ckpt.is_dir() else ckpt.parent
    for candidate in (base.parent.parent / "config.yaml", base / "config.yaml", base.parent / "config.yaml"):
        if candidate.is_file():
            return candidate
    return None


def is_lm_checkpoint(path: Path) -> bool:
    """A run or checkpoint of an LM head: its run config names one, or its weights header does."""
    try:
        ckpt = find_checkpoint(path)
    except UserError:
        return False
    cfg = run_config_path(ckpt)
    if cfg is not None:
        try:
            return is_lm_config(cfg)
        except UserError:
            return False
    saved = _saved_model_config(ckpt)
    return saved is not None and is_lm_arch(saved.get("name"))


def load_lm_checkpoint(path: Path, device: torch.device | str = "cpu") -> tuple[nn.Module, LMTrainConfig | None, Path]:
    """(model, the run's config or None, checkpoint directory) for a run, checkpoint directory or weights file."""
    ckpt = find_checkpoint(Path(path))
    weights, saved = read_weights(ckpt)
    cfg_path = run_config_path(ckpt)
    config = load_lm_config(cfg_path, vocab_size=(saved or {}).get("vocab_size")) if cfg_path is not None and is_lm_config(cfg_path) else None
    arch = saved if saved is not None else (config.arch if config is not None else None)
    if arch is None or not is_lm_arch(arch.get("name")):
        raise UserError(f"{ckpt}: not a language-model checkpoint (no LM head named in its weights or config.yaml)")
    if config is not None and config.arch.get("name") != arch.get("name"):
        raise UserError(f"{ckpt}: weights are of {arch.get('name')} but {cfg_path} names {config.arch.get('name')}")
    model = build_lm(arch, None, device, 0)
    load_weights(model, weights, ckpt)
    return model, config, ckpt
