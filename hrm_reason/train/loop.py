"""The one training loop of every model family: run directory, resume, budgets, logging, stop and divergence
handling, checkpoint and evaluation cadence, torchrun. What differs per family sits behind `TrainTask` (train/act.py
ACTTask: the ACT carry, SignSGD for the puzzle table, the ACT loss; train/lm.py LMTask: text windows or PrefixLM
puzzle sequences, gradient clipping).

A run is a sequence of rounds, each a stream of batches, one optimizer step per batch. The loop evaluates (and
checkpoints) after each round, every `eval_every_steps` steps, and when a budget (max_steps, max_seconds) ends the run
inside a round. The puzzle family's rounds are the original's iterations of `eval_interval` epochs; an LM run is one
round. Under torchrun each process takes its slice of the global batch and DDP averages the gradients; every process
takes the same path through the loop (its decisions go through `max_over_ranks`), so the collectives match.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from hrm_reason.checkpoint import find_checkpoint, prune_checkpoints, read_state, save_checkpoint
from hrm_reason.config import TrainConfig, dotted_keys, load_config, save_config
from hrm_reason.errors import UserError
from hrm_reason.models.registry import Family
from hrm_reason.provenance import record_provenance
from hrm_reason.runtime.clock import RunClock
from hrm_reason.runtime.device import resolve_device
from hrm_reason.runtime.distributed import Processes, barrier, lost_process, max_over_ranks, processes
from hrm_reason.runtime.lock import LOCK, RunLock, check_not_live, is_stale_temporary
from hrm_reason.runtime.logs import RunLog, progress_bar, read_records
from hrm_reason.runtime.memory import allocation_errors
from hrm_reason.runtime.peak import matmul_peak, record_peak, shared_machine_warning
from hrm_reason.runtime.stop import FORWARDED_WITHIN, StopRequest, signal_name
from hrm_reason.train.act import ACTTask
from hrm_reason.train.ema import EMA, ema_for_training, ema_weights
from hrm_reason.train.lm import LMTask
from hrm_reason.train.optim import load_optimizer_state
from hrm_reason.train.run_memory import check_run_memory


class TrainingDiverged(UserError):
    pass


class TrainTask(Protocol):
    """One model family's part of a run. Built with the model (seeded), its data and its optimizers."""

    model: nn.Module  # the bare model: checkpoints, EMA and evaluation use it; training calls the DDP wrapper
    optimizer: torch.optim.Optimizer
    total_steps: int
    total_rounds: int
    train_flops_per_step: float | None  # model FLOPs of one optimizer step on the global batch (models/flops.py)
    # The factor of the step's loss whose backward gives the gradients the optimizers step on (the ACT loss is a sum
    # over the batch: 1 / the global batch, times the world size that DDP's average divides by; a head's loss: 1).
    loss_scale: float

    def batches(self, round_index: int, start: int) -> Generator[Any, None, None]:
        """The batches of round `round_index` from its `start`-th on, on the device, this process's slice; closed when
        the round ends."""

    def forward(self, train_model: nn.Module, batch: Any, step: int, done: float = 0.0) -> tuple[torch.Tensor, Any]:
        """(loss, outputs) of training step `step` (0-based), with the share `done` of the run done (run_progress)."""

    def optimizer_step(self, position: float) -> dict[str, float]:
        """The optimizers' steps at schedule position `position`, after the loop's backward; returns the lr and what
        to log."""

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


