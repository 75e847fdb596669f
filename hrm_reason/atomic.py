"""Atomic writes: a reader never sees a half-written file or dataset, and a killed process leaves nothing partial."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path


def _temp_names(path: Path) -> Iterator[Path]:
    """Candidate `.NAME.XXXXXXXX.tmp` siblings of `path` (the pattern a later run recognises as a killed write's)."""
    for _ in range(100):
        yield path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    raise FileExistsError(f"no free temporary name beside {path}")


# Temporary files and directories are created with mode 0666 and 0777 so that the kernel applies the umask, as for
# any file the user makes: tempfile.mkstemp and mkdtemp use 0600 and 0700, which hid a run from the user's group.
def _temp_file(path: Path) -> tuple[Path, int]:
    for tmp in _temp_names(path):
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def _temp_dir(path: Path) -> Path:
    for tmp in _temp_names(path):
        try:
            os.mkdir(tmp, 0o777)
            return tmp
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _temp_file(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces `path`, on any error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_dir(path)
    try:
        yield tmp
        if path.exists():
            if not overwrite:
                raise FileExistsError(f"{path} already exists")
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
