"""The ACT puzzle family's part of a run (the models of models/registry.py): one ACT segment per optimizer step (deep
supervision), the carry between steps, SignSGD for the sparse puzzle table, the ACT loss.

Step accounting follows the original: total steps = epochs * groups * mean examples per puzzle / global batch, run as
epochs / eval_interval rounds. Halted batch slots are refilled from the loader; the others keep their example and
detached state for the next step. The carry is saved in state.pt for the whole global batch, so that a run resumes on
another number of processes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from hrm_reason.checkpoint import load_checkpoint
from hrm_reason.config import TrainConfig
from hrm_reason.data.puzzle import Batch, PuzzleSplit, TrainSampler, dataset_kind, load_split, total_train_steps
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import EvalResult, evaluate
from hrm_reason.models.act import act_loss
from hrm_reason.models.registry import build_model, flop_count, flops_or_none
from hrm_reason.models.sparse_embedding import SparseSignSGD
from hrm_reason.runtime.distributed import Processes, sum_over_ranks
from hrm_reason.runtime.prefetch import prefetch
from hrm_reason.tasks import task_metrics
from hrm_reason.tasks.augment import train_augmentation
from hrm_reason.train.curriculum import depth_at, flops_at_depth, segment_weights
from hrm_reason.train.optim import make_optimizer, scheduled_lr, set_lr


class ACTTask:
    def __init__(self, config: TrainConfig, device: torch.device, procs: Processes, progress: bool) -> None:
        self.config, self.device, self.procs = config, device, procs
        if dataset_kind(config.data_path) == "text":
            raise UserError(
                f"data_path {config.data_path} is a text dataset: arch.name must be a language-model head "
                "(e.g. --config configs/hrm_text_lm_quick.yaml)"
            )
        self.train_split = load_split(config.data_path, "train")
        self.test_split = load_split(config.data_path, "test")
        check_compatible(self.train_split, self.test_split)
        meta = self.train_split.metadata
        total = total_train_steps(meta, config.epochs, config.global_batch_size)
        self.total_steps = total if config.max_steps is None else min(total, config.max_steps)
        if self.total_steps < 1:
            raise UserError(
                f"{config.data_path}: the run has no step: epochs * groups / global_batch_size < 1 "
                "(lower global_batch_size)"
            )
        self.total_rounds = config.epochs // config.eval_interval
        # The bar's exact and segs: those of the last step on which examples halted (postfix).
        self.exact_shown, self.segments_shown = "-", "-"
        self.sampler = TrainSampler(
            self.train_split, config.global_batch_size, config.eval_interval, config.seed, procs.rank, procs.world_size
        )
        if self.sampler.batches_in(0) == 0:  # a small dataset: every round's batch would be incomplete, and dropped
            raise UserError(
                f"{config.data_path}: a round of eval_interval {config.eval_interval} epochs draws fewer examples than "
                f"global_batch_size {config.global_batch_size} ({meta.total_groups} training groups): no step would "
                "run; raise eval_interval or lower global_batch_size"
            )
        self.sampler.augment = train_augmentation(config.augment, self.train_split)
        task_metrics(self.test_split, 1)  # the evaluations' task and its rules load (or fail) before the first step
        self.model = build_model(config.arch, meta, device, config.seed)
        self.full_depth_flops = flops_or_none(
            lambda: flop_count(self.model.config).train_step * config.global_batch_size, config.model_name
        )
        self.optimizer = make_optimizer(config, self.model, device)
        puzzle_emb = self.model.puzzle_emb
        self.sparse_opt = (
            SparseSignSGD(puzzle_emb, config.puzzle_emb_lr, config.puzzle_emb_weight_decay)
            if puzzle_emb is not None
            else None
        )
        self.generator = torch.Generator(device=device)
        self.carry: Any = None
        self.depth: tuple[int, int] | None = None
        self.flops_by_depth: dict[tuple[int, int], float] = {}
        self.carry_state: dict[str, torch.Tensor] | None = None

    def batches(self, round_index: int, start: int) -> Generator[Batch, None, None]:
        return prefetch(self.sampler.batches(round_index, start), self.device)

    @property
    def loss_scale(self) -> float:
        return loss_scale_of(self.config.global_batch_size, self.procs.world_size)

    @property
    def train_flops_per_step(self) -> float | None:
        """FLOPs of the step just taken: a depth-curriculum step counts at its own depth (curriculum.flops_at_depth)."""
        if self.depth is None or self.full_depth_flops is None:
            return self.full_depth_flops
        if self.depth not in self.flops_by_depth:  # a handful of stages: counted once each, not every step
            flops = flops_at_depth(self.model.config, self.depth).train_step * self.config.global_batch_size
            self.flops_by_depth[self.depth] = flops
        return self.flops_by_depth[self.depth]

    def forward(
        self, train_model: torch.nn.Module, batch: Batch, step: int, done: float = 0.0
    ) -> tuple[torch.Tensor, Any]:
        c = self.config
        if self.carry is None:
            self.carry = self.model.empty_carry(batch)
            if self.carry_state is not None:
                self.carry = _fill_carry(self.carry, self.carry_state, self.device)
        generator = exploration_generator(self.generator, c.seed, step, self.procs.rank)
        # The depth curriculum's stage; past its last stage the call is the one without it (docs/training.md "Levers").
        self.depth = depth_at(c.depth_curriculum, done) if c.depth_curriculum else None
        depth = {} if self.depth is None else {"cycles": self.depth}
        new_carry, outputs = train_model(self.carry, batch, generator=generator, **depth)
        weights = (
            segment_weights(new_carry.steps, c.segment_loss_decay, c.arch.halt_max_steps)
            if c.segment_loss_decay is not None
            else None
        )
        loss, metrics = act_loss(
            outputs,
            new_carry.current_data["labels"],
            new_carry.halted,
            new_carry.steps,
            c.arch.loss.loss_type,
            weights,
        )
        self.carry = new_carry
        return loss, metrics

    def optimizer_step(self, position: float) -> dict[str, float]:
        c = self.config
        lr = scheduled_lr(c, c.lr, position, self.total_steps)
        emb_lr = scheduled_lr(c, c.puzzle_emb_lr, position, self.total_steps)
        optimizer_step(self.optimizer, self.sparse_opt, lr, emb_lr)
        return {"train/lr": lr}

    def record(
        self, step: int, loss: torch.Tensor, outputs: Any, logged: dict[str, float], seconds: float
    ) -> dict[str, Any]:
        keys = sorted(outputs)
        stats = dict(
            zip(keys, sum_over_ranks(torch.stack([outputs[k].double() for k in keys]), self.procs.world_size).tolist())
        )
        count = stats.pop("count")
        record: dict[str, Any] = {"step": step, **logged, "train/count": count}
        if self.config.depth_curriculum:  # this step's depth, for its FLOPs (curriculum.flops_at_depth)
            record["train/H_cycles"], record["train/L_cycles"] = self.depth or self.config.arch.depth
        for k, v in stats.items():
            if k.endswith("loss"):
                record[f"train/{k}"] = v / self.config.global_batch_size
            elif count > 0:
                record[f"train/{k}"] = v / count
        return record

    def postfix(self, record: dict[str, Any], rate: float) -> dict[str, str]:
        """A step on which no example halted has no exact accuracy or segment count of its own: the bar keeps the last
        step's that had, instead of showing 0."""
        if record.get("train/count", 0) > 0:
            self.segments_shown = f"{record['train/steps']:.1f}"
            self.exact_shown = f"{record['train/exact_accuracy']:.3f}"
        return {
            "loss": f"{record['train/lm_loss']:.3f}",
            "exact": self.exact_shown,
            "segs": self.segments_shown,
            "ex_s": f"{rate * self.config.global_batch_size:.0f}",
        }

    def evaluate(self, step: int, progress: bool) -> tuple[dict[str, Any], str]:
        c, halt = self.config, self.config.arch.halt_max_steps
        result = evaluate(
            self.model,
            self.test_split,
            halt,
            c.eval_global_batch_size or c.global_batch_size,
            self.device,
            c.arch.loss.loss_type,
            c.eval_max_examples,
            self.procs.rank,
            self.procs.world_size,
            progress=progress,
            metrics=task_metrics(self.test_split, halt),
        )
        record = flat_eval(result, halt)
        return (
            record,
            f"eval exact_accuracy {record['eval/exact_accuracy']:.4f}, token accuracy {record['eval/accuracy']:.4f}",
        )

    def load_weights(self, ckpt: Path) -> None:
        load_checkpoint(self.model, ckpt)

    def state(self) -> dict[str, Any]:
        # Before the first step of a resumed run the carry is still the loaded one.
        local = (
            self.carry_state
            if self.carry is None
            else {k: v.detach().cpu() for k, v in _flatten_carry(self.carry).items()}
        )
        return {"carry": _global_carry_state(local, self.procs.world_size)}

    def load_state(self, state: dict[str, Any]) -> None:
        self.carry_state = state["carry"] and _local_carry_state(state["carry"], self.procs.rank, self.procs.world_size)

    def first_record(self) -> dict[str, Any]:
        return {}

    def saved_config(self) -> TrainConfig:
        return self.config

    def model_config(self) -> dict[str, Any]:
        return self.model.config.model_dump()

    def write_run_files(self, run_dir: Path) -> None:
        pass


