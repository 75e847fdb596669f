"""Atomic writes: a reader never sees a half-written file or dataset, and a killed process leaves nothing partial.

A full disk, an exceeded quota, a read-only folder or a missing permission is the user's to fix, not a bug: every
writer here turns those OSErrors into a one-line UserError naming the output path (`disk_error`), after removing its
temporary file or directory.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import secrets
import shutil
import socket
import zlib
from collections.abc import Iterator
from pathlib import Path

from hrm_reason.errors import UserError

# errno -> what the user reads; anything else is a bug and keeps its traceback.
DISK_ERRORS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
}

# numpy's ndarray.tofile (np.save into a real file) reports a full disk as a short write without an errno.
SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


def disk_error(e: BaseException, path: str | os.PathLike, inside: str | os.PathLike | None = None) -> UserError | None:
    """The one-line error for an out-of-space or permission OSError met while writing `path`, else None.

    `inside`: the temporary folder the writer fills; a permission error on a file outside it (an input being read) is
    reported under that file's own name, not as a failure to write `path`."""
    if isinstance(e, OSError) and e.errno is None and SHORT_WRITE.fullmatch(str(e)):
        return UserError(f"{DISK_ERRORS[errno.ENOSPC]} writing {path}")
    if not isinstance(e, OSError) or e.errno not in DISK_ERRORS:
        return None
    what = DISK_ERRORS[e.errno]
    if e.errno in (errno.ENOSPC, errno.EDQUOT) or e.filename is None or inside is None:
        return UserError(f"{what} writing {path}")
    name = Path(os.fsdecode(e.filename))
    try:
        within = name.resolve().is_relative_to(Path(inside).resolve())
    except (OSError, ValueError):
        within = False
    return UserError(f"{what} writing {path}" if within else f"{what}: {name}")


def _check_file_target(path: Path) -> None:
    if path.is_dir():
        raise UserError(f"{path} is a directory: expected the path of a file to write")


def _owner() -> str:
    """`HOST-PID` of this process as temporary names carry it (the host as a short hash: names stay portable)."""
    return f"{zlib.crc32(socket.gethostname().encode()):08x}-{os.getpid()}"


def _temp_names(path: Path) -> Iterator[Path]:
    """Candidate `.NAME.HOST-PID-XXXXXXXX.tmp` siblings of `path`: a later writer recognises a killed writer's."""
    for _ in range(100):
        yield path.parent / f".{path.name}.{_owner()}-{secrets.token_hex(4)}.tmp"
    raise FileExistsError(f"no free temporary name beside {path}")


def remove_dead_temporaries(path: Path) -> list[Path]:
    """Remove the temporaries of `path` left by writers that died on this host (a killed `hrm build-data` can leave
    gigabytes). A live writer's, another host's (a shared filesystem) and unrecognised names are left alone."""
    host = _owner().split("-")[0]
    pattern = re.compile(rf"\.{re.escape(path.name)}\.([0-9a-f]{{8}})-(\d+)-[0-9a-f]{{8}}\.tmp")
    removed = []
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp") if path.parent.is_dir() else ():
        match = pattern.fullmatch(tmp.name)
        if match is None or match[1] != host or _alive(int(match[2])):
            continue
        remove_temporary(tmp)
        removed.append(tmp)
    return removed


def remove_temporary(tmp: Path) -> None:
    """Remove a temporary file or folder (a link is removed, never followed)."""
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


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
    _check_file_target(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp, fd = _temp_file(path)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if (user := disk_error(e, path)) is not None:
            raise user from None
        if isinstance(e, FileExistsError | NotADirectoryError) and not path.parent.is_dir():
            raise UserError(f"cannot write {path}: {path.parent} is not a directory") from None
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces `path`, on any error it is removed."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries(path)
        tmp = _temp_dir(path)
    except OSError as e:
        if (user := disk_error(e, path)) is not None:
            raise user from None
        raise
    try:
        yield tmp
        if path.exists():
            if not overwrite:  # it appeared while we wrote: another writer of the same output finished first
                raise UserError(f"{path}: written by another process during this one; pass --overwrite to replace it")
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if (user := disk_error(e, path, inside=tmp)) is not None:
            raise user from None
        raise


def check_writable(path: str | os.PathLike, inside: bool = False) -> None:
    """`path` can be written, tried before any work: a new file is created (and removed) where the writer will create
    its temporary, beside `path` (inside it with `inside`: a folder written into), or in the nearest folder that
    exists above a new path. A read-only folder, a full disk or a file in the way is then one line naming `path`,
    also where root ignores a folder's mode (the file is made, not just asked about)."""
    path = Path(path)
    base = path if inside else path.parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise UserError(f"cannot write {path}: {base} is not a directory")
    tmp = None
    try:
        tmp, fd = _temp_file(base / path.name)
        os.close(fd)
    except OSError as e:
        if (user := disk_error(e, path)) is not None:
            raise user from None
        raise
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
