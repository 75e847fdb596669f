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


def record_peak(
    run_dir: Path,
    flops: float | None,
    samples: list[float] | None = None,
    load: float | None = None,
    cpus: int | None = None,
) -> None:
    """Add this machine's fp32 matrix-product peak (FLOP/s: the median of the samples taken during the run and at its
    end) to this start's record in run.json, with the samples, the highest load average seen and the cores: the
    figures that scale the run's times to another machine, and say whether it had the machine to itself
    (docs/training.md, "Time to accuracy"). A start stopped before any sample records its load alone (flops None)."""
    path = run_dir / RUN_RECORD
    try:
        loaded = json.loads(path.read_text())
        runs = loaded["runs"]
        if flops is not None:
            runs[-1]["matmul_peak_flops"] = flops
        if samples is not None:
            runs[-1].update(matmul_peak_samples=samples, load_average_max=load, cpu_count=cpus)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError):
        return  # best effort, as the rest of run.json
    atomic_write_text(path, json.dumps({"runs": runs}, indent=2) + "\n")


def matmul_peak_of(run_dir: Path) -> float | None:
    """The last fp32 matrix-product peak recorded in run_dir/run.json, if any."""
    try:
        runs = json.loads((Path(run_dir) / RUN_RECORD).read_text())["runs"]
        peaks = [r["matmul_peak_flops"] for r in runs if isinstance(r, dict) and r.get("matmul_peak_flops")]
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        return None
    return float(peaks[-1]) if peaks else None


SHARED_LOAD_MARGIN = 0.5  # a load average above the cores by more than this: other work ran beside the run


def shared_machine_warning(run_dir: Path) -> str | None:
    """The warning a run ends with when any of its starts (run.json: the first and every resume, as record_peak wrote
    them) found the machine shared, naming the starts when there were several; None when none did, or none recorded
    its load (starts shorter than the peak's measurement, or written before loads were recorded)."""
    try:
        runs = json.loads((Path(run_dir) / RUN_RECORD).read_text())["runs"]
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        return None
    if not isinstance(runs, list):
        return None
    shared = []
    for number, start in enumerate(runs, 1):
        load, cpus = (
            (start.get("load_average_max"), start.get("cpu_count")) if isinstance(start, dict) else (None, None)
        )
        if isinstance(load, (int, float)) and isinstance(cpus, int) and load > cpus + SHARED_LOAD_MARGIN:
            shared.append((number, float(load), cpus))
    if not shared:
        return None
    load, cpus = max(shared, key=lambda s: s[1])[1:]
    numbers = [str(n) for n, _, _ in shared]
    starts = numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + " and " + numbers[-1]
    where = "" if len(runs) == 1 else f" in start{'s' * (len(shared) > 1)} {starts} of {len(runs)} (run.json)"
    return (
        f"warning: the machine was shared during this run (load average up to {load:.1f} on {cpus} cores{where}): its "
        "wall times and recorded matrix-product peak are those of a loaded machine; compare runs by CPU-seconds and "
        "FLOPs"
    )
