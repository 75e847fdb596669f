"""`.gitignore` must never drop a source file or a kept record: a bare `data/` once hid `hrm_reason/data/__init__.py`
and a bare `runs/` hid the maze study's records under `benchmarks/`. Asked of git with paths that need not exist, so a
clean checkout (where ignored files are simply absent) still catches a pattern that would drop them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEPT = ("hrm_reason", "datasets_build", "tests", "benchmarks", "configs", "docs", "scripts")


def ignored(paths: list[str]) -> set[str]:
    out = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="\n".join(paths),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode in (0, 1), out.stderr
    return set(out.stdout.split())


@pytest.fixture(scope="module")
def git() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an installed copy has no .gitignore to check)")


def candidate_paths() -> list[str]:
    """Files that would be kept in every tracked folder: a module, a record of a run kept under `runs/` or `data/`."""
    dirs = {Path(d) for top in KEPT for d in [top] + [str(p.relative_to(ROOT)) for p in (ROOT / top).rglob("*")]}
    dirs = {d for d in dirs if (ROOT / d).is_dir() and "__pycache__" not in d.parts}
    names = ("__init__.py", "runs/seed0/metrics.jsonl", "data/dataset.json", "build/config.yaml")
    return sorted(str(d / n) for d in dirs for n in names)


def test_no_source_or_record_path_is_ignored(git: None) -> None:
    paths = candidate_paths()
    assert "hrm_reason/data/__init__.py" in paths
    assert ignored(paths) == set()


def test_the_check_sees_an_ignored_path(git: None) -> None:
    # Scratch folders at the root stay ignored, and the check reports them.
    assert ignored(["runs/quick/metrics.jsonl", "data/sudoku/dataset.json", "hrm_reason/data/__init__.py"]) == {
        "runs/quick/metrics.jsonl",
        "data/sudoku/dataset.json",
    }
