"""Where a run's numbers go: metrics.jsonl in the run directory, and wandb or tensorboard when asked for; and the
progress bars of long work, on a terminal or in a log file."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from hrm_reason.atomic import atomic_write_text, disk_error
from hrm_reason.errors import UserError

ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # cursor moves and colours of nested bars
LOG_INTERVAL = 30.0  # seconds between a bar's lines when the output is a file, not a terminal


class PlainLines(io.TextIOBase):
    """Where a bar writes when stderr is not a terminal: each refresh becomes a line of its own, without the carriage
    returns and cursor moves that make a log file of nested bars unreadable."""

    def write(self, text: str) -> int:
        for line in ESCAPES.sub("", text).replace("\r", "\n").split("\n"):
            if line.strip():
                sys.stderr.write(line.rstrip() + "\n")
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()


def progress_bar(enabled: bool = True, **options: Any) -> tqdm:
    """A tqdm bar with its rates: redrawn in place on a terminal; in a log file a plain line every LOG_INTERVAL
    seconds and one at the end; nothing when not `enabled` (--quiet)."""
    if sys.stderr.isatty():
        return tqdm(disable=not enabled, dynamic_ncols=True, **options)
    return tqdm(disable=not enabled, file=PlainLines(), mininterval=LOG_INTERVAL, ncols=100, **options)


def read_records(path: Path, warn: bool = True) -> list[str]:
    """The lines of metrics.jsonl. A last line cut by a crash mid-write is dropped with a warning (`warn`; the resume
    rewrites what follows its checkpoint anyway); a damaged line before it is an error naming the line."""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    for i, line in enumerate(lines):
        try:
            record = json.loads(line)
            record["step"]
        except (json.JSONDecodeError, TypeError, KeyError):
            if i == len(lines) - 1:
                if warn:
                    print(f"warning: {path}: dropped its last line, cut by a crash: {line[:60]!r}", file=sys.stderr)
                return lines[:-1]
            raise UserError(f"{path}: line {i + 1} is not a metrics record; fix or delete it to resume") from None
    return lines


class MetricsLog:
    """metrics.jsonl: one flat JSON object per logged step or evaluation, appended and flushed."""

    def __init__(self, path: Path, resume_step: int | None) -> None:
        self.path = path
        if resume_step is not None and path.exists():
            # Drop what was logged after the checkpoint we resume from, so the log matches the run.
            kept = [line for line in read_records(path) if json.loads(line)["step"] <= resume_step]
            atomic_write_text(path, "".join(line + "\n" for line in kept))
        elif resume_step is None:
            atomic_write_text(path, "")
        self.file = path.open("a")

    def write(self, record: dict[str, Any]) -> None:
        try:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()
        except OSError as e:  # a full disk or a revoked permission: name the log (a cut last line is dropped on resume)
            if (user := disk_error(e, self.path)) is not None:
                raise user from None
            raise

    def close(self) -> None:
        self.file.close()


class ExternalLogger:
    """wandb or tensorboard, only when installed and asked for."""

    def __init__(
        self, kind: str, project_name: str | None, run_name: str | None, config: dict[str, Any], run_dir: Path
    ) -> None:
        self.kind, self.impl = kind, None
        if kind == "wandb":
            try:
                import wandb  # type: ignore[import-not-found]
            except ImportError:
                raise UserError("logger=wandb but wandb is not installed (pip install 'hrm-reason[wandb]')") from None
            self.impl = wandb.init(
                project=project_name or "hrm-reason", name=run_name or run_dir.name, config=config, dir=str(run_dir)
            )
        elif kind == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise UserError(
                    "logger=tensorboard but tensorboard is not installed (pip install 'hrm-reason[tensorboard]')"
                ) from None
            self.impl = SummaryWriter(str(run_dir / "tensorboard"))

    def log(self, record: dict[str, Any]) -> None:
        if self.impl is None:
            return
        step = record["step"]
        values = {k: v for k, v in record.items() if k != "step" and isinstance(v, (int, float))}
        if self.kind == "wandb":
            self.impl.log(values, step=step)
        else:
            for k, v in values.items():
                self.impl.add_scalar(k, v, step)

    def close(self) -> None:
        if self.impl is not None:
            self.impl.finish() if self.kind == "wandb" else self.impl.close()


class RunLog:
    """metrics.jsonl plus the external logger, written by the main process only (the others get a silent one)."""

    def __init__(
        self,
        run_dir: Path | None,
        resume_step: int | None,
        kind: str = "none",
        project_name: str | None = None,
        run_name: str | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.metrics = MetricsLog(run_dir / "metrics.jsonl", resume_step) if run_dir is not None else None
        self.external = (
            ExternalLogger(kind, project_name, run_name, config or {}, run_dir) if run_dir is not None else None
        )

    def write(self, record: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write(record)
            self.external.log(record)  # type: ignore[union-attr]

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
            self.external.close()  # type: ignore[union-attr]
