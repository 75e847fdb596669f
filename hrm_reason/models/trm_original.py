"""Checkpoints and configs of the original TRM code (SamsungSAILMontreal/TinyRecursiveModels) as our `trm`.

The original writes, beside each weights file `step_N`, the `all_config.yaml` of its run: `arch.name`
`recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1`, a list `data_paths`, `ema` as a flag with `ema_rate`, and
arch fields of its own (`no_ACT_continue`, `H_layers`, `puzzle_emb_len: 0` for "as many as the embedding fills").
`translate_config` turns that mapping into our run config; a field that changes what the model computes or how it
trains and that we cannot honour is a one-line error naming it. Its weights are the state dict of the compiled loss
head (`_orig_mod.model.inner.*`); `from_original_weights` renames them to ours and keeps the halting row of its
2-output Q head. What is mapped, dropped and refused: docs/models.md, "TRM: original checkpoints".
"""

from __future__ import annotations

from typing import Any

from hrm_reason.errors import UserError

ORIGINAL_NAME = "recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1"

# Top-level fields of the original run config that change neither the model nor, here, the training: dropped.
IGNORED_FIELDS = ("evaluators", "load_checkpoint", "min_eval_interval")
# Arch fields the original model does not read (H_layers: "ignored" there) or that we fix (no_ACT_continue: true).
IGNORED_ARCH_FIELDS = ("H_layers",)
# Tensor names: the one network, the initial states of y (z_H) and z (z_L), the token-mixing SwiGLU.
RENAMES = (("inner.L_level.", "inner.net."), ("inner.H_init", "inner.y_init"), ("inner.L_init", "inner.z_init"))


def is_original_config(data: dict[str, Any]) -> bool:
    """A run config of the original TRM code: its models are named `recursive_reasoning.<module>@<class>`."""
    arch = data.get("arch")
    return isinstance(arch, dict) and str(arch.get("name", "")).startswith("recursive_reasoning.")


def translate_config(data: dict[str, Any], source: str) -> dict[str, Any]:
    """An original TRM `all_config.yaml` (as read, overrides applied) as our run config mapping."""
    data = dict(data)
    arch = dict(data["arch"])

    def refuse(field: str, why: str) -> UserError:
        return UserError(f"{source}: field '{field}' of the original TRM config: {why}")

    if arch["name"] != ORIGINAL_NAME:  # its single-z, multi-z, HRM and transformer variants
        raise refuse("arch.name", f"{arch['name']} is not supported; of that code only {ORIGINAL_NAME} (TRM) loads")

    for field in IGNORED_FIELDS:
        data.pop(field, None)
    paths = data.pop("data_paths", None)
    if paths is not None and "data_path" not in data:  # an explicit data_path (an override) wins
        if not isinstance(paths, list) or len(paths) != 1:
            raise refuse("data_paths", f"hrm trains on one dataset, this run used {paths!r}; give data_path=DIR")
        data["data_path"] = paths[0]
    if data.pop("data_paths_test", None):
        raise refuse("data_paths_test", "a separate test dataset is not supported; evaluate with --data DIR")
    if data.pop("freeze_weights", False):
        raise refuse("freeze_weights", "training only the puzzle embeddings is not supported")
    ema_rate = data.pop("ema_rate", 0.999)
    if isinstance(data.get("ema"), bool):
        data["ema"] = ema_rate if data["ema"] else None
    if data.get("eval_interval") is None and data.get("epochs") is not None:
        data["eval_interval"] = data["epochs"]  # the original evaluates once, at the end, without one

    arch["name"] = "trm"
    for field in IGNORED_ARCH_FIELDS:
        arch.pop(field, None)
    if arch.pop("no_ACT_continue", True) is not True:
        raise refuse(
            "arch.no_ACT_continue",
            "false (a Q-continue target) is not supported by trm (the original's code for it fails)",
        )
    if arch.get("puzzle_emb_len") == 0:
        arch["puzzle_emb_len"] = None  # the original's 0: ceil(puzzle_emb_ndim / hidden_size)
    if arch.get("puzzle_emb_ndim") == 0 and arch.get("puzzle_emb_len", 16):
        raise refuse("arch.puzzle_emb_len", "prefix positions without a puzzle embedding do not run in the original")
    if arch.get("pos_encodings", "rope") not in ("rope", "learned"):
        arch["pos_encodings"] = "none"  # the original reads any other value as no positional encoding
    if arch.get("mlp_t") and arch.get("pos_encodings", "rope") == "rope":
        arch["pos_encodings"] = "none"  # TRM-MLP has no attention: its rope tables are never read
    if arch.get("forward_dtype") == "bfloat16":
        arch["forward_dtype"] = "auto"  # bf16 on CUDA as the original; a CPU computes in fp32 (our one policy)
    data["arch"] = arch
    return data


def from_original_weights(weights: dict[str, Any]) -> dict[str, Any]:
    """The original's state dict (`[_orig_mod.]model.inner.L_level...`, or a `{"model": state dict, ...}` checkpoint
    of later versions) with our names; a 2-output Q head keeps its first row, q_halt (the second, q_continue, is
    computed but never read by the original's default no_ACT_continue mode)."""
    if isinstance(weights.get("model"), dict):
        weights = weights["model"]
    out = {}
    for key, value in weights.items():
        name = key.removeprefix("_orig_mod.").removeprefix("model.").replace(".embedding_weight", ".weight")
        for old, new in RENAMES:
            if name.startswith(old):
                name = new + name.removeprefix(old)
        name = name.replace(".mlp_t.", ".token_mlp.")
        if name in ("inner.q_head.weight", "inner.q_head.bias") and value.shape[0] == 2:
            value = value[:1]
        out[name] = value
    return out
