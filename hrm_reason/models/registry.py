"""The one place that knows every model head: `arch.name` -> builder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from hrm_reason.config import ArchConfig
from hrm_reason.data import PuzzleDatasetMetadata
from hrm_reason.models.baselines import Transformer, TransformerConfig, UniTF, UniTFConfig
from hrm_reason.models.hrm import HRM, HRMConfig
from hrm_reason.models.trm import TRM, TRMConfig


def resolve_dtype(arch: ArchConfig, device: torch.device) -> str:
    """bf16 on CUDA, fp32 on CPU (bf16 matrix products on CPUs are hundreds of times slower)."""
    if arch.forward_dtype == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    return arch.forward_dtype


# ArchConfig fields that HRM does not read.
OTHER_MODELS_FIELDS = {"num_layers", "unitf_steps", "unitf_grad_steps", "mlp_t", "puzzle_emb_len"}


def hrm_config(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device) -> HRMConfig:
    fields = arch.model_dump(exclude={"name", "loss", "forward_dtype", "puzzle_emb_ndim", *OTHER_MODELS_FIELDS})
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


def core_fields(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device) -> dict[str, Any]:
    """The fields every non-HRM core reads (models/core.py), resolved from the flat ArchConfig and the dataset."""
    ndim = arch.hidden_size if arch.puzzle_emb_ndim is None else arch.puzzle_emb_ndim
    return dict(
        seq_len=metadata.seq_len, vocab_size=metadata.vocab_size, num_puzzle_identifiers=metadata.num_puzzle_identifiers,
        hidden_size=arch.hidden_size, num_heads=arch.num_heads, expansion=arch.expansion, pos_encodings=arch.pos_encodings,
        puzzle_emb_ndim=ndim, puzzle_emb_len=-(ndim // -arch.hidden_size) if arch.puzzle_emb_len is None else arch.puzzle_emb_len,
        rms_norm_eps=arch.rms_norm_eps, rope_theta=arch.rope_theta, halt_max_steps=arch.halt_max_steps,
        halt_exploration_prob=arch.halt_exploration_prob, forward_dtype=resolve_dtype(arch, device),
    )


def _build_transformer(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device) -> nn.Module:
    num_layers = arch.H_layers + arch.L_layers if arch.num_layers is None else arch.num_layers
    return Transformer(TransformerConfig(**core_fields(arch, metadata, device), q_target=arch.q_target, num_layers=num_layers))


def _build_unitf(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device) -> nn.Module:
    return UniTF(UniTFConfig(**core_fields(arch, metadata, device), q_target=arch.q_target, unitf_steps=arch.unitf_steps,
                             unitf_grad_steps=arch.unitf_grad_steps))


def _build_trm(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device) -> nn.Module:
    """TRM halts on q_halt > 0 with no continue target: arch.q_target is not read."""
    return TRM(TRMConfig(**core_fields(arch, metadata, device), H_cycles=arch.H_cycles, L_cycles=arch.L_cycles,
                         L_layers=arch.L_layers, mlp_t=arch.mlp_t))


MODELS: dict[str, Callable[[ArchConfig, PuzzleDatasetMetadata, torch.device], nn.Module]] = {
    "hrm": _build_hrm,
    "transformer": _build_transformer,
    "unitf": _build_unitf,
    "trm": _build_trm,
}


def build_model(arch: ArchConfig, metadata: PuzzleDatasetMetadata, device: torch.device, seed: int) -> nn.Module:
    """Build on the target device with a seeded init that leaves the global RNG as it was."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        with device:
            return MODELS[arch.name](arch, metadata, device)
