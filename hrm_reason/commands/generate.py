"""`hrm generate`: text from a trained language-model head, its tokenizer found beside the run or the dataset.
The sampling itself is hrm_reason/models/lm/sampling.py."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from hrm_reason.data.text import (
    DATASET_FILE,
    HF_TOKENIZER_FILE,
    TOKENIZER_META,
    HFTokenizer,
    Tokenizer,
    tokenizer_from_record,
)
from hrm_reason.errors import UserError
from hrm_reason.load import load_run, run_config_path
from hrm_reason.models.lm.sampling import generate
from hrm_reason.models.registry import family_spec


def find_tokenizer(*directories: Path | None) -> Tokenizer | None:
    """The tokenizer kept beside a run (tokenizer_meta.json, tokenizer.json), a dataset (dataset.json) or a
    `transformers` checkpoint (tokenizer.json), looked for in that order of directories."""
    for d in directories:
        if d is None or not d.is_dir():
            continue
        if (d / TOKENIZER_META).is_file():
            return tokenizer_from_record(json.loads((d / TOKENIZER_META).read_text()), d)
        if (d / DATASET_FILE).is_file():
            record = json.loads((d / DATASET_FILE).read_text())
            if isinstance(record, dict) and record.get("kind") == "text":
                return tokenizer_from_record(record["tokenizer"], d)
        if (d / HF_TOKENIZER_FILE).is_file():
            return HFTokenizer(d / HF_TOKENIZER_FILE)
    return None


def load_for_generation(path: Path, data: Path | None, device: torch.device) -> tuple[nn.Module, Tokenizer]:
    """The LM head at `path` (a run, a checkpoint or a transformers HrmText directory) and its tokenizer: --data's, the
    one saved with the run or beside the checkpoint, or its dataset's."""
    loaded = load_run(path, device)
    if not family_spec(loaded.family).generates:
        raise UserError(
            f"--run {path}: not a language-model head (hrm generate needs hrm_lm, unitf_lm, hrm_text or ham_lm)"
        )
    ckpt = loaded.checkpoint
    cfg = run_config_path(ckpt) if loaded.config is not None else None
    dirs = [cfg.parent if cfg is not None else None, ckpt if ckpt.is_dir() else ckpt.parent]
    tokenizer = find_tokenizer(data, *dirs, Path(loaded.config.data_path) if loaded.config is not None else None)
    if tokenizer is None:
        raise UserError(
            f"--run {path}: no tokenizer found beside it; pass --data DIR (the text dataset it was trained on)"
        )
    return loaded.model, tokenizer


def generate_text(
    model: nn.Module,
    tokenizer: Tokenizer,
    prompt: str,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    use_cache: bool | None = None,
    prefix: bool = False,
    device: torch.device | str = "cpu",
) -> str:
    """The decoded continuation of `prompt` (without the prompt); it ends at the end-of-document id. An empty prompt
    starts a new document (the end-of-document id as the only context)."""
    ids = tokenizer.encode(prompt) or [tokenizer.eos_id]
    device = torch.device(device)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab is not None and max(ids) >= vocab:
        raise UserError(
            f"the prompt has token id {max(ids)} but the model's vocabulary has {vocab} ids: is this the run's tokenizer?"
        )
    generator = torch.Generator(device=device).manual_seed(seed)
    prompt_ids = torch.tensor([ids], dtype=torch.long, device=device)
    out = generate(
        model, prompt_ids, max_new_tokens, temperature, top_k, generator, use_cache, tokenizer.eos_id, prefix
    )
    new = out[0, len(ids) :].tolist()
    if tokenizer.eos_id in new:
        new = new[: new.index(tokenizer.eos_id)]
    return tokenizer.decode(new)
