"""`hrm eval`'s own batch size (issue #36): without --batch-size or eval_global_batch_size an ACT puzzle model is
evaluated at the largest power-of-two multiple of its training batch that fits a quarter of the free memory, up to
1,024; the batch changes the time, never the numbers. And `--json` records what was evaluated, on what, by what."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import hrm_reason.evaluate.run as run_module
from hrm_reason.config import load_config
from hrm_reason.data.puzzle import load_split
from hrm_reason.evaluate.run import MAX_EVAL_BATCH, act_eval_batch, evaluate_run
from hrm_reason.train.loop import train
from tests.helpers import hrm_in_process, tiny_config, write_original_layout


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("eval_batch")
    data = write_original_layout(root / "sudoku4")
    return train(tiny_config(data, root / "run", "epochs=4", "eval_interval=4"), progress=False)


def test_the_default_grows_with_free_memory_within_its_bounds(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(run / "config.yaml")
    split = load_split(config.data_path, "test")

    def batch(free: int, global_batch: int | None = None, examples: int | None = None) -> int:
        monkeypatch.setattr(run_module, "free_memory", lambda device: free)
        c = config if global_batch is None else config.model_copy(update={"global_batch_size": global_batch})
        return act_eval_batch(c, split, torch.device("cpu"), examples)

    assert config.global_batch_size == 8
    assert batch(0) == 8  # never below the training batch, which trained on this machine
    assert batch(1 << 40) == MAX_EVAL_BATCH
    assert batch(1 << 40, global_batch=768) == 768  # 1,536 would pass the cap
    mid = batch(64 << 20)
    assert 8 < mid < MAX_EVAL_BATCH and mid & (mid - 1) == 0 and batch(32 << 20) == mid // 2
    # no larger than the first power of two that holds the examples (the batch is padded), never below training's
    assert batch(1 << 40, examples=12) == 16 and batch(1 << 40, examples=16) == 16
    assert batch(1 << 40, examples=3) == 8 and batch(1 << 40, examples=10**6) == MAX_EVAL_BATCH


def test_a_small_test_split_is_evaluated_in_a_batch_its_size(
    run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    real = run_module.evaluate
    monkeypatch.setattr(run_module, "evaluate", lambda *a, **k: sizes.append(a[3]) or real(*a, **k))
    monkeypatch.setattr(run_module, "free_memory", lambda device: 1 << 40)
    examples = load_split(load_config(run / "config.yaml").data_path, "test").num_examples
    evaluate_run(run, None, None, 2, None, None, "cpu", progress=False)
    evaluate_run(run, None, None, 2, None, 3, "cpu", progress=False)
    assert sizes == [max(8, 1 << (examples - 1).bit_length()), 8]  # not MAX_EVAL_BATCH rows, mostly padding


def test_the_batch_changes_no_number(run: Path) -> None:
    small = evaluate_run(run, None, None, 6, 2, None, "cpu", progress=False)
    default = evaluate_run(run, None, None, 6, None, None, "cpu", progress=False)
    assert small.count == default.count > 2
    assert small.exact_accuracy == default.exact_accuracy and small.act_mean_segments == default.act_mean_segments
    assert small.token_accuracy == pytest.approx(default.token_accuracy, abs=1e-6)


def test_eval_json_records_what_was_evaluated(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "eval.json"
    code, err = hrm_in_process(
        capsys, monkeypatch, "eval", "--run", str(run), "--mmax", "2", "--json", str(out), "--quiet"
    )
    assert code in (0, None), err
    record = json.loads(out.read_text())["provenance"]
    config = load_config(run / "config.yaml")
    assert record["evaluated"] == str(run) and record["data_path"] == str(config.data_path)
    assert record["step"] == 12 and record["checkpoint"].endswith("step_12")  # 4 epochs of 24 groups, batch 8
    assert record["argv"][1:3] == ["eval", "--run"] and record["torch"] == torch.__version__