@dataclass
class RunState:
    """Where the run stands: what a checkpoint's state.pt keeps (and a resume reads back), and this start's marks."""

    step: int = 0  # optimizer steps taken
    rounds_done: int = 0  # rounds finished: the index of the round under way
    steps_in_round: int = 0  # steps taken in the round under way
    train_seconds: float = 0.0  # training time on the budget clock (budget_clock), over every start
    train_flops: float | None = None  # None: the model's FLOPs are unknown (models/flops.py)
    out_of_time: bool = False  # the time budget (max_seconds) is spent
    stopped: bool = False  # a stop request (Ctrl-C, SIGTERM, SIGUSR1) ended this start
    evaluated_at: int = -1  # the step of this start's last evaluation
    saved_at: tuple[int, bool] = (-1, False)  # (step, finished) of this start's last checkpoint

    @classmethod
    def resumed(cls, saved: dict[str, Any] | None, config: TrainConfig, task: TrainTask) -> RunState:
        """From a checkpoint's state.pt, or (None) at the beginning of the run. A state.pt written before the keys
        were renamed holds `iteration` and `batch_in_iter` for `rounds_done` and `steps_in_round`: read too."""
        saved = saved or {}
        step, train_seconds = saved.get("step", 0), saved.get("train_seconds", 0.0)
        per_step = task.train_flops_per_step
        return cls(
            step=step,
            rounds_done=saved.get("rounds_done", saved.get("iteration", 0)),
            steps_in_round=saved.get("steps_in_round", saved.get("batch_in_iter", step)),  # LM runs: one round
            train_seconds=train_seconds,
            train_flops=saved.get("train_flops", None if per_step is None else step * per_step),
            out_of_time=config.max_seconds is not None and train_seconds >= config.max_seconds,
        )

    def at_end(self, task: TrainTask) -> bool:
        """The step cap, the last round or the time budget is reached."""
        return self.step >= task.total_steps or self.rounds_done >= task.total_rounds or self.out_of_time


@dataclass
class Run:
    """What one start of the run holds fixed: the config, the task, the processes, the model as trained (the DDP
    wrapper under torchrun), the EMA, the log, the run clock and the progress bar."""

    config: TrainConfig
    task: TrainTask
    procs: Processes
    run_dir: Path
    progress: bool  # progress bars (the main process only)
    train_model: nn.Module
    ema: EMA | None
    log: RunLog
    clock: RunClock  # time to accuracy: totals over every start and resume
    bar: tqdm
    first_step: int  # the step this start began at
    started_at: float  # time.perf_counter() when this start began
    # The machine as the run found it (sample_machine): matrix-product peaks (FLOP/s) and 1-minute load averages.
    peaks: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    # Training FLOPs and wall seconds over the starts before this one: this start's own rate is what its peak is to
    # exceed (model_rate).
    flops_before: float = 0.0
    wall_before: float = 0.0

    def budget_clock(self) -> float:
        """The clock of max_seconds: this process's CPU time, or wall time."""
        return time.process_time() if self.config.budget_clock == "cpu" else time.perf_counter()


def default_run_dir(config: TrainConfig) -> Path:
    return Path("runs") / f"{Path(config.data_path).name}-{config.model_name}-seed{config.seed}"


# Each family's part of a run: a TrainTask class, built (config, device, procs, progress).
TASKS: dict[Family, type[ACTTask] | type[LMTask]] = {"act": ACTTask, "lm": LMTask}


def make_task(config: TrainConfig, device: torch.device, procs: Processes, progress: bool) -> TrainTask:
    """The model family's part of the run (`TASKS`)."""
    return TASKS[config.family](config, device, procs, progress)


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


def train(config: TrainConfig, resume: bool = False, progress: bool = True, notices: Sequence[str] = ()) -> Path:
    """Train (or resume) a run of any model family; returns the run directory. The main process holds the run
    directory's lock for the whole run, so a second process on it refuses instead of mixing two runs. `notices` (the
    default config taken) are said once the checks have passed and the data and model are loaded: a refusal is its
    one line alone."""
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)
    check_run_dir(run_dir, resume)  # before its lock is made in it, anything loads or a line is said
    with processes(config.device) as procs, RunLock(run_dir) if procs.is_main else contextlib.nullcontext():
        try:
            with allocation_errors("hrm train", "global_batch_size, eval_global_batch_size or arch.hidden_size"):
                return _train(config, resume, progress, procs, notices)
        except Exception as e:
            lost = lost_process(e) if procs.distributed else None
            if lost is None:
                raise
            # Another process died or hangs: every process that is left says so in one line and exits (exit 2).
            raise UserError(
                f"process {procs.rank} of {procs.world_size} lost the others ({lost}): one died or stopped answering, "
                f"see its log. Resume from the last checkpoint with: hrm train --run-dir {run_dir} --resume"
            ) from None


