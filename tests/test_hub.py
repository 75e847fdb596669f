"""Released checkpoints by name: `--checkpoint owner/name` reads a Hugging Face repository from a local cache built
here in the hub's own layout (models--owner--name/{blobs,refs/main,snapshots/REV}); nothing is ever downloaded."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cli
from hrm_reason.checkpoint import find_checkpoint, read_weights
from hrm_reason.hub import is_repo_id, resolve_checkpoint
from hrm_reason.train.loop import train
from tests.helpers import on_cpu, run_hrm, tiny_config, write_original_layout

REPO_ID = "someone/HRM-checkpoint-tiny"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def original_checkpoint(run: Path) -> dict[str, torch.Tensor]:
    """Our run's weights under the original code's names (a compiled ACTLossHead's state_dict), as released."""
    weights, _ = read_weights(find_checkpoint(run))
    names = {"embed_tokens.weight": "embed_tokens.embedding_weight", "embed_pos.weight": "embed_pos.embedding_weight"}
    out = {}
    for key, value in weights.items():
        for ours, theirs in names.items():
            key = key.replace(ours, theirs)
        out["_orig_mod.model." + key] = value.to(torch.bfloat16) if key.endswith("_init") else value
    return out


def write_hub_cache(cache: Path, repo_id: str, files: dict[str, bytes]) -> Path:
    """A repository in the Hugging Face cache as `snapshot_download` leaves it: blobs named by their hash, the
    snapshot's files linking to them, and refs/main holding the commit (no newline). Returns the snapshot folder."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / REVISION
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        try:
            os.symlink(os.path.relpath(blob, snapshot), snapshot / name)
        except OSError:  # no symlinks on this filesystem: the hub copies as well
            shutil.copy(blob, snapshot / name)
    return snapshot


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(dataset, cache, snapshot): a tiny run's weights released as `checkpoint` + `all_config.yaml`."""
    root = tmp_path_factory.mktemp("hub")
    data = write_original_layout(root / "sudoku4")
    run = train(tiny_config(data, root / "run", "epochs=2", "eval_interval=2"), progress=False)
    path = root / "checkpoint"
    torch.save(original_checkpoint(run), path)
    files = {"checkpoint": path.read_bytes(), "all_config.yaml": (run / "config.yaml").read_bytes()}
    return data, root / "cache", write_hub_cache(root / "cache", REPO_ID, files)


def hrm_offline(monkeypatch: pytest.MonkeyPatch, cache: Path, *args: str) -> subprocess.CompletedProcess:
    """`hrm ARGS` in a fresh process, offline, with `cache` as its Hugging Face cache (HF_HUB_CACHE)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return run_hrm(*args, offline=True)


def hrm_here(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path, *args: str
) -> tuple[int, str]:
    """(exit code, stderr) of `hrm ARGS` in this process, offline, with `cache` as the Hugging Face cache (the hub
    library read HF_HUB_CACHE when it was imported, so its constant is set)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HRM_OFFLINE", "1")
    monkeypatch.setattr(sys, "argv", ["hrm", *on_cpu(args)])  # on the CPU unless ARGS name a device
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    return exit_info.value.code, capsys.readouterr().err


def test_repo_id_shape() -> None:
    assert is_repo_id("sapientinc/HRM-checkpoint-sudoku-extreme") and is_repo_id("a_b/c.d-1")
    for text in ("runs", "/abs/path", "./a/b", "a/b/c", "a--b/c", "a/b..c", "../x", "a\\b/c", ""):
        assert not is_repo_id(text), text


def test_eval_by_repository_id_equals_eval_by_path(
    released: tuple[Path, Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data, cache, snapshot = released
    common = ("--data", str(data), "--mmax", "3", "--device", "cpu", "--quiet", "--json")
    by_id = hrm_offline(monkeypatch, cache, "eval", "--checkpoint", REPO_ID, *common, str(tmp_path / "id.json"))
    assert by_id.returncode == 0, by_id.stderr
    assert f"{REPO_ID} -> {snapshot}" in by_id.stderr
    code, err = hrm_here(
        capsys,
        monkeypatch,
        cache,
        "eval",
        "--checkpoint",
        str(snapshot / "checkpoint"),
        *common,
        str(tmp_path / "p.json"),
    )
    assert code in (0, None), err
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("id.json", "p.json"))
    # The same weights whichever way they were named; the records say which name was given.
    assert a.pop("provenance")["evaluated"] == REPO_ID and b.pop("provenance")["evaluated"].endswith("checkpoint")
    assert a == b and a["count"] == 16 and len(a["exact_accuracy"]) == 3


def test_a_local_folder_named_like_the_repository_wins(
    released: tuple[Path, Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data, _, snapshot = released
    shutil.copytree(snapshot, tmp_path / "other" / "released")  # follows the blob links
    monkeypatch.chdir(tmp_path)
    assert resolve_checkpoint("other/released") == Path("other/released")
    assert resolve_checkpoint("not-shaped-like-a-repo") == Path("not-shaped-like-a-repo")
    # A typo of a local path (its first folder is here) is reported missing, never looked up on the hub.
    assert resolve_checkpoint("other/relaesed") == Path("other/relaesed")
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    args = ("eval", "--checkpoint", "other/released", "--data", str(data), "--mmax", "2", "--device", "cpu", "--quiet")
    code, err = hrm_here(capsys, monkeypatch, empty, *args)
    assert code in (0, None), err
    assert "->" not in err  # read from the folder, not resolved on the hub
    # --run is a run directory: a missing one is named at once, without a hub lookup.
    code, err = hrm_here(capsys, monkeypatch, empty, "eval", "--run", "./runs/nope", "--device", "cpu")
    assert code == 2 and err.strip() == "error: --run runs/nope: no such run directory"


def test_an_uncached_repository_offline_is_one_line_naming_it(
    released: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, cache, _ = released
    code, err = hrm_here(capsys, monkeypatch, cache, "eval", "--checkpoint", "someone/not-cached", "--data", str(data))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "someone/not-cached" in lines[0] and "not in the local Hugging Face cache" in lines[0]
    # the cached one resolves from the same cache
    assert resolve_checkpoint(REPO_ID) == cache / ("models--" + REPO_ID.replace("/", "--")) / "snapshots" / REVISION
    # neither a path nor shaped like owner/name: the plain not-found error, as before
    code, err = hrm_here(capsys, monkeypatch, cache, "eval", "--checkpoint", "no-such-run", "--data", str(data))
    assert code == 2 and "no such checkpoint" in err and "Hugging Face" not in err
