"""A checkpoint of the original HRM code, as its training script leaves it: `all_config.yaml` in the original's own keys
(its arch named `hrm.hrm_act_v1@HierarchicalReasoningModel_ACTV1`, the `loss` section, `checkpoint_path`, ...) beside
`step_N`, the state dict of the compiled ACTLossHead (`_orig_mod.model.inner.*`, `embedding_weight`, the initial
states in bf16). Loaded through the public loader, it gives the weights written and the outputs of the model they came
from (docs/models.md, "Configs"; docs/training.md, "Released checkpoints")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import hrm_reason
from hrm_reason.config import load_config
from hrm_reason.data.puzzle import load_split
from hrm_reason.models.registry import build_model
from tests.helpers import ORIGINAL_KEYS_1_LAYER, output_tensors, write_original_layout


def original_all_config(data: Path) -> dict:
    """The all_config.yaml of an original HRM run (its dumped PretrainConfig), at tiny sizes."""
    return {
        "arch": {
            "name": "hrm.hrm_act_v1@HierarchicalReasoningModel_ACTV1",
            "loss": {"name": "losses@ACTLossHead", "loss_type": "stablemax_cross_entropy"},
            "halt_exploration_prob": 0.1,
            "halt_max_steps": 3,
            "H_cycles": 2,
            "L_cycles": 2,
            "H_layers": 1,
            "L_layers": 1,
            "hidden_size": 32,
            "num_heads": 2,
            "expansion": 4,
            "puzzle_emb_ndim": 32,
            "pos_encodings": "rope",
        },
        "data_path": str(data),
        "global_batch_size": 8,
        "epochs": 20,
        "lr": 7e-5,
        "lr_min_ratio": 1.0,
        "lr_warmup_steps": 2,
        "weight_decay": 1.0,
        "beta1": 0.9,
        "beta2": 0.95,
        "puzzle_emb_lr": 7e-5,
        "puzzle_emb_weight_decay": 1.0,
        "project_name": "Sudoku4 ACT-torch",
        "run_name": "HierarchicalReasoningModel_ACTV1 tiny-test",
        "checkpoint_path": "checkpoints/Sudoku4 ACT-torch/HierarchicalReasoningModel_ACTV1 tiny-test",
        "seed": 0,
        "checkpoint_every_eval": True,
        "eval_interval": 10,
        "eval_save_outputs": [],
    }


# The state dict of the original code's compiled ACTLossHead for one H and one L block with a puzzle embedding.
ORIGINAL_KEYS = {f"_orig_mod.{key}" for key in ORIGINAL_KEYS_1_LAYER}


def test_original_all_config_and_weights_load_through_the_public_loader(tmp_path: Path) -> None:
    data = write_original_layout(tmp_path / "sudoku4", distinct_identifiers=True)
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "all_config.yaml").write_text(yaml.safe_dump(original_all_config(data)))
    config = load_config(folder / "all_config.yaml")
    assert (config.model_name, config.arch.hidden_size, config.data_path) == ("hrm", 32, str(data))

    # The model the weights come from: seeded apart from the config's seed, so that a loader that kept its fresh
    # initialisation would not pass; its initial states rounded to bf16, as the original stores them.
    split = load_split(data, "test")
    source = build_model(config.arch, split.metadata, "cpu", seed=7).eval()
    with torch.no_grad():
        for name in ("H_init", "L_init"):
            getattr(source.inner, name).copy_(getattr(source.inner, name).to(torch.bfloat16).float())
    original = {}
    for key, value in source.state_dict().items():
        key = key.replace("embed_tokens.weight", "embed_tokens.embedding_weight")
        original["_orig_mod.model." + key] = value.to(torch.bfloat16) if key.endswith("_init") else value.clone()
    assert set(original) == ORIGINAL_KEYS
    torch.save(original, folder / "step_24")

    s = split.sets["all"]
    batch = {
        "inputs": torch.from_numpy(np.array(s.inputs[:4], dtype=np.int32)),
        "labels": torch.from_numpy(np.array(s.labels[:4], dtype=np.int32)),
        "puzzle_identifiers": torch.from_numpy(np.array(s.puzzle_identifiers[:4], dtype=np.int32)),
    }

    def outputs(model: torch.nn.Module) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            _, out = model(model.empty_carry(batch), batch)
        return output_tensors(out)

    want_weights, want_outputs = source.state_dict(), outputs(source)
    for path in (folder / "step_24", folder):  # the weights file, and its folder (the latest step_N)
        model = hrm_reason.load(path)
        assert type(model).__name__ == "HRM" and not model.training
        weights = model.state_dict()
        assert weights.keys() == want_weights.keys()
        for key, value in want_weights.items():
            assert torch.equal(weights[key], value), key
        got = outputs(model)
        assert got.keys() == want_outputs.keys()
        for key, value in want_outputs.items():
            torch.testing.assert_close(got[key], value, rtol=0, atol=0, msg=key)


@pytest.mark.parametrize("key", ["checkpoint_path", "eval_save_outputs"])
def test_the_original_config_keys_nothing_reads_are_dropped_not_kept(key: str, tmp_path: Path) -> None:
    path = tmp_path / "all_config.yaml"
    path.write_text(yaml.safe_dump(original_all_config(tmp_path / "data")))
    assert key not in load_config(path).model_dump()