def _train(config: TrainConfig, resume: bool, progress: bool, procs: Processes, notices: Sequence[str] = ()) -> Path:
    """One start of the run in this process (under torchrun every process runs it, in step with the others)."""
    device = resolve_device(config.device, procs.local_rank)
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)
    check_run_memory(config, device, procs.world_size)  # before the model and the data take any memory
    task = make_task(config, device, procs, progress and procs.is_main)
    for notice in notices if procs.is_main else ():
        print(notice, file=sys.stderr)
    saved = resumed_state(task, procs, run_dir, resume)
    state = RunState.resumed(saved, config, task)
    if saved is not None:
        # Checkpoints from before the "finished" flag: one at the end of the run is taken as finished.
        if saved.get("finished", True) and state.at_end(task):
            if procs.is_main:
                print(
                    f"run {run_dir} already finished at step {state.step}: nothing to do "
                    "(raise max_steps, epochs or max_seconds to train on)",
                    file=sys.stderr,
                )
            return run_dir
        load_optimizer_state(task.optimizer, saved["optimizer"], config.optimizer)
        task.load_state(saved)
        saved_world = saved.get("world_size", procs.world_size)
        if saved_world != procs.world_size and procs.is_main:
            print(
                f"resuming on {procs.world_size} process(es) a run saved on {saved_world}: the global batch stays "
                f"{config.global_batch_size} ({config.global_batch_size // procs.world_size} per process), so the "
                "batches are the same; what each process draws for itself (the ACT models' halting exploration, seeded "
                "by rank) differs from a run without the change",
                file=sys.stderr,
            )
    run = start(config, task, procs, run_dir, device, saved, state.step, progress and procs.is_main)
    run.flops_before, run.wall_before = state.train_flops or 0.0, run.clock.train_wall_seconds
    try:
        if saved is not None and not saved.get("evaluated", True) and eval_due(config, state):
            # A stop landed on a step due an evaluation: it saved first, so the evaluation is this start's first
            # work, and the log holds every record an uninterrupted run's does.
            evaluate(run, state)
            if config.checkpoint_every_eval:
                checkpoint(run, state)
        with StopRequest(FORWARDED_WITHIN if procs.distributed else 0.0) as stop:
            while not state.stopped and not state.at_end(task):
                train_round(run, state, stop)
            if state.stopped:
                checkpoint(run, state)
                if procs.is_main:
                    how = "" if stop.signum is None else f" by {signal_name(stop.signum)}"
                    tqdm.write(
                        f"stopped{how} at step {state.step}; checkpoint written to "
                        f"{run_dir / 'checkpoints' / f'step_{state.step}'}. "
                        f"Resume with: hrm train --run-dir {run_dir} --resume",
                        file=sys.stderr,
                    )
                # No process exits before the checkpoint is whole: torchrun stops the others when one exits with
                # the signal's code, and a second signal would cut rank 0's save short.
                barrier(procs.world_size, device)
            elif (state.step >= task.total_steps or state.out_of_time) and state.steps_in_round > 0:
                # The step cap or the time budget ended the run inside a round: evaluate and save the final state.
                evaluate(run, state)
                checkpoint(run, state)
    finally:
        run.bar.close()
        run.log.close()
    if procs.is_main and time.perf_counter() - run.started_at >= PEAK_AFTER_SECONDS:
        # Every start records the machine it found, a stopped one too (its load now, no last peak: it stops at once),
        # so that the warning below covers every start of a resumed run.
        if state.stopped:
            run.loads.append(load_average())
        else:
            sample_machine(run, device, seconds=1.0)
        record_peak(run_dir, run.peaks, max(run.loads), os.cpu_count(), model_rate(run, state))
    if state.stopped:
        raise stop.stopped()
    if procs.is_main and (warning := shared_machine_warning(run_dir)) is not None:
        print(warning, file=sys.stderr)
    return run_dir


