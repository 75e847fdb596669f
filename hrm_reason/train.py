"""The one training loop of every model family: run directory, resume, budgets, logging, stop and divergence
handling, checkpoint and evaluation cadence, torchrun. What differs per family sits behind `TrainTask`
(act_train.ACTTask: the ACT carry, SignSGD for the puzzle table, the ACT loss; lm_train.LMTask: text windows or
PrefixLM puzzle sequences, gradient clipping).

A run is a sequence of rounds, each a stream of batches, one optimizer step per batch. The loop evaluates (and
checkpoints) after each round, every `eval_every_steps` steps, and when a budget (max_steps, max_seconds) ends the run
inside a round. The puzzle family's rounds are the original's iterations of `eval_interval` epochs; an LM run is one
round. Under torchrun each process takes its slice of the global batch and DDP averages the gradients.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from hrm_reason.checkpoint import find_checkpoint, prune_checkpoints, read_state, save_checkpoint
from hrm_reason.config import TrainConfig, save_config
from hrm_reason.ema import ema_for_training, ema_weights
from hrm_reason.errors import UserError
from hrm_reason.optim import lr_at
from hrm_reason.provenance import record_peak, record_provenance
from hrm_reason.runtime.clock import RunClock
from hrm_reason.runtime.device import compile_model, resolve_device
from hrm_reason.runtime.distributed import Processes, any_rank, processes
from hrm_reason.runtime.lock import LOCK, RunLock, is_stale_temporary
from hrm_reason.runtime.logs import RunLog
from hrm_reason.runtime.stop import StopRequest, signal_name


class TrainingDiverged(UserError):
    pass


class TrainTask(Protocol):
    """One model family's part of a run. Built with the model (seeded), its data and its optimizers."""

    model: nn.Module  # the bare model: checkpoints, EMA and evaluation use it; training calls the DDP wrapper
    optimizer: torch.optim.Optimizer
    total_steps: int
    total_rounds: int
    train_flops_per_step: float | None  # model FLOPs of one optimizer step on the global batch (models/flops.py)

    def batches(self, round: int, start: int) -> Iterator[Any]:
        """The batches of round `round` from its `start`-th on, on the device, this process's slice."""

    def forward(self, train_model: nn.Module, batch: Any, step: int, progress: float = 0.0) -> tuple[torch.Tensor, Any]:
        """(loss, outputs) of training step `step` (0-based), `progress` of the run done (run_progress)."""

    def optimizer_step(self, loss: torch.Tensor, position: float) -> dict[str, float]:
        """Backward and the optimizers' steps at schedule position `position`; returns the lr and what to log."""

    def record(
        self, step: int, loss: torch.Tensor, outputs: Any, logged: dict[str, float], seconds: float
    ) -> dict[str, Any]:
        """The metrics.jsonl record of a step (reduced across processes: collective)."""

    def evaluate(self, step: int, progress: bool) -> tuple[dict[str, Any], str]:
        """(the eval record, one line for the console); collective under torchrun."""

    def load_weights(self, ckpt: Path) -> None: ...

    def state(self) -> dict[str, Any]:
        """The family's part of state.pt (collective: the puzzle carry is gathered from every process)."""

    def load_state(self, state: dict[str, Any]) -> None: ...

    def first_record(self) -> dict[str, Any]:
        """Step 0 of metrics.jsonl: sizes of the model and the data."""

    def saved_config(self) -> TrainConfig:
        """The config written to the run directory (with what the data resolved, e.g. the LM vocabulary)."""

    def model_config(self) -> dict[str, Any]:
        """The model config written into the weights' header."""

    def write_run_files(self, run_dir: Path) -> None:
        """Files beside config.yaml (the tokenizer of a text dataset)."""

    def postfix(self, record: dict[str, Any], rate: float) -> dict[str, str]: ...


