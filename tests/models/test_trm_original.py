"""Checkpoints of the original TRM code load as our trm and compute what the original computes from the same weights.

The checkpoint is written here as the original writes it: the state dict of its compiled loss head under its own
names (checked against the name list below, taken from the original model's modules), its 2-output Q head, initial
states in bf16, and the `all_config.yaml` its training script dumps. A functional transcription of the original
forward over that state dict is the reference, besides the model the weights came from.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import yaml

from hrm_reason.checkpoint import write_weights
from hrm_reason.config import load_config, save_config
from hrm_reason.data.puzzle import load_split
from hrm_reason.load import load_run
from hrm_reason.models.layers import swiglu_intermediate_size
from hrm_reason.models.registry import build_model
from tests.helpers import REPO, write_original_layout
from tests.helpers import hrm_in_process as hrm

HIDDEN, HEADS, SEGMENTS = 32, 2, 3


def original_all_config(data: Path, **arch: Any) -> dict[str, Any]:
    """The all_config.yaml of an original TRM run (its training config dumped whole), small sizes."""
    return {
        "arch": {
            "name": "recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1",
            "loss": {"name": "losses@ACTLossHead", "loss_type": "stablemax_cross_entropy"},
            "halt_exploration_prob": 0.1,
            "halt_max_steps": SEGMENTS,
            "H_cycles": 2,
            "L_cycles": 2,
            "H_layers": 0,
            "L_layers": 2,
            "hidden_size": HIDDEN,
            "num_heads": HEADS,
            "expansion": 4,
            "puzzle_emb_ndim": HIDDEN,
            "pos_encodings": "rope",
            "forward_dtype": "bfloat16",
            "mlp_t": False,
            "puzzle_emb_len": 16,
            "no_ACT_continue": True,
            **arch,
        },
        "data_paths": [str(data)],
        "data_paths_test": [],
        "evaluators": [],
        "global_batch_size": 8,
        "epochs": 4,
        "lr": 1e-4,
        "lr_min_ratio": 1.0,
        "lr_warmup_steps": 2,
        "weight_decay": 1.0,
        "beta1": 0.9,
        "beta2": 0.95,
        "puzzle_emb_lr": 1e-4,
        "puzzle_emb_weight_decay": 1.0,
        "project_name": "Sudoku4-ACT-torch",
        "run_name": "TinyRecursiveReasoningModel_ACTV1 tiny-test",
        "load_checkpoint": None,
        "checkpoint_path": "checkpoints/Sudoku4-ACT-torch/TinyRecursiveReasoningModel_ACTV1 tiny-test",
        "seed": 0,
        "checkpoint_every_eval": True,
        "eval_interval": 2,
        "min_eval_interval": 0,
        "eval_save_outputs": [],
        "ema": True,
        "ema_rate": 0.999,
        "freeze_weights": False,
    }


def original_names(layers: int, mlp_t: bool, learned: bool) -> set[str]:
    """The tensors the original TRM model registers (inner model; non-persistent RoPE tables excluded)."""
    names = {"embed_tokens.embedding_weight", "lm_head.weight", "q_head.weight", "q_head.bias", "puzzle_emb.weights"}
    names |= {"H_init", "L_init"} | ({"embed_pos.embedding_weight"} if learned else set())
    mixer = ("mlp_t.gate_up_proj", "mlp_t.down_proj") if mlp_t else ("self_attn.qkv_proj", "self_attn.o_proj")
    for i in range(layers):
        names |= {f"L_level.layers.{i}.{m}.weight" for m in (*mixer, "mlp.gate_up_proj", "mlp.down_proj")}
    return names


OURS_TO_ORIGINAL = (
    ("inner.net.", "inner.L_level."),
    ("inner.y_init", "inner.H_init"),
    ("inner.z_init", "inner.L_init"),
)


def write_original_checkpoint(
    model: torch.nn.Module, directory: Path, q_outputs: int, prefix: str, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """directory/step_12 as the original saves it; returns the state dict written."""
    sd = {}
    for name, value in model.state_dict().items():
        for ours, theirs in OURS_TO_ORIGINAL:
            if name.startswith(ours):
                name = theirs + name.removeprefix(ours)
        name = name.replace(".token_mlp.", ".mlp_t.").replace("embed_tokens.weight", "embed_tokens.embedding_weight")
        name = name.replace("embed_pos.weight", "embed_pos.embedding_weight")
        if name.endswith(("H_init", "L_init")):
            value = value.to(torch.bfloat16)  # the original keeps its initial states in its forward dtype
        if name.startswith("inner.q_head") and q_outputs == 2:  # a continue row the loader must drop
            value = torch.cat((value, torch.randn(value.shape, generator=generator)))
        sd[prefix + name] = value.clone()
    torch.save(sd, directory / "step_12")
    return sd


def randomise(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Non-trivial Q head and puzzle embeddings (both start constant), bf16-exact initial states."""
    inner = model.inner
    with torch.no_grad():
        inner.q_head.weight.copy_(torch.randn(inner.q_head.weight.shape, generator=generator) * 0.3)
        inner.q_head.bias.copy_(torch.randn(inner.q_head.bias.shape, generator=generator))
        inner.puzzle_emb.weights.copy_(torch.randn(inner.puzzle_emb.weights.shape, generator=generator))
        for name in ("y_init", "z_init"):
            getattr(inner, name).copy_(getattr(inner, name).to(torch.bfloat16).float())


