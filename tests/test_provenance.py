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


def started_run(tmp_path: Path, starts: int = 1) -> Path:
    """A run directory whose run.json holds `starts` records, as record_provenance writes them."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"runs": [{"event": "start"}] * starts}))
    return run


def test_record_peak_sets_aside_samples_below_the_runs_own_rate(tmp_path: Path) -> None:
    """Issue 59, item 5: a peak below the model's own rate is no measurement, in run.json as in `hrm bench`."""
    from hrm_reason.runtime.peak import matmul_peak_of, record_peak, shared_machine_warning

    run = started_run(tmp_path)
    record_peak(run, [3e10, 1e11, 2e11], 1.0, 2, model_flops_per_s=5e10)
    [start] = runs_of(run)
    assert start["matmul_peak_samples"] == [3e10, 1e11, 2e11]  # every sample, as measured
    assert start["matmul_peak_disturbed"] == [3e10] and start["model_flops_per_s"] == 5e10
    assert start["matmul_peak_flops"] == 1.5e11 and matmul_peak_of(run) == 1.5e11  # the median of the rest
    assert shared_machine_warning(run) == (
        "warning: 1 matrix-product peak sample(s) fell below the run's own rate: their measurement was disturbed "
        "(other work on the cores), so they are set aside and the median of the rest is recorded; compare runs by "
        "CPU-seconds and FLOPs"
    )


def test_a_start_whose_samples_are_all_below_its_rate_records_no_peak(tmp_path: Path) -> None:
    from hrm_reason.runtime.peak import matmul_peak_of, record_peak, shared_machine_warning

    run = started_run(tmp_path, starts=2)
    record_peak(run, [3e10, 4e10], 9.0, 2, model_flops_per_s=8.86e10)
    start = runs_of(run)[-1]
    assert "matmul_peak_flops" not in start and matmul_peak_of(run) is None
    assert start["matmul_peak_disturbed"] == [3e10, 4e10]
    warning = shared_machine_warning(run)
    assert warning is not None and len(warning.splitlines()) == 1
    assert warning.startswith("warning: the machine was shared during this run (load average up to 9.0 on 2 cores in ")
    assert "2 matrix-product peak sample(s) in start 2 of 2 (run.json) fell below the run's own rate" in warning
    assert "a start with none left records no peak" in warning


def test_record_peak_without_a_rate_keeps_every_sample(tmp_path: Path) -> None:
    """A model whose FLOPs are not counted has no rate to compare with: the median of every sample, as before."""
    from hrm_reason.runtime.peak import record_peak, shared_machine_warning

    run = started_run(tmp_path)
    record_peak(run, [3e10, 1e11, 2e11], 1.0, 2)
    [start] = runs_of(run)
    assert start["matmul_peak_flops"] == 1e11 and "matmul_peak_disturbed" not in start
    assert shared_machine_warning(run) is None


def test_a_run_whose_peak_is_below_its_rate_records_none_and_warns(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The training loop gives record_peak the start's own rate (FLOPs over training wall seconds)."""
    import hrm_reason.train.loop as train_module

    monkeypatch.setattr(train_module, "PEAK_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(train_module, "matmul_peak", lambda device, dtype, seconds: 1.0)  # 1 FLOP/s: disturbed
    run = train(tiny_config(data, tmp_path / "run", "epochs=2"), progress=False)
    [start] = runs_of(run)
    assert "matmul_peak_flops" not in start and start["matmul_peak_disturbed"] == start["matmul_peak_samples"]
    assert start["model_flops_per_s"] > 1.0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "fell below the run's own rate" in warnings[0]
