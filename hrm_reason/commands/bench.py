"""`hrm bench`: training and evaluation speed of any registered model, with model FLOPs counted from the config and
the shapes (each model's count, named in the registry, models/flops.py) and the fraction of this machine's
matrix-product peak (runtime/peak.py: measured before and after the timed steps, the larger kept; a peak below the
model's own rate was disturbed, and gives no MFU). Random tokens of the dataset's shape: no dataset needed.

Puzzle models run full ACT training steps (segment, Q target, backward, the run's optimizer and the puzzle
embedding's SignSGD) and evaluation segments, counted in examples; language-model heads run forward with labels,
backward and the run's optimizer step on windows of seq_len tokens, and forwards without labels, counted in tokens.
The optimizer is the config's (`optimizer`: adam_atan2, adamw or muon), built as `hrm train` builds it.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from hrm_reason.commands.cli_options import overrides, write_json
from hrm_reason.config import TrainConfig, load_config
from hrm_reason.errors import UserError
from hrm_reason.limits import BENCH_SEQ_LEN, BENCH_STEPS, BENCH_VOCAB, BENCH_WARMUP
from hrm_reason.load import puzzle_metadata
from hrm_reason.models import registry
from hrm_reason.models.act import act_loss
from hrm_reason.models.sparse_embedding import SparseSignSGD
from hrm_reason.outputs import BENCH_JSON, claim
from hrm_reason.provenance import provenance
from hrm_reason.runtime.device import autocast_context, resolve_device, synchronize
from hrm_reason.runtime.memory import allocation_errors, check_fits
from hrm_reason.runtime.peak import disturbed_line, matmul_peak, mfu_of
from hrm_reason.train.act import loss_scale_of, optimizer_step
from hrm_reason.train.optim import make_optimizer
from hrm_reason.train.run_memory import run_need

DEFAULT_SEQ_LEN, DEFAULT_VOCAB = 81, 11  # a 9x9 Sudoku's shape, where nothing else gives one


@dataclass
class BenchResult:
    model: str
    unit: str  # "examples" (puzzle models) or "tokens" (language-model heads)
    device: str
    dtype: str
    threads: int
    batch_size: int
    seq_len: int
    q_target: str
    compile: bool
    optimizer: str  # the config's `optimizer`, as `hrm train` builds it (train/optim.py make_optimizer)
    train_examples_per_s: float  # units per second: examples or tokens
    eval_examples_per_s: float  # puzzle models: examples through halt_max_steps segments
    train_flops_per_step: float
    eval_flops_per_segment: float  # one evaluation segment (puzzle) or forward (LM) of the batch
    train_flops_per_s: float
    matmul_peak_flops: float  # the larger of the peaks measured before and after the timed steps
    mfu: float | None  # None: the model ran above the peak, whose measurement was disturbed (no MFU)
    peak_memory_bytes: int  # CUDA: peak allocated; CPU: the process's peak resident set

    def to_dict(self) -> dict:
        """The figures and what measured them (code, libraries, command, host): `hrm bench --json`'s record."""
        return {**asdict(self), "provenance": provenance()}


def _peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def bench(
    config: TrainConfig, batch_size: int | None, seq_len: int | None, vocab_size: int | None, steps: int, warmup: int
) -> BenchResult:
    """`hrm bench`: time `config`'s model on its device, at its global batch size unless `batch_size` is given. The
    counts are bounded (hrm_reason.limits) and a model and batch that cannot fit in the device's memory are refused,
    naming the flag or key that sizes them, before anything is built (train/run_memory.py)."""
    BENCH_STEPS.check(steps)
    BENCH_WARMUP.check(warmup)
    sizes = bench_sizes(config, *shape_flags(config, seq_len, vocab_size), say=False)
    device = resolve_device(config.device)
    batch = batch_size or config.global_batch_size
    key = ("--batch-size", batch) if batch_size is not None else ("global_batch_size", batch)
    need, model = run_need(config, sizes, device, batch, batch, 0)  # the evaluation segments run on the same batch
    culprits = {"model": model, "activations": key, "evaluation": key} | _size_culprits(config, sizes, need)
    check_fits(need, device, culprits)
    if not (registry.family_spec(config.family).segments and puzzle_metadata(config.data_path) is not None):
        print(random_tokens_line(config, sizes), file=sys.stderr)  # a stand-in shape, said once it fits
    with allocation_errors("hrm bench", f"{key[0]} or {culprits['model'][0]}"):
        return run_bench(config, sizes, device, batch, steps, warmup)


def _size_culprits(config: TrainConfig, sizes: dict[str, int], need: Any) -> dict[str, tuple[str, object]]:
    """Without a built dataset the shape is --seq-len's and --vocab-size's: a model too large for one example is
    --seq-len's (an LM head's: the config's seq_len), and one whose weights are mostly token embeddings is
    --vocab-size's, not arch.hidden_size's."""
    if puzzle_metadata(config.data_path) is not None and registry.family_spec(config.family).segments:
        return {}
    segments = registry.family_spec(config.family).segments
    culprits: dict[str, tuple[str, object]] = {"example": ("--seq-len" if segments else "seq_len", sizes["seq_len"])}
    hidden = getattr(config.arch, "hidden_size", None)
    if hidden is not None and 2 * sizes["vocab_size"] * hidden * 4 > need.weights / 2:  # embedding and output rows
        culprits["model"] = ("--vocab-size", sizes["vocab_size"])
    return culprits


