"""The one evaluation entry (`hrm eval`): load a run, a checkpoint (ours or an original HRM one) or a transformers
HrmText directory through `hrm_reason.load`, and evaluate it the way its model family is evaluated.

- ACT puzzle models: accuracy after every segment m = 1..mmax on the test split and the ACT result (evaluate.py);
- LM heads on a text dataset: CE, perplexity and tokens/s on the val split (lm_eval.py);
- LM heads on a puzzle dataset (PrefixLM): exact and token accuracy of greedy decoding on the test split (lm_puzzle.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hrm_reason.config import TrainConfig
from hrm_reason.data import PuzzleSplit, dataset_kind, load_split
from hrm_reason.errors import UserError
from hrm_reason.evaluate import EvalResult, evaluate, format_table
from hrm_reason.lm_eval import LMEvalResult, evaluate_lm, format_lm_result
from hrm_reason.lm_puzzle import (
    PuzzleLMData,
    PuzzleLMEvalResult,
    evaluate_puzzle_lm,
    format_puzzle_result,
)
from hrm_reason.load import load_run, run_config
from hrm_reason.runtime.device import resolve_device
from hrm_reason.tasks import task_metrics, task_transforms
from hrm_reason.test_time import TestTimeEval, TestTimeOptions, format_test_time

Result = EvalResult | LMEvalResult | PuzzleLMEvalResult


def load_model_for_eval(
    path: Path, config_path: Path | None, data: Path | None, device_name: str
) -> tuple[Any, TrainConfig, PuzzleSplit, Any]:
    """(model, config, test split, device) of an ACT puzzle run, for evaluations that walk the test split."""
    device = resolve_device(device_name)
    loaded = load_run(path, device, config_path, data)
    if loaded.family != "act":
        raise UserError(f"{path}: a language-model head, not an ACT puzzle model")
    return (
        loaded.model,
        loaded.config,
        load_split(data if data is not None else loaded.config.data_path, "test"),
        device,
    )


def evaluate_run(
    path: Path,
    config_path: Path | None = None,
    data: Path | None = None,
    mmax: int = 16,
    batch_size: int | None = None,
    max_examples: int | None = None,
    device_name: str = "auto",
    progress: bool = True,
    max_tokens: int | None = None,
    seq_len: int | None = None,
    arc_submission: bool = False,
    test_time: TestTimeOptions | None = None,
) -> Result:
    """Evaluate whatever `path` holds, dispatching on its model family. `test_time` (ACT puzzle models only): copies,
    samples and the blank puzzle identifier (test_time.py); its table joins the result's extra as "test_time"."""
    device = resolve_device(device_name)
    test_time = test_time or TestTimeOptions()
    if arc_submission:  # before loading: the dataset decides whether there is a submission to write
        from hrm_reason.tasks.arc import require_arc_dataset

        require_arc_dataset(data if data is not None else run_config(path, config_path).data_path, "--submission")
    loaded = load_run(path, device, config_path, data if data is not None and dataset_kind(data) == "puzzle" else None)
    config, model = loaded.config, loaded.model
    if loaded.family != "act" and not test_time.plain:
        raise UserError(
            f"{path}: a language-model head; --tta, --samples, --noise and --puzzle-id blank are for ACT puzzle models"
        )
    if loaded.family == "act":
        split = load_split(data if data is not None else config.data_path, "test")
        bs = batch_size or config.eval_global_batch_size or config.global_batch_size
        source = None if test_time.plain else TestTimeEval(test_time, task_transforms(split, test_time.tta), mmax)
        return evaluate(
            model,
            split,
            mmax,
            bs,
            device,
            config.arch.loss.loss_type,
            max_examples,
            progress=progress,
            metrics=task_metrics(split, mmax, announce=True),
            test_time=source,
        )
    if data is None and config is None:
        raise UserError(f"{path}: no run config names its dataset; pass --data DIR (a text or puzzle dataset)")
    data_path = data if data is not None else config.data_path
    forward_dtype = config.forward_dtype if config is not None else "auto"
    if dataset_kind(data_path) == "puzzle":  # PrefixLM on puzzles
        puzzles = PuzzleLMData(data_path)
        puzzles.check_model(model, f"--data {puzzles.path}")
        bs = batch_size or (config.eval_global_batch_size or config.global_batch_size if config is not None else 64)
        return evaluate_puzzle_lm(
            model, puzzles, bs, device, max_examples, progress=progress, forward_dtype=forward_dtype
        )
    from hrm_reason.lm_data import load_text_dataset

    dataset = load_text_dataset(data_path)
    if dataset.vocab_size > model.config.vocab_size:
        raise UserError(
            f"--data {dataset.path}: its vocabulary has {dataset.vocab_size} ids, the model only {model.config.vocab_size}"
        )
    seq = seq_len or (config.seq_len if config is not None else 256)
    bs = batch_size or (config.eval_global_batch_size or config.global_batch_size if config is not None else 8)
    return evaluate_lm(
        model, dataset.splits["val"], seq, bs, device, max_tokens, progress=progress, forward_dtype=forward_dtype
    )


def format_result(result: Result) -> str:
    if isinstance(result, EvalResult):
        table = result.extra.get("test_time")
        return format_table(result) + (f"\n{format_test_time(table)}" if table is not None else "")
    return format_lm_result(result) if isinstance(result, LMEvalResult) else format_puzzle_result(result)
