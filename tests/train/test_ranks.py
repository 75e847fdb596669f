"""Across ranks (2 processes, gloo, a tiny HRM, one launcher per rank as on two machines): only rank 0 writes; a stop
signal to one rank or to every process stops every rank at the same step with one complete checkpoint; a resume on
another number of processes continues exactly and says so in one line; a rank that dies or hangs makes the other
exit with one line instead of waiting forever."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from hrm_reason.checkpoint import read_state
from hrm_reason.config import save_config
from hrm_reason.train.loop import train
from tests.helpers import assert_same_trajectory, rewind, tiny_config, torch_threads, write_original_layout
from tests.train.launchers import Nodes, error_lines, launch_nodes, torchrun_signals_flag

# One round (epochs and eval_interval far past the step cap); exploration off, as its draws are seeded by rank.
SETTINGS = ("epochs=4000", "eval_interval=4000", "arch.halt_exploration_prob=0.0", "device=cpu")
PAUSE_AT = 3  # the rank child's pause: signals and kills land inside this training step


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("ranks") / "sudoku4", distinct_identifiers=True)


def start(tmp_path: Path, data: Path, *overrides: str, **env: str) -> tuple[Nodes, Path]:
    """Two launchers of one rank child each, training a tiny HRM into tmp_path/run; its writes watched."""
    run, config = tmp_path / "run", tmp_path / "config.yaml"
    save_config(tiny_config(data, run, *SETTINGS, *overrides), config)
    env = {"HRM_TEST_WATCH": str(run), **env}
    args = ["train", "--config", str(config), "--quiet"]
    return launch_nodes(tmp_path, args, child=True, extra_env=env, torchrun_args=torchrun_signals_flag()), run


@pytest.fixture(scope="module")
def two_ranks(data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Nodes, Path]:
    """6 steps on 2 ranks, checkpoints at steps 3 and 6, evaluated at 6."""
    nodes, run = start(tmp_path_factory.mktemp("two"), data, "max_steps=6", "checkpoint_every_steps=3")
    try:
        results = nodes.wait(timeout=180)
    finally:
        nodes.kill()
    assert all(code == 0 for code, _ in results), results
    return nodes, run


def test_only_rank_zero_writes(two_ranks: tuple[Nodes, Path]) -> None:
    nodes, run = two_ranks
    rank0, rank1 = nodes.report(0), nodes.report(1)
    assert rank1["writes"] == []
    # The watch sees writes: rank 0's run files, the lock and both checkpoints among them.
    written = {Path(path).relative_to(run).parts[0] for _, path in rank0["writes"] if Path(path) != run}
    assert {".lock", "config.yaml", "run.json", "metrics.jsonl", "checkpoints"} <= written
    assert {"step_3", "step_6", "latest"} <= {Path(p).name for _, p in rank0["writes"]}


def test_resume_on_one_process_continues_exactly_and_says_so(
    two_ranks: tuple[Nodes, Path], tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2 processes -> 1 from the checkpoint at step 3: the records and weights of the uninterrupted 2-process run."""
    _, run = two_ranks
    resumed = rewind(run, tmp_path / "resumed", 3)
    capsys.readouterr()
    with torch_threads(1):
        train(
            tiny_config(data, resumed, *SETTINGS, "max_steps=6", "checkpoint_every_steps=3"),
            resume=True,
            progress=False,
        )
    said = [line for line in capsys.readouterr().err.splitlines() if "resuming on" in line]
    assert said == [
        "resuming on 1 process(es) a run saved on 2: the global batch stays 8 (8 per process), so the batches are "
        "the same; what each process draws for itself (the ACT models' halting exploration, seeded by rank) differs "
        "from a run without the change"
    ]
    assert_same_trajectory(run, resumed)


def signalled_processes(nodes: Nodes, workers: list[int], who: str) -> list[int]:
    if who == "rank 1":
        return [workers[1]]
    return [*workers, *(p.pid for p in nodes.launchers)]  # a scheduler's way: every process of the job


@pytest.mark.parametrize(
    "signum,who",
    [(signal.SIGUSR1, "rank 1"), (signal.SIGTERM, "every process"), (signal.SIGUSR1, "every process")],
    ids=["SIGUSR1-rank1", "SIGTERM-all", "SIGUSR1-all"],
)
def test_stop_signal_stops_every_rank_at_one_step_with_one_checkpoint(
    signum: int, who: str, data: Path, tmp_path: Path
) -> None:
    if who == "every process" and signum == signal.SIGUSR1 and not torchrun_signals_flag():
        pytest.skip("this torchrun cannot forward SIGUSR1 (no --signals-to-handle)")
    nodes, run = start(tmp_path, data, "max_steps=8", HRM_TEST_PAUSE_AT=str(PAUSE_AT))
    try:
        workers = nodes.wait_paused(2)
        for pid in signalled_processes(nodes, workers, who):
            os.kill(pid, signum)
        nodes.go()
        results = nodes.wait(timeout=120)
    finally:
        nodes.kill()
    name = signal.Signals(signum).name
    for rank in (0, 1):
        report = nodes.report(rank)
        assert (report["steps"], report["exit_code"]) == (PAUSE_AT, 128 + signum), (rank, report, results[rank][1])
    assert f"stopped by {name} at step {PAUSE_AT}" in results[0][1]
    ckpts = run / "checkpoints"
    assert (ckpts / "latest").read_text() == f"step_{PAUSE_AT}"
    assert sorted(p.name for p in ckpts.iterdir()) == ["latest", f"step_{PAUSE_AT}"]
    state = read_state(ckpts / f"step_{PAUSE_AT}")
    assert (state["step"], state["world_size"], state["finished"]) == (PAUSE_AT, 2, False)
    assert not list(run.rglob("*.tmp"))
    assert nodes.report(1)["writes"] == []


@pytest.mark.parametrize("how", ["killed", "hung"])
def test_lost_rank_makes_the_other_exit_with_one_line(how: str, data: Path, tmp_path: Path) -> None:
    """kill -9: the other rank's next collective fails at once (its connection closes). SIGSTOP (a hung process, or a
    machine gone from the network): it fails after HRM_DIST_TIMEOUT seconds. Either way one line and exit 2."""
    timeout = 8
    nodes, run = start(tmp_path, data, "max_steps=8", HRM_TEST_PAUSE_AT=str(PAUSE_AT), HRM_DIST_TIMEOUT=str(timeout))
    try:
        workers = nodes.wait_paused(2)
        os.kill(workers[1], signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        started = time.monotonic()
        nodes.go()
        _, err = nodes.launchers[0].communicate(timeout=timeout + 60)
        waited, code = time.monotonic() - started, nodes.launchers[0].returncode
    finally:
        nodes.kill()
    assert code != 0 and nodes.report(0)["exit_code"] == 2, err[-3000:]
    assert waited < timeout if how == "killed" else timeout <= waited < timeout + 60
    lines = error_lines(err)
    assert len(lines) == 1 and "[rank0]" not in err, err[-3000:]
    assert lines[0].startswith("error: process 0 of 2 lost the others (")
    assert ("Timed out" if how == "hung" else "Connection") in lines[0]
    assert lines[0].endswith(f"Resume from the last checkpoint with: hrm train --run-dir {run} --resume")