def loss_scale_of(global_batch_size: int, world_size: int) -> float:
    """The factor of the summed ACT loss whose backward gives the step's gradients: a mean over the global batch (under
    DDP, which averages gradients over the processes, each process's share is scaled up by the world size)."""
    return world_size / global_batch_size


def optimizer_step(
    optimizer: torch.optim.Optimizer, sparse_opt: SparseSignSGD | None, lr: float, puzzle_emb_lr: float
) -> None:
    """Both optimizers' steps, after the backward of `loss * loss_scale_of(...)`: the network's at `lr`, SignSGD's on
    the puzzle rows the batch used at `puzzle_emb_lr`."""
    set_lr(optimizer, lr)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if sparse_opt is not None:
        sparse_opt.lr = puzzle_emb_lr
        sparse_opt.step()
        sparse_opt.zero_grad()


def exploration_generator(generator: torch.Generator, seed: int, step: int, rank: int) -> torch.Generator:
    """Re-seed the ACT exploration draws from (seed, step, rank): no RNG state to save, any resume point reproduces."""
    return generator.manual_seed(int(np.random.SeedSequence([seed, step, rank]).generate_state(1, np.uint64)[0] >> 1))


def flat_eval(result: EvalResult, halt_max_steps: int) -> dict[str, float]:
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
        **{
            f"eval/{name}": v[m] if isinstance(v, list) else v
            for name, v in result.extra.items()
            if isinstance(v, (list, float, int))
        },
    }


def check_compatible(train: PuzzleSplit, test: PuzzleSplit) -> None:
    a, b = train.metadata, test.metadata
    for field in ("seq_len", "vocab_size", "num_puzzle_identifiers"):
        if getattr(a, field) != getattr(b, field):
            raise UserError(
                f"{test.path / 'dataset.json'}: {field} {getattr(b, field)} differs from train's {getattr(a, field)}"
            )


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
    """Write saved tensors into a carry of the same structure (made by model.empty_carry on the first batch)."""
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
