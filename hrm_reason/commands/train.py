"""`hrm train`: the run config from the flags and the key=value overrides (config.py `resume_config`), then the one
training loop (train/loop.py `train`)."""

from __future__ import annotations

from pathlib import Path

from hrm_reason.commands.cli_options import overrides
from hrm_reason.config import default_config_notice, resume_config
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
    --config (said once the run's checks have passed: a refusal is its one line alone). Returns the line that names
    the run directory."""
    keys = overrides(args, "train")
    keys += [f"data_path={data}"] * (data is not None) + [f"run_dir={run_dir}"] * (run_dir is not None)
    notice = default_config_notice(config, resume, default)
    config_used = resume_config(run_dir, config, resume, keys, default)
    out = train(config_used, resume, progress=progress, notices=[notice] if notice else [])
    return f"run directory: {out}"
