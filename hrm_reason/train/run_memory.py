"""Whether a run's model, batch and data fit in this machine's memory, asked before `hrm train` and `hrm bench` build
anything: the model built on the meta device (exact sizes, no storage), the dataset's sizes from its dataset.json
alone, and the floor of hrm_reason/runtime/memory.py. A refusal is one line naming the key to lower."""

from __future__ import annotations

import math
from typing import Any

import torch

from hrm_reason.config import TrainConfig
from hrm_reason.data.prefix_lm import PuzzleLayout
from hrm_reason.data.puzzle import PuzzleDatasetMetadata, dataset_kind
from hrm_reason.data.text import DATASET_FILE, TextDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.models import registry
from hrm_reason.readers import read_json_model
from hrm_reason.runtime.memory import ModelSize, Need, check_fits, meta_size, training_need
from hrm_reason.train.muon import muon_split

# Bytes per (epoch, group) entry of the puzzle sampler's plan of a round (data/puzzle.py TrainSampler._plan), at least:
# the group order, the puzzle drawn, its size and the running sum, each an int64.
PLAN_BYTES = 32


def run_sizes(config: TrainConfig) -> dict[str, int] | None:
    """The sizes the run's model is built for, read from the dataset's dataset.json alone (seq_len: positions of a
    training example as the model sees them, before any prefix; for an ACT model also vocab_size,
    num_puzzle_identifiers and total_groups); None where the dataset cannot be read: the run's own loading says why."""
    try:
        kind = dataset_kind(config.data_path)
        if kind == "puzzle":
            meta = read_json_model(
                f"{config.data_path}/train/dataset.json", PuzzleDatasetMetadata, "expected a puzzle dataset"
            )
            if config.family == "lm":  # PrefixLM sequences: puzzle, SEP, solution
                layout = PuzzleLayout(puzzle_len=meta.seq_len, puzzle_vocab=meta.vocab_size)
                return dict(seq_len=layout.seq_len, vocab_size=layout.vocab_size)
            return dict(
                seq_len=meta.seq_len,
                vocab_size=meta.vocab_size,
                num_puzzle_identifiers=meta.num_puzzle_identifiers,
                total_groups=meta.total_groups,
            )
        if kind == "text" and config.family == "lm" and config.seq_len is not None:
            text = read_json_model(f"{config.data_path}/{DATASET_FILE}", TextDatasetMetadata, "expected a text dataset")
            return dict(seq_len=config.seq_len, vocab_size=text.vocab_size)
    except UserError:
        return None
    return None


def model_size(config: Any, sizes: dict[str, int]) -> tuple[ModelSize, Any, int]:
    """The size of `config`'s model for the data `sizes`, its resolved config, and the bytes of the parameters whose
    optimizer keeps one state tensor (with optimizer muon: the matrices Muon takes, train/muon.py), from a build on the
    meta device."""
    holder: list[Any] = []
    one_state: list[int] = []

    def build(device: torch.device) -> torch.nn.Module:
        if config.family == "lm":
            model = registry.build_lm(config.arch, sizes["vocab_size"], device, config.seed)
        else:
            shape = {k: sizes[k] for k in ("seq_len", "vocab_size", "num_puzzle_identifiers")}
            model = registry.build(config.arch, shape, device, config.seed)
        holder.append(model.config)
        matrices = muon_split(model)[0] if config.optimizer == "muon" else []
        one_state.append(sum(p.numel() * p.element_size() for p in matrices))
        return model

    return meta_size(build), holder[0], one_state[0]


def run_need(
    config: Any, sizes: dict[str, int], device: torch.device, batch: int, eval_batch: int, data: int
) -> tuple[Need, tuple[str, object]]:
    """The floor of a run's memory on `device` with `batch` and `eval_batch` examples (LM: windows) per process, and
    the key that sizes the model, with its value, for a refusal that no batch size helps."""
    size, resolved, one_state = model_size(config, sizes)
    prefix = getattr(resolved, "prefix_len", 0)  # a puzzle model's embedding prefix: puzzle_emb_ndim / hidden_size
    bf16 = device.type == "cuda" and config.forward_dtype in ("auto", "bfloat16")  # runtime/device.py compute_dtype
    need = training_need(
        size, batch, sizes["seq_len"] + prefix, resolved.hidden_size, 2 if bf16 else 4, eval_batch, data, one_state
    )
    if prefix > sizes["seq_len"]:
        key: tuple[str, object] = ("arch.puzzle_emb_ndim", resolved.puzzle_emb_ndim)
    else:
        key = ("arch.hidden_size", resolved.hidden_size)
    return need, key


def check_run_memory(config: TrainConfig, device: torch.device, world_size: int = 1) -> None:
    """Refuse, in one line naming the key, a run whose model and per-process batches cannot fit in `device`'s memory
    (the floor of runtime/memory.py); a dataset that cannot be read is left to the run to report."""
    sizes = run_sizes(config)
    if sizes is None:
        return
    batch = math.ceil(config.global_batch_size / world_size)
    eval_global = config.eval_global_batch_size or config.global_batch_size
    plan = (config.eval_interval or 0) * sizes.get("total_groups", 0) * PLAN_BYTES
    need, model = run_need(config, sizes, device, batch, math.ceil(eval_global / world_size), plan)
    check_fits(
        need,
        device,
        {
            "model": model,
            "activations": ("global_batch_size", config.global_batch_size),
            "evaluation": (
                ("eval_global_batch_size", eval_global)
                if config.eval_global_batch_size is not None
                else ("global_batch_size", config.global_batch_size)
            ),
            "data": ("eval_interval", config.eval_interval),
        },
    )
