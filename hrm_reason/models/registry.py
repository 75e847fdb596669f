"""The one place that knows every model head: `arch.name` -> builder."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from hrm_reason.config import ArchConfig
from hrm_reason.data import PuzzleDatasetMetadata
from hrm_reason.models.hrm import HRM, HRMConfig


def resolve_dtype(arch: ArchConfig, device: torch.device) -> str:
    """bf16 on CUDA, fp32 on CPU (bf16 matrix products on CPUs are hundreds of times slower)."""
    if arch.forward_dtype == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    return arch.forward_dtype


def hrm_config(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device) -> HRMConfig:
    fields = arch.model_dump(exclude={"name", "loss", "forward_dtype", "puzzle_emb_ndim"})
    return HRMConfig(
        **fields,
        seq_len=metadata.seq_len,
        vocab_size=metadata.vocab_size,
        num_puzzle_identifiers=metadata.num_puzzle_identifiers,
        puzzle_emb_ndim=arch.hidden_size if arch.puzzle_emb_ndim is None else arch.puzzle_emb_ndim,
        forward_dtype=resolve_dtype(arch, device),
    )


def _build_hrm(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device) -> nn.Module:
    return HRM(hrm_config(arch, metadata, device))


MODELS: dict[str, Callable[[ArchConfig, PuzzleDatasetMetadata, torch.device], nn.Module]] = {"hrm": _build_hrm}


def build_model(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device, seed: int) -> nn.Module:
    """Build on the target device with a seeded init that leaves the global RNG as it was."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        with device:
            return MODELS[arch.name](arch, metadata, device)
