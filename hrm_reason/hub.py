"""Released checkpoints by name: a Hugging Face repository id (`owner/name`, e.g. sapientinc/HRM-checkpoint-sudoku-
extreme) given where a checkpoint path is accepted stands for its snapshot in the local Hugging Face cache.

A path that exists on disk always wins, and so does one whose first folder exists (`runs/x` when `runs/` is here), so
a run directory, or a typo of one, is never looked up on the hub. Online, the snapshot
is downloaded (or brought up to date) with `huggingface_hub.snapshot_download`; offline (HRM_OFFLINE or
HF_HUB_OFFLINE set) only the cache is read, and an unreachable hub falls back to the cache as well. Decisions:
docs/training.md, "Released checkpoints".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hrm_reason.errors import UserError

OFFLINE_ENV = ("HRM_OFFLINE", "HF_HUB_OFFLINE")


def offline() -> bool:
    """HRM_OFFLINE or HF_HUB_OFFLINE set to anything but an empty, 0, false or no value."""
    return any(os.environ.get(k, "").strip().lower() not in ("", "0", "false", "no") for k in OFFLINE_ENV)


def is_repo_id(text: str) -> bool:
    """Shaped like a Hugging Face model repository id: exactly `owner/name`, in the hub's own alphabet."""
    if text.count("/") != 1 or text.startswith(("/", ".")) or "\\" in text:
        return False
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def resolve_checkpoint(path: str | Path) -> Path:
    """`path` itself when it exists on disk or is not shaped like `owner/name` (the caller reports it missing); else
    the local snapshot directory of that Hugging Face repository, as a one-line error when it is neither cached nor
    reachable."""
    path = Path(path)
    if path.exists() or not is_repo_id(str(path)) or Path(path.parts[0]).is_dir():
        return path  # on disk, or a path whose first folder is here (a typo of a local path, not a repository id)
    return Path(snapshot(str(path)))


def snapshot(repo_id: str) -> str:
    """The snapshot directory of `repo_id` in the Hugging Face cache, downloaded first unless offline."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        IncompleteSnapshotError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{repo_id}: not a path on disk, and the Hugging Face repository {repo_id}"
    local = offline()
    try:
        # HF_HUB_OFFLINE is read once when huggingface_hub is imported; HRM_OFFLINE (and a late HF_HUB_OFFLINE) here.
        folder = snapshot_download(repo_id, local_files_only=local)
    except GatedRepoError:
        raise UserError(f"{where} is gated: accept its terms on the hub and log in (hf auth login)") from None
    except RepositoryNotFoundError:
        raise UserError(f"{where} does not exist on the hub (or is private: log in with hf auth login)") from None
    except RevisionNotFoundError:
        raise UserError(f"{where} has no main revision on the hub") from None
    except IncompleteSnapshotError:
        raise UserError(f"{where} is only partly in the local cache and the hub cannot be reached") from None
    except LocalEntryNotFoundError:
        why = "offline: HRM_OFFLINE or HF_HUB_OFFLINE is set" if local else "the hub cannot be reached"
        raise UserError(f"{where} is not in the local Hugging Face cache ({why})") from None
    except Exception as e:  # noqa: BLE001 -- a proxy, a full disk, an unreadable cache: one line, no traceback
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{where} could not be fetched ({msg})") from None
    print(f"checkpoint: {repo_id} -> {folder}", file=sys.stderr)
    return folder