def shape_flags(config: TrainConfig, seq_len: int | None, vocab_size: int | None) -> tuple[int, int]:
    """--seq-len and --vocab-size (None: not given) where they apply, bounded, with their defaults (a 9x9 Sudoku's); one
    given where the shape comes from elsewhere is refused, since it would be ignored: a puzzle model's built dataset
    gives both, an LM head's windows are the config's seq_len."""
    segments = registry.family_spec(config.family).segments
    built = segments and puzzle_metadata(config.data_path) is not None
    if seq_len is not None and (built or not segments):
        why = f"the built dataset {config.data_path} gives the shape" if built else "an LM head's windows are seq_len=N"
        raise UserError(f"--seq-len {seq_len}: not used ({why})")
    if vocab_size is not None and built:
        raise UserError(f"--vocab-size {vocab_size}: not used (the built dataset {config.data_path} gives the shape)")
    BENCH_SEQ_LEN.check(seq_len)
    BENCH_VOCAB.check(vocab_size)
    return (DEFAULT_SEQ_LEN if seq_len is None else seq_len), (DEFAULT_VOCAB if vocab_size is None else vocab_size)


def bench_sizes(config: TrainConfig, seq_len: int, vocab_size: int, say: bool = True) -> dict[str, int]:
    """The shape of a puzzle model's dataset when it is built; else random tokens of `vocab_size`, in sequences of
    `seq_len` for a puzzle model and in windows of the config's seq_len for a language-model head (said on stderr with
    `say`: hrm bench says it once the batch is known to fit, so that a refusal is its one line alone)."""
    segments = registry.family_spec(config.family).segments
    meta = puzzle_metadata(config.data_path) if segments else None
    if meta is not None:
        return dict(
            seq_len=meta.seq_len, vocab_size=meta.vocab_size, num_puzzle_identifiers=meta.num_puzzle_identifiers
        )
    sizes = dict(seq_len=seq_len if segments else config.seq_len, vocab_size=vocab_size, num_puzzle_identifiers=1)
    if say:
        print(random_tokens_line(config, sizes), file=sys.stderr)
    return sizes


def random_tokens_line(config: TrainConfig, sizes: dict[str, int]) -> str:
    """What bench_sizes says of a shape of random tokens."""
    why = f" ({config.data_path} is not built)" if registry.family_spec(config.family).segments else ""
    return f"random tokens of seq_len {sizes['seq_len']}, vocab {sizes['vocab_size']}{why}"


def run_bench(
    config: Any, sizes: dict[str, int], device: torch.device, batch_size: int, steps: int, warmup: int
) -> BenchResult:
    """Time `config`'s model (any model family) on random tokens of `sizes` (seq_len, vocab_size,
    and num_puzzle_identifiers for a puzzle model)."""
    measure = _bench_act if registry.family_spec(config.family).segments else _bench_lm
    model, unit, units, dtype, train_step, eval_step, flops, eval_repeat, q_target = measure(
        config, sizes, device, batch_size
    )
    before = matmul_peak(device, dtype)
    train_time = _timed(train_step, steps, warmup, device)
    eval_time = eval_repeat * _timed(eval_step, steps, warmup, device)
    peak = max(before, matmul_peak(device, dtype))  # a measurement that met other work is the lower one
    train_flops, eval_flops = flops.train_step * units, _eval_flops(flops) * units
    achieved = train_flops / train_time
    return BenchResult(
        model=model.config.name,
        unit=unit,
        device=str(device),
        dtype=str(dtype).removeprefix("torch."),
        threads=torch.get_num_threads(),
        batch_size=batch_size,
        seq_len=sizes["seq_len"],
        q_target=q_target,
        compile=getattr(config, "compile", False),
        optimizer=config.optimizer,
        train_examples_per_s=units / train_time,
        eval_examples_per_s=units / eval_time,
        train_flops_per_step=train_flops,
        eval_flops_per_segment=eval_flops,
        train_flops_per_s=achieved,
        matmul_peak_flops=peak,
        mfu=mfu_of(achieved, peak),
        peak_memory_bytes=_peak_memory(device),
    )


def _eval_flops(flops: Any) -> float:
    return flops.segment if hasattr(flops, "segment") else flops.forward


