"""LM plumbing: the head registry, training (loss goes down, resume reproduces, post_step), validation, generation
(cached = recomputed), `hrm_reason.load`, the CLI commands and the LM quick presets.

A tiny causal model defined here (it follows the LM-head contract, with a KV cache) drives the pipeline tests; the
registered heads run the same pipeline on a few steps each.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from pydantic import BaseModel, ConfigDict
from torch import nn
from typer.testing import CliRunner

import hrm_reason
from datasets_build.text import TextBuildOptions, build_text
from hrm_reason.checkpoint import find_checkpoint, read_weights
from hrm_reason.commands.generate import generate_text
from hrm_reason.config import load_config
from hrm_reason.data.text import ByteTokenizer, load_text_dataset
from hrm_reason.errors import UserError
from hrm_reason.evaluate.lm import evaluate_lm
from hrm_reason.load import load_run
from hrm_reason.models import registry
from hrm_reason.models.lm.head import LMHead, LMOutput
from hrm_reason.models.lm.sampling import generate
from hrm_reason.models.spec import ModelSpec
from hrm_reason.runtime.clock import KEYS as CLOCK_KEYS
from hrm_reason.train.loop import train
from tests.helpers import TINY_HAM, TINY_HRM_TEXT, arch_overrides, assert_same_trajectory, read_metrics, rewind

REPO = Path(__file__).resolve().parents[2]


# -------------------------------------------------------------------------------------------- a tiny contract model


class TinyLMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Literal["tiny_lm"] = "tiny_lm"
    vocab_size: int
    hidden_size: int = 32
    num_heads: int = 2
    max_seq_len: int = 256


class TinyLM(LMHead):
    """One pre-norm causal attention block with learned positions; its cache is (keys, values) [B, h, T, d_h]."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__(config)
        d, v = config.hidden_size, config.vocab_size
        self.embed = nn.Embedding(v, d)
        self.pos = nn.Embedding(config.max_seq_len, d)
        self.norm1, self.norm2, self.norm_f = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, v, bias=False)
        self.register_buffer("post_steps", torch.zeros((), dtype=torch.long))
        self.calls: list[int] = []  # sequence length of every forward (not state: for the cache test)

    def decode(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        labels: torch.Tensor | None,
        past_key_values: Any,
        use_cache: bool,
    ) -> LMOutput:
        """Logits and cache; LMHead.forward adds the next-token loss (and its "ce" metric) when labels are given."""
        if token_type_ids is not None and bool((token_type_ids != 0).any()):
            raise UserError("tiny_lm is causal only")
        self.calls.append(input_ids.shape[1])
        B, T = input_ids.shape
        h = self.config.num_heads
        start = 0 if past_key_values is None else past_key_values[0].shape[2]
        x = self.embed(input_ids) + self.pos(torch.arange(start, start + T, device=input_ids.device))
        q, k, v = (t.reshape(B, T, h, -1).transpose(1, 2) for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        if past_key_values is not None:
            k, v = torch.cat([past_key_values[0], k], dim=2), torch.cat([past_key_values[1], v], dim=2)
        mask = (
            torch.arange(start + T, device=x.device)[None, :]
            <= torch.arange(start, start + T, device=x.device)[:, None]
        )
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, -1))
        x = x + self.mlp(self.norm2(x))
        logits = self.head(self.norm_f(x))
        return LMOutput(logits=logits, past_key_values=(k, v) if use_cache else None)

    def post_step(self) -> None:
        with torch.no_grad():
            self.post_steps += 1


# This module is tiny_lm's model module: its SPEC, registered by the fixture below as a model file is by its line.
SPEC = ModelSpec(family="lm", config=TinyLMConfig, model=TinyLM, tiny={}, foreign_option="N=2")  # no FLOP count


@pytest.fixture(autouse=True)
def _tiny_head(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.models(), "tiny_lm", sys.modules[__name__])