# A run whose training took this long (in one start or resume) measures the machine's fp32 matrix-product peak at its
# end (about a second) and records it in run.json, so that its times can be scaled to another machine; shorter runs
# (tests, smoke runs) skip it. docs/training.md, "Time to accuracy".
PEAK_AFTER_SECONDS = 30.0


def flops_or_none(count: Callable[[], float], model_name: str) -> float | None:
    """Training FLOPs per step, or None for a model registered without its FLOP count: it still trains."""
    try:
        return count()
    except UserError as e:
        print(f"warning: {e}: training FLOPs are not logged for arch.name {model_name}", file=sys.stderr)
        return None


def default_run_dir(config: TrainConfig) -> Path:
    return Path("runs") / f"{Path(config.data_path).name}-{config.model_name}-seed{config.seed}"


def make_task(config: TrainConfig, device: torch.device, procs: Processes, progress: bool) -> TrainTask:
    if config.family == "lm":
        from hrm_reason.lm_train import LMTask

        return LMTask(config, device, procs, progress)
    from hrm_reason.act_train import ACTTask

    return ACTTask(config, device, procs, progress)


def has_checkpoint(run_dir: Path) -> bool:
    ckpts = run_dir / "checkpoints"
    return (ckpts / "latest").is_file() or (ckpts.is_dir() and any(p.name.startswith("step_") for p in ckpts.iterdir()))


def restartable(run_dir: Path) -> bool:
    """A new run may use this directory: it does not exist, holds nothing but our lock and stale temporaries, or is a
    run killed before its first checkpoint (config.yaml, maybe metrics.jsonl), where nothing would be lost."""
    if not run_dir.is_dir():
        return True
    if has_checkpoint(run_dir):
        return False
    rest = [p for p in run_dir.iterdir() if p.name not in (LOCK, "checkpoints") and not is_stale_temporary(p)]
    return not rest or (run_dir / "config.yaml").is_file()


def train(config: TrainConfig, resume: bool = False, progress: bool = True) -> Path:
    """Train (or resume) a run of any model family; returns the run directory. The main process holds the run
    directory's lock for the whole run, so a second process on it refuses instead of mixing two runs."""
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)
    with processes(config.device) as procs, RunLock(run_dir) if procs.is_main else contextlib.nullcontext():
        return _train(config, resume, progress, procs)


