"""What a killed writer leaves beside its output (`.NAME.HOST-PID-XXXXXXXX.tmp`) is removed by the next writer of that
output on this host, once the writer's process is dead; a live writer's temporaries are left alone."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

import hrm_reason.atomic as atomic
from hrm_reason.errors import UserError
from hrm_reason.runtime.logs import MetricsLog


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_dead_writers_temporary_folder_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    out = tmp_path / "arc"
    host = atomic._owner().split("-")[0]
    dead = tmp_path / f".arc.{host}-{dead_pid()}-0123abcd.tmp"
    live = tmp_path / f".arc.{atomic._owner()}-89abcdef.tmp"
    other_host = tmp_path / f".arc.{'0' * 8 if host != '0' * 8 else '1' * 8}-{dead_pid()}-0123abcd.tmp"
    unrecognised = tmp_path / ".arc.k2j4x9.tmp"  # an older writer's name: its owner cannot be told
    for folder in (dead, live, other_host, unrecognised):
        folder.mkdir()
        (folder / "all__inputs.npy").write_bytes(b"x" * 1000)
    with atomic.atomic_directory(out) as tmp:
        (tmp / "dataset.json").write_text("{}")
    assert (out / "dataset.json").is_file()
    assert not dead.exists()
    assert live.is_dir() and other_host.is_dir() and unrecognised.is_dir()


def test_temporaries_carry_their_writer(tmp_path: Path) -> None:
    with atomic.atomic_directory(tmp_path / "data") as tmp:
        assert tmp.name.startswith(f".data.{atomic._owner()}-") and tmp.name.endswith(".tmp")
    atomic.atomic_write_text(tmp_path / "config.yaml", "a: 1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "data"]


def test_a_full_disk_while_logging_names_the_metrics_file(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "metrics.jsonl", resume_step=None)

    class FullDisk:
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self) -> None:
            pass

    log.file.close()
    log.file = FullDisk()
    with pytest.raises(UserError, match=r"no space left on device writing .*metrics\.jsonl"):
        log.write({"step": 1})


def test_an_output_written_by_another_process_meanwhile_is_kept_and_named(tmp_path: Path) -> None:
    out = tmp_path / "maze"
    with pytest.raises(UserError, match=r"maze: written by another process during this one; pass --overwrite"):
        with atomic.atomic_directory(out) as tmp:
            (tmp / "dataset.json").write_text("ours")
            out.mkdir()
            (out / "dataset.json").write_text("theirs")
    assert (out / "dataset.json").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["maze"]
