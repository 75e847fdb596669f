"""What the Sudoku and maze builders share (datasets_build/sources.py, hrm_format.py): parallel generation gives the
serial bytes, and an interrupted build leaves nothing behind. One test per property, run for each builder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from datasets_build import hrm_format
from datasets_build import maze as M
from datasets_build import sudoku as S
from tests.helpers import run_hrm


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach the network: the `auto` source must see offline mode."""
    monkeypatch.setenv("HRM_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def build_sudoku(out: Path, **kw: Any) -> Path:
    return S.build_sudoku(S.SudokuBuildOptions(out=out, source="generate", **kw))


def build_maze(out: Path, **kw: Any) -> Path:
    return M.build_maze(M.MazeBuildOptions(out=out, source="generate", size=9, **kw))


# builder, options of a generation run, options of a small run
BUILDERS: dict[str, tuple[Callable[..., Path], dict[str, Any], dict[str, Any]]] = {
    "sudoku": (
        build_sudoku,
        {"box": "2x3", "train_size": 30, "test_size": 10, "seed": 8},
        {"box": "2x2", "train_size": 5, "test_size": 5},
    ),
    "maze": (build_maze, {"train_size": 12, "test_size": 4, "seed": 8}, {"train_size": 3, "test_size": 2}),
}


@pytest.mark.parametrize("name", BUILDERS)
def test_parallel_generation_gives_the_same_bytes(name: str, tmp_path: Path) -> None:
    build, kw, _ = BUILDERS[name]
    a, b = build(tmp_path / "serial", workers=1, **kw), build(tmp_path / "parallel", workers=2, **kw)
    for rel in ("train/all__inputs.npy", "test/all__labels.npy", "train/dataset.json", "test/dataset.json"):
        assert (a / rel).read_bytes() == (b / rel).read_bytes()


@pytest.mark.parametrize("name", BUILDERS)
def test_interrupted_build_leaves_nothing(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build, _, small = BUILDERS[name]

    def boom(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(hrm_format, "write_identifiers", boom)  # after both splits were written into the temp dir
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path / "ds", **small)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["sudoku", "--source", "generate", "--box", "2x2", "--train-size", "30", "--test-size", "10", "--num-aug", "2"],
        ["maze", "--source", "generate", "--size", "6", "--train-size", "20", "--test-size", "5"],
    ],
    ids=["sudoku", "maze"],
)
def test_quiet_builds_show_no_bar_and_write_the_same_bytes(args: list[str], tmp_path: Path) -> None:
    loud = run_hrm("build-data", *args, "--out", str(tmp_path / "loud"))
    quiet = run_hrm("build-data", *args, "--out", str(tmp_path / "quiet"), "--quiet")
    assert loud.returncode == quiet.returncode == 0, quiet.stderr
    assert "%|" in loud.stderr and "%|" not in quiet.stderr
    files = sorted(p.relative_to(tmp_path / "loud") for p in (tmp_path / "loud").rglob("*") if p.is_file())
    assert files and all((tmp_path / "loud" / f).read_bytes() == (tmp_path / "quiet" / f).read_bytes() for f in files)
