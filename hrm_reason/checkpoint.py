"""Checkpoints: weights in safetensors (with the model config in the header), training state beside them.

Layout of a run directory:
    config.yaml, metrics.jsonl, checkpoints/step_N/{model.safetensors, state.pt}, checkpoints/latest (text: step_N)
Each checkpoint directory is written under a temporary name and renamed, and `latest` is replaced atomically, so an
interrupted save never leaves a checkpoint that looks complete.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickletools
import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save
from torch import nn

from hrm_reason.atomic import atomic_directory, atomic_write_text
from hrm_reason.errors import UserError
from hrm_reason.models.registry import checkpoint_adapter
from hrm_reason.readers import read_json, read_jsonl, read_safetensors, read_text

WEIGHTS = "model.safetensors"
STATE = "state.pt"
# sha256 of each file of a checkpoint directory, written with them: bytes flipped on disk or in a copy still parse as
# tensors, so only a checksum tells a damaged file. Checkpoints written before it (no manifest) load unchecked.
MANIFEST = "manifest.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_checked(directory: Path, files: dict[str, Callable[[], bytes]]) -> None:
    """Write each file's bytes (made one at a time, to hold one serialized copy in memory) and the manifest of their
    sha256. Python's own writes, so that a full disk is an OSError that atomic_directory names (torch.save and
    safetensors' save_file raise their own error types)."""
    digests = {}
    for name, make in files.items():
        data = make()
        with open(directory / name, "wb") as f:
            f.write(data)
        digests[name] = _sha256(data)
        del data
    (directory / MANIFEST).write_text(json.dumps({"sha256": digests}, indent=2) + "\n")


def weights_bytes(model: nn.Module, model_config: dict[str, Any]) -> bytes:
    """model.safetensors with the model's config in the header (enough to rebuild it). Tensors are copied:
    safetensors refuses one storage under two names, as tied embeddings are."""
    tensors = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}
    return save(tensors, metadata={"format": "hrm-reason", "model_config": json.dumps(model_config)})


