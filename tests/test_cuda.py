"""The CUDA path, run where a GPU is present (skipped on CPU-only machines, where the rest of the suite covers the same
code in fp32): bf16 numerics against the fp32 CPU outputs of tests/golden, training, resume and evaluation end to end
through the CLI, torch.compile, and `hrm bench`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from tests.golden.cases import LM_CASES, PUZZLE_CASES, run_case
from tests.helpers import bench_args, read_metrics, run_hrm, write_original_layout

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
GOLDEN = torch.load(REPO / "tests" / "golden" / "golden.pt", weights_only=True) if torch.cuda.is_available() else {}


def rel_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    got, expected = got.detach().double().cpu(), expected.double()
    return ((got - expected).norm() / expected.norm().clamp_min(1e-12)).item()


@pytest.mark.parametrize("name", list(PUZZLE_CASES))
def test_puzzle_models_in_bf16_on_cuda_match_fp32_cpu(name: str) -> None:
    """Segment 0 of training (before exploration, whose CUDA draws differ from the CPU's) and every evaluation
    segment, from the golden weights: bf16 compute with fp32 master weights stays within bf16 rounding."""
    saved = GOLDEN[name]
    model, got = run_case(name, saved["state_dict"], device="cuda")
    assert all(p.dtype == torch.float32 for p in model.parameters()), "master weights must stay fp32"
    keys = [
        k for k in saved if k.startswith(("train0/", "eval")) and "metric" not in k and saved[k].is_floating_point()
    ]
    assert any(k.startswith("train0/grad/") for k in keys) and any(k.startswith("eval4/") for k in keys)
    for key in keys:
        tol = 8e-2 if "/grad/" in key else 3e-2
        assert rel_error(got[key], saved[key]) < tol, key


@pytest.mark.parametrize("name", list(LM_CASES))
def test_lm_heads_on_cuda_match_cpu(name: str) -> None:
    """fp32 on CUDA (no autocast): the same logits, loss and gradients as on the CPU."""
    saved = GOLDEN[name]
    _, got = run_case(name, saved["state_dict"], device="cuda")
    for key, value in saved.items():
        if key != "state_dict" and value.is_floating_point():
            assert rel_error(got[key], value) < 2e-3, key


def hrm(*args: str) -> subprocess.CompletedProcess:
    proc = run_hrm(*args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


TINY = (
    "global_batch_size=8",
    "epochs=4",
    "eval_interval=2",
    "arch.hidden_size=32",
    "arch.num_heads=2",
    "arch.H_layers=1",
    "arch.L_layers=1",
    "arch.halt_max_steps=3",
    "lr=1e-3",
    "lr_warmup_steps=2",
    "device=cuda",
)


@pytest.mark.parametrize("arch", ["hrm", "transformer", "unitf", "trm"])
@pytest.mark.parametrize("compile", [False, True])
def test_train_resume_and_eval_on_cuda(arch: str, compile: bool, tmp_path: Path) -> None:
    data = write_original_layout(tmp_path / "data", distinct_identifiers=True)
    run = tmp_path / "run"
    hrm(
        "train",
        "--data",
        str(data),
        "--run-dir",
        str(run),
        "--quiet",
        f"arch.name={arch}",
        f"compile={compile}",
        "checkpoint_every_steps=3",
        *TINY,
    )
    records = read_metrics(run)
    losses = [r["train/lm_loss"] for r in records if "train/lm_loss" in r]
    assert len(losses) == 12 and all(torch.isfinite(torch.tensor(losses)))
    assert "eval/exact_accuracy" in records[-1]
    # Checkpoints hold fp32 weights whatever the compute dtype, and a CUDA run evaluates on the CPU too.
    from safetensors.torch import load_file

    weights = load_file(str(run / "checkpoints" / "step_12" / "model.safetensors"))
    assert all(v.dtype == torch.float32 for v in weights.values() if v.is_floating_point())
    for device in ("cuda", "cpu"):
        out = tmp_path / f"eval-{device}.json"
        hrm("eval", "--run", str(run), "--mmax", "4", "--device", device, "--json", str(out), "--quiet")
        assert len(json.loads(out.read_text())["exact_accuracy"]) == 4
    # Resume from the step-6 checkpoint reaches the same final step.
    (run / "checkpoints" / "latest").write_text("step_6")
    hrm("train", "--run-dir", str(run), "--resume", "--quiet")
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 12


def test_lm_head_trains_and_generates_on_cuda(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(8):
        (corpus / f"doc{i}.txt").write_text(f"document {i}: " + "the quick brown fox jumps over the lazy dog. " * 30)
    data = tmp_path / "text"
    hrm("build-data", "text", "--input", str(corpus), "--out", str(data))
    run = tmp_path / "lm"
    hrm(
        "train",
        "-c",
        str(REPO / "configs" / "hrm_text_lm_quick.yaml"),
        "--data",
        str(data),
        "--run-dir",
        str(run),
        "--quiet",
        "max_steps=6",
        "eval_every_steps=3",
        "seq_len=32",
        "global_batch_size=4",
        "lr_warmup_steps=2",
        "arch.hidden_size=32",
        "arch.intermediate_size=64",
        "arch.head_dim=16",
        "arch.num_attention_heads=2",
        "device=cuda",
    )
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert torch.isfinite(torch.tensor(last["eval/ce"]))
    out = hrm("generate", "--run", str(run), "--prompt", "the ", "--max-new-tokens", "8", "--device", "cuda").stdout
    assert out.startswith("the ")


def test_bench_on_cuda_reports_bf16_mfu(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    hrm(*bench_args("sudoku_quick.yaml", out, 64, "data_path=/nonexistent", "device=cuda", steps=3, warmup=2))
    figures = json.loads(out.read_text())
    assert figures["device"].startswith("cuda") and figures["dtype"] == "bfloat16"
    assert 0 < figures["mfu"] < 1 and figures["peak_memory_bytes"] > 0