def _train(config: TrainConfig, resume: bool, progress: bool, procs: Processes) -> Path:
    device = resolve_device(config.device, procs.local_rank)
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)
    task = make_task(config, device, procs, progress and procs.is_main)
    if resume and not has_checkpoint(run_dir) and (run_dir / "config.yaml").is_file():
        # Killed before its first checkpoint: nothing to continue from, nothing to lose by starting again.
        if procs.is_main:
            print(f"{run_dir} has no checkpoint yet: starting the run from the beginning", file=sys.stderr)
        resume = False
    if not resume and not restartable(run_dir):
        raise UserError(
            f"run directory {run_dir} is not empty: pass --resume to continue it, or choose another --run-dir"
        )
    model, optimizer = task.model, task.optimizer
    step, round_, in_round, train_seconds, state = 0, 0, 0, 0.0, None
    if resume:
        ckpt = find_checkpoint(run_dir)
        task.load_weights(ckpt)  # first: a checkpoint of another config is an error even when the run is finished
        state = read_state(ckpt)
        step, train_seconds = state["step"], state.get("train_seconds", 0.0)
        round_, in_round = state.get("iteration", 0), state.get("batch_in_iter", step)  # LM runs: one round
        budget_spent = config.max_seconds is not None and train_seconds >= config.max_seconds
        # Checkpoints from before the "finished" flag: one at the end of the run is taken as finished.
        if state.get("finished", True) and (step >= task.total_steps or round_ >= task.total_rounds or budget_spent):
            if procs.is_main:
                print(
                    f"run {run_dir} already finished at step {step}: nothing to do "
                    "(raise max_steps, epochs or max_seconds to train on)",
                    file=sys.stderr,
                )
            return run_dir
        optimizer.load_state_dict(state["optimizer"])
        task.load_state(state)
    run_clock = RunClock.resumed(state)  # time to accuracy: totals over every start and resume
    per_step = task.train_flops_per_step
    train_flops = (state or {}).get("train_flops", None if per_step is None else step * per_step)
    ema = ema_for_training(model, config.ema, state, config.ema_warmup)
    if procs.distributed:
        for t in model.buffers():  # the puzzle embedding table is a buffer; DDP broadcasts the parameters
            dist.broadcast(t.data, src=0)
    if config.compile:
        compile_model(model)
    # Buffers (the puzzle table, kept in step by the sparse optimizer's all_gather) are not re-broadcast every forward.
    train_model = (
        DDP(model, device_ids=[device.index] if device.type == "cuda" else None, broadcast_buffers=False)
        if procs.distributed
        else model
    )

    if procs.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(task.saved_config().model_copy(update={"run_dir": str(run_dir)}), run_dir / "config.yaml")
        task.write_run_files(run_dir)
        record_provenance(run_dir, step if resume else None)
    log = RunLog(
        run_dir if procs.is_main else None,
        step if resume else None,
        config.logger,
        config.project_name,
        config.run_name,
        config.model_dump(mode="json"),
    )
    if not resume:
        log.write(
            {
                "step": 0,
                "num_params": sum(p.numel() for p in model.parameters()),
                **({"train_flops_per_step": per_step} if per_step is not None else {}),
                **task.first_record(),
            }
        )
    saved_at, evaluated_at = (-1, False), -1

    def checkpoint() -> None:
        nonlocal saved_at
        # Finished: at the end of the run with its final evaluation done (a stop on the last step is not finished: the
        # resume evaluates). A resume of a finished run does nothing.
        finished = evaluated_at == step and (step >= total_steps or round_ >= task.total_rounds or out_of_time)
        with run_clock.aside("checkpoint"):
            family_state = task.state()  # collective
            if procs.is_main and saved_at != (step, finished):
                full = {
                    "optimizer": optimizer.state_dict(),
                    "step": step,
                    "iteration": round_,
                    "batch_in_iter": in_round,
                    "train_seconds": train_seconds,
                    "clock": run_clock.totals(),
                    "train_flops": train_flops,
                    "finished": finished,
                    **family_state,
                    **(ema.checkpoint_state(model) if ema else {}),
                }
                with ema_weights(ema, model):
                    save_checkpoint(run_dir, step, model, task.model_config(), full)
            if procs.is_main:  # also when this step's save was done before its evaluation, which may name a new best
                prune_checkpoints(run_dir, config.keep_checkpoints, config.keep_best_checkpoint)
        saved_at = (step, finished)

    def evaluate() -> None:
        nonlocal evaluated_at
        if evaluated_at == step:
            return
        with run_clock.aside("eval"), ema_weights(ema, model):
            record, message = task.evaluate(step, progress and procs.is_main)
        progress_so_far = {
            **run_clock.totals(),
            "examples_seen": step * config.global_batch_size,
            **({"train_flops": train_flops} if train_flops is not None else {}),
        }
        log.write({"step": step, **record, **progress_so_far})
        if procs.is_main:
            tqdm.write(f"step {step}: {message}")
        evaluated_at = step

    total_steps = task.total_steps
    bar = tqdm(
        total=total_steps,
        initial=step,
        desc="train",
        unit="step",
        disable=not (progress and procs.is_main),
        dynamic_ncols=True,
    )
    seen_steps, t0 = 0, time.perf_counter()
    run_clock.start()
    model.train()
    stopped = False
    clock = time.process_time if config.budget_clock == "cpu" else time.perf_counter
    out_of_time = config.max_seconds is not None and train_seconds >= config.max_seconds
    try:
        with StopRequest() as stop:
            while round_ < task.total_rounds and step < total_steps and not stopped and not out_of_time:
                for batch in task.batches(round_, in_round):
                    if step >= total_steps:
                        break
                    step_start = clock()
                    position: float = step + 1
                    if (
                        config.schedule_over == "seconds"
                    ):  # the share of the time budget spent, in steps of the schedule
                        position = max(position, total_steps * train_seconds / config.max_seconds)
                    progress_done = run_progress(config, step, total_steps, train_seconds)
                    loss, outputs = task.forward(train_model, batch, step, progress_done)
                    time_up = (
                        config.max_seconds is not None and train_seconds + clock() - step_start >= config.max_seconds
                    )
                    diverged, stop_now, time_up = any_rank(
                        [~torch.isfinite(loss.detach()), stop.requested, time_up], procs.world_size, loss.device
                    )
                    if diverged:
                        kept = (
                            f"The last good checkpoint is kept in {run_dir / 'checkpoints'}"
                            if has_checkpoint(run_dir)
                            else "No checkpoint was written before it"
                        )
                        raise TrainingDiverged(
                            f"loss became {loss.item()} at step {step + 1}; stopped without saving this step. "
                            f"{kept} (try a lower lr)"
                        )
                    logged = task.optimizer_step(loss, position)
                    if train_flops is not None:
                        train_flops += task.train_flops_per_step  # at this step's depth
                    if ema is not None:
                        ema.update(model, step)
                    seconds = clock() - step_start
                    train_seconds += seconds
                    step, in_round, seen_steps = step + 1, in_round + 1, seen_steps + 1
                    record = task.record(step, loss, outputs, logged, seconds)
                    log.write(record)
                    if procs.is_main:
                        bar.set_postfix(**task.postfix(record, seen_steps / (time.perf_counter() - t0)), refresh=False)
                        bar.update(1)
                    if stop_now:
                        stopped = True
                        break
                    if time_up:
                        out_of_time = True
                        break
                    if config.eval_every_steps and step % config.eval_every_steps == 0:
                        evaluate()
                        if config.checkpoint_every_eval:
                            checkpoint()
                    if config.checkpoint_every_steps and step % config.checkpoint_every_steps == 0:
                        checkpoint()
                else:
                    round_, in_round = round_ + 1, 0
                    evaluate()
                    if config.checkpoint_every_eval or round_ >= task.total_rounds:
                        checkpoint()
                    continue
                break
            if stopped:
                checkpoint()
                if procs.is_main:
                    how = "" if stop.signum is None else f" by {signal_name(stop.signum)}"
                    tqdm.write(
                        f"stopped{how} at step {step}; checkpoint written to {run_dir / 'checkpoints' / f'step_{step}'}."
                        f" Resume with: hrm train --run-dir {run_dir} --resume",
                        file=sys.stderr,
                    )
            elif (step >= total_steps or out_of_time) and in_round > 0:
                # The step cap or the time budget ended the run inside a round: evaluate and save the final state.
                evaluate()
                checkpoint()
    finally:
        bar.close()
        log.close()
    if stopped:
        raise stop.stopped()
    if procs.is_main and time.perf_counter() - t0 >= PEAK_AFTER_SECONDS:
        from hrm_reason.bench import matmul_peak  # bench imports the training code

        record_peak(run_dir, matmul_peak(device, torch.float32, seconds=1.0))
    return run_dir


def scheduled_lr(config: TrainConfig, base_lr: float, position: float, total_steps: int) -> float:
    """Warmup then config.lr_schedule (cosine decay to lr_min_ratio by default), at schedule position `position` of
    `total_steps`."""
    return lr_at(config.lr_schedule, position, base_lr, config.lr_warmup_steps, total_steps, config.lr_min_ratio)


def run_progress(config: TrainConfig, step: int, total_steps: int, train_seconds: float) -> float:
    """The share of the run done before step `step` (0-based), in the LR schedule's measure (steps, or the time
    budget with schedule_over=seconds): what the depth curriculum follows."""
    done = step / total_steps
    if config.schedule_over == "seconds" and config.max_seconds is not None:
        done = max(done, train_seconds / config.max_seconds)
    return done
