"""`hrm_reason.load(path)`: the model behind any checkpoint the CLI writes, or a `transformers` HrmText directory.

- a `transformers` HrmText directory (config.json with model_type "hrm_text" + model.safetensors) -> our HRMText;
- a run directory, checkpoint directory or weights file of an LM head -> that head;
- the same of a puzzle model (or an original HRM checkpoint with its all_config.yaml) -> that puzzle model.
The model comes back in eval mode. An LM head called with `input_ids` (and optional `token_type_ids`) returns an
output whose `.logits` is (batch, seq, vocab), as a `transformers` causal LM does.
Heavy imports happen inside `load`, so that `import hrm_reason` stays cheap.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def is_hf_hrm_text(path: Path) -> bool:
    """A `transformers` checkpoint directory of HrmText (its config.json says model_type hrm_text)."""
    cfg = path / "config.json"
    if not (path.is_dir() and cfg.is_file()):
        return False
    try:
        return json.loads(cfg.read_text()).get("model_type") == "hrm_text"
    except (json.JSONDecodeError, AttributeError, OSError):
        return False


def load(path: str | Path, device: Any = "cpu") -> Any:
    """Load the model stored at `path` onto `device` (eval mode)."""
    import torch

    from hrm_reason.errors import UserError

    path = Path(path)
    device = torch.device(device)
    if not path.exists():
        raise UserError(f"{path}: no such checkpoint, run directory or transformers directory")
    if is_hf_hrm_text(path):
        from hrm_reason.models.lm.hrm_text_convert import load_hf_hrm_text

        model = load_hf_hrm_text(path)
    else:
        from hrm_reason.lm_eval import is_lm_checkpoint, load_lm_checkpoint

        if is_lm_checkpoint(path):
            model, _, _ = load_lm_checkpoint(path, device)
        else:
            model = _load_puzzle_model(path, device)
    return model.to(device).eval()


def _load_puzzle_model(path: Path, device: Any) -> Any:
    """A puzzle model through the evaluation loader; without its dataset on disk, the shapes come from the weights'
    header (seq_len, vocab_size, num_puzzle_identifiers are fields of every puzzle model's config)."""
    from hrm_reason.checkpoint import find_checkpoint, load_checkpoint, read_weights
    from hrm_reason.data import PuzzleDatasetMetadata
    from hrm_reason.errors import UserError
    from hrm_reason.inference import find_config, load_model_for_eval
    from hrm_reason.models.registry import build_model

    ckpt = find_checkpoint(path)
    config = find_config(ckpt, None)
    if (Path(config.data_path) / "test" / "dataset.json").is_file():
        model, *_ = load_model_for_eval(path, None, None, str(device.type))
        return model
    _, saved = read_weights(ckpt)
    if saved is None or not all(k in saved for k in ("seq_len", "vocab_size", "num_puzzle_identifiers")):
        raise UserError(f"{ckpt}: its dataset {config.data_path} is not on disk and the weights do not record the model's shapes")
    meta = PuzzleDatasetMetadata(pad_id=0, ignore_label_id=0, blank_identifier_id=0, vocab_size=saved["vocab_size"], seq_len=saved["seq_len"],
                                 num_puzzle_identifiers=saved["num_puzzle_identifiers"], total_groups=1, mean_puzzle_examples=1.0, sets=["all"])
    model = build_model(config.arch, meta, device, config.seed)
    load_checkpoint(model, ckpt)
    return model
