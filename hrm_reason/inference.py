"""Load a trained model from a run, one of our checkpoints, or an original HRM checkpoint, and evaluate it."""

from __future__ import annotations

from pathlib import Path

from hrm_reason.checkpoint import find_checkpoint, load_checkpoint
from hrm_reason.config import TrainConfig, load_config
from hrm_reason.data import load_split
from hrm_reason.errors import UserError
from hrm_reason.evaluate import EvalResult, evaluate
from hrm_reason.models.registry import build_model
from hrm_reason.tasks import task_metrics
from hrm_reason.train import resolve_device


def find_config(ckpt: Path, config_path: Path | None) -> TrainConfig:
    """The explicit --config, else the run's config.yaml, else the original code's all_config.yaml beside the file."""
    if config_path is not None:
        return load_config(config_path)
    candidates = [ckpt.parent.parent / "config.yaml", ckpt.parent / "config.yaml", ckpt.parent / "all_config.yaml"]
    for candidate in candidates:
        if candidate.is_file():
            return load_config(candidate)
    raise UserError(f"{ckpt}: no config.yaml or all_config.yaml found beside the checkpoint; pass --config FILE")


def load_model_for_eval(path: Path, config_path: Path | None, data: Path | None, device_name: str):
    ckpt = find_checkpoint(path)
    config = find_config(ckpt, config_path)
    split = load_split(data if data is not None else config.data_path, "test")
    device = resolve_device(device_name)
    model = build_model(config.arch, split.metadata, device, config.seed)
    load_checkpoint(model, ckpt)
    return model, config, split, device


def evaluate_checkpoint(
    path: Path, config_path: Path | None, data: Path | None, mmax: int, batch_size: int | None, max_examples: int | None,
    device_name: str, progress: bool = True,
) -> EvalResult:
    model, config, split, device = load_model_for_eval(path, config_path, data, device_name)
    bs = batch_size or config.eval_global_batch_size or config.global_batch_size
    return evaluate(model, split, mmax, bs, device, config.arch.loss.loss_type, max_examples, progress=progress,
                    metrics=task_metrics(split, mmax))
