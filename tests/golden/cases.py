"""The models of the golden parity test and one training-like pass of each: a few ACT segments with the ACT loss and
backward (puzzle models), or one forward with labels and backward (language-model heads), all in fp32 on CPU."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.models.act import act_loss
from hrm_reason.models.registry import arch_config, build_lm, build_model, model_classes
from tests.helpers import TINY_HAM, TINY_HRM, TINY_HRM_TEXT, output_tensors

SMALL = dict(**TINY_HRM, halt_max_steps=3, halt_exploration_prob=0.5)
PUZZLE_CASES: dict[str, dict[str, Any]] = {
    "hrm": dict(name="hrm"),
    "hrm_next_segment": dict(name="hrm", q_target="next_segment"),
    "hrm_softmax_learned": dict(name="hrm", pos_encodings="learned", loss={"loss_type": "softmax_cross_entropy"}),
    "transformer": dict(name="transformer", num_layers=2),
    "transformer_direct": dict(name="transformer", halt_max_steps=1),
    "unitf": dict(name="unitf", unitf_steps=3, unitf_grad_steps=2),
    "trm_att": dict(name="trm", puzzle_emb_len=4),
    "trm_mlp": dict(name="trm", mlp_t=True, pos_encodings="none", puzzle_emb_len=4),
}
LM_CASES: dict[str, dict[str, Any]] = {
    "hrm_lm": dict(name="hrm_lm", hidden_size=32, num_heads=2, N=2, T=2, S=2, K=2, entropy_weight=0.01, max_seq_len=32),
    "unitf_lm": dict(name="unitf_lm", hidden_size=32, num_heads=2, M=3, K=2, max_seq_len=32),
    "hrm_text": dict(name="hrm_text", **TINY_HRM_TEXT, max_position_embeddings=32),
    "ham_lm": dict(
        name="ham_lm",
        **TINY_HAM,
        router="fit_error",
        threshold_mode="global",
        kv_target=0.5,
        max_position_embeddings=32,
    ),
}
CASES = [*PUZZLE_CASES, *LM_CASES]
SEQ_LEN, VOCAB, IDENTIFIERS, LM_VOCAB = 16, 6, 5, 40


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    out = {f"grad/{n}": p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    emb = getattr(getattr(model, "inner", None), "puzzle_emb", None)
    if emb is not None and emb.local_weights is not None and emb.local_weights.grad is not None:
        out["grad/puzzle_emb.local_weights"] = emb.local_weights.grad.clone()
    return out


def _arch(name: str) -> Any:
    """The case's model config: of SMALL, the options its model reads (the flat config before per-model configs gave
    every model all of them; a transformer without num_layers stacked H_layers + L_layers blocks)."""
    fields = {**SMALL, **PUZZLE_CASES[name]}
    if fields["name"] == "transformer":
        fields.setdefault("num_layers", fields["H_layers"] + fields["L_layers"])
    config_cls, _ = model_classes(fields["name"])
    return arch_config({k: v for k, v in fields.items() if k in config_cls.model_fields})


def _puzzle_case(
    name: str, state_dict: dict[str, torch.Tensor] | None, device: torch.device
) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    arch = _arch(name)
    metadata = PuzzleDatasetMetadata.of_shape(SEQ_LEN, VOCAB, IDENTIFIERS)
    model = build_model(arch, metadata, device, seed=0)
    if state_dict is not None:
        model.load_state_dict(state_dict)
    g = torch.Generator().manual_seed(1)
    batch = {
        "inputs": torch.randint(1, VOCAB, (6, SEQ_LEN), generator=g, dtype=torch.int32),
        "labels": torch.randint(0, VOCAB, (6, SEQ_LEN), generator=g, dtype=torch.int32),
        "puzzle_identifiers": torch.randint(0, IDENTIFIERS, (6,), generator=g, dtype=torch.int32),
    }
    batch = {k: v.to(device) for k, v in batch.items()}
    out: dict[str, torch.Tensor] = {}
    model.train()
    carry = model.empty_carry(batch)
    explore = torch.Generator(device).manual_seed(2)
    for step in range(3):
        carry, outputs = model(carry, batch, generator=explore)
        loss, metrics = act_loss(outputs, batch["labels"], carry.halted, carry.steps, arch.loss.loss_type)
        model.zero_grad(set_to_none=True)
        loss.backward()
        out.update({f"train{step}/{k}": v.detach().clone() for k, v in output_tensors(outputs).items()})
        out.update({f"train{step}/metric/{k}": v.clone() for k, v in metrics.items()})
        out[f"train{step}/loss"] = loss.detach().clone()
        out[f"train{step}/halted"] = carry.halted.clone()
        out.update({f"train{step}/{k}": v for k, v in _grads(model).items()})
    model.eval()
    with torch.no_grad():
        carry = model.empty_carry(batch)
        for step in range(5):
            carry, outputs = model(carry, batch, halt_max_steps=5)
            out.update({f"eval{step}/{k}": v.clone() for k, v in output_tensors(outputs).items()})
    return model, out


def _lm_case(
    name: str, state_dict: dict[str, torch.Tensor] | None, device: torch.device
) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    model = build_lm(LM_CASES[name], LM_VOCAB, device, seed=0)
    if state_dict is not None:
        model.load_state_dict(state_dict)
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, LM_VOCAB, (3, 12), generator=g).to(device)
    labels = input_ids.clone()
    labels[0, :4] = -100
    kwargs: dict[str, Any] = {}
    if name == "hrm_text":
        kwargs["token_type_ids"] = (torch.arange(12, device=device) < 5).long().expand(3, 12)
    model.train()
    output = model(input_ids, labels=labels, **kwargs)
    output.loss.backward()
    out = {"train/logits": output.logits.detach().clone(), "train/loss": output.loss.detach().clone()}
    out.update({f"train/metric/{k}": v.detach().clone() for k, v in output.metrics.items()})
    out.update({f"train/{k}": v for k, v in _grads(model).items()})
    model.eval()
    with torch.no_grad():
        out["eval/logits"] = model(input_ids, **kwargs).logits.clone()
    return model, out


def run_case(
    name: str, state_dict: dict[str, torch.Tensor] | None, device: str = "cpu"
) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """The model of case `name` (seeded init, or `state_dict` when given) on `device` and its outputs. On CUDA the
    puzzle models compute in bf16 (their `forward_dtype` auto) and the LM heads in fp32 (no autocast here)."""
    torch.manual_seed(0)
    case = _puzzle_case if name in PUZZLE_CASES else _lm_case
    return case(name, state_dict, torch.device(device))