def _bench_act(config: Any, sizes: dict[str, int], device: torch.device, batch_size: int) -> tuple:
    """Full training steps (segment, Q target, backward, both optimizers) and evaluation segments: the same code path
    as `hrm train`."""
    model = registry.build(config.arch, sizes, device, seed=config.seed)
    if config.compile:
        model.compile_core()
    optimizer = make_optimizer(config, model, device)
    sparse = (
        SparseSignSGD(model.puzzle_emb, config.puzzle_emb_lr, config.puzzle_emb_weight_decay)
        if model.puzzle_emb is not None
        else None
    )
    g = torch.Generator().manual_seed(config.seed)
    shape = (batch_size, sizes["seq_len"])
    batch = {
        "inputs": torch.randint(1, sizes["vocab_size"], shape, generator=g, dtype=torch.int32).to(device),
        "labels": torch.randint(1, sizes["vocab_size"], shape, generator=g, dtype=torch.int32).to(device),
        "puzzle_identifiers": torch.randint(
            0, sizes["num_puzzle_identifiers"], (batch_size,), generator=g, dtype=torch.int32
        ).to(device),
    }
    explore = torch.Generator(device=device).manual_seed(config.seed)
    state = {"train": model.empty_carry(batch), "eval": model.empty_carry(batch)}

    def train_step() -> None:
        model.train()
        state["train"], out = model(state["train"], batch, generator=explore)
        carry = state["train"]
        loss, _ = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, config.arch.loss.loss_type)
        (loss * loss_scale_of(batch_size, 1)).backward()
        optimizer_step(optimizer, sparse, config.lr, config.puzzle_emb_lr)

    @torch.no_grad()
    def eval_segment() -> None:
        model.eval()
        state["eval"], _ = model(state["eval"], batch, halt_max_steps=10**9)

    flops = registry.flop_count(model.config)
    return (
        model,
        "examples",
        batch_size,
        model.config.dtype,
        train_step,
        eval_segment,
        flops,
        config.arch.halt_max_steps,
        model.config.q_target,
    )


def _bench_lm(config: Any, sizes: dict[str, int], device: torch.device, batch_size: int) -> tuple:
    """Training steps (forward with labels, backward, the run's optimizer) and forwards on windows of seq_len tokens,
    bf16 autocast on CUDA as `hrm train` runs a head."""
    model = registry.build_lm(config.arch, sizes["vocab_size"], device, config.seed)
    optimizer = make_optimizer(config, model, device)
    g = torch.Generator().manual_seed(config.seed)
    input_ids = torch.randint(0, sizes["vocab_size"], (batch_size, sizes["seq_len"]), generator=g).to(device)
    autocast = lambda: autocast_context(device, config.forward_dtype)  # noqa: E731

    def train_step() -> None:
        model.train()
        with autocast():
            loss = model(input_ids, labels=input_ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    @torch.no_grad()
    def forward() -> None:
        model.eval()
        with autocast():
            model(input_ids)

    bf16 = device.type == "cuda" and config.forward_dtype != "float32"
    flops = registry.flop_count(model.config, sizes["seq_len"])
    return (
        model,
        "tokens",
        batch_size * sizes["seq_len"],
        torch.bfloat16 if bf16 else torch.float32,
        train_step,
        forward,
        flops,
        1,
        "-",
    )


def _timed(fn: Callable[[], None], repeats: int, warmup: int, device: torch.device) -> float:
    """Seconds per call after `warmup` calls (which also absorb any compile time)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    synchronize(device)
    return (time.perf_counter() - t0) / repeats


def format_result(r: BenchResult) -> str:
    evaluation = "full segments" if r.unit == "examples" else "forwards"
    return "\n".join(
        [
            f"{r.model} on device {r.device} ({r.dtype}, {r.threads} threads), batch {r.batch_size}, seq {r.seq_len}, "
            f"q_target {r.q_target}, compile {r.compile}, optimizer {r.optimizer}",
            f"train: {r.train_examples_per_s:.2f} {r.unit}/s, {r.train_flops_per_step / 1e9:.3f} GFLOP/step, "
            f"{r.train_flops_per_s / 1e9:.1f} GFLOP/s",
            f"eval:  {r.eval_examples_per_s:.2f} {r.unit}/s ({r.eval_flops_per_segment / 1e9:.3f} GFLOP {evaluation})",
            disturbed_line(r.train_flops_per_s, r.matmul_peak_flops)
            if r.mfu is None
            else f"matmul peak {r.matmul_peak_flops / 1e9:.1f} GFLOP/s measured now; MFU {100 * r.mfu:.1f}%",
            f"peak memory {r.peak_memory_bytes / 2**20:.0f} MiB",
        ]
    )


def bench_command(
    config_path: Path,
    args: list[str],
    json_out: Path | None,
    batch_size: int | None,
    seq_len: int | None,
    vocab_size: int | None,
    steps: int,
    warmup: int,
) -> Iterator[str]:
    """`hrm bench`: --json claimed first, then `config_path` with the key=value `args` measured; yields the figures,
    then where --json went."""
    claim(json_out, BENCH_JSON)
    result = bench(load_config(config_path, overrides(args, "bench")), batch_size, seq_len, vocab_size, steps, warmup)
    yield format_result(result)
    if json_out is not None:
        yield write_json(json_out, result.to_dict())
