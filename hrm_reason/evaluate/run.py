"""The one evaluation entry (`hrm eval`): load a run, a checkpoint (ours or an original HRM one) or a transformers
HrmText directory through `hrm_reason.load`, and evaluate it the way its model family is evaluated (`EVALUATORS`,
keyed by the family's name).

- ACT puzzle models: accuracy after every segment m = 1..mmax on the test split and the ACT result (evaluate/act.py);
- LM heads on a text dataset: CE, perplexity and tokens/s on the val split (evaluate/lm.py);
- LM heads on a puzzle dataset (PrefixLM): exact and token accuracy of greedy decoding on the test split
  (evaluate/prefix_lm.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hrm_reason.config import TrainConfig
from hrm_reason.data.prefix_lm import PuzzleLMData
from hrm_reason.data.puzzle import PuzzleSplit, dataset_kind, load_split
from hrm_reason.data.text import load_text_dataset
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import EvalResult, check_mmax, evaluate, format_table
from hrm_reason.evaluate.lm import LMEvalResult, evaluate_lm, format_lm_result
from hrm_reason.evaluate.prefix_lm import PuzzleLMEvalResult, evaluate_puzzle_lm, format_puzzle_result
from hrm_reason.evaluate.tta import (
    TestTimeEval,
    TestTimeOptions,
    carry_row_bytes,
    fit_batch,
    fit_to_group,
    format_test_time,
)
from hrm_reason.load import LoadedRun, load_run, run_config
from hrm_reason.models.registry import Family, family_spec
from hrm_reason.provenance import provenance
from hrm_reason.runtime.device import free_memory, resolve_device
from hrm_reason.tasks import task_metrics, task_transforms
from hrm_reason.tasks.arc import require_arc_dataset

Result = EvalResult | LMEvalResult | PuzzleLMEvalResult


def load_model_for_eval(
    path: Path, config_path: Path | None, data: Path | None, device_name: str
) -> tuple[Any, TrainConfig, PuzzleSplit, Any]:
    """(model, config, test split, device) of an ACT puzzle run, for evaluations that walk the test split."""
    device = resolve_device(device_name)
    loaded = load_run(path, device, config_path, data)
    if not family_spec(loaded.family).segments:
        raise UserError(f"{path}: a language-model head, not an ACT puzzle model")
    return (
        loaded.model,
        loaded.config,
        load_split(data if data is not None else loaded.config.data_path, "test"),
        device,
    )


DEFAULT_MMAX = 16  # segments an ACT puzzle model is evaluated for when --mmax is not given
MAX_EVAL_BATCH = 1024  # past this a CPU gains nothing and a long evaluation's progress bar stalls


def act_eval_batch(config: TrainConfig, split: PuzzleSplit, device: torch.device, examples: int | None = None) -> int:
    """`hrm eval`'s batch for an ACT puzzle model when neither --batch-size nor eval_global_batch_size is given.
    Evaluation has no backward pass, no optimizer state and keeps one segment's activations, so it fits several
    training batches: the largest power of two between the training batch and MAX_EVAL_BATCH whose estimated
    activations (a block's tensors, the attention scores, the logits: 4 bytes each, with room for intermediates) use
    at most a quarter of the memory free on the device, and no larger than the first such power that holds all
    `examples` (the batch is padded: 12 test puzzles in a batch of 1,024 would cost 85 times their compute;
    docs/commands.md, `hrm eval`)."""
    arch, meta = config.arch, split.metadata
    tokens = meta.seq_len + getattr(arch, "prefix_len", 0)
    per_example = 4 * (
        32 * tokens * arch.hidden_size + 2 * getattr(arch, "num_heads", 1) * tokens**2 + 4 * tokens * meta.vocab_size
    )
    fits = max(1, free_memory(device) // 4 // per_example)
    batch = config.global_batch_size
    while batch * 2 <= min(fits, MAX_EVAL_BATCH) and (examples is None or batch < examples):
        batch *= 2
    return batch


# The flags of `hrm eval` that only some evaluations read (docs/commands.md, `hrm eval`): (EvalOptions field, flag,
# what reads it).
ACT_ONLY = (("mmax", "--mmax", "segments of an ACT puzzle model"),)
TEXT_ONLY = (
    ("max_tokens", "--max-tokens", "validation tokens of a language-model head on a text dataset"),
    ("seq_len", "--seq-len", "window of a language-model head on a text dataset"),
)
PUZZLE_ONLY = (("max_examples", "--max-examples", "test examples of a puzzle dataset"),)


@dataclass(frozen=True)
class EvalOptions:
    """What `hrm eval` was asked, the same for every family (so each family's evaluator has one signature); an
    evaluator reads the fields that apply to its models and refuses (`refuse`) those given that do not: a flag
    accepted and ignored would report a number the user did not ask for (docs/commands.md, `hrm eval`)."""

    path: Path  # what was loaded, for error messages
    data: Path | None  # replaces the run's dataset
    mmax: int | None  # ACT: segments to evaluate (None: DEFAULT_MMAX)
    batch_size: int | None  # None: the run's eval batch size
    max_examples: int | None  # puzzle datasets: the first N test examples
    device: torch.device
    progress: bool
    max_tokens: int | None  # LM on text: val tokens to read
    seq_len: int | None  # LM on text: window length (None: the run's)
    test_time: TestTimeOptions  # ACT: copies, samples and the blank puzzle identifier (evaluate/tta.py)

    def refuse(self, unused: tuple[tuple[str, str, str], ...], what: str) -> None:
        """A one-line error naming the first flag of `unused` that was given: it has no meaning for `what`."""
        for field, flag, meaning in unused:
            if getattr(self, field) is not None:
                raise UserError(f"{flag}: {self.path} is {what}; {flag} is for the {meaning}")


def evaluate_run(
    path: Path,
    config_path: Path | None = None,
    data: Path | None = None,
    mmax: int | None = None,
    batch_size: int | None = None,
    max_examples: int | None = None,
    device_name: str = "auto",
    progress: bool = True,
    max_tokens: int | None = None,
    seq_len: int | None = None,
    arc_submission: bool = False,
    test_time: TestTimeOptions | None = None,
) -> Result:
    """Evaluate whatever `path` holds with its model family's evaluator. `test_time` (ACT puzzle models only): copies,
    samples and the blank puzzle identifier (evaluate/tta.py); its table joins the result's extra as "test_time".
    An option given (not None) that the evaluation does not read is a one-line error naming its flag."""
    device = resolve_device(device_name)
    test_time = test_time or TestTimeOptions()
    if arc_submission:  # before loading: the dataset decides whether there is a submission to write
        require_arc_dataset(data if data is not None else run_config(path, config_path).data_path, "--submission")
    loaded = load_run(path, device, config_path, data if data is not None and dataset_kind(data) == "puzzle" else None)
    if not family_spec(loaded.family).segments and not test_time.plain:
        raise UserError(
            f"{path}: a language-model head; --tta, --samples, --noise and --puzzle-id blank are for ACT puzzle models"
        )
    options = EvalOptions(path, data, mmax, batch_size, max_examples, device, progress, max_tokens, seq_len, test_time)
    result = EVALUATORS[loaded.family](loaded, options)
    result.provenance = {
        "evaluated": str(path),
        "checkpoint": str(loaded.checkpoint),
        "step": checkpoint_step(loaded.checkpoint),
        "data_path": str(data if data is not None else loaded.config.data_path if loaded.config else None),
        **{k: v for k, v in provenance().items() if k != "event"},
    }
    return result


def checkpoint_step(checkpoint: Path) -> int | None:
    """The training step of a checkpoint, from its name: ours and the original code's are both step_N (reading it
    from state.pt would load the optimizer state for one number)."""
    digits = checkpoint.name.removeprefix("step_")
    return int(digits) if digits.isdigit() else None


def evaluate_act_run(loaded: LoadedRun, options: EvalOptions) -> EvalResult:
    """An ACT puzzle model on its test split, segment by segment, with test-time compute when asked for: copies beyond
    the task's group are capped, and the batch cut to what the trajectories' carried states leave room for, each with
    a notice on stderr (evaluate/tta.py `fit_to_group`, `fit_batch`)."""
    options.refuse(TEXT_ONLY, f"an ACT puzzle model ({loaded.config.model_name})")
    config, test_time = loaded.config, options.test_time
    mmax = options.mmax if options.mmax is not None else DEFAULT_MMAX
    check_mmax(mmax, config.arch.halt_max_steps)
    split = load_split(options.data if options.data is not None else config.data_path, "test")
    examples = split.num_examples if options.max_examples is None else min(options.max_examples, split.num_examples)
    bs = options.batch_size or config.eval_global_batch_size or act_eval_batch(config, split, options.device, examples)
    source = None
    if not test_time.plain:
        transforms = task_transforms(split, test_time.tta)
        test_time, capped = fit_to_group(test_time, transforms)
        cut = None
        if test_time.trajectories > 1:
            row = carry_row_bytes(loaded.model, split.metadata.seq_len, options.device)
            bs, cut = fit_batch(bs, test_time, row, free_memory(options.device))
        for notice in (capped, cut):
            if notice is not None:
                print(notice, file=sys.stderr)
        source = TestTimeEval(test_time, transforms, mmax)
    return evaluate(
        loaded.model,
        split,
        mmax,
        bs,
        options.device,
        config.arch.loss.loss_type,
        options.max_examples,
        progress=options.progress,
        metrics=task_metrics(split, mmax, announce=True),
        test_time=source,
    )


def evaluate_lm_run(loaded: LoadedRun, options: EvalOptions) -> LMEvalResult | PuzzleLMEvalResult:
    """An LM head on the dataset given or its run's: greedy decoding on a puzzle dataset (PrefixLM), else
    cross-entropy on a text dataset's val split."""
    model, config, path = loaded.model, loaded.config, options.path
    options.refuse(ACT_ONLY, "a language-model head")
    if options.data is None and config is None:
        raise UserError(f"{path}: no run config names its dataset; pass --data DIR (a text or puzzle dataset)")
    data_path = options.data if options.data is not None else config.data_path
    kind = dataset_kind(data_path)  # neither: the dataset's reader below says why
    if kind is not None:
        unused = TEXT_ONLY if kind == "puzzle" else PUZZLE_ONLY
        options.refuse(unused, f"a language-model head evaluated on the {kind} dataset {data_path}")
    forward_dtype = config.forward_dtype if config is not None else "auto"
    run_bs = config.eval_global_batch_size or config.global_batch_size if config is not None else None
    if kind == "puzzle":  # PrefixLM on puzzles
        puzzles = PuzzleLMData(data_path)
        puzzles.check_model(model, f"--data {puzzles.path}")
        bs = options.batch_size or run_bs or 64
        return evaluate_puzzle_lm(
            model,
            puzzles,
            bs,
            options.device,
            options.max_examples,
            progress=options.progress,
            forward_dtype=forward_dtype,
        )
    dataset = load_text_dataset(data_path)
    if dataset.vocab_size > model.config.vocab_size:
        raise UserError(
            f"--data {dataset.path}: its vocabulary has {dataset.vocab_size} ids, the model only {model.config.vocab_size}"
        )
    seq = options.seq_len or (config.seq_len if config is not None else 256)
    bs = options.batch_size or run_bs or 8
    val = dataset.splits["val"]
    return evaluate_lm(
        model, val, seq, bs, options.device, options.max_tokens, progress=options.progress, forward_dtype=forward_dtype
    )


# Each family's evaluator, one signature: (loaded run, options) -> its result.
EVALUATORS: dict[Family, Callable[[LoadedRun, EvalOptions], Result]] = {
    "act": evaluate_act_run,
    "lm": evaluate_lm_run,
}


def format_result(result: Result) -> str:
    if isinstance(result, EvalResult):
        table = result.extra.get("test_time")
        return format_table(result) + (f"\n{format_test_time(table)}" if table is not None else "")
    return format_lm_result(result) if isinstance(result, LMEvalResult) else format_puzzle_result(result)
