"""The tensor names of a `transformers` HrmText checkpoint and ours: read by hrm_text's checkpoint adapter
(`rename_hf_weights`, its registry `SPEC`) and by the reader and writer of those directories (hrm_text_convert.py).

Our HRMText uses HrmTextForCausalLM's parameter names without the "model." prefix of the base model, so conversion is
a renaming, plus the legacy fused layout:
- `...attn.gqkv_proj.weight` is split on dim 0 into [gate, q, k, v] (equal chunks), named `self_attn.*_proj`;
- `...attn.o_proj.*` is renamed to `...self_attn.o_proj.*`;
- `...mlp.gate_up_proj.weight` is split on dim 0 into [gate, up].
(A fused `.bias` is split the same way on reading, for robustness; transformers itself keeps biases split.)
This is transformers 5.23's `conversion_mapping.py` "hrm_text" entry. That same release *writes* this fused layout
in `save_pretrained` (the mapping is reversed on save), so `save_hf_hrm_text` writes it too by default
(`fused=False` writes the split names, which transformers also loads).
"""

from __future__ import annotations

import re

import torch

from hrm_reason.errors import UserError

WEIGHTS_FILE = "model.safetensors"
BASE_PREFIX = "model."


def unfuse(hf: dict[str, torch.Tensor], source: str) -> dict[str, tuple[torch.Tensor, str]]:
    """Split the legacy fused tensors ([gate, q, k, v] and [gate, up], dim 0) and rename attn -> self_attn; each
    result remembers the stored name it came from (for error messages)."""
    out: dict[str, tuple[torch.Tensor, str]] = {}
    for key, t in hf.items():
        if m := re.fullmatch(r"(.*)\.attn\.gqkv_proj\.(weight|bias)", key):
            if t.shape[0] % 4:
                raise UserError(f"{source}: {key} has {t.shape[0]} rows, not a multiple of 4 ([gate, q, k, v])")
            for name, part in zip(("gate_proj", "q_proj", "k_proj", "v_proj"), t.chunk(4, dim=0)):
                out[f"{m[1]}.self_attn.{name}.{m[2]}"] = (part, key)
        elif m := re.fullmatch(r"(.*)\.mlp\.gate_up_proj\.(weight|bias)", key):
            if t.shape[0] % 2:
                raise UserError(f"{source}: {key} has {t.shape[0]} rows, not a multiple of 2 ([gate, up])")
            for name, part in zip(("gate_proj", "up_proj"), t.chunk(2, dim=0)):
                out[f"{m[1]}.mlp.{name}.{m[2]}"] = (part, key)
        else:
            out[re.sub(r"\.attn\.o_proj\.", ".self_attn.o_proj.", key)] = (t, key)
    return out


def fuse(ours: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of `unfuse`, as transformers 5.23's save_pretrained writes it: only weights are fused (biases keep
    their split names), and every o_proj tensor moves to `attn.o_proj`."""
    out: dict[str, torch.Tensor] = {}
    for key, t in ours.items():
        if m := re.fullmatch(r"(.*)\.self_attn\.q_proj\.weight", key):
            parts = [ours[f"{m[1]}.self_attn.{n}.weight"] for n in ("gate_proj", "q_proj", "k_proj", "v_proj")]
            out[f"{m[1]}.attn.gqkv_proj.weight"] = torch.cat(parts, dim=0)
        elif m := re.fullmatch(r"(.*)\.mlp\.gate_proj\.weight", key):
            out[f"{m[1]}.mlp.gate_up_proj.weight"] = torch.cat([t, ours[f"{m[1]}.mlp.up_proj.weight"]], dim=0)
        elif re.fullmatch(r".*\.(self_attn\.(gate|k|v)_proj|mlp\.up_proj)\.weight", key):
            continue  # folded into the fused tensor above
        else:
            out[re.sub(r"\.self_attn\.o_proj\.", ".attn.o_proj.", key)] = t
    return out


def our_names(hf: dict[str, torch.Tensor], source: str) -> dict[str, tuple[torch.Tensor, str]]:
    """`unfuse`d, without the base model's prefix (the head keeps its name): ours, each with its stored name."""
    return {(k.removeprefix(BASE_PREFIX) if k != "lm_head.weight" else k): t for k, t in unfuse(hf, source).items()}


def rename_hf_weights(hf: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers tensor names (split or legacy fused) -> ours, unchecked: hrm_text's checkpoint adapter."""
    return {k: t for k, (t, _) in our_names(hf, WEIGHTS_FILE).items()}
