"""The training loop of the language-model heads: one backward and one optimizer step per batch, periodic validation,
checkpoints, resume.

Unlike the puzzle trainer (deep supervision, one step per ACT segment, carries between steps) there is no state
between batches: step s trains on the windows drawn from (seed, s), so a resumed run reproduces an uninterrupted one.
Per step: forward with labels (the head shifts them and adds its auxiliary terms to `loss`), backward, gradient
clipping, the AdamAtan2 (or AdamW) step under the warmup + cosine schedule, then `model.post_step()` if the head has
one (HAM's threshold controller). A head with state outside its weights (an optimizer of its own) may expose
`training_state() -> dict` and `load_training_state(dict)`; it is saved in state.pt.
Logged to metrics.jsonl: train loss, CE, LR, gradient norm, tokens/s and the head's metrics every step; validation CE,
perplexity and tokens/s every eval_interval steps.
A puzzle dataset as data_path (the original HRM layout) trains on PrefixLM puzzle sequences instead (lm_puzzle.py:
puzzle as bidirectional prefix, solution as causal response); its periodic evaluation is the exact and token accuracy
of greedy decoding on the test split (eval/exact_accuracy, eval/accuracy) and the response CE.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from hrm_reason.atomic import atomic_write_text
from hrm_reason.checkpoint import STATE, find_checkpoint, load_weights, read_weights, save_checkpoint
from hrm_reason.data import dataset_kind
from hrm_reason.errors import UserError
from hrm_reason.lm_config import LMTrainConfig, save_lm_config
from hrm_reason.lm_data import TOKENIZER_META, load_text_dataset, save_tokenizer, train_batch
from hrm_reason.lm_eval import autocast_context, evaluate_lm
from hrm_reason.lm_puzzle import PuzzleLMData, evaluate_puzzle_lm, forward_sequences
from hrm_reason.models.registry import build_lm
from hrm_reason.optim import cosine_schedule_with_warmup, make_adam_atan2
from hrm_reason.train import ExternalLogger, MetricsLog, StopRequest, TrainingDiverged, resolve_device


def default_lm_run_dir(config: LMTrainConfig) -> Path:
    return Path("runs") / f"{Path(config.data_path).name}-{config.arch['name']}-seed{config.seed}"


def make_optimizer(config: LMTrainConfig, model: nn.Module, device: torch.device) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    betas = (config.beta1, config.beta2)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=config.lr, betas=betas, weight_decay=config.weight_decay)
    return make_adam_atan2(params, lr=config.lr, betas=betas, weight_decay=config.weight_decay, device=device)


def _scalar_metrics(metrics: dict[str, torch.Tensor], prefix: str) -> dict[str, float]:
    return {f"{prefix}{k}": float(v) for k, v in metrics.items() if isinstance(v, torch.Tensor) and v.numel() == 1}


def train_lm(config: LMTrainConfig, resume: bool = False, progress: bool = True) -> Path:
    """Train (or resume) an LM head on a text dataset (or on puzzle sequences); returns the run directory."""
    device = resolve_device(config.device)
    run_dir = Path(config.run_dir) if config.run_dir else default_lm_run_dir(config)
    puzzles = PuzzleLMData(config.data_path) if dataset_kind(config.data_path) == "puzzle" else None  # PrefixLM on puzzles
    if puzzles is None:
        data = load_text_dataset(config.data_path)
        train_stream, val_stream = data.splits["train"], data.splits["val"]
        if len(train_stream) < config.seq_len + 1:
            raise UserError(f"{config.data_path}: the train split has {len(train_stream)} tokens, fewer than seq_len + 1 = {config.seq_len + 1}")
        if len(val_stream) < 2:
            raise UserError(f"{config.data_path}: the val split has {len(val_stream)} tokens; nothing to validate on")
    vocab_size = data.vocab_size if puzzles is None else puzzles.layout.vocab_size
    if not resume and run_dir.exists() and any(run_dir.iterdir()):
        raise UserError(f"run directory {run_dir} is not empty: pass --resume to continue it, or choose another --run-dir")

    model = build_lm(config.arch, vocab_size, device, config.seed)
    if puzzles is not None:
        puzzles.check_model(model, config.data_path)
    optimizer = make_optimizer(config, model, device)
    step, train_seconds = 0, 0.0
    if resume:
        ckpt = find_checkpoint(run_dir)
        weights, saved = read_weights(ckpt)
        own = model.config.model_dump(mode="json")
        if saved is not None and saved != own:
            diff = sorted(k for k in set(own) | set(saved) if own.get(k) != saved.get(k))
            raise UserError(f"{ckpt}: checkpoint is from another arch config ({', '.join(f'{k}: {saved.get(k)} vs {own.get(k)}' for k in diff[:3])})")
        load_weights(model, weights, ckpt)
        state = torch.load(ckpt / STATE, map_location="cpu", weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        step, train_seconds = state["step"], state.get("train_seconds", 0.0)
        if state.get("model_state") is not None and hasattr(model, "load_training_state"):
            model.load_training_state(state["model_state"])

    run_dir.mkdir(parents=True, exist_ok=True)
    resolved = config.model_copy(update={"run_dir": str(run_dir), "arch": model.config.model_dump(mode="json")})
    save_lm_config(resolved, run_dir / "config.yaml")
    if puzzles is None:
        tokenizer = data.tokenizer()
        save_tokenizer(tokenizer, run_dir)
        atomic_write_text(run_dir / TOKENIZER_META, json.dumps(tokenizer.record(), indent=2) + "\n")
    metrics = MetricsLog(run_dir / "metrics.jsonl", step if resume else None)
    external = ExternalLogger(config.logger, config, run_dir)  # type: ignore[arg-type]  # reads project_name, run_name, model_dump
    if not resume:
        sizes = puzzles.record() if puzzles is not None else {"train_tokens": len(train_stream), "val_tokens": len(val_stream)}
        metrics.write({"step": 0, "num_params": sum(p.numel() for p in model.parameters()), "vocab_size": vocab_size, **sizes})
    params = [p for p in model.parameters() if p.requires_grad]
    post_step = getattr(model, "post_step", None)
    tokens_per_step = config.global_batch_size * (config.seq_len if puzzles is None else puzzles.layout.seq_len)

    def checkpoint() -> None:
        state = {"optimizer": optimizer.state_dict(), "step": step, "train_seconds": train_seconds,
                 "model_state": model.training_state() if hasattr(model, "training_state") else None}
        save_checkpoint(run_dir, step, model, model.config.model_dump(mode="json"), state)

    def run_eval() -> None:
        if puzzles is not None:
            run_puzzle_eval()
            return
        result = evaluate_lm(model, val_stream, config.seq_len, config.eval_batch_size or config.global_batch_size, device,
                             config.eval_max_tokens, progress=progress, forward_dtype=config.forward_dtype)
        record = {"step": step, "eval/ce": result.ce, "eval/perplexity": result.perplexity, "eval/tokens": result.tokens,
                  "eval/tokens_per_s": result.tokens_per_s, **{f"eval/{k}": v for k, v in result.metrics.items()}}
        metrics.write(record)
        external.log(record)
        tqdm.write(f"step {step}: val CE {result.ce:.4f}, perplexity {result.perplexity:.2f}")

    def run_puzzle_eval() -> None:
        result = evaluate_puzzle_lm(model, puzzles, config.eval_batch_size or config.global_batch_size, device,
                                    config.eval_max_examples, progress=progress, forward_dtype=config.forward_dtype)
        record = {"step": step, **result.record()}
        metrics.write(record)
        external.log(record)
        tqdm.write(f"step {step}: eval exact_accuracy {result.exact_accuracy:.4f}, token accuracy {result.token_accuracy:.4f}, "
                   f"response CE {result.ce:.4f}")

    bar = tqdm(total=config.max_steps, initial=step, desc="train", unit="step", disable=not progress, dynamic_ncols=True)
    model.train()
    stopped = out_of_time = False
    try:
        with StopRequest() as stop:
            while step < config.max_steps and not stopped and not out_of_time:
                if puzzles is None:
                    ids = train_batch(train_stream, config.global_batch_size, config.seq_len, config.seed, step).to(device)
                else:
                    seqs = puzzles.train_batch(config.global_batch_size, config.seed, step).to(device)
                lr = cosine_schedule_with_warmup(step + 1, config.lr, config.lr_warmup_steps, config.max_steps, config.lr_min_ratio)
                start = time.perf_counter()
                with autocast_context(device, config.forward_dtype):
                    out = model(ids, labels=ids) if puzzles is None else forward_sequences(model, seqs)
                loss = out.loss
                if loss is None:
                    raise UserError(f"arch {config.arch['name']}: the head returned no loss for labelled input")
                if not torch.isfinite(loss.detach()):
                    raise TrainingDiverged(
                        f"loss became {loss.item()} at step {step + 1}; stopped without saving this step. "
                        f"The last good checkpoint is kept in {run_dir / 'checkpoints'} (try a lower lr)"
                    )
                loss.backward()
                max_norm = config.grad_clip if config.grad_clip is not None else math.inf
                grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if post_step is not None:
                    post_step()
                loss_value = loss.item()  # synchronises, so the step time below is the step's
                seconds = time.perf_counter() - start
                train_seconds += seconds
                step += 1

                ce = float(out.metrics["ce"]) if "ce" in out.metrics else loss_value
                record = {"step": step, "train/loss": loss_value, "train/ce": ce, "train/lr": lr, "train/grad_norm": float(grad_norm),
                          "train/tokens_per_s": tokens_per_step / max(seconds, 1e-9),
                          **_scalar_metrics({k: v for k, v in out.metrics.items() if k != "ce"}, "train/")}
                metrics.write(record)
                external.log(record)
                bar.set_postfix(loss=f"{loss_value:.3f}", ce=f"{ce:.3f}", tok_s=f"{record['train/tokens_per_s']:.0f}", refresh=False)
                bar.update(1)
                stopped = stop.requested
                out_of_time = config.max_seconds is not None and train_seconds >= config.max_seconds
                if step % config.eval_interval == 0 or step == config.max_steps or stopped or out_of_time:
                    if not stopped:
                        run_eval()
                    checkpoint()
                elif config.checkpoint_every_steps and step % config.checkpoint_every_steps == 0:
                    checkpoint()
    finally:
        bar.close()
        metrics.close()
        external.close()
    if stopped:
        tqdm.write(f"stopped at step {step}; checkpoint written. Resume with: hrm train --run-dir {run_dir} --resume", file=sys.stderr)
        raise KeyboardInterrupt
    return run_dir
