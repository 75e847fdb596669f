"""The `hrm` command as a user runs it: one-line errors with a non-zero exit, Ctrl-C, eval output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, TINY_CLI, assert_one_line_error, run_hrm, write_original_layout


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("cli") / "sudoku4")


@pytest.fixture(scope="module")
def run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("cli") / "run"
    proc = run_hrm(
        "train", "--data", str(data), "--run-dir", str(run_dir), "--quiet", "epochs=2", "eval_interval=2", *TINY_CLI
    )
    assert proc.returncode == 0, proc.stderr
    return run_dir


@pytest.mark.parametrize(
    "override,fragments",
    [
        ("arch.hiden_size=64", ("arch.hiden_size", "unknown key")),
        ("lr=fast", ("'lr'", "fast")),
        ("arch.pos_encodings=alibi", ("arch.pos_encodings", "alibi")),
        ("epochs=3", ("eval_interval", "divide")),
        ("nonsense", ("nonsense", "key=value")),
    ],
)
def test_bad_config_is_one_line(data: Path, tmp_path: Path, override: str, fragments: tuple[str, ...]) -> None:
    assert_one_line_error(run_hrm("train", "--data", str(data), "--run-dir", str(tmp_path / "r"), override), *fragments)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["build-data", "maze", "--bogus"], "--bogus"),
        (["eval", "--mmax", "0", "--run", "x"], "--mmax"),
        (["viz", "puzzle"], "--data"),
    ],
)
def test_usage_errors_are_one_line(args: list[str], fragment: str) -> None:
    assert_one_line_error(run_hrm(*args), fragment)


def test_bad_config_file_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("arch:\n  hidden_size: [1, 2\n")
    assert_one_line_error(run_hrm("train", "--config", str(cfg)), str(cfg), "YAML")
    assert_one_line_error(run_hrm("train", "--config", str(tmp_path / "missing.yaml")), "missing.yaml", "not found")


def test_missing_or_malformed_dataset_is_one_line(data: Path, tmp_path: Path) -> None:
    def train_on(dataset: Path) -> subprocess.CompletedProcess:
        return run_hrm("train", "--data", str(dataset), "--run-dir", str(tmp_path / "r"), "device=cpu")

    assert_one_line_error(train_on(tmp_path / "nope"), "nope", "does not exist")
    broken = tmp_path / "broken"
    (broken / "train").mkdir(parents=True)
    (broken / "train" / "dataset.json").write_text("{not json")
    assert_one_line_error(train_on(broken), "dataset.json", "not valid JSON")
    (broken / "train" / "dataset.json").write_text(json.dumps({"pad_id": 0}))
    assert_one_line_error(train_on(broken), "dataset.json", "ignore_label_id")
    # Arrays missing and arrays inconsistent with the metadata.
    import shutil

    shutil.copytree(data, tmp_path / "partial")
    (tmp_path / "partial" / "train" / "all__labels.npy").unlink()
    assert_one_line_error(
        train_on(tmp_path / "partial"),
        "all__labels.npy",
        "not found",
    )
    shutil.copytree(data, tmp_path / "wrong")
    meta = json.loads((tmp_path / "wrong" / "test" / "dataset.json").read_text())
    meta["seq_len"] = 81
    (tmp_path / "wrong" / "test" / "dataset.json").write_text(json.dumps(meta))
    assert_one_line_error(train_on(tmp_path / "wrong"), "seq_len=81")


def test_eval_table_and_json(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    proc = run_hrm("eval", "--run", str(run), "--mmax", "5", "--json", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["mmax"] == 5 and len(result["exact_accuracy"]) == 5 and result["count"] == 16
    table_rows = [line.split() for line in proc.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [int(r[0]) for r in table_rows] == [1, 2, 3, 4, 5]
    assert float(table_rows[-1][2]) == pytest.approx(result["token_accuracy"][-1], abs=1e-4)


def test_checkpoint_from_another_config_is_one_line(run: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "other.yaml"
    cfg.write_text((run / "config.yaml").read_text().replace("hidden_size: 32", "hidden_size: 64"))
    proc = run_hrm("eval", "--checkpoint", str(run / "checkpoints" / "step_6"), "--config", str(cfg), "--quiet")
    assert_one_line_error(proc, "hidden_size", "another config")
    proc = run_hrm("train", "--run-dir", str(run), "--resume", "--config", str(cfg), "--quiet")
    assert_one_line_error(proc, "hidden_size")


def test_existing_run_needs_resume(run: Path, data: Path) -> None:
    assert_one_line_error(
        run_hrm("train", "--data", str(data), "--run-dir", str(run), *TINY_CLI, "epochs=2", "eval_interval=2"),
        "--resume",
    )


def test_ctrl_c_writes_checkpoint_and_resume_continues(data: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [
        "train",
        "--data",
        str(data),
        "--run-dir",
        str(run_dir),
        "--quiet",
        "epochs=4000",
        "eval_interval=4000",
        *TINY_CLI,
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", "import cli; cli.main()", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = run_dir / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 5):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "checkpoint written" in err
    latest = (run_dir / "checkpoints" / "latest").read_text()
    step = int(latest.removeprefix("step_"))
    assert step >= 4
    assert max(json.loads(line)["step"] for line in metrics.read_text().splitlines()) == step
    resumed = run_hrm("train", "--run-dir", str(run_dir), "--resume", "--quiet", "max_steps=" + str(step + 3))
    assert resumed.returncode == 0, resumed.stderr
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines() if "train/lm_loss" in line]
    assert steps == list(range(1, step + 4))
