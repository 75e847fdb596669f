"""`hrm eval`: the --adapt route (commands/adapt.py `eval_adapted`, the test split's tasks as new ones) or the
evaluation of a run or checkpoint (evaluate/run.py `evaluate_run`), with its outputs claimed before the work and
written after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hrm_reason.commands.adapt import eval_adapted
from hrm_reason.commands.cli_options import one_of, write_json
from hrm_reason.evaluate.run import evaluate_run, format_result
from hrm_reason.outputs import EVAL_JSON, SUBMISSION_OUT, claim


def eval_command(
    run: Path | None,
    checkpoint: Path | None,
    config: Path | None,
    data: Path | None,
    mmax: int | None,
    batch_size: int | None,
    max_examples: int | None,
    max_tokens: int | None,
    seq_len: int | None,
    adapt_steps: int | None,
    json_out: Path | None,
    submission: Path | None,
    device: str,
    progress: bool,
    test_time: Any,
) -> Iterator[str]:
    """What `hrm eval` prints, line by line as the work goes: the results, then where --submission and --json went.
    With --adapt (`adapt_steps`), `eval_adapted` answers, refusing the flags it does not use."""
    if adapt_steps is not None:
        others = {"--checkpoint": checkpoint, "--config": config, "--batch-size": batch_size}
        others |= {"--max-examples": max_examples, "--max-tokens": max_tokens, "--seq-len": seq_len}
        yield eval_adapted(run, data, adapt_steps, mmax, json_out, submission, device, progress, others, test_time)
        return
    # --json and --submission: new or their own, checked before the evaluation (hrm_reason.outputs)
    claim(submission, SUBMISSION_OUT)
    claim(json_out, EVAL_JSON)
    result = evaluate_run(
        one_of(run, checkpoint),
        config,
        data,
        mmax,
        batch_size,
        max_examples,
        device,
        progress=progress,
        max_tokens=max_tokens,
        seq_len=seq_len,
        arc_submission=submission is not None,
        test_time=test_time,
    )
    arc_submission = getattr(result, "extra", {}).pop("arc_submission", None)
    yield format_result(result)
    if submission is not None and arc_submission is not None:
        yield write_json(submission, arc_submission, indent=None)
    if json_out is not None:
        yield write_json(json_out, result.to_dict())
