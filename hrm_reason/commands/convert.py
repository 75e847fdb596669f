"""`hrm convert`: HRM-Text checkpoints between `transformers` (HrmTextForCausalLM) and ours; logits are unchanged.

--to is new, or a checkpoint this command wrote (replaced with --overwrite): never a run, a dataset or another folder,
which --overwrite would delete (hrm_reason.outputs). --from is recognised before it loads, so that a folder of another
model (a BERT config.json) or without any model is one line naming --from, not a hint at a flag convert lacks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hrm_reason.atomic import atomic_directory
from hrm_reason.checkpoint import MANIFEST, WEIGHTS, find_checkpoint, saved_model_config, write_weights
from hrm_reason.data.text import HF_TOKENIZER_FILE
from hrm_reason.errors import UserError
from hrm_reason.load import is_hf_hrm_text, load, run_config_path
from hrm_reason.outputs import Output, claim, folder_of, read_own_json
from hrm_reason.readers import read_json

CONFIG_FILE = "config.json"  # a transformers directory's (models/lm/hrm_text_convert.py)


def _own_checkpoint(path: Path) -> str | None:
    """A checkpoint of HRM-Text either way: a transformers config.json of model_type hrm_text, or our weights whose
    header names hrm_text."""
    config = read_own_json(path / CONFIG_FILE) if (path / CONFIG_FILE).exists() else None
    if isinstance(config, dict) and config.get("model_type") == "hrm_text":
        return None
    saved = saved_model_config(path) if (path / WEIGHTS).is_file() else None
    if isinstance(saved, dict) and saved.get("name") == "hrm_text":
        return None
    return "no HrmText checkpoint"


OUT = Output(
    "--to",
    "hrm convert",
    folder_of((CONFIG_FILE, WEIGHTS, MANIFEST, HF_TOKENIZER_FILE), "an HrmText checkpoint", _own_checkpoint),
    folder=True,
)


def check_source(src: Path) -> None:
    """--from is a transformers HrmText directory or a checkpoint of hrm_text (a run, a checkpoint directory or file),
    said in one line naming it before anything loads."""
    if not src.exists():
        raise UserError(f"--from {src}: no such directory or file")
    if src.is_dir() and (src / CONFIG_FILE).is_file():
        raw = read_json(src / CONFIG_FILE, None)
        kind = raw.get("model_type") if isinstance(raw, dict) else None
        if kind != "hrm_text":
            raise UserError(
                f"--from {src}: its {CONFIG_FILE} is of model_type {kind!r}; hrm convert reads a transformers HrmText "
                "directory (model_type 'hrm_text') or an hrm_text run or checkpoint"
            )
        return
    ckpt = find_checkpoint(src)
    if run_config_path(ckpt) is None and saved_model_config(ckpt) is None:
        raise UserError(
            f"--from {src}: neither a transformers HrmText directory ({CONFIG_FILE} + {WEIGHTS}) nor an hrm_text run "
            "or checkpoint (no config.yaml beside it, and its weights name no model)"
        )


def convert_hrm_text(src: Path, dst: Path, overwrite: bool = False) -> Path:
    """A transformers directory -> our checkpoint directory, or our run/checkpoint -> a transformers directory; the
    tokenizer.json found beside the source goes along. Returns `dst`."""
    claim(dst, OUT)
    if dst.exists() and not overwrite:
        raise UserError(f"--to {dst}: already exists; pass --overwrite to replace it")
    check_source(src)
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