def original_segment(
    sd: dict[str, torch.Tensor],
    arch: dict[str, Any],
    batch: dict[str, torch.Tensor],
    carry: tuple[torch.Tensor, torch.Tensor] | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, q_halt) of one segment from `carry` (z_H, z_L; None: the initial states), computed as the original
    TRM code does, in fp32, from its state dict. One segment at a time: over several, fp32 rounding differences grow
    with the recurrence (to 1e-4 by the third segment of the MLP variant), whatever the order of operations."""
    prefix = next(k for k in sd if k.endswith("lm_head.weight")).removesuffix("lm_head.weight")
    w = {k.removeprefix(prefix): v.float() for k, v in sd.items()}
    D, eps = arch["hidden_size"], 1e-5
    P = arch["puzzle_emb_len"] or -(arch["puzzle_emb_ndim"] // -D)
    mlp_t, pos = arch["mlp_t"], arch["pos_encodings"]

    def rms(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    def swiglu(name: str, x: torch.Tensor) -> torch.Tensor:
        gate, up = (x @ w[f"{name}.gate_up_proj.weight"].T).chunk(2, dim=-1)
        return (F.silu(gate) * up) @ w[f"{name}.down_proj.weight"].T

    def rope(x: torch.Tensor) -> torch.Tensor:  # [B, S, H, d], rotate-half convention
        d = x.shape[-1]
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        freqs = torch.outer(torch.arange(x.shape[1], dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)[:, None, :]
        rotated = torch.cat((-x[..., d // 2 :], x[..., : d // 2]), dim=-1)
        return x * emb.cos() + rotated * emb.sin()

    def attention(name: str, h: torch.Tensor) -> torch.Tensor:
        B, S, _ = h.shape
        heads = arch["num_heads"]
        q, k, v = (h @ w[f"{name}.qkv_proj.weight"].T).view(B, S, 3, heads, D // heads).unbind(2)
        if pos == "rope":
            q, k = rope(q), rope(k)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return out.transpose(1, 2).reshape(B, S, D) @ w[f"{name}.o_proj.weight"].T

    def L_level(h: torch.Tensor, injection: torch.Tensor) -> torch.Tensor:
        h = h + injection
        for i in range(arch["L_layers"]):
            name = f"L_level.layers.{i}"
            if mlp_t:
                t = h.transpose(1, 2)
                h = rms(t + swiglu(f"{name}.mlp_t", t)).transpose(1, 2)
            else:
                h = rms(h + attention(f"{name}.self_attn", h))
            h = rms(h + swiglu(f"{name}.mlp", h))
        return h

    embedding = w["embed_tokens.embedding_weight"][batch["inputs"].long()]
    puzzle = w["puzzle_emb.weights"][batch["puzzle_identifiers"].long()]
    puzzle = F.pad(puzzle, (0, P * D - puzzle.shape[-1])).view(-1, P, D)
    embedding = torch.cat((puzzle, embedding), dim=-2)
    if pos == "learned":
        embedding = 0.707106781 * (embedding + w["embed_pos.embedding_weight"])
    x = math.sqrt(D) * embedding
    z_H, z_L = (w["H_init"].expand(x.shape), w["L_init"].expand(x.shape)) if carry is None else carry
    for _ in range(arch["H_cycles"]):
        for _ in range(arch["L_cycles"]):
            z_L = L_level(z_L, z_H + x)
        z_H = L_level(z_H, z_L)
    q = z_H[:, 0] @ w["q_head.weight"].T + w["q_head.bias"]
    return (z_H @ w["lm_head.weight"].T)[:, P:], q[..., 0]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("trm") / "sudoku4", distinct_identifiers=True)


CASES = {
    # attention with RoPE, the 2-output Q head, a compiled loss head's names: the original's default checkpoint
    "att-rope-q2-compiled": (dict(mlp_t=False), 2, "_orig_mod.model."),
    # TRM-MLP as the README runs it for Sudoku
    "mlp-q2": (dict(mlp_t=True, pos_encodings="none"), 2, "model."),
    # a 1-output Q head, learned positions, an uncompiled head
    "att-learned-q1": (dict(mlp_t=False, pos_encodings="learned"), 1, "model."),
    # MLP with rope left on (the original never reads it), puzzle_emb_len 0 (as many as the embedding fills), 1 layer
    "mlp-rope-auto-prefix-q1": (dict(mlp_t=True, puzzle_emb_len=0, L_layers=1), 1, "_orig_mod.model."),
}


def original_checkpoint(
    case: str, data: Path, tmp_path: Path
) -> tuple[Path, dict[str, Any], torch.nn.Module, dict[str, torch.Tensor]]:
    """(checkpoint folder, its all_config.yaml as written, the model the weights came from, the state dict written)."""
    arch_fields, q_outputs, prefix = CASES[case]
    raw = original_all_config(data, **arch_fields)
    ckpt_dir = tmp_path / "checkpoints" / "run"
    ckpt_dir.mkdir(parents=True)
    (ckpt_dir / "all_config.yaml").write_text(yaml.safe_dump(raw))
    # The weights' source: our trm built from the translated config, made non-trivial.
    config = load_config(ckpt_dir / "all_config.yaml")
    source = build_model(config.arch, load_split(data, "test").metadata, "cpu", seed=3).eval()
    generator = torch.Generator().manual_seed(7)
    randomise(source, generator)
    return ckpt_dir, raw, source, write_original_checkpoint(source, ckpt_dir, q_outputs, prefix, generator)


@pytest.mark.parametrize("case", list(CASES))
def test_original_checkpoint_gives_the_same_logits(case: str, data: Path, tmp_path: Path) -> None:
    _, q_outputs, prefix = CASES[case]
    ckpt_dir, raw, source, sd = original_checkpoint(case, data, tmp_path)
    meta = load_split(data, "test").metadata
    arch = raw["arch"]
    learned = arch["pos_encodings"] == "learned"
    assert {k.removeprefix(prefix + "inner.") for k in sd} == original_names(arch["L_layers"], arch["mlp_t"], learned)
    assert all(k.startswith(prefix + "inner.") for k in sd)
    assert sd[prefix + "inner.q_head.weight"].shape == (q_outputs, HIDDEN)
    assert sd[prefix + "inner.H_init"].dtype == torch.bfloat16
    positions = meta.seq_len + (arch["puzzle_emb_len"] or 1)
    if arch["mlp_t"]:  # the token-mixing SwiGLU spans the grid and the prefix
        inner = swiglu_intermediate_size(positions, 4)
        assert sd[prefix + "inner.L_level.layers.0.mlp_t.gate_up_proj.weight"].shape == (2 * inner, positions)

    # Through the public loader: the checkpoint folder (latest step_N beside all_config.yaml) and the weights file.
    loaded = load_run(ckpt_dir).model
    assert load_run(ckpt_dir / "step_12").checkpoint == ckpt_dir / "step_12"
    assert loaded.config.prefix_len == (16 if arch["puzzle_emb_len"] else 1)

    g = torch.Generator().manual_seed(11)
    batch = {
        "inputs": torch.randint(0, meta.vocab_size, (4, meta.seq_len), generator=g, dtype=torch.int32),
        "labels": torch.randint(0, meta.vocab_size, (4, meta.seq_len), generator=g, dtype=torch.int32),
        "puzzle_identifiers": torch.randint(0, meta.num_puzzle_identifiers, (4,), generator=g, dtype=torch.int32),
    }
    with torch.no_grad():
        carries = [source.empty_carry(batch), loaded.empty_carry(batch)]
        for segment in range(SEGMENTS):
            inner = None if segment == 0 else (carries[1].inner_carry.y, carries[1].inner_carry.z)
            reference = original_segment(sd, arch, batch, inner)
            carries[0], want = source(carries[0], batch)
            carries[1], got = loaded(carries[1], batch)
            for name, a, b, c in (
                ("logits", want.logits, got.logits, reference[0]),
                ("q_halt", want.q_halt_logits, got.q_halt_logits, reference[1]),
            ):
                assert (a - b).abs().max().item() <= 1e-5, (case, segment, name)
                assert (c - b).abs().max().item() <= 1e-5, (case, segment, name, "vs the original's forward")
            assert torch.equal(got.q_continue_logits, torch.zeros_like(got.q_halt_logits))  # halting on q_halt > 0
        assert bool(carries[1].halted.all())  # the full budget ran: the model halts after halt_max_steps


def test_hrm_eval_of_an_original_checkpoint_equals_ours(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hrm eval --checkpoint` of the original layout and of our own checkpoint of the same weights agree."""
    ckpt_dir, _, source, _ = original_checkpoint("mlp-q2", data, tmp_path)
    ours = tmp_path / "ours"
    ours.mkdir()
    write_weights(ours, source, source.config.model_dump())
    save_config(load_config(ckpt_dir / "all_config.yaml"), ours / "config.yaml")
    results = []
    for checkpoint in (ckpt_dir, ours):
        out = tmp_path / f"{checkpoint.name}.json"
        code, err = hrm(
            capsys, monkeypatch, "eval", "--checkpoint", str(checkpoint), "--mmax", "4", "--quiet", "--json", str(out)
        )
        assert code in (0, None), err
        results.append(json.loads(out.read_text()))
    assert len(set(results[1]["token_accuracy"])) > 1  # segments differ: the comparison sees every one
    origins = [r.pop("provenance") for r in results]  # what was evaluated differs; the numbers must not
    assert [o["evaluated"] for o in origins] == [str(ckpt_dir), str(ours)]
    assert results[0] == results[1]