def state_bytes(state: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def write_weights(directory: Path, model: nn.Module, model_config: dict[str, Any]) -> Path:
    """directory/model.safetensors (see weights_bytes) and its manifest."""
    write_checked(directory, {WEIGHTS: lambda: weights_bytes(model, model_config)})
    return directory / WEIGHTS


def save_checkpoint(
    run_dir: Path, step: int, model: nn.Module, model_config: dict[str, Any], state: dict[str, Any]
) -> Path:
    """run_dir/checkpoints/step_N/{model.safetensors, state.pt} and checkpoints/latest, atomically."""
    ckpt_root = run_dir / "checkpoints"
    path = ckpt_root / f"step_{step}"
    with atomic_directory(path, overwrite=True) as tmp:
        write_checked(tmp, {WEIGHTS: lambda: weights_bytes(model, model_config), STATE: lambda: state_bytes(state)})
    atomic_write_text(ckpt_root / "latest", path.name)
    return path


_STEP_DIR = re.compile(r"step_(\d+)")


def _best_evaluated_step(run_dir: Path, steps: set[int]) -> int | None:
    """Among `steps`, the one whose evaluation in metrics.jsonl is best: highest `eval/exact_accuracy` (puzzle
    runs), else lowest `eval/ce` (text runs). Read from the log, not kept in memory, so it survives resumes; a line
    that does not parse (one cut by a crash) is skipped: a damaged log never stops a training at its save."""
    scores: dict[int, tuple[float, str]] = {}
    try:
        records = read_jsonl(run_dir / "metrics.jsonl", int_key="step", skip_damaged=True)
    except UserError:  # no log, or one that cannot be read: no best step to keep
        return None
    for record in records:
        if record["step"] not in steps:
            continue
        if isinstance(record.get("eval/exact_accuracy"), (int, float)):
            scores[record["step"]] = (float(record["eval/exact_accuracy"]), "acc")
        elif isinstance(record.get("eval/ce"), (int, float)):
            scores[record["step"]] = (-float(record["eval/ce"]), "ce")
    kinds = {kind for _, kind in scores.values()}
    if not scores or len(kinds) > 1:
        return None
    # The latest of equal scores: it has trained longest.
    return max(scores, key=lambda step: (scores[step][0], step))


def prune_checkpoints(run_dir: Path, keep: int | None, keep_best: bool = False) -> list[Path]:
    """Remove all but the last `keep` checkpoints of a run (and the best evaluated one when `keep_best`); returns
    the removed directories. Called after a save is complete; the one `latest` names is never removed. Each victim
    is first renamed to a `.step_N.<hex>.tmp` name, so a kill mid-removal leaves a temp folder (cleaned like any
    killed write), never a half-deleted directory that looks like a checkpoint."""
    if keep is None:
        return []
    ckpt_root = run_dir / "checkpoints"
    steps = {int(m.group(1)): d for d in ckpt_root.glob("step_*") if d.is_dir() and (m := _STEP_DIR.fullmatch(d.name))}
    kept = set(sorted(steps)[-keep:])
    if (pointed := latest_pointer(ckpt_root)) is not None:
        kept.add(int(pointed.name.removeprefix("step_")))
    if keep_best and (best := _best_evaluated_step(run_dir, set(steps))) is not None:
        kept.add(best)
    removed = []
    for step in sorted(set(steps) - kept):
        victim = ckpt_root / f".{steps[step].name}.{os.urandom(4).hex()}.tmp"
        os.replace(steps[step], victim)
        shutil.rmtree(victim, ignore_errors=True)
        removed.append(steps[step])
    return removed


def latest_pointer(ckpt_root: Path) -> Path | None:
    """The checkpoint directory that `ckpt_root/latest` names (None without that file). A pointer that is not
    `step_N` (damaged bytes, a hand edit) or names no directory is a one-line error: loading another checkpoint than
    the one it names would silently evaluate or resume the wrong step; deleting it selects the newest complete one."""
    latest = ckpt_root / "latest"
    if not latest.is_file():
        return None
    fix = "delete it to use the newest complete checkpoint"
    try:
        text = read_text(latest, expected="a checkpoint pointer").strip()
    except UserError as e:
        raise UserError(f"{e}; {fix}") from None
    if _STEP_DIR.fullmatch(text) is None:
        raise UserError(f"{latest}: not a checkpoint pointer (expected step_N, got {text[:40]!r}); {fix}")
    if not (ckpt_root / text).is_dir():
        raise UserError(f"{latest}: names {text}, which is not a directory in {ckpt_root}; {fix}")
    return ckpt_root / text


# The weights file of a released HRM checkpoint (a Hugging Face repository: `checkpoint` beside `all_config.yaml`).
RELEASED_WEIGHTS = "checkpoint"


def find_checkpoint(path: Path) -> Path:
    """A run directory (its latest checkpoint), a checkpoint directory, a released checkpoint's directory (its
    `checkpoint` file), or a weights file."""
    if not path.exists():
        raise UserError(f"checkpoint or run directory {path} not found")
    if path.is_dir() and (pointed := latest_pointer(path / "checkpoints")) is not None:
        return pointed
    if path.is_dir() and (path / "checkpoints").is_dir():
        # Killed between writing a checkpoint and pointing `latest` at it: the newest complete one.
        steps = [
            p
            for p in (path / "checkpoints").glob("step_*")
            if p.name.removeprefix("step_").isdigit() and (p / WEIGHTS).is_file() and (p / STATE).is_file()
        ]
        if steps:
            return max(steps, key=lambda p: int(p.name.removeprefix("step_")))
    if path.is_dir() and (path / WEIGHTS).is_file():
        return path
    if path.is_dir() and (path / RELEASED_WEIGHTS).is_file():
        return path / RELEASED_WEIGHTS
    if path.is_file():
        return path
    if path.is_dir() and (original := _latest_original_step(path)) is not None:
        return original
    raise UserError(
        f"{path}: no checkpoint found (expected a run directory with checkpoints/latest, or a checkpoint directory)"
    )


def _latest_original_step(path: Path) -> Path | None:
    """The checkpoint folder of the original HRM or TRM code (all_config.yaml beside weights files step_N): its
    latest weights file."""
    if not (path / "all_config.yaml").is_file():
        return None
    steps = [p for p in path.glob("step_*") if p.is_file() and p.name.removeprefix("step_").isdigit()]
    return max(steps, key=lambda p: int(p.name.removeprefix("step_")), default=None)


def verify_file(file: Path) -> None:
    """Compare `file` with the sha256 its directory's manifest records; no manifest or no entry: nothing to check."""
    manifest = file.parent / MANIFEST
    if not manifest.is_file():
        return
    try:
        expected = read_json(manifest, None)["sha256"].get(file.name)
    except UserError as e:
        raise UserError(f"{e}; not a readable checkpoint manifest, the file is damaged") from None
    except (KeyError, TypeError, AttributeError):
        raise UserError(f"{manifest}: not a readable checkpoint manifest; the file is damaged") from None
    if expected is None:
        return
    digest = hashlib.sha256()
    try:
        with open(file, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    except OSError as e:
        raise UserError(f"{file}: cannot read it ({e.strerror or type(e).__name__})") from None
    if digest.hexdigest() != expected:
        raise UserError(f"{file}: checksum mismatch, the file is damaged (its sha256 is not the one in {MANIFEST})")


# Every global the pickle of a state.pt may name (train/loop.py `checkpoint` writes dicts, lists, numbers and strings,
# and tensors: the optimizer's moments, the ACT carry, the EMA's trained weights). Anything else is not a training
# state, and loading it could run code: a pickle calls what it names, and the manifest beside it, in the same folder,
# vouches for nothing. torch.load(weights_only=True) then reads the file with its own restricted unpickler.
STATE_GLOBALS = frozenset(
    {
        "collections OrderedDict",
        "torch._utils _rebuild_tensor_v2",
        *(
            f"torch {kind}Storage"
            for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
        ),
    }
)
# Opcodes that name a callable by other means than GLOBAL (torch.save writes protocol 2: GLOBAL only).
_OTHER_CALLS = frozenset({"STACK_GLOBAL", "INST", "OBJ", "EXT1", "EXT2", "EXT4"})


def _unexpected_global(file: Path) -> str | None:
    """The first callable the pickle of `file` (a torch.save zip) names outside STATE_GLOBALS, read by pickletools,
    which parses and runs nothing; None when there is none. A file that is not such a zip raises (zipfile's errors)."""
    with zipfile.ZipFile(file) as archive:
        pickles = [name for name in archive.namelist() if name.endswith("/data.pkl") or name == "data.pkl"]
        if len(pickles) != 1:
            raise ValueError(f"{len(pickles)} pickles in the archive")
        data = archive.read(pickles[0])
    for opcode, arg, _ in pickletools.genops(data):
        if opcode.name in _OTHER_CALLS:
            return f"a callable by {opcode.name}"
        if opcode.name == "GLOBAL" and arg not in STATE_GLOBALS:
            return str(arg).replace(" ", ".")
    return None


def read_state(ckpt: Path) -> dict[str, Any]:
    """A checkpoint's state.pt (optimizer, step, carry), checked against the manifest; one line if unreadable. Read
    without running code: its pickle may name nothing beyond STATE_GLOBALS, then torch.load(weights_only=True)."""
    file = ckpt / STATE
    if not file.is_file():
        raise UserError(f"{file} not found: a checkpoint directory holds {WEIGHTS} and {STATE}")
    verify_file(file)
    try:
        unexpected = _unexpected_global(file)
    except OSError as e:
        raise UserError(f"{file}: cannot read it ({e.strerror or e})") from None
    except Exception as e:  # zipfile and pickletools raise many types for a cut or damaged file
        raise UserError(f"{file}: not a readable training state ({type(e).__name__}); the file is damaged") from None
    if unexpected is not None:
        raise UserError(
            f"{file}: its pickle names {unexpected}, which no training state of hrm train holds: refused unread, as "
            f"loading it could run code. Its {WEIGHTS} still evaluates; to resume it, load the state where you trust "
            "it and torch.save its tensors, numbers, lists and dicts alone in its place"
        )
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except OSError as e:
        raise UserError(f"{file}: cannot read it ({e.strerror or e})") from None
    except Exception as e:  # torch and pickle raise many types for a cut or damaged file
        raise UserError(f"{file}: not a readable training state ({type(e).__name__}); the file is damaged") from None
    if not isinstance(state, dict) or "step" not in state:
        raise UserError(f"{file}: not a training state written by hrm train")
    return state


def _header_config(file: Path) -> dict[str, Any] | None:
    """The model config in the header; ValueError (JSONDecodeError among them) when it is not a JSON object."""
    with safe_open(str(file), "pt") as f:
        return _metadata_config(f.metadata() or {})


def _metadata_config(meta: dict[str, str]) -> dict[str, Any] | None:
    """The model config of a safetensors header's metadata (None: it has none); ValueError when it is no object."""
    if "model_config" not in meta:
        return None
    config = json.loads(meta["model_config"])
    if not isinstance(config, dict):
        raise ValueError(f"its header's model_config is a {type(config).__name__}, expected a JSON object")
    return config


def saved_model_config(path: Path) -> dict[str, Any] | None:
    """The model config in a safetensors header, without reading the tensors (None for other or unreadable files)."""
    file = path / WEIGHTS if path.is_dir() else path
    if file.suffix != ".safetensors" or not file.is_file():
        return None
    try:
        return _header_config(file)
    except (SafetensorError, OSError, ValueError, RecursionError):
        return None


def read_weights(path: Path, model_name: str = "hrm") -> tuple[dict[str, torch.Tensor], dict[str, Any] | None]:
    """Our safetensors file with its model config, or a state_dict file of the original code of `model_name` (HRM's
    or TRM's; config unknown: None)."""
    file = path / WEIGHTS if path.is_dir() else path
    if file.is_file():
        verify_file(file)
    if file.suffix == ".safetensors":
        tensors, metadata = read_safetensors(file, what="safetensors checkpoint")
        try:
            return tensors, _metadata_config(metadata)
        except (ValueError, RecursionError) as e:
            detail = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
            raise UserError(f"{file}: not a readable safetensors checkpoint ({detail})") from None
    try:
        sd = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a bad file
        raise UserError(f"{file}: not a readable checkpoint ({type(e).__name__})") from None
    if not isinstance(sd, dict):
        raise UserError(f"{file}: expected a state_dict")
    return convert_original_state_dict(sd, model_name), None


def convert_original_state_dict(sd: dict[str, torch.Tensor], model_name: str = "hrm") -> dict[str, torch.Tensor]:
    """Key names of the original code (`[_orig_mod.]model.inner.embed_tokens.embedding_weight`, ...) to ours, by the
    checkpoint adapter of `model_name` (models/registry.py); a model without one takes HRM's, whose names are those
    of the shared puzzle core."""
    return checkpoint_adapter(model_name)(sd)


def load_checkpoint(model: nn.Module, ckpt: Path) -> None:
    """Load a checkpoint's weights into `model`, refusing one trained with another model config or dataset."""
    weights, saved_config = read_weights(ckpt, model.config.name)
    own = model.config.model_dump()
    if saved_config is not None:
        # The compute dtype (a GPU run evaluated on a CPU) and the training-only Q target may differ; nothing else.
        diff = sorted(
            k for k in own if k not in ("forward_dtype", "q_target") and k in saved_config and saved_config[k] != own[k]
        )
        if diff:
            details = ", ".join(f"{k}: checkpoint {saved_config.get(k)} vs {own[k]}" for k in diff[:3])
            raise UserError(f"{ckpt}: checkpoint is from another config or dataset ({details})")
    load_weights(model, weights, ckpt)


def load_weights(model: nn.Module, weights: dict[str, torch.Tensor], source: Path) -> None:
    """Strict load with one-line errors: missing or unexpected keys, or shapes of another config."""
    own = model.state_dict()
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    if missing or unexpected:
        what = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise UserError(f"{source}: checkpoint does not match this model ({what}); was it trained with another arch?")
    for key, value in weights.items():
        if value.shape != own[key].shape:
            raise UserError(
                f"{source}: checkpoint tensor '{key}' has shape {tuple(value.shape)}, this config expects {tuple(own[key].shape)}"
            )
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in weights.items()})
