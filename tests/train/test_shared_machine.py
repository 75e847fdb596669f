"""The shared-machine warning covers the whole run (issue 44, item 2): each start records the load it found in
run.json, a start stopped by Ctrl-C or a signal too, and the run ends with the warning when any start, this one or one
before a resume, found the machine shared, naming which."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import hrm_reason.train.loop as train_module
from hrm_reason.runtime.peak import shared_machine_warning
from hrm_reason.runtime.stop import StopRequest
from hrm_reason.train.loop import train
from tests.helpers import tiny_config, write_original_layout

WARNING = "warning: the machine was shared"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("data") / "sudoku4")


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, float]]:
    """A 2-core machine whose load the test sets; peaks measured at once."""
    state = {"load": 1.0}
    monkeypatch.setattr(train_module, "PEAK_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(train_module, "matmul_peak", lambda device, dtype, seconds: 1e11)
    monkeypatch.setattr(train_module.os, "getloadavg", lambda: (state["load"], 0.0, 0.0))
    monkeypatch.setattr(train_module.os, "cpu_count", lambda: 2)
    yield state


class StopAtOnce(StopRequest):
    """Ctrl-C as the first step runs: the step is saved, the start ends with KeyboardInterrupt."""

    def __enter__(self) -> StopRequest:
        super().__enter__()
        self.requested = True
        return self


def warnings(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith(WARNING)]


def test_a_shared_first_start_is_warned_of_at_the_end_of_the_resumed_run(
    data: Path,
    tmp_path: Path,
    machine: dict[str, float],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tiny_config(data, tmp_path / "run", "epochs=4", "eval_interval=2")
    machine["load"] = 9.0
    with monkeypatch.context() as m:
        m.setattr(train_module, "StopRequest", StopAtOnce)
        with pytest.raises(KeyboardInterrupt):
            train(config, progress=False)
    first = json.loads((tmp_path / "run" / "run.json").read_text())["runs"]
    assert first[-1]["load_average_max"] == 9.0 and first[-1]["cpu_count"] == 2  # recorded although stopped
    assert warnings(capsys) == []  # a stopped start says how to resume, not more
    machine["load"] = 0.5  # the resume has the machine to itself
    run = train(config, resume=True, progress=False)
    (line,) = warnings(capsys)
    assert "load average up to 9.0 on 2 cores in start 1 of 2 (run.json)" in line
    assert line == shared_machine_warning(run)


def test_a_shared_resume_is_named_and_an_idle_run_has_no_warning(
    data: Path, tmp_path: Path, machine: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    run = train(tiny_config(data, tmp_path / "run", "epochs=2"), progress=False)
    assert warnings(capsys) == [] and shared_machine_warning(run) is None  # load 1.0 on 2 cores
    machine["load"] = 4.0
    train(tiny_config(data, run, "epochs=4"), resume=True, progress=False)
    (line,) = warnings(capsys)
    assert "load average up to 4.0 on 2 cores in start 2 of 2 (run.json)" in line


def test_a_single_shared_start_keeps_the_short_wording(
    data: Path, tmp_path: Path, machine: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    machine["load"] = 3.0
    train(tiny_config(data, tmp_path / "run", "epochs=2"), progress=False)
    assert warnings(capsys) == [
        f"{WARNING} during this run (load average up to 3.0 on 2 cores): its wall times and recorded matrix-product "
        "peak are those of a loaded machine; compare runs by CPU-seconds and FLOPs"
    ]
