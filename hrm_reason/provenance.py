"""What made a run: `run.json` in the run directory lists one record per start and per resume, each with the package
version, the git commit (and whether the tree had uncommitted changes) when the code runs from a git checkout, the
torch and Python versions, the platform and the command line. A result can then be traced to the code that made it,
and a resume with other code is visible."""

from __future__ import annotations

import datetime
import json
import platform
import socket
import sys
from pathlib import Path
from typing import Any

import torch

from hrm_reason.atomic import atomic_write_text
from hrm_reason.version import git_state, installed_version

RUN_RECORD = "run.json"


def provenance(resume_step: int | None = None, argv: list[str] | None = None) -> dict[str, Any]:
    """This process's record: what code, libraries and command; `resume_step` is the checkpoint's step on a resume."""
    return {
        "event": "start" if resume_step is None else "resume",
        **({"resume_step": resume_step} if resume_step is not None else {}),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hrm_reason": installed_version(),
        "git": git_state(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "argv": list(sys.argv if argv is None else argv),
    }


def record_provenance(run_dir: Path, resume_step: int | None = None) -> dict[str, Any]:
    """Append this start's or resume's record to run_dir/run.json (rewritten atomically); a fresh start begins the
    list anew. An unreadable earlier file is not fatal to training: its records are lost, the new one is kept."""
    path = run_dir / RUN_RECORD
    runs: list[Any] = []
    if resume_step is not None and path.is_file():
        try:
            loaded = json.loads(path.read_text())
            runs = loaded["runs"] if isinstance(loaded, dict) and isinstance(loaded.get("runs"), list) else []
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            runs = []
    record = provenance(resume_step)
    atomic_write_text(path, json.dumps({"runs": [*runs, record]}, indent=2) + "\n")
    return record
