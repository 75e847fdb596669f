"""`hrm convert`: HRM-Text checkpoints between `transformers` (HrmTextForCausalLM) and ours; logits are unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

from hrm_reason.atomic import atomic_directory
from hrm_reason.checkpoint import write_weights
from hrm_reason.data.text import HF_TOKENIZER_FILE
from hrm_reason.errors import UserError
from hrm_reason.load import is_hf_hrm_text, load


def convert_hrm_text(src: Path, dst: Path, overwrite: bool = False) -> Path:
    """A transformers directory -> our checkpoint directory, or our run/checkpoint -> a transformers directory; the
    tokenizer.json found beside the source goes along. Returns `dst`."""
    if dst.exists() and not overwrite:
        raise UserError(f"--to {dst}: already exists; pass --overwrite to replace it")
    model = load(src)
    if type(model).__name__ != "HRMText":
        raise UserError(
            f"--from {src}: holds a {type(model).__name__}; hrm convert handles hrm_text (HrmText) checkpoints only"
        )
    if is_hf_hrm_text(src):
        with atomic_directory(dst, overwrite=overwrite) as tmp:
            write_weights(tmp, model, model.config.model_dump(mode="json"))
            if (src / HF_TOKENIZER_FILE).is_file():
                shutil.copyfile(src / HF_TOKENIZER_FILE, tmp / HF_TOKENIZER_FILE)
        return dst
    from hrm_reason.models.lm.hrm_text_convert import save_hf_hrm_text

    save_hf_hrm_text(model, dst, overwrite=overwrite)
    src_dir = src if src.is_dir() else src.parent
    for d in (src_dir, src_dir.parent.parent):
        if (d / HF_TOKENIZER_FILE).is_file():
            shutil.copyfile(d / HF_TOKENIZER_FILE, dst / HF_TOKENIZER_FILE)
            break
    return dst
