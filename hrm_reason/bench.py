"""`hrm bench`: training and evaluation speed of a config, with model FLOPs counted from the shapes and the fraction
of this machine's matrix-product peak (measured in the same run).

FLOPs count multiply-adds as 2 and cover what is computed, gradient-free passes included: per segment
H_cycles * L_cycles applications of the L module and H_cycles of the H module; a training step adds the backward of
the last L and H applications and of the output head (2x their forward), and with q_target=extra_forward one more
segment for the Q target. Token embedding, norms, rotary and element-wise work are left out (they are not matmuls).
"""

from __future__ import annotations

import resource
import time
from dataclasses import asdict, dataclass

import torch

from hrm_reason.act_train import optimizer_step
from hrm_reason.config import TrainConfig
from hrm_reason.data import PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.losses import act_loss
from hrm_reason.models.hrm import HRM
from hrm_reason.models.layers import swiglu_intermediate_size
from hrm_reason.models.registry import build_model
from hrm_reason.models.sparse_embedding import SparseSignSGD
from hrm_reason.optim import make_adam_atan2
from hrm_reason.runtime.device import compile_model


@dataclass
class BenchResult:
    device: str
    dtype: str
    threads: int
    batch_size: int
    seq_len: int
    q_target: str
    compile: bool
    train_examples_per_s: float
    eval_examples_per_s: float  # examples through halt_max_steps segments
    train_flops_per_step: float
    eval_flops_per_segment: float
    train_flops_per_s: float
    matmul_peak_flops: float
    mfu: float
    peak_memory_bytes: int  # CUDA: peak allocated; CPU: the process's peak resident set

    def to_dict(self) -> dict:
        return asdict(self)


def layer_flops_per_token(hidden: int, expansion: float, seq_len: int) -> int:
    """One post-norm block: fused QKV, output projection, SwiGLU (fused gate/up, down), and attention scores/values."""
    inter = swiglu_intermediate_size(hidden, expansion)
    projections = hidden * 3 * hidden + hidden * hidden + hidden * 2 * inter + inter * hidden
    attention = 2 * seq_len * hidden  # q.k over seq_len keys, then the weighted sum of values
    return 2 * (projections + attention)


def hrm_flops(model: HRM, batch_size: int) -> tuple[float, float]:
    """(FLOPs of one training step, FLOPs of one evaluation segment) for a batch."""
    c = model.config
    tokens = batch_size * (c.seq_len + model.inner.puzzle_emb_len)
    layer = layer_flops_per_token(c.hidden_size, c.expansion, c.seq_len + model.inner.puzzle_emb_len) * tokens
    L_app, H_app = c.L_layers * layer, c.H_layers * layer
    head = 2 * c.hidden_size * c.vocab_size * batch_size * c.seq_len
    segment = c.H_cycles * c.L_cycles * L_app + c.H_cycles * H_app + head
    backward = 2 * (L_app + H_app + head)
    target = segment if c.q_target == "extra_forward" and c.halt_max_steps > 1 else 0
    return float(segment + backward + target), float(segment)


def matmul_peak(device: torch.device, dtype: torch.dtype, seconds: float = 2.0) -> float:
    """Best FLOP/s of a large square matrix product in the model's compute dtype, on this device, now."""
    n = 4096 if device.type == "cuda" else 1536
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best, start = 0.0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(4):
            a @ b
        _sync(device)
        best = max(best, 4 * 2 * n**3 / (time.perf_counter() - t0))
    return best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def run_bench(config: TrainConfig, metadata: PuzzleDatasetMetadata, device: torch.device, batch_size: int, steps: int,
              warmup: int) -> BenchResult:
    """Full training steps (segment, Q target, backward, both optimizers) and evaluation segments on random tokens of
    the dataset's shape: no dataset needed, the same code path as `hrm train`."""
    model = build_model(config.arch, metadata, device, seed=config.seed)
    if not isinstance(model, HRM):
        raise UserError(f"arch.name={config.arch.name}: hrm bench counts FLOPs for the hrm architecture only")
    if config.compile:
        compile_model(model)
    optimizer = make_adam_atan2(model.parameters(), lr=config.lr, betas=(config.beta1, config.beta2), weight_decay=config.weight_decay, device=device)
    sparse = SparseSignSGD(model.puzzle_emb, config.puzzle_emb_lr, config.puzzle_emb_weight_decay) if model.puzzle_emb is not None else None
    g = torch.Generator().manual_seed(config.seed)
    shape = (batch_size, metadata.seq_len)
    batch = {
        "inputs": torch.randint(1, metadata.vocab_size, shape, generator=g, dtype=torch.int32).to(device),
        "labels": torch.randint(1, metadata.vocab_size, shape, generator=g, dtype=torch.int32).to(device),
        "puzzle_identifiers": torch.randint(0, metadata.num_puzzle_identifiers, (batch_size,), generator=g, dtype=torch.int32).to(device),
    }
    explore = torch.Generator(device=device).manual_seed(config.seed)

    model.train()
    carry = model.initial_carry(batch)

    def train_step() -> None:
        nonlocal carry
        carry, out = model(carry, batch, generator=explore)
        loss, _ = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, config.arch.loss.loss_type)
        optimizer_step(loss, optimizer, sparse, batch_size, 1, config.lr, config.puzzle_emb_lr)

    train_time = _timed(train_step, steps, warmup, device)

    model.eval()
    eval_carry = model.initial_carry(batch)

    @torch.no_grad()
    def eval_segment() -> None:
        nonlocal eval_carry
        eval_carry, _ = model(eval_carry, batch, halt_max_steps=10**9)

    eval_time = config.arch.halt_max_steps * _timed(eval_segment, steps, warmup, device)
    train_flops, eval_flops = hrm_flops(model, batch_size)
    dtype = model.inner.forward_dtype
    peak = matmul_peak(device, dtype)
    achieved = train_flops / train_time
    return BenchResult(
        device=str(device), dtype=str(dtype).removeprefix("torch."), threads=torch.get_num_threads(), batch_size=batch_size,
        seq_len=metadata.seq_len, q_target=config.arch.q_target, compile=config.compile,
        train_examples_per_s=batch_size / train_time, eval_examples_per_s=batch_size / eval_time,
        train_flops_per_step=train_flops, eval_flops_per_segment=eval_flops, train_flops_per_s=achieved,
        matmul_peak_flops=peak, mfu=achieved / peak, peak_memory_bytes=_peak_memory(device),
    )


def _timed(fn, repeats: int, warmup: int, device: torch.device) -> float:  # type: ignore[no-untyped-def]
    """Seconds per call after `warmup` calls (which also absorb any compile time)."""
    for _ in range(warmup):
        fn()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / repeats


def format_result(r: BenchResult) -> str:
    return "\n".join([
        f"device {r.device} ({r.dtype}, {r.threads} threads), batch {r.batch_size}, seq {r.seq_len}, "
        f"q_target {r.q_target}, compile {r.compile}",
        f"train: {r.train_examples_per_s:.2f} examples/s, {r.train_flops_per_step / 1e9:.1f} GFLOP/step, "
        f"{r.train_flops_per_s / 1e9:.1f} GFLOP/s",
        f"eval:  {r.eval_examples_per_s:.2f} examples/s (full {r.eval_flops_per_segment / 1e9:.1f} GFLOP segments)",
        f"matmul peak {r.matmul_peak_flops / 1e9:.1f} GFLOP/s measured now; MFU {100 * r.mfu:.1f}%",
        f"peak memory {r.peak_memory_bytes / 2**20:.0f} MiB",
    ])
