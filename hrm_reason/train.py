"""The training loop: one ACT segment per optimizer step (deep supervision), periodic evaluation, checkpoints, resume.

Step accounting follows the original: total steps = epochs * groups * mean examples per puzzle / global batch, run as
epochs / eval_interval iterations with an evaluation and a checkpoint after each. Halted batch slots are refilled
from the loader; the others keep their example and detached state for the next step.
Under torchrun each process takes its slice of the global batch and gradients are summed across processes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from hrm_reason.atomic import atomic_write_text
from hrm_reason.checkpoint import (
    STATE,
    find_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from hrm_reason.config import TrainConfig, save_config
from hrm_reason.data import (
    Batch,
    PuzzleSplit,
    TrainSampler,
    load_split,
    total_train_steps,
)
from hrm_reason.ema import ema_for_training, ema_weights
from hrm_reason.errors import UserError
from hrm_reason.evaluate import EvalResult, evaluate
from hrm_reason.models.act import act_loss
from hrm_reason.models.registry import build_model
from hrm_reason.models.sparse_embedding import SparseSignSGD
from hrm_reason.optim import cosine_schedule_with_warmup, make_adam_atan2
from hrm_reason.tasks import task_metrics


class TrainingDiverged(UserError):
    pass


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device=cuda was asked for but CUDA is not available; use device=cpu or device=auto")
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def default_run_dir(config: TrainConfig) -> Path:
    return Path("runs") / f"{Path(config.data_path).name}-{config.arch.name}-seed{config.seed}"


class MetricsLog:
    """metrics.jsonl: one flat JSON object per logged step or evaluation, appended and flushed."""

    def __init__(self, path: Path, resume_step: int | None) -> None:
        self.path = path
        if resume_step is not None and path.exists():
            # Drop what was logged after the checkpoint we resume from, so the log matches the run.
            kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= resume_step]
            atomic_write_text(path, "".join(line + "\n" for line in kept))
        elif resume_step is None:
            atomic_write_text(path, "")
        self.file = path.open("a")

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class ExternalLogger:
    """wandb or tensorboard, only when installed and asked for."""

    def __init__(self, kind: str, config: TrainConfig, run_dir: Path) -> None:
        self.kind, self.impl = kind, None
        if kind == "wandb":
            try:
                import wandb  # type: ignore[import-not-found]
            except ImportError:
                raise UserError("logger=wandb but wandb is not installed (pip install 'hrm-reason[wandb]')") from None
            self.impl = wandb.init(project=config.project_name or "hrm-reason", name=config.run_name or run_dir.name, config=config.model_dump(), dir=str(run_dir))
        elif kind == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise UserError("logger=tensorboard but tensorboard is not installed (pip install 'hrm-reason[tensorboard]')") from None
            self.impl = SummaryWriter(str(run_dir / "tensorboard"))

    def log(self, record: dict[str, Any]) -> None:
        if self.impl is None:
            return
        step = record["step"]
        values = {k: v for k, v in record.items() if k != "step" and isinstance(v, (int, float))}
        if self.kind == "wandb":
            self.impl.log(values, step=step)
        else:
            for k, v in values.items():
                self.impl.add_scalar(k, v, step)

    def close(self) -> None:
        if self.impl is not None:
            self.impl.finish() if self.kind == "wandb" else self.impl.close()


class StopRequest:
    """First Ctrl-C asks the loop to stop after the current step and checkpoint; a second one stops at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> StopRequest:
        def handler(signum: int, frame: Any) -> None:
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True

        try:
            self._previous = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not in the main thread
            self._previous = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _flatten_carry(obj: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Nested dataclasses / dicts of tensors -> {"inner_carry.z_H": tensor, ...} (None fields are skipped)."""
    if isinstance(obj, torch.Tensor):
        return {prefix[:-1]: obj}
    if obj is None:
        return {}
    items = obj.items() if isinstance(obj, dict) else ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj))
    flat: dict[str, torch.Tensor] = {}
    for name, value in items:
        flat.update(_flatten_carry(value, f"{prefix}{name}."))
    return flat


def _fill_carry(template: Any, flat: dict[str, torch.Tensor], device: torch.device) -> Any:
    """Write saved tensors into a carry of the same structure (made by model.initial_carry on the first batch)."""
    for name, value in flat.items():
        *parents, leaf = name.split(".")
        obj = template
        for part in parents:
            obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
        if isinstance(obj, dict):
            obj[leaf] = value.to(device)
        else:
            setattr(obj, leaf, value.to(device))
    return template


def _global_carry_state(flat: dict[str, torch.Tensor] | None, world_size: int) -> dict[str, torch.Tensor] | None:
    """The carry of the whole global batch (rank slices concatenated in rank order), so that a run can resume on a
    different number of processes. Collective: every rank must call it."""
    if flat is None or world_size == 1:
        return flat
    parts: list[Any] = [None] * world_size
    dist.all_gather_object(parts, flat)
    return {k: torch.cat([part[k] for part in parts]) for k in flat}


def _local_carry_state(state: dict[str, torch.Tensor], rank: int, world_size: int) -> dict[str, torch.Tensor]:
    return {k: v.chunk(world_size)[rank] for k, v in state.items()}


def exploration_generator(generator: torch.Generator, seed: int, step: int, rank: int) -> torch.Generator:
    """Re-seed the ACT exploration draws from (seed, step, rank): no RNG state to save, any resume point reproduces."""
    return generator.manual_seed(int(np.random.SeedSequence([seed, step, rank]).generate_state(1, np.uint64)[0] >> 1))


def prefetch(batches: Iterator[Batch], device: torch.device, depth: int = 2) -> Iterator[Batch]:
    """Collate the next batches on a background thread while the current step runs; on CUDA they are pinned and
    copied asynchronously. Same batches, same order."""
    ready: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def work() -> None:
        try:
            for batch in batches:
                if device.type == "cuda":
                    batch = {k: v.pin_memory() for k, v in batch.items()}
                if not put(batch):
                    return
            put(done)
        except BaseException as e:  # handed to the consumer, raised there
            put(e)

    threading.Thread(target=work, daemon=True, name="hrm-prefetch").start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield {k: v.to(device, non_blocking=True) for k, v in item.items()}
    finally:
        stop.set()


def compile_model(model: torch.nn.Module) -> None:
    """torch.compile the recurrent core in place (its parameter names, hence checkpoints, are unchanged); the ACT
    bookkeeping around it stays eager."""
    getattr(model, "inner", model).compile()


def _flat_eval(result: EvalResult, halt_max_steps: int) -> dict[str, float]:
    """eval/* keys at the trained number of segments, as the original's periodic evaluation reports them."""
    m = min(halt_max_steps, result.mmax) - 1
    return {
        "eval/count": result.count,
        "eval/exact_accuracy": result.exact_accuracy[m],
        "eval/accuracy": result.token_accuracy[m],
        "eval/lm_loss": result.lm_loss,
        "eval/q_halt_accuracy": result.q_halt_accuracy,
        "eval/act_exact_accuracy": result.act_exact_accuracy,
        "eval/steps": result.act_mean_segments,
        **{f"eval/{name}": v[m] if isinstance(v, list) else v for name, v in result.extra.items() if isinstance(v, (list, float, int))},
    }


def train(config: TrainConfig, resume: bool = False, progress: bool = True) -> Path:
    """Train (or resume) a run; returns the run directory."""
    distributed = "LOCAL_RANK" in os.environ
    rank, world_size, local_rank = 0, 1, int(os.environ.get("LOCAL_RANK", 0))
    if distributed:
        backend = "nccl" if torch.cuda.is_available() and config.device != "cpu" else "gloo"
        dist.init_process_group(backend)
        rank, world_size = dist.get_rank(), dist.get_world_size()
    device = resolve_device(config.device, local_rank)
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)

    train_split = load_split(config.data_path, "train")
    test_split = load_split(config.data_path, "test")
    _check_compatible(train_split, test_split)
    meta = train_split.metadata

    total_steps = total_train_steps(meta, config.epochs, config.global_batch_size)
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    if total_steps < 1:
        raise UserError(f"{config.data_path}: the run has no step: epochs * groups / global_batch_size < 1 (lower global_batch_size)")
    total_iters = config.epochs // config.eval_interval
    sampler = TrainSampler(train_split, config.global_batch_size, config.eval_interval, config.seed, rank, world_size)

    if not resume and run_dir.exists() and any(run_dir.iterdir()):
        raise UserError(f"run directory {run_dir} is not empty: pass --resume to continue it, or choose another --run-dir")
    model = build_model(config.arch, meta, device, config.seed)
    model_config = model.config.model_dump()
    step, iteration, batch_in_iter, carry_state, train_seconds = 0, 0, 0, None, 0.0
    optimizer = make_adam_atan2(model.parameters(), lr=config.lr, betas=(config.beta1, config.beta2), weight_decay=config.weight_decay, device=device)
    if resume:
        ckpt = find_checkpoint(run_dir)
        load_checkpoint(model, ckpt)
        state = torch.load(ckpt / STATE, map_location="cpu", weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        step, iteration, batch_in_iter = state["step"], state["iteration"], state["batch_in_iter"]
        carry_state = state["carry"] and _local_carry_state(state["carry"], rank, world_size)
        train_seconds = state.get("train_seconds", 0.0)
    ema = ema_for_training(model, config.ema, state if resume else None)
    if distributed:
        for t in model.buffers():  # the puzzle embedding table is a buffer; DDP broadcasts the parameters
            dist.broadcast(t.data, src=0)
    sparse_opt = SparseSignSGD(model.puzzle_emb, config.puzzle_emb_lr, config.puzzle_emb_weight_decay) if model.puzzle_emb is not None else None
    if config.compile:
        compile_model(model)
    # DDP averages gradients in buckets while the backward runs; buffers (the puzzle embedding table, kept in step
    # by the sparse optimizer's all_gather) are not re-broadcast on every forward.
    train_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, broadcast_buffers=False) if distributed else model
    generator = torch.Generator(device=device)
    carry = None

    is_main = rank == 0
    if is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(config.model_copy(update={"run_dir": str(run_dir)}), run_dir / "config.yaml")
        metrics = MetricsLog(run_dir / "metrics.jsonl", step if resume else None)
        external = ExternalLogger(config.logger, config, run_dir)
        if not resume:
            num_params = sum(p.numel() for p in model.parameters())
            metrics.write({"step": 0, "num_params": num_params})

    def checkpoint() -> None:
        # Before the first step of a resumed run the carry is still the loaded one.
        local = carry_state if carry is None else {k: v.detach().cpu() for k, v in _flatten_carry(carry).items()}
        carry_global = _global_carry_state(local, world_size)
        if is_main:
            state = {"optimizer": optimizer.state_dict(), "step": step, "iteration": iteration, "batch_in_iter": batch_in_iter,
                     "carry": carry_global, "train_seconds": train_seconds, **(ema.checkpoint_state(model) if ema else {})}
            with ema_weights(ema, model):
                save_checkpoint(run_dir, step, model, model_config, state)

    def run_eval() -> None:
        eval_bs = config.eval_global_batch_size or config.global_batch_size
        with ema_weights(ema, model):
            result = evaluate(model, test_split, config.arch.halt_max_steps, eval_bs, device, config.arch.loss.loss_type,
                              config.eval_max_examples, rank, world_size, progress=progress and is_main,
                              metrics=task_metrics(test_split, config.arch.halt_max_steps))
        if is_main:
            record = {"step": step, **_flat_eval(result, config.arch.halt_max_steps)}
            metrics.write(record)
            external.log(record)
            tqdm.write(f"step {step}: eval exact_accuracy {record['eval/exact_accuracy']:.4f}, token accuracy {record['eval/accuracy']:.4f}")

    bar = tqdm(total=total_steps, initial=step, desc="train", unit="step", disable=not (progress and is_main), dynamic_ncols=True)
    examples_seen, t0 = 0, time.perf_counter()
    model.train()
    stopped = False
    clock = time.process_time if config.budget_clock == "cpu" else time.perf_counter
    out_of_time = config.max_seconds is not None and train_seconds >= config.max_seconds
    try:
        with StopRequest() as stop:
            while iteration < total_iters and step < total_steps and not stopped and not out_of_time:
                for batch in prefetch(sampler.batches(iteration, batch_in_iter), device):
                    if step >= total_steps:
                        break
                    step_start = clock()
                    if carry is None:
                        carry = model.initial_carry(batch)
                        if carry_state is not None:
                            carry = _fill_carry(carry, carry_state, device)
                    position: float = step + 1
                    if config.schedule_over == "seconds":  # the share of the time budget spent, in steps of the schedule
                        position = max(position, total_steps * train_seconds / config.max_seconds)
                    lr_this = cosine_schedule_with_warmup(position, config.lr, config.lr_warmup_steps, total_steps, config.lr_min_ratio)
                    emb_lr = cosine_schedule_with_warmup(position, config.puzzle_emb_lr, config.lr_warmup_steps, total_steps, config.lr_min_ratio)

                    new_carry, outputs = train_model(carry, batch, generator=exploration_generator(generator, config.seed, step, rank))
                    loss, m = act_loss(outputs, new_carry.current_data["labels"], new_carry.halted, new_carry.steps, config.arch.loss.loss_type)
                    # Every process must take the same branch (stop, or fail) or the others wait forever.
                    time_up = config.max_seconds is not None and train_seconds + clock() - step_start >= config.max_seconds
                    flags = torch.stack([~torch.isfinite(loss.detach()), torch.tensor(stop.requested, device=loss.device),
                                         torch.tensor(time_up, device=loss.device)]).float()
                    if world_size > 1:
                        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
                    diverged, stop_now, time_up = flags.tolist()
                    if diverged:
                        raise TrainingDiverged(
                            f"loss became {loss.item()} at step {step + 1}; stopped without saving this step. "
                            f"The last good checkpoint is kept in {run_dir / 'checkpoints'} (try a lower lr)"
                        )
                    optimizer_step(loss, optimizer, sparse_opt, config.global_batch_size, world_size, lr_this, emb_lr)
                    if ema is not None:
                        ema.update(model)
                    train_seconds += clock() - step_start

                    carry = new_carry
                    step += 1
                    batch_in_iter += 1
                    examples_seen += config.global_batch_size
                    record = _train_record(m, step, lr_this, config.global_batch_size, world_size)
                    if is_main:
                        metrics.write(record)
                        external.log(record)
                        rate = examples_seen / (time.perf_counter() - t0)
                        bar.set_postfix(loss=f"{record['train/lm_loss']:.3f}", exact=f"{record.get('train/exact_accuracy', 0):.3f}",
                                        segs=f"{record.get('train/steps', 0):.1f}", ex_s=f"{rate:.0f}", refresh=False)
                        bar.update(1)
                    if stop_now:
                        stopped = True
                        break
                    if time_up:
                        out_of_time = True
                        break
                    if config.checkpoint_every_steps and step % config.checkpoint_every_steps == 0:
                        checkpoint()
                else:
                    iteration, batch_in_iter = iteration + 1, 0
                    run_eval()
                    if config.checkpoint_every_eval or iteration >= total_iters:
                        checkpoint()
                    continue
                break
            if stopped:
                checkpoint()
                if is_main:
                    tqdm.write(f"stopped at step {step}; checkpoint written. Resume with: hrm train --run-dir {run_dir} --resume", file=sys.stderr)
            elif (step >= total_steps or out_of_time) and batch_in_iter > 0:
                # The step cap or the time budget ended the run inside an iteration: evaluate and save the final state.
                run_eval()
                checkpoint()
    finally:
        bar.close()
        if is_main:
            metrics.close()
            external.close()
        if distributed:
            dist.destroy_process_group()
    if stopped:
        raise KeyboardInterrupt
    return run_dir


def optimizer_step(
    loss: torch.Tensor, optimizer: torch.optim.Optimizer, sparse_opt: SparseSignSGD | None,
    global_batch_size: int, world_size: int, lr: float, puzzle_emb_lr: float,
) -> None:
    """Backward of the summed loss as a mean over the global batch (under DDP, which averages gradients over the
    processes, each process's share is scaled up by the world size), then both optimizers."""
    (loss * (world_size / global_batch_size)).backward()
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if sparse_opt is not None:
        sparse_opt.lr = puzzle_emb_lr
        sparse_opt.step()
        sparse_opt.zero_grad()


def _train_record(m: dict[str, torch.Tensor], step: int, lr: float, global_batch_size: int, world_size: int) -> dict[str, Any]:
    keys = sorted(m)
    values = torch.stack([m[k].double() for k in keys])
    if world_size > 1:
        dist.all_reduce(values)
    stats = dict(zip(keys, values.tolist()))
    count = stats.pop("count")
    record: dict[str, Any] = {"step": step, "train/lr": lr, "train/count": count}
    for k, v in stats.items():
        if k.endswith("loss"):
            record[f"train/{k}"] = v / global_batch_size
        elif count > 0:
            record[f"train/{k}"] = v / count
    return record


def _check_compatible(train: PuzzleSplit, test: PuzzleSplit) -> None:
    a, b = train.metadata, test.metadata
    for field in ("seq_len", "vocab_size", "num_puzzle_identifiers"):
        if getattr(a, field) != getattr(b, field):
            raise UserError(f"{test.path / 'dataset.json'}: {field} {getattr(b, field)} differs from train's {getattr(a, field)}")
