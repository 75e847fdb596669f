"""Which code is running: the package's version and, in a git checkout, its commit. No torch: `hrm --version` answers
at once, and run records (hrm_reason/provenance.py) read the same."""

from __future__ import annotations

import re
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

SOURCE_DIR = Path(__file__).resolve().parent.parent  # the checkout root when installed editable or run in place


def installed_version() -> str | None:
    """The installed distribution's version; None when the package runs from a checkout without an install."""
    try:
        return metadata.version("hrm-reason")
    except metadata.PackageNotFoundError:
        return None


def package_version() -> str:
    """The installed version, else the version line of the checkout's pyproject.toml (tomllib is 3.11+, the package
    supports 3.10), else "unknown"."""
    installed = installed_version()
    if installed is not None:
        return installed
    try:
        text = (SOURCE_DIR / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "unknown"
    table = re.search(r"^\[project\][ \t]*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = table and re.search(r"^version\s*=\s*[\"']([^\"']+)[\"']", table.group(1), re.M)
    return found.group(1) if found else "unknown"


def _git(directory: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # no git, or a hung filesystem: best effort
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(directory: Path = SOURCE_DIR) -> dict[str, Any] | None:
    """{commit, dirty} of the checkout `directory` is the root of; None when it is not one (an installed wheel, whose
    site-packages may sit inside some unrelated repository, must not report that repository's commit). Untracked
    files do not count as dirty: runs/ and data/ live in the checkout."""
    top = _git(directory, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != directory.resolve():
        return None
    commit = _git(directory, "rev-parse", "HEAD")
    status = _git(directory, "status", "--porcelain", "--untracked-files=no")
    if commit is None:
        return None
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def version_line() -> str:
    """`hrm-reason VERSION (commit HASH[-dirty])`: the line a bug report quotes; the commit only where there is one."""
    git = git_state(SOURCE_DIR)
    commit = f" (commit {git['commit'][:7]}{'-dirty' if git['dirty'] else ''})" if git is not None else ""
    return f"hrm-reason {package_version()}{commit}"
