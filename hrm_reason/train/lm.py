"""The language-model family's part of a run (the heads of models/registry.py): one backward and one optimizer
step per batch, no state between batches.

Step s trains on the windows drawn from (seed, s), so a resumed run reproduces an uninterrupted one, and under
torchrun each process takes its rows of that global batch (the head's loss is a token mean, DDP averages it).
Per step: forward with labels (the head shifts them and adds its auxiliary terms to `loss`), backward, gradient
clipping, the optimizer step under the warmup + cosine schedule, then the head's `post_step()` (HAM's threshold
controller, whose state lives in buffers and so is saved with the weights).
Logged: train loss, CE, LR, gradient norm, tokens/s and the head's metrics every step; validation CE, perplexity and
tokens/s at every evaluation. A puzzle dataset as data_path (the original HRM layout) trains on PrefixLM puzzle
sequences instead (data/prefix_lm.py: puzzle as bidirectional prefix, solution as causal response); its evaluation is
the exact and token accuracy of greedy decoding on the test split (eval/exact_accuracy, eval/accuracy) and the response
CE.
"""

from __future__ import annotations

import json
import math
from collections.abc import Generator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hrm_reason.atomic import atomic_write_text
from hrm_reason.checkpoint import load_weights, read_weights
from hrm_reason.config import TrainConfig
from hrm_reason.data.prefix_lm import PuzzleLMData, PuzzleSequences, uses_prefix
from hrm_reason.data.puzzle import dataset_kind
from hrm_reason.data.text import TOKENIZER_META, load_text_dataset, save_tokenizer, train_batch
from hrm_reason.errors import UserError
from hrm_reason.evaluate.lm import evaluate_lm
from hrm_reason.evaluate.prefix_lm import evaluate_puzzle_lm
from hrm_reason.models.registry import build_lm, flop_count, flops_or_none
from hrm_reason.runtime.device import autocast_context
from hrm_reason.runtime.distributed import Processes, sum_over_ranks
from hrm_reason.train.optim import make_optimizer, scheduled_lr, set_lr