def model_rate(run: Run, state: RunState) -> float | None:
    """This start's own FLOP/s per process over its training wall time: a peak sample below it was disturbed
    (runtime/peak.py record_peak). None where the model's FLOPs are not counted."""
    seconds = run.clock.train_wall_seconds - run.wall_before
    if state.train_flops is None or seconds <= 0:
        return None
    return (state.train_flops - run.flops_before) / seconds / run.procs.world_size


def load_average() -> float:
    """The 1-minute load average (0 where the platform has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def sample_machine(run: Run, device: torch.device, seconds: float) -> None:
    """Measure the matrix-product peak and the load average now, as the run finds the machine: at each evaluation
    and at the end, so that a peak taken in a quiet moment cannot stand for a run that shared its cores."""
    run.peaks.append(matmul_peak(device, torch.float32, seconds=seconds))
    run.loads.append(load_average())


def check_run_dir(run_dir: Path, resume: bool) -> None:
    """The run directory checked before the data and model load and before the "resuming" line: first that no other
    process trains in it (a live run is named as live, with its process); then a new run's is new, empty or a run
    killed before its first checkpoint (else one line: resume it, or it is no run at all); a resumed run's
    metrics.jsonl is readable (a damaged line is the one error, not a second line after "resuming"). Under torchrun
    the first process alone asks the lock: the others may ask once it holds it for them all."""
    if os.environ.get("RANK", "0") == "0":
        check_not_live(run_dir)
    if resume and has_checkpoint(run_dir):
        if (run_dir / "metrics.jsonl").is_file():
            read_records(run_dir / "metrics.jsonl", warn=False)
        return
    if not run_dir.is_dir() or (resume and (run_dir / "config.yaml").is_file()) or restartable(run_dir):
        return  # resumed_state starts a run killed before its first checkpoint again
    if not has_checkpoint(run_dir) and not (run_dir / "config.yaml").is_file():
        names = sorted(p.name for p in run_dir.iterdir() if p.name != LOCK and not is_stale_temporary(p))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise UserError(f"run directory {run_dir} is not empty and holds no run ({shown}): choose another --run-dir")
    raise UserError(f"run directory {run_dir} is not empty: pass --resume to continue it, or choose another --run-dir")


def resumed_state(task: TrainTask, procs: Processes, run_dir: Path, resume: bool) -> dict[str, Any] | None:
    """The state.pt of the checkpoint to resume from, its weights loaded into the task's model; None for a run from
    the beginning."""
    if resume and not has_checkpoint(run_dir) and (run_dir / "config.yaml").is_file():
        # Killed before its first checkpoint: nothing to continue from, nothing to lose by starting again.
        if procs.is_main:
            print(f"{run_dir} has no checkpoint yet: starting the run from the beginning", file=sys.stderr)
        resume = False
    if not resume:
        return None
    ckpt = find_checkpoint(run_dir)
    task.load_weights(ckpt)  # first: a checkpoint of another config is an error even when the run is finished
    state = read_state(ckpt)
    if procs.is_main:
        print(resume_line(run_dir, ckpt, state, task.saved_config()), file=sys.stderr)
    return state


def resume_line(run_dir: Path, ckpt: Path, state: dict[str, Any], config: TrainConfig) -> str:
    """What a resume says first: the step and checkpoint it continues from, and the keys it changes from the
    config the run was saved with (the overrides given with --resume)."""
    line = f"resuming {run_dir} at step {state['step']} from {ckpt.relative_to(run_dir)}"
    try:
        before = dotted_keys(load_config(run_dir / "config.yaml").model_dump(mode="json"))
    except UserError:
        return line  # config.yaml unreadable: the resume config came from elsewhere and says so itself
    after = dotted_keys(config.model_dump(mode="json"))
    changed = [f"{k} {before.get(k)} -> {v}" for k, v in after.items() if before.get(k) != v and k != "run_dir"]
    return line + ("; changed: " + ", ".join(changed) if changed else "; config unchanged")


def start(
    config: TrainConfig,
    task: TrainTask,
    procs: Processes,
    run_dir: Path,
    device: torch.device,
    saved: dict[str, Any] | None,
    step: int,
    progress: bool,
) -> Run:
    """Set up one start of the run (EMA, DDP, compile, the run directory's files, the log) and start its clock."""
    model, resume = task.model, saved is not None
    run_clock = RunClock.resumed(saved)
    ema = ema_for_training(model, config.ema, saved, config.ema_warmup)
    if procs.distributed:
        for t in model.buffers():  # the puzzle embedding table is a buffer; DDP broadcasts the parameters
            dist.broadcast(t.data, src=0)
    if config.compile:
        model.compile_core()
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
        per_step = task.train_flops_per_step
        log.write(
            {
                "step": 0,
                "num_params": sum(p.numel() for p in model.parameters()),
                **({"train_flops_per_step": per_step} if per_step is not None else {}),
                **task.first_record(),
            }
        )
    bar = progress_bar(total=task.total_steps, initial=step, desc="train", unit="step", enabled=progress)
    run = Run(config, task, procs, run_dir, progress, train_model, ema, log, run_clock, bar, step, time.perf_counter())
    run_clock.start()
    model.train()
    return run


def train_round(run: Run, state: RunState, stop: StopRequest) -> None:
    """Train round `state.rounds_done` from its `state.steps_in_round`-th batch to its end, then evaluate it (and
    checkpoint after each round with checkpoint_every_eval, and after the last); the step cap, a stop request or the
    time budget may end it first."""
    config, task = run.config, run.task
    with contextlib.closing(task.batches(state.rounds_done, state.steps_in_round)) as batches:  # its thread ends here
        for batch in batches:
            if state.step >= task.total_steps:
                return
            train_step(run, state, batch, stop)
            if state.stopped or state.out_of_time:
                return
            if eval_due(config, state):
                evaluate(run, state)
                if config.checkpoint_every_eval:
                    checkpoint(run, state)
            if config.checkpoint_every_steps and state.step % config.checkpoint_every_steps == 0:
                checkpoint(run, state)
    state.rounds_done, state.steps_in_round = state.rounds_done + 1, 0
    evaluate(run, state)
    if config.checkpoint_every_eval or state.rounds_done >= task.total_rounds:
        checkpoint(run, state)


def eval_due(config: TrainConfig, state: RunState) -> bool:
    """Whether eval_every_steps asks for an evaluation at this step (the end of a round always has one)."""
    return bool(config.eval_every_steps) and state.step % config.eval_every_steps == 0


def train_step(run: Run, state: RunState, batch: Any, stop: StopRequest) -> None:
    """One optimizer step and its record. Every process agrees (max_over_ranks) on whether the loss diverged, a stop was
    requested or the time budget ran out, so that all take the same path on."""
    config, task = run.config, run.task
    step_start = run.budget_clock()
    position: float = state.step + 1
    if config.schedule_over == "seconds":  # the share of the time budget spent, in steps of the schedule
        position = max(position, task.total_steps * state.train_seconds / config.max_seconds)
    done = run_progress(config, state.step, task.total_steps, state.train_seconds)
    loss, outputs = task.forward(run.train_model, batch, state.step, done)
    elapsed = state.train_seconds + run.budget_clock() - step_start
    time_up = config.max_seconds is not None and elapsed >= config.max_seconds
    # The stop's signal number, not a flag: every process stops with the same signal, hence the same exit code.
    diverged, stop_signum, time_up = max_over_ranks(
        [~torch.isfinite(loss.detach()), (stop.signum or -1) if stop.requested else 0, time_up],
        run.procs.world_size,
        loss.device,
    )
    if diverged:
        kept = (
            f"The last good checkpoint is kept in {run.run_dir / 'checkpoints'}"
            if has_checkpoint(run.run_dir)
            else "No checkpoint was written before it"
        )
        raise TrainingDiverged(
            f"loss became {loss.item()} at step {state.step + 1}; stopped without saving this step. {kept} "
            "(try a lower lr)"
        )
    (loss * task.loss_scale).backward()  # the step's gradients (under DDP, averaged over the processes)
    logged = task.optimizer_step(position)
    if state.train_flops is not None:
        state.train_flops += task.train_flops_per_step  # at this step's depth
    if run.ema is not None:
        run.ema.update(task.model, state.step)
    seconds = run.budget_clock() - step_start
    state.train_seconds += seconds
    state.step, state.steps_in_round = state.step + 1, state.steps_in_round + 1
    record = task.record(state.step, loss, outputs, logged, seconds)
    run.log.write(record)
    if run.procs.is_main:
        rate = (state.step - run.first_step) / (time.perf_counter() - run.started_at)
        run.bar.set_postfix(**task.postfix(record, rate), refresh=False)
        run.bar.update(1)
    if stop_signum:
        stop.join(max(int(stop_signum), 0))
        state.stopped = True
    elif time_up:
        state.out_of_time = True


def evaluate(run: Run, state: RunState) -> None:
    """Evaluate (the EMA weights, if any) and log it with the run's progress so far; once per step. Collective."""
    if state.evaluated_at == state.step:
        return
    with run.clock.aside("eval"), ema_weights(run.ema, run.task.model):
        record, message = run.task.evaluate(state.step, run.progress)
        if run.procs.is_main and time.perf_counter() - run.started_at >= PEAK_AFTER_SECONDS:
            sample_machine(run, run.task.device, seconds=0.5)
    so_far = {
        **run.clock.totals(),
        "examples_seen": state.step * run.config.global_batch_size,
        **({"train_flops": state.train_flops} if state.train_flops is not None else {}),
    }
    run.log.write({"step": state.step, **record, **so_far})
    if run.procs.is_main:
        tqdm.write(f"step {state.step}: {message}")
    state.evaluated_at = state.step


def checkpoint(run: Run, state: RunState) -> None:
    """Save the run's state (the EMA weights as the model's, if any), once per step unless it has since become
    finished, and prune old checkpoints. Collective (task.state gathers the puzzle carry)."""
    config, task, model = run.config, run.task, run.task.model
    # Finished: at the end of the run with its final evaluation done (a stop on the last step is not finished: the
    # resume evaluates). A resume of a finished run does nothing.
    finished = state.evaluated_at == state.step and state.at_end(task)
    with run.clock.aside("checkpoint"):
        family_state = task.state()
        if run.procs.is_main and state.saved_at != (state.step, finished):
            full = {
                "optimizer": task.optimizer.state_dict(),
                "step": state.step,
                "rounds_done": state.rounds_done,
                "steps_in_round": state.steps_in_round,
                "train_seconds": state.train_seconds,
                "clock": run.clock.totals(),
                "train_flops": state.train_flops,
                "finished": finished,
                "evaluated": state.evaluated_at == state.step,  # False: a stop saved before a due evaluation
                "world_size": run.procs.world_size,  # a resume on another number of processes says what changes
                **family_state,
                **(run.ema.checkpoint_state(model) if run.ema else {}),
            }
            with ema_weights(run.ema, model):
                save_checkpoint(run.run_dir, state.step, model, task.model_config(), full)
        if run.procs.is_main:  # also when this step's save was done before its evaluation, which may name a new best
            prune_checkpoints(run.run_dir, config.keep_checkpoints, config.keep_best_checkpoint)
    state.saved_at = (state.step, finished)


def run_progress(config: TrainConfig, step: int, total_steps: int, train_seconds: float) -> float:
    """The share of the run done before step `step` (0-based), in the LR schedule's measure (steps, or the time
    budget with schedule_over=seconds): what the depth curriculum follows."""
    done = step / total_steps
    if config.schedule_over == "seconds" and config.max_seconds is not None:
        done = max(done, train_seconds / config.max_seconds)
    return done
