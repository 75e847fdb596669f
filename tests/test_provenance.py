"""What a run records about its making (run.json), file modes under the umask, and checkpoint pruning."""

from __future__ import annotations

import json
import os
import platform
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
import torch

from hrm_reason import checkpoint as checkpoint_module
from hrm_reason.atomic import atomic_directory, atomic_write_text
from hrm_reason.checkpoint import find_checkpoint, prune_checkpoints, read_weights
from hrm_reason.errors import UserError
from hrm_reason.train.loop import train
from hrm_reason.version import SOURCE_DIR, git_state
from tests.helpers import rewind, tiny_config, write_original_layout


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("data") / "sudoku4")


def runs_of(run: Path) -> list[dict]:
    return json.loads((run / "run.json").read_text())["runs"]


def test_run_json_records_the_code_libraries_and_command_at_start_and_resume(data: Path, tmp_path: Path) -> None:
    overrides = ("epochs=4", "eval_interval=2")  # checkpoints at steps 6 and 12
    run = train(tiny_config(data, tmp_path / "run", *overrides), progress=False)
    [start] = runs_of(run)
    assert start["event"] == "start" and "resume_step" not in start
    assert start["hrm_reason"] == metadata.version("hrm-reason")
    assert start["torch"] == torch.__version__
    assert start["python"] == platform.python_version()
    assert start["platform"] == platform.platform()
    assert start["argv"] == sys.argv
    assert start["git"] == git_state()
    if shutil.which("git") and (SOURCE_DIR / ".git").exists():  # the tests run from a checkout: its commit is named
        head = subprocess.run(["git", "-C", str(SOURCE_DIR), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert start["git"]["commit"] == head.stdout.strip() and isinstance(start["git"]["dirty"], bool)

    cut = rewind(run, tmp_path / "cut", 6)
    train(tiny_config(data, cut, *overrides), resume=True, progress=False)
    first, resumed = runs_of(cut)
    assert first == start  # the resume appends; the start's record is kept
    assert resumed["event"] == "resume" and resumed["resume_step"] == 6
    assert resumed["torch"] == torch.__version__
    # A fresh start in an emptied directory begins the list anew.
    shutil.rmtree(run)
    train(tiny_config(data, run, "epochs=2", "eval_interval=2"), progress=False)
    assert [r["event"] for r in runs_of(run)] == ["start"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_state_names_the_commit_and_tracked_changes_only_at_the_checkout_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env).stdout.strip()

    assert git_state(repo) is None  # not a checkout yet
    git("init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("commit", "-q", "-m", "one")
    assert git_state(repo) == {"commit": git("rev-parse", "HEAD"), "dirty": False}
    (repo / "runs.txt").write_text("untracked")  # run outputs in the checkout are not a code change
    assert git_state(repo)["dirty"] is False
    (repo / "a.py").write_text("x = 2\n")
    assert git_state(repo)["dirty"] is True
    # A directory inside some repository (site-packages in a user's dotfiles repo) is not that repository's code.
    assert git_state(repo / "sub") is None


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writes_follow_the_umask(tmp_path: Path, umask_022: None) -> None:
    atomic_write_text(tmp_path / "a.txt", "x")
    with atomic_directory(tmp_path / "d") as d:
        (d / "f").write_text("y")
    assert mode(tmp_path / "a.txt") == 0o644  # was 0600 (tempfile.mkstemp)
    assert mode(tmp_path / "d") == 0o755  # was 0700 (tempfile.mkdtemp)
    os.umask(0o077)  # a private umask is honoured too
    atomic_write_text(tmp_path / "b.txt", "x")
    with atomic_directory(tmp_path / "e"):
        pass
    assert mode(tmp_path / "b.txt") == 0o600 and mode(tmp_path / "e") == 0o700
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_run_files_follow_the_umask(data: Path, tmp_path: Path, umask_022: None) -> None:
    run = train(tiny_config(data, tmp_path / "run", "epochs=2", "eval_interval=2"), progress=False)
    ckpt = find_checkpoint(run)
    for f in (
        run / "config.yaml",
        run / "metrics.jsonl",
        run / "run.json",
        run / "checkpoints" / "latest",
        ckpt / "model.safetensors",
        ckpt / "state.pt",
    ):
        assert mode(f) == 0o644, f
    for d in (run, run / "checkpoints", ckpt):
        assert mode(d) == 0o755, d


def fake_checkpoints(run: Path, steps: list[int], latest: int, evals: dict[int, dict]) -> None:
    for s in steps:
        (run / "checkpoints" / f"step_{s}").mkdir(parents=True)
        (run / "checkpoints" / f"step_{s}" / "model.safetensors").write_bytes(b"w")
    (run / "checkpoints" / "latest").write_text(f"step_{latest}")
    lines = [json.dumps({"step": s, "train/lm_loss": 1.0}) for s in steps]
    lines += [json.dumps({"step": s, **r}) for s, r in evals.items()]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n" + '{"step": 6, "eval/exact_acc')  # a cut last line


def kept(run: Path) -> list[str]:
    return sorted((p.name for p in (run / "checkpoints").iterdir() if p.name != "latest"), key=lambda n: int(n[5:]))


def test_prune_keeps_the_last_n_the_best_and_latest(tmp_path: Path) -> None:
    acc = {2: {"eval/exact_accuracy": 0.9}, 4: {"eval/exact_accuracy": 0.5}, 6: {"eval/exact_accuracy": 0.1}}
    fake_checkpoints(tmp_path / "a", [1, 2, 3, 4, 5, 6], 6, acc)
    assert prune_checkpoints(tmp_path / "a", None, True) == []  # default: keep all
    assert len(kept(tmp_path / "a")) == 6
    prune_checkpoints(tmp_path / "a", 2, keep_best=True)
    assert kept(tmp_path / "a") == ["step_2", "step_5", "step_6"]
    assert (tmp_path / "a" / "checkpoints" / "latest").read_text() == "step_6"
    prune_checkpoints(tmp_path / "a", 1)
    assert kept(tmp_path / "a") == ["step_6"]

    # Text runs: the lowest eval CE is best.
    ce = {2: {"eval/ce": 3.0}, 3: {"eval/ce": 1.5}, 5: {"eval/ce": 2.0}}
    fake_checkpoints(tmp_path / "b", [1, 2, 3, 4, 5, 6], 6, ce)
    prune_checkpoints(tmp_path / "b", 1, keep_best=True)
    assert kept(tmp_path / "b") == ["step_3", "step_6"]

    # The checkpoint `latest` names is never removed, even when it is not the newest directory.
    fake_checkpoints(tmp_path / "c", [1, 2, 3], 1, {})
    prune_checkpoints(tmp_path / "c", 1, keep_best=True)
    assert kept(tmp_path / "c") == ["step_1", "step_3"]


def test_training_prunes_after_each_complete_save(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    overrides = ("epochs=4", "eval_interval=2", "checkpoint_every_steps=1", "keep_checkpoints=2")
    run = train(tiny_config(data, tmp_path / "run", *overrides, "keep_best_checkpoint=true"), progress=False)
    evals = {
        r["step"]: r["eval/exact_accuracy"]
        for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        if "eval/exact_accuracy" in r
    }
    best = max(evals, key=lambda s: (evals[s], s))
    assert kept(run) == sorted({"step_11", "step_12", f"step_{best}"}, key=lambda n: int(n[5:]))
    assert (run / "checkpoints" / "latest").read_text() == "step_12"
    read_weights(find_checkpoint(run))

    # A save that fails leaves the previous checkpoints as they were: pruning runs only after a complete save.
    real_save, calls = torch.save, []

    def failing_save(obj: object, f: object) -> None:
        calls.append(f)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real_save(obj, f)

    monkeypatch.setattr(checkpoint_module.torch, "save", failing_save)
    with pytest.raises((OSError, UserError)):
        train(tiny_config(data, tmp_path / "full", *overrides), progress=False)
    assert kept(tmp_path / "full") == ["step_1", "step_2"]
    assert (tmp_path / "full" / "checkpoints" / "latest").read_text() == "step_2"
    read_weights(find_checkpoint(tmp_path / "full"))


def test_keep_checkpoints_must_be_positive(data: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="keep_checkpoints"):
        tiny_config(data, tmp_path / "run", "keep_checkpoints=0")
