"""`hrm compare`: every config x seed trained and evaluated, statistics that match the runs, reruns that skip finished
runs and resume interrupted ones, the tables, the plots, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import statistics
from pathlib import Path

import pytest
import torch

import hrm_reason.compare as compare_module
from hrm_reason.compare import compare
from hrm_reason.config import save_config
from hrm_reason.errors import UserError
from hrm_reason.inference import evaluate_run
from tests.helpers import tiny_config, write_original_layout
from tests.test_cli import assert_one_line_error, hrm

TINY = ["epochs=2", "eval_interval=2"]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], dict]:
    root = tmp_path_factory.mktemp("compare")
    data = write_original_layout(root / "sudoku4")
    configs = []
    for name, arch in (
        ("hrm_tiny", []),
        ("trm_tiny", ["arch.name=trm", "arch.L_layers=1", "arch.puzzle_emb_len=1", "ema=0.5"]),
    ):
        path = root / f"{name}.yaml"
        save_config(tiny_config(data, root / "unused", *arch), path)
        configs.append(path)
    out = root / "study"
    results = compare(configs, seeds=2, out=out, overrides=TINY, progress=False, command="hrm compare (test)")
    return out, configs, results


def test_every_config_and_seed_is_trained_and_evaluated(study) -> None:
    out, configs, results = study
    assert list(results["summary"]) == ["hrm_tiny", "trm_tiny"]
    assert [(r["label"], r["seed"]) for r in results["runs"]] == [
        ("hrm_tiny", 0),
        ("hrm_tiny", 1),
        ("trm_tiny", 0),
        ("trm_tiny", 1),
    ]
    for record in results["runs"]:
        run = out / "runs" / record["label"] / f"seed{record['seed']}"
        assert json.loads((run / "compare.json").read_text()) == record
        assert record["steps"] == 6 and record["train_seconds"] > 0  # 2 epochs * 24 groups / batch 8
        assert record["eval"]["mmax"] == 6  # default: twice halt_max_steps 3
        # The recorded evaluation is the checkpoint's evaluation.
        direct = evaluate_run(run, None, None, 6, None, None, "cpu", progress=False)
        assert (
            direct.exact_accuracy == record["eval"]["exact_accuracy"]
            and direct.token_accuracy == record["eval"]["token_accuracy"]
        )
    hrm_runs = [r for r in results["runs"] if r["label"] == "hrm_tiny"]
    assert hrm_runs[0]["eval"]["token_accuracy"] != hrm_runs[1]["eval"]["token_accuracy"]  # seeds differ
    assert json.loads((out / "results.json").read_text())["summary"] == results["summary"]


def test_summary_statistics_are_those_of_the_runs(study) -> None:
    _, _, results = study
    for label, entry in results["summary"].items():
        runs = [r for r in results["runs"] if r["label"] == label]
        trained = [r["eval"]["exact_accuracy"][2] for r in runs]  # after halt_max_steps = 3 segments
        assert entry["exact_accuracy"]["mean"] == pytest.approx(statistics.fmean(trained))
        assert entry["exact_accuracy"]["std"] == pytest.approx(statistics.stdev(trained))
        segments = [r["eval"]["act_mean_segments"] for r in runs]
        assert entry["act_mean_segments"]["mean"] == pytest.approx(statistics.fmean(segments))
        for m in range(6):
            column = [r["eval"]["token_accuracy"][m] for r in runs]
            assert entry["token_accuracy_per_segment"]["mean"][m] == pytest.approx(statistics.fmean(column))
            assert entry["token_accuracy_per_segment"]["std"][m] == pytest.approx(statistics.stdev(column))
        assert entry["num_params"] == runs[0]["num_params"] > 0 and entry["seeds"] == [0, 1]
    assert results["summary"]["trm_tiny"]["arch"] == "trm" and results["summary"]["hrm_tiny"]["arch"] == "hrm"
    one = compare_module.mean_std([0.25])
    assert one == {"mean": 0.25, "std": None}


def test_tables_and_plots(study) -> None:
    out, _, results = study
    text = (out / "results.md").read_text()
    e = results["summary"]["trm_tiny"]
    row = next(line for line in text.splitlines() if line.startswith("| trm_tiny | trm |"))
    assert (
        f"{e['num_params']:,}" in row
        and f"{100 * e['exact_accuracy']['mean']:.1f} ± {100 * e['exact_accuracy']['std']:.1f}% (3)" in row
    )
    assert "| config | 1 | 2 | 3 | 4 | 5 | 6 |" in text
    assert "hrm compare (test)" in text
    names = sorted(Path(p).name for p in results["plots"])
    assert names == ["accuracy_vs_segments.png", "act_vs_fixed_segments.png", "exact_accuracy.png"]
    assert all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in results["plots"])


def test_rerun_skips_finished_runs_and_resumes_interrupted_ones(study, monkeypatch: pytest.MonkeyPatch) -> None:
    out, configs, results = study
    calls: list[tuple[str, bool]] = []
    real_train = compare_module.train

    def counting_train(config, resume=False, progress=True):
        calls.append((config.run_dir, resume))
        return real_train(config, resume=resume, progress=progress)

    monkeypatch.setattr(compare_module, "train", counting_train)
    again = compare(configs, seeds=2, out=out, overrides=TINY, progress=False, command="hrm compare (test)")
    assert calls == [] and again["summary"] == results["summary"]

    # Died after training but before its evaluation was written: resumed (nothing left to train), evaluated again.
    (out / "runs" / "trm_tiny" / "seed1" / "compare.json").unlink()
    # Died before its first checkpoint: started again from scratch.
    partial = out / "runs" / "hrm_tiny" / "seed0"
    shutil.rmtree(partial / "checkpoints")
    (partial / "compare.json").unlink()
    again = compare(configs, seeds=2, out=out, overrides=TINY, progress=False, command="hrm compare (test)")
    assert calls == [(str(partial), False), (str(out / "runs" / "trm_tiny" / "seed1"), True)]
    assert again["summary"]["trm_tiny"]["exact_accuracy"] == pytest.approx(
        results["summary"]["trm_tiny"]["exact_accuracy"]
    )
    first, rerun = results["runs"][0]["eval"], again["runs"][0]["eval"]  # same seed: the same run again
    assert rerun["exact_accuracy"] == first["exact_accuracy"] and rerun["token_accuracy"] == pytest.approx(
        first["token_accuracy"]
    )


def test_bad_requests_are_one_line_errors(study, tmp_path: Path) -> None:
    _, configs, _ = study
    with pytest.raises(UserError, match="sets seed"):
        compare(configs, 1, tmp_path, overrides=["seed=3"], progress=False)
    twin = tmp_path / "other"
    twin.mkdir()
    shutil.copy(configs[0], twin / configs[0].name)
    with pytest.raises(UserError, match="two configs are named hrm_tiny"):
        compare([configs[0], twin / configs[0].name], 1, tmp_path, progress=False)
    with pytest.raises(UserError, match="arch.hidden_size"):
        compare(configs, 1, tmp_path, overrides=["arch.hidden_size=-1"], progress=False)
    assert not (tmp_path / "runs").exists()  # nothing trains before every config is valid
    assert_one_line_error(
        hrm("compare", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "o")), "missing.yaml", "not found"
    )


def test_compare_command(study, tmp_path: Path) -> None:
    _, configs, _ = study
    proc = hrm(
        "compare", str(configs[1]), "--seeds", "1", "--out", str(tmp_path / "o"), "--mmax", "4", "--quiet", *TINY
    )
    assert proc.returncode == 0, proc.stderr
    assert "| trm_tiny | trm |" in proc.stdout and f"wrote {tmp_path / 'o' / 'results.json'}" in proc.stdout
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert (
        results["summary"]["trm_tiny"]["mmax"] == 4 and results["summary"]["trm_tiny"]["exact_accuracy"]["std"] is None
    )
    assert results["command"].startswith("hrm compare ") and "epochs=2" in results["command"]


def test_parallel_jobs_give_the_runs_of_the_sequential_study(study, tmp_path: Path) -> None:
    _, configs, _ = study
    run = dict(configs=configs, seeds=2, overrides=TINY, progress=False, command="hrm compare (test)")
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))  # what each of the 2 jobs gets: the same float reductions
    try:
        sequential = compare(out=tmp_path / "sequential", **run)
    finally:
        torch.set_num_threads(threads)
    parallel = compare(out=tmp_path / "parallel", jobs=2, **run)
    for a, b in zip(sequential["runs"], parallel["runs"], strict=True):
        assert (a["label"], a["seed"], a["steps"]) == (b["label"], b["seed"], b["steps"])
        assert a["eval"] == b["eval"]  # CPU training is deterministic per seed, in whichever process it runs