# Small settings of the registered heads (the registry's names), a few hundred tokens per step.
HEADS = {
    "hrm_lm": ["arch.hidden_size=32", "arch.num_heads=2", "arch.N=2", "arch.T=2", "arch.K=2", "arch.max_seq_len=128"],
    "unitf_lm": ["arch.hidden_size=32", "arch.num_heads=2", "arch.M=3", "arch.K=2", "arch.max_seq_len=128"],
    "transformer_lm": ["arch.hidden_size=32", "arch.num_heads=2", "arch.num_layers=2", "arch.max_seq_len=128"],
    "hrm_text": arch_overrides({**TINY_HRM_TEXT, "max_position_embeddings": 128}),
    "ham_lm": arch_overrides({**TINY_HAM, "num_layers": 1, "chunk_size": 8}),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small corpus with structure a tiny model can pick up quickly (repeated phrases)."""
    root = tmp_path_factory.mktemp("lmdata")
    rng = np.random.default_rng(0)
    phrases = ["the cat sat on the mat. ", "a dog ran in the park. ", "def f(x):\n    return x + 1\n", "import os\n"]
    for i in range(16):
        (root / "c" / f"{i}.txt").parent.mkdir(exist_ok=True)
        (root / "c" / f"{i}.txt").write_text("".join(rng.choice(phrases, size=40)))
    return build_text(TextBuildOptions(input=[str(root / "c")], out=root / "ds", val_fraction=0.2), progress=False)


def config(data: Path, run_dir: Path, *overrides: str, name: str = "tiny_lm"):
    base = [
        f"arch.name={name}",
        f"data_path={data}",
        f"run_dir={run_dir}",
        "seq_len=32",
        "global_batch_size=8",
        "max_steps=6",
        "eval_every_steps=3",
        "eval_max_tokens=512",
        "lr=3e-3",
        "lr_warmup_steps=2",
        "device=cpu",
        "seed=0",
    ]
    return load_config(None, base + list(overrides))


TIMING_KEYS = {"train/tokens_per_s", "eval/tokens_per_s", *CLOCK_KEYS}


# -------------------------------------------------------------------------------------------------------- registry


def test_registry_errors_are_one_line() -> None:
    with pytest.raises(UserError, match="unknown language-model head 'gpt'"):
        registry.build_lm({"name": "gpt"}, 10)
    with pytest.raises(UserError, match=r"field 'arch\.hiden_size': unknown key"):
        registry.build_lm({"name": "tiny_lm", "hiden_size": 3}, 10)
    with pytest.raises(UserError, match="arch.vocab_size' is 11 but the dataset's vocabulary has 10"):
        registry.build_lm({"name": "tiny_lm", "vocab_size": 11}, 10)
    a = registry.build_lm({"name": "tiny_lm"}, 10, seed=1)
    b = registry.build_lm({"name": "tiny_lm"}, 10, seed=1)
    assert a.config.vocab_size == 10 and torch.equal(a.head.weight, b.head.weight)  # seeded init


def test_config_dispatch(tmp_path: Path) -> None:
    lm = tmp_path / "lm.yaml"
    lm.write_text("arch:\n  name: tiny_lm\n  hidden_size: 16\nseq_len: 8\n")
    assert load_config(lm).arch == {"name": "tiny_lm", "hidden_size": 16}
    assert type(load_config(REPO / "configs" / "sudoku_quick.yaml")).__name__ == "TrainConfig"
    with pytest.raises(UserError, match=r"field 'arch\.num_heads'"):
        load_config(lm, ["arch.num_heads=zero"])
    with pytest.raises(UserError, match="lr_warmup_steps 50 exceeds max_steps 10"):
        load_config(lm, ["max_steps=10", "lr_warmup_steps=50"])
    # The one run config: keys of LM run configs written before it (eval_interval counted steps) are read as today's.
    old = load_config(lm, ["eval_interval=7", "eval_batch_size=3", "forward_dtype=float32"])
    assert (old.eval_every_steps, old.eval_global_batch_size, old.eval_interval, old.forward_dtype) == (
        7,
        3,
        None,
        "float32",
    )
    with pytest.raises(UserError, match="eval_interval .* and eval_every_steps are both given"):
        load_config(lm, ["eval_interval=7", "eval_every_steps=5"])
    with pytest.raises(UserError, match="LM heads count max_steps"):
        load_config(lm, ["epochs=3"])
    assert (old.family, load_config(REPO / "configs" / "sudoku_quick.yaml").family) == ("lm", "act")


# -------------------------------------------------------------------------------------------------------- training


def test_training_lowers_the_validation_loss(data: Path, tmp_path: Path) -> None:
    ds = load_text_dataset(data)
    fresh = registry.build_lm({"name": "tiny_lm"}, ds.vocab_size, seed=0)
    before = evaluate_lm(fresh, ds.splits["val"], 32, 8, torch.device("cpu"), max_tokens=512).ce
    run = train(config(data, tmp_path / "run", "max_steps=30", "eval_every_steps=30"), progress=False)
    records = read_metrics(run)
    evals = [r for r in records if "eval/ce" in r]
    assert len(evals) == 1 and evals[0]["step"] == 30
    assert evals[0]["eval/ce"] < before - 1.0  # ln(259) = 5.56 to well under 4.6 in 30 steps
    assert evals[0]["eval/perplexity"] == pytest.approx(math.exp(evals[0]["eval/ce"]))
    steps = [r for r in records if "train/loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 31))
    assert np.mean([r["train/ce"] for r in steps[-5:]]) < np.mean([r["train/ce"] for r in steps[:5]]) - 0.5
    assert all(r["train/tokens_per_s"] > 0 and r["train/grad_norm"] > 0 for r in steps)
    loaded = load_run(run)
    model, cfg = loaded.model, loaded.config
    assert int(model.post_steps) == 30  # post_step after every optimizer step
    assert cfg is not None and cfg.arch["vocab_size"] == ds.vocab_size  # the run's config records the resolved head
    assert (run / "tokenizer_meta.json").is_file()


def test_resume_reproduces_the_uninterrupted_run(data: Path, tmp_path: Path) -> None:
    full = train(config(data, tmp_path / "full", "checkpoint_every_steps=2"), progress=False)
    cut = rewind(full, tmp_path / "cut", 2)
    resumed = train(config(data, cut, "checkpoint_every_steps=2"), resume=True, progress=False)
    assert_same_trajectory(full, resumed, TIMING_KEYS)
    assert int(read_weights(find_checkpoint(resumed))[0]["post_steps"]) == 6


@pytest.mark.parametrize("name", list(HEADS))
def test_the_runs_seed_draws_every_heads_initial_weights(name: str) -> None:
    """`hrm train seed=S` gives each seed its own initial weights, for the heads with a generator of their own (an
    `arch.seed` field) too; an `arch.seed` given in the config wins."""
    arch = {
        "name": name,
        **{k.removeprefix("arch."): yaml.safe_load(v) for k, v in (o.split("=") for o in HEADS[name])},
    }
    weights = [registry.build_lm(arch, 40, seed=s).state_dict() for s in (0, 1, 0)]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert all(torch.equal(weights[0][k], weights[2][k]) for k in weights[0])
    if "seed" in registry.head_classes(name)[0].model_fields:
        pinned = [registry.build_lm({**arch, "seed": 5}, 40, seed=s).state_dict() for s in (0, 1)]
        assert all(torch.equal(pinned[0][k], pinned[1][k]) for k in pinned[0])


def test_a_run_saved_when_its_heads_seed_was_0_resumes_under_its_own_seed(data: Path, tmp_path: Path) -> None:
    """Before the run's seed reached the head's generator, a run of seed 1 saved weights whose config says seed 0:
    it resumes, and on the same trajectory."""
    head = ("arch.hidden_size=16", "arch.num_heads=2", "arch.M=2", "arch.K=2", "arch.max_seq_len=64")
    old = (*head, "arch.seed=0", "seed=1", "checkpoint_every_steps=2")
    full = train(config(data, tmp_path / "full", *old, name="unitf_lm"), progress=False)
    cut = rewind(full, tmp_path / "cut", 2)
    saved = yaml.safe_load((cut / "config.yaml").read_text())
    del saved["arch"]["seed"]  # as such a run's config.yaml was written
    (cut / "config.yaml").write_text(yaml.safe_dump(saved))
    resumed = train(
        config(data, cut, *head, "seed=1", "checkpoint_every_steps=2", name="unitf_lm"), resume=True, progress=False
    )
    assert_same_trajectory(full, resumed, TIMING_KEYS)


def test_run_guards(data: Path, tmp_path: Path) -> None:
    run = train(config(data, tmp_path / "run", "max_steps=2", "eval_every_steps=2"), progress=False)
    with pytest.raises(UserError, match="not empty"):
        train(config(data, run, "max_steps=2", "eval_every_steps=2"), progress=False)
    with pytest.raises(UserError, match="another arch config"):
        train(
            config(data, run, "max_steps=4", "eval_every_steps=2", "arch.hidden_size=16"), resume=True, progress=False
        )
    with pytest.raises(UserError, match="fewer than seq_len"):
        train(config(data, tmp_path / "r2", "seq_len=100000"), progress=False)
    # A run directory written before the one run config (its LM keys: eval_interval counted steps) still loads.
    saved = yaml.safe_load((run / "config.yaml").read_text())
    old_keys = {
        "arch",
        "data_path",
        "run_dir",
        "seq_len",
        "global_batch_size",
        "max_steps",
        "eval_max_tokens",
        "eval_max_examples",
        "optimizer",
        "lr",
        "lr_min_ratio",
        "lr_warmup_steps",
        "beta1",
        "beta2",
        "weight_decay",
        "grad_clip",
        "seed",
        "device",
        "forward_dtype",
        "checkpoint_every_steps",
        "max_seconds",
        "logger",
        "project_name",
        "run_name",
    }
    old = {k: v for k, v in saved.items() if k in old_keys} | {
        "eval_interval": saved["eval_every_steps"],
        "eval_batch_size": None,
    }
    (run / "config.yaml").write_text(yaml.safe_dump(old, sort_keys=False))
    loaded = load_run(run)
    assert loaded.family == "lm" and loaded.config.eval_every_steps == 2 and loaded.config.eval_interval is None


# ------------------------------------------------------------------------------------------------------ generation


@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (1.0, None), (0.7, 5)])
def test_cached_generation_equals_recomputation(temperature: float, top_k: int | None) -> None:
    model = registry.build_lm({"name": "tiny_lm"}, 40, seed=3)
    prompt = torch.randint(0, 40, (3, 5), generator=torch.Generator().manual_seed(0))
    model.calls.clear()
    cached = generate(model, prompt, 12, temperature, top_k, torch.Generator().manual_seed(7), use_cache=True)
    assert model.calls == [5] + [1] * 11  # the prompt once, then one token per step from the cache
    model.calls.clear()
    full = generate(model, prompt, 12, temperature, top_k, torch.Generator().manual_seed(7), use_cache=False)
    assert model.calls == list(range(5, 17))
    assert cached.shape == (3, 17) and torch.equal(cached, full) and torch.equal(cached[:, :5], prompt)
    if top_k is not None:  # every sampled token is among the k most likely at its step
        logits = model(full).logits
        for t in range(5, 17):
            top = logits[:, t - 1].topk(top_k).indices
            assert (top == full[:, t : t + 1]).any(-1).all()


def test_generation_stops_at_end_of_document_and_decodes() -> None:
    tok = ByteTokenizer()
    model = registry.build_lm({"name": "tiny_lm"}, tok.vocab_size, seed=0)
    with torch.no_grad():  # make EOS the most likely next token everywhere
        model.head.weight.zero_()
        model.head.weight[tok.EOS] = 1.0
        model.norm_f.bias.fill_(1.0)
    out = generate(model, torch.tensor([[104, 105]]), 10, temperature=0, eos_id=tok.EOS)
    assert out.tolist() == [[104, 105, tok.EOS]]
    assert generate_text(model, tok, "hi", 10, temperature=0) == ""


# ------------------------------------------------------------------------------------------- load, eval, the CLI


def test_load_returns_an_lm_with_transformers_shaped_logits(data: Path, tmp_path: Path) -> None:
    run = train(config(data, tmp_path / "run", "max_steps=2", "eval_every_steps=2"), progress=False)
    ckpt = find_checkpoint(run)
    ids = torch.randint(0, 259, (2, 9))
    ref = hrm_reason.load(run)
    assert not ref.training and ref(ids).logits.shape == (2, 9, 259)
    for path in (ckpt, ckpt / "model.safetensors"):
        torch.testing.assert_close(hrm_reason.load(path)(ids).logits, ref(ids).logits, rtol=0, atol=0)
    alone = tmp_path / "alone"  # a checkpoint copied out of its run: the weights' header names the head
    shutil.copytree(ckpt, alone)
    torch.testing.assert_close(hrm_reason.load(alone)(ids).logits, ref(ids).logits, rtol=0, atol=0)
    with pytest.raises(UserError, match="no such checkpoint"):
        hrm_reason.load(tmp_path / "nothing")


def test_load_reads_a_transformers_hrm_text_directory(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")  # the dev extra's; hrm_text itself needs no optional package
    cfg = transformers.HrmTextConfig(vocab_size=50, **TINY_HRM_TEXT, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.HrmTextForCausalLM(cfg).save_pretrained(tmp_path / "hf")
    model = hrm_reason.load(tmp_path / "hf")
    ids = torch.randint(0, 50, (2, 7))
    assert model(ids).logits.shape == (2, 7, 50)
    assert model(ids, token_type_ids=torch.ones_like(ids)).logits.shape == (2, 7, 50)


def test_cli_train_eval_generate(data: Path, tmp_path: Path) -> None:
    import cli

    runner = CliRunner()
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(
        "arch:\n  name: tiny_lm\nseq_len: 16\nglobal_batch_size: 4\nmax_steps: 3\neval_interval: 3\neval_max_tokens: 128\n"
        "lr_warmup_steps: 1\ndevice: cpu\n"
    )
    run = tmp_path / "run"
    res = runner.invoke(cli.app, ["train", "-c", str(cfg), "--data", str(data), "--run-dir", str(run), "--quiet"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert (run / "checkpoints" / "step_3").is_dir()
    res = runner.invoke(
        cli.app,
        [
            "eval",
            "--run",
            str(run),
            "--max-tokens",
            "64",
            "--json",
            str(tmp_path / "e.json"),
            "--quiet",
            "--device",
            "cpu",
        ],
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    result = json.loads((tmp_path / "e.json").read_text())
    assert result["tokens"] == 64 and result["perplexity"] == pytest.approx(math.exp(result["ce"]))
    assert "perplexity" in res.output
    args = [
        "generate",
        "--run",
        str(run),
        "--prompt",
        "the cat",
        "--max-new-tokens",
        "8",
        "--seed",
        "3",
        "--device",
        "cpu",
    ]
    first = runner.invoke(cli.app, args)
    assert first.exit_code == 0, first.output + repr(first.exception)
    assert first.output.startswith("the cat")
    assert runner.invoke(cli.app, args + ["--no-cache"]).output == first.output  # cache or not, same text
    res = runner.invoke(
        cli.app, ["train", "--data", str(data), "--run-dir", str(tmp_path / "r2"), "device=cpu"]
    )  # the default puzzle config
    assert isinstance(res.exception, UserError) and "is a text dataset" in str(res.exception)


# ------------------------------------------------------------------------------------------ the registered heads


@pytest.mark.parametrize("name", list(HEADS))
def test_registered_heads_run_the_pipeline(name: str, data: Path, tmp_path: Path) -> None:
    # No skip: no head needs an optional package with these options (HAM's fla recurrence is opt-in), so a head that
    # fails to import is a failure here, not a skip.
    run = train(
        config(data, tmp_path / "run", "max_steps=2", "eval_every_steps=2", *HEADS[name], name=name), progress=False
    )
    assert [r["step"] for r in read_metrics(run) if "eval/ce" in r] == [2]
    model = hrm_reason.load(run)
    prompt = torch.randint(0, 256, (2, 6), generator=torch.Generator().manual_seed(1))
    assert model(prompt).logits.shape == (2, 6, 259)
    full = generate(model, prompt, 5, temperature=0, use_cache=False)
    if model.supports_cache:
        assert torch.equal(generate(model, prompt, 5, temperature=0, use_cache=True), full)
    if name == "hrm_text":  # the prompt as a bidirectional prefix: cached and recomputed decoding still agree
        prefixed = generate(model, prompt, 5, temperature=0, use_cache=False, prefix=True)
        assert torch.equal(generate(model, prompt, 5, temperature=0, use_cache=True, prefix=True), prefixed)
        model.config.prefix_lm = False  # the same weights without the prefix: --prefix is refused, not passed over
    with pytest.raises(UserError, match="causal only"):
        generate(model, prompt, 5, temperature=0, use_cache=False, prefix=True)


def test_load_returns_puzzle_models_with_or_without_their_dataset(tmp_path: Path) -> None:
    from tests.helpers import tiny_config, write_original_layout

    puzzles = write_original_layout(tmp_path / "sudoku4")
    run = train(tiny_config(puzzles, tmp_path / "prun", "epochs=2", "eval_every_steps=2"), progress=False)
    with_data = hrm_reason.load(run)
    shutil.move(puzzles, tmp_path / "moved")
    without = hrm_reason.load(run)  # shapes from the weights' header
    assert type(with_data).__name__ == type(without).__name__ == "HRM" and not without.training
    a, b = with_data.state_dict(), without.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


PRESETS = {
    "hrm_lm": "hrm_lm_quick.yaml",
    "unitf_lm": "unitf_lm_quick.yaml",
    "transformer_lm": "transformer_lm_quick.yaml",
    "hrm_text": "hrm_text_lm_quick.yaml",
    "ham_lm": "ham_lm_quick.yaml",
}


@pytest.mark.parametrize("name", list(PRESETS))
def test_quick_presets_load(name: str) -> None:
    path = REPO / "configs" / PRESETS[name]
    cfg = load_config(path)
    assert cfg.arch["name"] == name and cfg.data_path == "data/text-stdlib"
    model = registry.build_lm(cfg.arch, ByteTokenizer.vocab_size)
    assert 0.2e6 < sum(p.numel() for p in model.parameters()) < 5e6  # small enough for a CPU in minutes
