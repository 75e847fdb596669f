"""One process per run directory: an advisory lock on RUN/.lock for the whole life of `hrm train`.

Two processes writing one run would leave one run's config.yaml and metrics.jsonl beside the other's weights, so the
second refuses with the holder's host and pid. The lock is `flock`, which the kernel releases when its holder dies
(kill -9 included), so a lock left by a dead process is simply taken over: the file stays, its lock does not. Under the
lock, the temporary outputs of a killed writer (`.NAME.*.tmp`, from hrm_reason.atomic) are removed. `check_not_live`
asks the same before anything else is said about the directory: a live run is named as live, never as "not empty".
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from types import TracebackType

from hrm_reason.atomic import remove_temporary
from hrm_reason.errors import UserError

try:
    import fcntl
except ImportError:  # Windows: no flock; runs are not locked there
    fcntl = None  # type: ignore[assignment]

LOCK = ".lock"


def is_stale_temporary(path: Path) -> bool:
    """A temporary of hrm_reason.atomic (`.NAME.XXXX.tmp`, a file or a directory); only a dead writer leaves one."""
    return path.name.startswith(".") and path.name.endswith(".tmp")


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Remove what killed writers left in the run directory and its checkpoints folder; returns what was removed."""
    removed = []
    for folder in (run_dir, run_dir / "checkpoints"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if is_stale_temporary(path):
                remove_temporary(path)
                removed.append(path)
    return removed


def in_use(run_dir: Path, fd: int) -> UserError:
    """The one line of a run directory whose lock another process holds, naming the holder (the lock file's text)."""
    holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "holder unknown"
    return UserError(
        f"run directory {run_dir} is in use by another process ({holder}); "
        "wait for it to end, stop it, or choose another --run-dir"
    )


def check_not_live(run_dir: Path) -> None:
    """The in-use line when another process holds RUN/.lock; nothing is created (a folder that is no run gets no lock
    file), and a lock that is free is let go at once. Asked before a run directory is called "not empty": its advice,
    --resume, would meet the lock."""
    if fcntl is None:
        return
    try:
        fd = os.open(run_dir / LOCK, os.O_RDONLY)
    except OSError:
        return  # no lock file (no run has held it) or none readable: RunLock says the rest
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise in_use(run_dir, fd) from None
    except OSError:
        pass  # a filesystem without flock: RunLock warns
    finally:
        os.close(fd)  # releases the shared lock where it was taken


class RunLock:
    """Hold RUN/.lock (text: the holder's host and pid) while the run is written."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / LOCK
        self._fd: int | None = None
        self._created = False

    def __enter__(self) -> RunLock:
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise UserError(f"run directory {self.run_dir} is a file, not a directory: choose another --run-dir")
        try:
            self._created = not self.run_dir.exists()
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise UserError(f"run directory {self.run_dir}: cannot create it or its lock ({e.strerror})") from None
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                error = in_use(self.run_dir, fd)
                os.close(fd)
                raise error from None
            except OSError as e:  # a filesystem without flock (Lustre mounted without it): run, unlocked
                print(
                    f"warning: {self.path}: no file locks on this filesystem ({e.strerror}); not locked",
                    file=sys.stderr,
                )
        os.ftruncate(fd, 0)
        os.write(fd, f"host {socket.gethostname()} pid {os.getpid()}\n".encode())
        self._fd = fd
        remove_stale_temporaries(self.run_dir)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # The lock file stays: deleting it would let a waiting process lock a file another one is about to create.
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None
        # A run that failed before writing anything (bad data, a bad config) leaves no directory it made itself.
        if exc_type is not None and self._created and [p.name for p in self.run_dir.iterdir()] == [LOCK]:
            self.path.unlink(missing_ok=True)
            self.run_dir.rmdir()
