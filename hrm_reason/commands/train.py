"""`hrm train`: the run config from the flags and the key=value overrides (config.py `resume_config`), then the one
training loop (train/loop.py `train`)."""

from __future__ import annotations

from pathlib import Path

from hrm_reason.commands.cli_options import overrides
from hrm_reason.config import resume_config
from hrm_reason.train.loop import train


def train_command(
    args: list[str],
    config: Path | None,
    data: Path | None,
    run_dir: Path | None,
    resume: bool,
    default: str,
    progress: bool,
) -> str:
    """Trains (or resumes) the run; `args` are the key=value overrides, `default` the packaged config without
    --config. Returns the line that names the run directory."""
    keys = overrides(args, "train")
    keys += [f"data_path={data}"] * (data is not None) + [f"run_dir={run_dir}"] * (run_dir is not None)
    out = train(resume_config(run_dir, config, resume, keys, default), resume, progress=progress)
    return f"run directory: {out}"