class LMTask:
    def __init__(self, config: TrainConfig, device: torch.device, procs: Processes, progress: bool) -> None:
        self.config, self.device, self.procs = config, device, procs
        if config.global_batch_size % procs.world_size:
            raise UserError(
                f"global_batch_size {config.global_batch_size} is not divisible by the number of processes "
                f"{procs.world_size}"
            )
        self.puzzles = PuzzleLMData(config.data_path) if dataset_kind(config.data_path) == "puzzle" else None
        if self.puzzles is None:
            self.data = load_text_dataset(config.data_path)
            self.train_stream, self.val_stream = self.data.splits["train"], self.data.splits["val"]
            if len(self.train_stream) < config.seq_len + 1:
                raise UserError(
                    f"{config.data_path}: the train split has {len(self.train_stream)} tokens, fewer than "
                    f"seq_len + 1 = {config.seq_len + 1}"
                )
            if len(self.val_stream) < 2:
                raise UserError(
                    f"{config.data_path}: the val split has {len(self.val_stream)} tokens; nothing to validate on"
                )
        self.vocab_size = self.data.vocab_size if self.puzzles is None else self.puzzles.layout.vocab_size
        self.model = build_lm(config.arch, self.vocab_size, device, config.seed)
        if self.puzzles is not None:
            self.puzzles.check_model(self.model, config.data_path)
        self.optimizer = make_optimizer(config, self.model, device)
        self.total_steps, self.total_rounds = config.max_steps, 1
        self.loss_scale = 1.0  # the head's loss is a token mean, DDP averages it over the processes
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        seq_len = config.seq_len if self.puzzles is None else self.puzzles.layout.seq_len
        self.tokens_per_step = config.global_batch_size * seq_len
        self.train_flops_per_step = flops_or_none(
            lambda: flop_count(self.model.config, seq_len).train_step * self.tokens_per_step, config.model_name
        )

    def batches(self, round_index: int, start: int) -> Generator[torch.Tensor | PuzzleSequences, None, None]:
        c, (rank, world) = self.config, (self.procs.rank, self.procs.world_size)
        rows = slice(rank * c.global_batch_size // world, (rank + 1) * c.global_batch_size // world)
        for step in range(start, self.total_steps):
            if self.puzzles is None:
                yield train_batch(self.train_stream, c.global_batch_size, c.seq_len, c.seed, step)[rows].to(self.device)
            else:
                seqs = self.puzzles.train_batch(c.global_batch_size, c.seed, step)
                yield PuzzleSequences(seqs.input_ids[rows], seqs.token_type_ids[rows], seqs.labels[rows]).to(
                    self.device
                )

    def forward(self, train_model: nn.Module, batch: Any, step: int, done: float = 0.0) -> tuple[torch.Tensor, Any]:
        with autocast_context(self.device, self.config.forward_dtype):
            if self.puzzles is None:
                out = train_model(batch, labels=batch)
            else:  # the prefix is bidirectional where the head supports it
                types = batch.token_type_ids if uses_prefix(self.model) else None
                out = train_model(batch.input_ids, token_type_ids=types, labels=batch.labels)
        if out.loss is None:
            raise UserError(f"arch {self.config.model_name}: the head returned no loss for labelled input")
        return out.loss, out

    def optimizer_step(self, position: float) -> dict[str, float]:
        c = self.config
        lr = scheduled_lr(c, c.lr, position, self.total_steps)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, c.grad_clip if c.grad_clip is not None else math.inf)
        set_lr(self.optimizer, lr)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.model.post_step()
        return {"train/lr": lr, "train/grad_norm": float(grad_norm)}

    def record(
        self, step: int, loss: torch.Tensor, outputs: Any, logged: dict[str, float], seconds: float
    ) -> dict[str, Any]:
        scalars = {k: v for k, v in outputs.metrics.items() if isinstance(v, torch.Tensor) and v.numel() == 1}
        values = {"loss": loss.detach().float(), "ce": scalars.pop("ce", loss.detach()).float(), **scalars}
        if self.procs.world_size > 1:  # every process's token mean over the same number of tokens
            reduced = (
                sum_over_ranks(torch.stack(list(values.values())).double(), self.procs.world_size)
                / self.procs.world_size
            )
            values = dict(zip(values, reduced))
        loss_value, ce = float(values.pop("loss")), float(values.pop("ce"))
        return {
            "step": step,
            "train/loss": loss_value,
            "train/ce": ce,
            "train/lr": logged["train/lr"],
            "train/grad_norm": logged["train/grad_norm"],
            "train/tokens_per_s": self.tokens_per_step / max(seconds, 1e-9),
            **{f"train/{k}": float(v) for k, v in values.items()},
        }

    def postfix(self, record: dict[str, Any], rate: float) -> dict[str, str]:
        return {
            "loss": f"{record['train/loss']:.3f}",
            "ce": f"{record['train/ce']:.3f}",
            "tok_s": f"{record['train/tokens_per_s']:.0f}",
        }

    def evaluate(self, step: int, progress: bool) -> tuple[dict[str, Any], str]:
        """Every process evaluates the whole split with its (identical) weights: no collective needed."""
        c = self.config
        batch_size = c.eval_global_batch_size or c.global_batch_size
        options = {"progress": progress, "forward_dtype": c.forward_dtype}
        if self.puzzles is not None:
            p = evaluate_puzzle_lm(self.model, self.puzzles, batch_size, self.device, c.eval_max_examples, **options)
            return p.record(), (
                f"eval exact_accuracy {p.exact_accuracy:.4f}, token accuracy {p.token_accuracy:.4f}, response CE {p.ce:.4f}"
            )
        r = evaluate_lm(self.model, self.val_stream, c.seq_len, batch_size, self.device, c.eval_max_tokens, **options)
        record = {
            "eval/ce": r.ce,
            "eval/perplexity": r.perplexity,
            "eval/tokens": r.tokens,
            "eval/tokens_per_s": r.tokens_per_s,
            **{f"eval/{k}": v for k, v in r.metrics.items()},
        }
        return record, f"val CE {r.ce:.4f}, perplexity {r.perplexity:.2f}"

    def load_weights(self, ckpt: Path) -> None:
        weights, saved = read_weights(ckpt)
        # The init's seed is no property of loaded weights: a run saved before the run's seed reached the head's
        # generator (arch.seed 0 whatever the run's seed) resumes.
        own = {k: v for k, v in self.model_config().items() if k != "seed"}
        saved = None if saved is None else {k: v for k, v in saved.items() if k != "seed"}
        if saved is not None and saved != own:
            diff = sorted(k for k in set(own) | set(saved) if own.get(k) != saved.get(k))
            details = ", ".join(f"{k}: {saved.get(k)} vs {own.get(k)}" for k in diff[:3])
            raise UserError(f"{ckpt}: checkpoint is from another arch config ({details})")
        load_weights(self.model, weights, ckpt)

    def state(self) -> dict[str, Any]:
        """Nothing beyond the weights (a head's own state is in its buffers); the key keeps state.pt's layout."""
        return {"model_state": None}

    def load_state(self, state: dict[str, Any]) -> None:
        pass

    def first_record(self) -> dict[str, Any]:
        sizes = (
            self.puzzles.record()
            if self.puzzles is not None
            else {"train_tokens": len(self.train_stream), "val_tokens": len(self.val_stream)}
        )
        return {"vocab_size": self.vocab_size, **sizes}

    def saved_config(self) -> TrainConfig:
        return self.config.model_copy(update={"arch": self.model_config()})

    def model_config(self) -> dict[str, Any]:
        return self.model.config.model_dump(mode="json")

    def write_run_files(self, run_dir: Path) -> None:
        if self.puzzles is None:
            tokenizer = self.data.tokenizer()
            save_tokenizer(tokenizer, run_dir)
            atomic_write_text(run_dir / TOKENIZER_META, json.dumps(tokenizer.record(), indent=2) + "\n")
