"""`hrm --version` (issue 59): the line a bug report quotes, `hrm-reason VERSION (commit HASH)`, at once (no torch
import), and the version alone, with no error, where there is no git or no checkout."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from hrm_reason import version
from tests.helpers import REPO, run_hrm

VERSION = metadata.version("hrm-reason")
LINE = re.compile(rf"hrm-reason {re.escape(VERSION)}( \(commit [0-9a-f]{{4,}}(-dirty)?\))?")


def version_line(proc: subprocess.CompletedProcess) -> str:
    """The one line of a `hrm --version` that succeeded and said nothing on stderr."""
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    return lines[0]


def git(cwd: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_version_is_one_line_with_the_distribution_version() -> None:
    assert LINE.fullmatch(version_line(run_hrm("--version")))


def test_the_distribution_version_is_pyprojects() -> None:
    """A stale install (pyproject.toml's version raised since `pip install -e .`) would report the old one."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(REPO / "pyproject.toml", "rb") as f:
        assert VERSION == tomllib.load(f)["project"]["version"]


def test_without_an_install_the_version_is_read_from_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert version.package_version() == VERSION


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="no git checkout here")
def test_a_checkout_names_its_commit() -> None:
    commit = git(REPO, "rev-parse", "--short=7", "HEAD")
    dirty = "-dirty" if git(REPO, "status", "--porcelain", "--untracked-files=no") else ""
    assert version_line(run_hrm("--version")) == f"hrm-reason {VERSION} (commit {commit}{dirty})"


def test_a_copy_outside_git_prints_the_version_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package's folder outside any checkout (an installed copy): no commit, no error."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.setattr(version, "SOURCE_DIR", tmp_path)
    assert version.version_line() == f"hrm-reason {VERSION}"


def test_without_git_on_the_path_the_version_alone(tmp_path: Path) -> None:
    assert version_line(run_hrm("--version", env={"PATH": str(tmp_path)})) == f"hrm-reason {VERSION}"


@pytest.mark.skipif(shutil.which("git") is None, reason="no git")
def test_a_changed_tracked_file_marks_the_commit_dirty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout of its own: clean, then with a tracked file edited; an untracked file is no change."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "pyproject.toml")
    git(tmp_path, "commit", "-q", "-m", "copy")
    commit = git(tmp_path, "rev-parse", "--short=7", "HEAD")
    monkeypatch.setattr(version, "SOURCE_DIR", tmp_path)
    (tmp_path / "notes.txt").write_text("untracked\n")
    assert version.version_line() == f"hrm-reason {VERSION} (commit {commit})"
    with open(tmp_path / "pyproject.toml", "a") as f:
        f.write("# edited\n")
    assert version.version_line() == f"hrm-reason {VERSION} (commit {commit}-dirty)"


def test_version_never_imports_torch(tmp_path: Path) -> None:
    """A torch that refuses to import, first on the path: --version answers all the same (as fast as --help)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text('raise ImportError("hrm --version imported torch")\n')
    proc = run_hrm("--version", env={"PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert LINE.fullmatch(version_line(proc))


def test_no_arguments_still_print_the_help() -> None:
    proc = run_hrm()
    assert "Usage: hrm" in proc.stdout and "--version" in proc.stdout and "build-data" in proc.stdout