@pytest.mark.parametrize(
    "change, fragments",
    [
        ({"arch.name": "recursive_reasoning.trm_hier6@TinyRecursiveReasoningModel_ACTV1"}, ["arch.name", "trm_hier6"]),
        ({"arch.name": "trm_original"}, ["arch.name", "unknown puzzle model 'trm_original'"]),
        ({"arch.no_ACT_continue": False}, ["field 'arch.no_ACT_continue'", "original TRM config"]),
        ({"arch.supervision_curriculum": True}, ["arch.supervision_curriculum", "unknown key"]),
        ({"freeze_weights": True}, ["field 'freeze_weights'"]),
        ({"data_paths": ["data/a", "data/b"]}, ["field 'data_paths'"]),
        ({"data_paths_test": ["data/b"]}, ["field 'data_paths_test'"]),
        ({"curriculum_min_depth": 2}, ["curriculum_min_depth", "unknown key"]),
    ],
)
def test_unsupported_original_config_is_one_line(
    change: dict[str, Any],
    fragments: list[str],
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = original_all_config(data)
    for dotted, value in change.items():
        section, _, key = dotted.rpartition(".")
        (raw[section] if section else raw)[key] = value
    (tmp_path / "all_config.yaml").write_text(yaml.safe_dump(raw))
    torch.save({"model.inner.lm_head.weight": torch.zeros(6, HIDDEN)}, tmp_path / "step_1")
    code, err = hrm(capsys, monkeypatch, "eval", "--checkpoint", str(tmp_path), "--device", "cpu")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_original_config_translation(data: Path, tmp_path: Path) -> None:
    """What the original's fields become: ema flag and rate, one data path, no eval_interval, the ignored fields."""
    raw = original_all_config(data, H_layers=4, pos_encodings="sinusoidal")
    raw.update(eval_interval=None, epochs=6, evaluators=[{"name": "arc@ARC"}], load_checkpoint="x/step_1")
    path = tmp_path / "all_config.yaml"
    path.write_text(yaml.safe_dump(raw))
    config = load_config(path)
    assert (config.model_name, config.data_path, config.ema, config.eval_interval) == ("trm", str(data), 0.999, 6)
    assert config.arch.pos_encodings == "none"  # the original reads an unknown value as none
    assert config.arch.forward_dtype == "auto"  # bf16 on CUDA as the original, fp32 on a CPU
    raw["ema"] = False
    path.write_text(yaml.safe_dump(raw))
    assert load_config(path).ema is None
    assert load_config(path, [f"data_path={tmp_path}"]).data_path == str(tmp_path)  # an override wins


@pytest.mark.parametrize("preset", ["trm_sudoku", "trm_maze", "trm_arc1"])
def test_trm_paper_presets_validate_and_build(preset: str, data: Path) -> None:
    path = REPO / "configs" / f"{preset}.yaml"
    full = load_config(path)
    assert full.model_name == "trm" and full.arch.puzzle_emb_len == 16 and full.arch.hidden_size == 512
    assert (full.arch.L_layers, full.arch.H_cycles, full.ema) == (2, 3, 0.999)
    assert path.read_text().startswith("#") and "hrm build-data" in path.read_text()
    small = load_config(path, [f"data_path={data}", "arch.hidden_size=32", "arch.num_heads=2"])
    model = build_model(small.arch, load_split(data, "test").metadata, "cpu", seed=0)
    assert model.inner.full_len == 16 + 16
