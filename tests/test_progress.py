"""Progress bars that read well where they end up (issue #36): redrawn in place on a terminal; in a log file a line
per refresh, without the carriage returns and cursor moves of nested bars; and a training bar whose exact and segs
figures mean something on every step."""

from __future__ import annotations

import io
import sys

import pytest

from hrm_reason.runtime.logs import PlainLines, progress_bar
from hrm_reason.train.act import ACTTask


def test_a_bar_in_a_log_file_writes_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    PlainLines().write("\rtrain:  10%|#         | 1/10\r\x1b[A\x1b[2Keval (mmax=8):  50%|#####     | 4/8\n")
    assert log.getvalue().splitlines() == ["train:  10%|#         | 1/10", "eval (mmax=8):  50%|#####     | 4/8"]
    log.truncate(0)
    log.seek(0)
    with progress_bar(total=3, desc="steps") as bar:  # stderr is not a terminal here
        for _ in range(3):
            bar.update(1)
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text and text.splitlines()[-1].startswith("steps: 100%")
    assert progress_bar(enabled=False, total=3).disable


def test_the_training_bar_keeps_the_last_steps_figures_where_nothing_halted() -> None:
    task = ACTTask.__new__(ACTTask)  # postfix reads no config beyond the batch size
    task.config = type("C", (), {"global_batch_size": 8})()
    task.exact_shown, task.segments_shown = "-", "-"
    first = task.postfix({"train/lm_loss": 1.0, "train/count": 0}, rate=1.0)
    assert (first["exact"], first["segs"]) == ("-", "-")  # nothing has halted yet: nothing to show, not 0
    halted = {"train/lm_loss": 0.9, "train/count": 5, "train/exact_accuracy": 0.4, "train/steps": 3.2}
    assert task.postfix(halted, rate=1.0)["segs"] == "3.2"
    later = task.postfix({"train/lm_loss": 0.8, "train/count": 0}, rate=1.0)
    assert (later["exact"], later["segs"], later["loss"]) == ("0.400", "3.2", "0.800")
