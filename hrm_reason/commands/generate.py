"""`hrm generate`: text from a trained language-model head, its tokenizer found beside the run or the dataset.
The sampling itself is hrm_reason/models/lm/sampling.py."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from hrm_reason.data.puzzle import dataset_kind
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
from hrm_reason.models.registry import family_spec, model_spec, models
from hrm_reason.readers import read_json
from hrm_reason.runtime.device import resolve_device

# Below this the logits divided by the temperature overflow float32 (softmax of inf is nan): 0 is the greedy choice.
MIN_TEMPERATURE = 1e-6
TEXT_DATASET = "the text dataset the run was trained on (hrm build-data text)"


def check_temperature(temperature: float) -> None:
    """--temperature: 0 (greedy) or a finite number from MIN_TEMPERATURE; inf would sample uniformly at random and a
    tiny one fail deep in torch.multinomial."""
    if not math.isfinite(temperature) or temperature < 0:
        raise UserError(f"--temperature {temperature:g}: expected a finite number, 0 (greedy decoding) or more")
    if 0 < temperature < MIN_TEMPERATURE:
        raise UserError(
            f"--temperature {temperature:g}: too small to divide the logits by; use 0 for greedy decoding or at "
            f"least {MIN_TEMPERATURE:g}"
        )


def data_tokenizer(data: Path) -> Tokenizer:
    """The tokenizer of --data, which must be a text dataset (or a folder holding a tokenizer): a puzzle dataset or a
    missing folder would otherwise be passed over in silence for the run's own tokenizer."""
    if not data.exists():
        raise UserError(f"--data {data}: no such directory; expected {TEXT_DATASET}")
    if not data.is_dir():
        raise UserError(f"--data {data}: not a directory; expected {TEXT_DATASET}")
    if dataset_kind(data) == "puzzle":
        raise UserError(f"--data {data}: a puzzle dataset, which has no tokenizer; expected {TEXT_DATASET}")
    tokenizer = find_tokenizer(data)
    if tokenizer is None:
        raise UserError(
            f"--data {data}: no tokenizer in it ({DATASET_FILE} of a text dataset, {TOKENIZER_META} or "
            f"{HF_TOKENIZER_FILE}); expected {TEXT_DATASET}"
        )
    return tokenizer


def find_tokenizer(*directories: Path | None) -> Tokenizer | None:
    """The tokenizer kept beside a run (tokenizer_meta.json, tokenizer.json), a dataset (dataset.json) or a
    `transformers` checkpoint (tokenizer.json), looked for in that order of directories."""
    for d in directories:
        if d is None or not d.is_dir():
            continue
        if (d / TOKENIZER_META).is_file():
            return tokenizer_from_record(_record(read_json(d / TOKENIZER_META, None), d / TOKENIZER_META), d)
        if (d / DATASET_FILE).is_file():
            record = read_json(d / DATASET_FILE, None)
            if isinstance(record, dict) and record.get("kind") == "text":
                return tokenizer_from_record(_record(record.get("tokenizer"), d / DATASET_FILE, "tokenizer"), d)
        if (d / HF_TOKENIZER_FILE).is_file():
            return HFTokenizer(d / HF_TOKENIZER_FILE)
    return None


def _record(value: object, path: Path, key: str | None = None) -> dict:
    """A tokenizer record read from `path` (under `key`), which must be a JSON object."""
    if not isinstance(value, dict):
        where = f"{path}: {key}" if key else str(path)
        raise UserError(f"{where}: expected a JSON object describing the tokenizer, got {type(value).__name__}")
    return value


def load_for_generation(path: Path, data: Path | None, device: torch.device) -> tuple[nn.Module, Tokenizer]:
    """The LM head at `path` (a run, a checkpoint or a transformers HrmText directory) and its tokenizer: --data's, the
    one saved with the run or beside the checkpoint, or its dataset's."""
    tokenizer = data_tokenizer(data) if data is not None else None  # before the model: a wrong --data fails at once
    loaded = load_run(path, device)
    if not family_spec(loaded.family).generates:
        heads = ", ".join(n for n in models() if family_spec(model_spec(n).family).generates)
        raise UserError(f"--run {path}: not a language-model head (hrm generate needs one of {heads})")
    ckpt = loaded.checkpoint
    cfg = run_config_path(ckpt) if loaded.config is not None else None
    dirs = [cfg.parent if cfg is not None else None, ckpt if ckpt.is_dir() else ckpt.parent]
    if tokenizer is None:
        tokenizer = find_tokenizer(*dirs, Path(loaded.config.data_path) if loaded.config is not None else None)
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


def generate_command(
    run: Path,
    data: Path | None,
    prompt: str,
    max_new_tokens: int,
    temperature: float,
    top_k: int | None,
    seed: int,
    prefix: bool,
    no_cache: bool,
    device_name: str,
) -> str:
    """`hrm generate`: the prompt and its continuation by the run's head (its KV cache unless `no_cache`); the
    temperature is checked before the model loads."""
    check_temperature(temperature)
    device = resolve_device(device_name)
    model, tokenizer = load_for_generation(run, data, device)
    cache = False if no_cache else None  # None: the head's KV cache where it has one
    text = generate_text(
        model,
        tokenizer,
        prompt,
        max_new_tokens,
        temperature,
        top_k,
        seed,
        use_cache=cache,
        prefix=prefix,
        device=device,
    )
    return prompt + text
