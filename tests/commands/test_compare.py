"""`hrm compare`: every config x seed trained and evaluated, statistics that match the runs, reruns that skip finished
runs and resume interrupted ones, the tables, the plots, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import statistics
from pathlib import Path

import pytest

import hrm_reason.commands.compare as compare_module
import hrm_reason.commands.compare_tables as compare_tables
from hrm_reason.commands.compare import compare, compare_runs, parse_targets
from hrm_reason.commands.compare_tables import reach, time_to_accuracy
from hrm_reason.config import save_config
from hrm_reason.errors import UserError
from hrm_reason.evaluate.run import evaluate_run
from tests.helpers import (
    assert_one_line_error,
    hrm_in_process,
    run_hrm,
    tiny_config,
    torch_threads,
    write_original_layout,
)

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
        assert entry["segments"] == 3 and entry["per_seed"] == trained
        assert entry["at_trained"]["mean"] == pytest.approx(statistics.fmean(trained))
        assert entry["at_trained"]["std"] == pytest.approx(statistics.stdev(trained))
        assert entry["at_mmax"]["mean"] == pytest.approx(statistics.fmean(r["eval"]["exact_accuracy"][5] for r in runs))
        segments = [r["eval"]["act_mean_segments"] for r in runs]
        assert entry["act_segments"]["mean"] == pytest.approx(statistics.fmean(segments))
        per_step = [r["curve"][-1]["train_cpu_seconds"] / r["steps"] for r in runs]
        assert entry["cpu_seconds_per_step"]["mean"] == pytest.approx(statistics.fmean(per_step))
        for m in range(6):
            column = [r["eval"]["token_accuracy"][m] for r in runs]
            assert entry["token_accuracy_per_segment"]["mean"][m] == pytest.approx(statistics.fmean(column))
            assert entry["token_accuracy_per_segment"]["std"][m] == pytest.approx(statistics.stdev(column))
        assert entry["num_params"] == runs[0]["num_params"] > 0 and entry["seeds"] == [0, 1]
    assert results["summary"]["trm_tiny"]["arch"] == "trm" and results["summary"]["hrm_tiny"]["arch"] == "hrm"
    one = compare_tables.mean_std([0.25])
    assert one == {"mean": 0.25, "std": None}


def test_tables_and_plots(study) -> None:
    out, _, results = study
    text = (out / "results.md").read_text()
    e = results["summary"]["trm_tiny"]
    row = next(line for line in text.splitlines() if line.startswith("| trm_tiny | trm |"))
    seeds = " / ".join(f"{100 * v:.1f}" for v in e["per_seed"])
    assert f"| {e['num_params']:,} | 2 | 6 ± 0 |" in row and f"| {seeds}% (@3) |" in row
    assert f"| {100 * e['at_trained']['mean']:.1f} ± {100 * e['at_trained']['std']:.1f}% |" in row
    assert f"% (@6) | {100 * e['act']['mean']:.1f} ± " in row
    assert "| config | 1 | 2 | 3 | 4 | 5 | 6 |" in text
    assert results["tables"]["final"] in text and results["tables"]["segments"] in text
    assert results["tables"]["time"] in text
    assert "hrm compare (test)" in text
    names = sorted(Path(p).name for p in results["plots"])
    assert names == [
        "accuracy_vs_segments.png",
        "accuracy_vs_time.png",
        "act_vs_fixed_segments.png",
        "exact_accuracy.png",
    ]
    assert all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in results["plots"])


def test_study_reports_time_to_accuracy(study) -> None:
    out, _, results = study
    tta = results["time_to_accuracy"]
    assert tta["metric"] == "exact_accuracy" and tta["targets"] == [0.5, 0.8]
    assert [(r["label"], r["seed"]) for r in tta["per_run"]] == [(r["label"], r["seed"]) for r in results["runs"]]
    for record, run in zip(results["runs"], tta["per_run"]):
        metrics = [
            json.loads(line)
            for line in (Path(out) / "runs" / record["label"] / f"seed{record['seed']}" / "metrics.jsonl")
            .read_text()
            .splitlines()
        ]
        evals = [m for m in metrics if "eval/exact_accuracy" in m]
        assert [p["step"] for p in record["curve"]] == [m["step"] for m in evals] == [6]
        point = record["curve"][0]
        assert point["eval/exact_accuracy"] == evals[0]["eval/exact_accuracy"]
        assert point["train_flops"] == 6 * metrics[0]["train_flops_per_step"] and point["examples_seen"] == 48
        assert point["train_wall_seconds"] == evals[0]["train_wall_seconds"] > 0
        for target in ("0.5", "0.8"):
            reached = reach(record["curve"], float(target))
            assert run["reached"][target] == reached
    for label, entry in tta["per_config"].items():
        for target in ("0.5", "0.8"):
            hits = [r["reached"][target] for r in tta["per_run"] if r["label"] == label and r["reached"][target]]
            assert entry["runs"] == 2 and entry[target]["reached"] == len(hits)
    text = (out / "results.md").read_text()
    assert "## Time to exact accuracy" in text and "| hrm_tiny | 50% |" in text and "| trm_tiny | 80% |" in text


def test_runs_are_summarised_without_training(study, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, _, results = study

    def no_training(*args, **kwargs):
        raise AssertionError("hrm compare --runs trained")

    monkeypatch.setattr(compare_module, "train", no_training)
    again = compare_runs([out], tmp_path / "again", command="hrm compare (test)")
    assert again["summary"] == results["summary"] and again["runs"] == results["runs"]
    assert again["time_to_accuracy"] == results["time_to_accuracy"]
    # Plain runs of hrm train (no compare.json): named by their directory less -seed<k>, time to accuracy only.
    plain = []
    for seed in (0, 1):
        plain.append(tmp_path / f"sudoku4-hrm-seed{seed}")
        shutil.copytree(
            out / "runs" / "hrm_tiny" / f"seed{seed}", plain[-1], ignore=shutil.ignore_patterns("compare.json")
        )
    loose = compare_runs(plain, tmp_path / "loose", targets=[0.1], metric="accuracy")
    assert [(r["label"], r["seed"]) for r in loose["runs"]] == [("sudoku4-hrm", 0), ("sudoku4-hrm", 1)]
    # Their final evaluation is the last one they logged: at the trained segments and with ACT, not after each m.
    final = loose["summary"]["sudoku4-hrm"]
    last = [r["curve"][-1] for r in loose["runs"]]
    assert final["per_seed"] == [p["eval/accuracy"] for p in last] and "per_segment" not in final
    assert final["act_segments"]["mean"] == pytest.approx(statistics.fmean(p["eval/steps"] for p in last))
    assert (
        final["steps"] == {"mean": 6, "std": 0.0}
        and final["num_params"] == results["summary"]["hrm_tiny"]["num_params"]
    )
    assert "segments" not in loose["tables"]
    # A run of another config under the same name is another experiment, not a third seed.
    other = tmp_path / "elsewhere" / "sudoku4-hrm-seed2"
    shutil.copytree(out / "runs" / "trm_tiny" / "seed0", other, ignore=shutil.ignore_patterns("compare.json"))
    mixed = compare_runs([*plain, other], tmp_path / "mixed", targets=[0.1], metric="accuracy")
    assert list(mixed["summary"]) == ["sudoku4-hrm", "sudoku4-hrm [2]"]
    assert mixed["summary"]["sudoku4-hrm [2]"]["arch"] == "trm" and mixed["summary"]["sudoku4-hrm"]["seeds"] == [0, 1]
    entry = loose["time_to_accuracy"]["per_config"]["sudoku4-hrm"]["0.1"]
    assert entry["reached"] == 2 and entry["step"] == {"mean": 6, "std": 0.0}  # token accuracy is over 10% at once
    text = (tmp_path / "loose" / "results.md").read_text()
    assert "| sudoku4-hrm | 10% | 2/2 |" in text and "| sudoku4-hrm | hrm |" in text
    assert (tmp_path / "loose" / "plots" / "accuracy_vs_time.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(UserError, match="--metric nope: no evaluation of these runs logs eval/nope"):
        compare_runs(plain, tmp_path / "bad", metric="nope")
    with pytest.raises(UserError, match="neither a run directory"):
        compare_runs([tmp_path], tmp_path / "bad")
    with pytest.raises(UserError, match="--targets 0.5,2"):
        parse_targets("0.5,2")
    proc = run_hrm(
        "compare",
        "--runs",
        str(plain[0]),
        "--out",
        str(tmp_path / "cli"),
        "--targets",
        "0.1,0.2",
        "--metric",
        "accuracy",
    )
    assert proc.returncode == 0, proc.stderr
    assert "| sudoku4-hrm | 20% | 1/1 |" in proc.stdout
    assert_one_line_error(
        run_hrm("compare", "--runs", str(plain[0]), "--out", str(tmp_path / "cli"), "--targets", "x"), "--targets x"
    )
    # Flags that only a study that trains uses are refused with --runs, not ignored.
    for flags, named in ((["--mmax", "8"], "--mmax"), (["--seeds", "7", "--jobs", "4"], "--seeds, --jobs")):
        proc = run_hrm("compare", "--runs", str(plain[0]), "--out", str(tmp_path / "cli"), *flags)
        assert_one_line_error(proc, named, "trains and evaluates nothing")
    # A run that has logged no evaluation yet is named, not reported as nothing.
    empty = tmp_path / "empty-seed0"
    shutil.copytree(plain[0], empty)
    (empty / "metrics.jsonl").write_text((plain[0] / "metrics.jsonl").read_text().splitlines()[0] + "\n")
    with pytest.raises(UserError, match="empty-seed0: its metrics.jsonl has no evaluation yet"):
        compare_runs([empty], tmp_path / "bad")


def test_runs_read_the_hrm_eval_json_kept_in_their_directory(
    study, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44 item 5: a plain run's `hrm eval --json` output fills @ mmax, the per-segment table and the plots of
    --runs, ACT is printed with its cap, and each row gives its test examples. Only a plain evaluation of the final
    checkpoint on the run's own data stands for the run; of several, the one with the most segments."""
    out, _, results = study
    plain = []
    for seed in (0, 1):
        plain.append(tmp_path / f"sudoku4-hrm-seed{seed}")
        shutil.copytree(
            out / "runs" / "hrm_tiny" / f"seed{seed}", plain[-1], ignore=shutil.ignore_patterns("compare.json")
        )
    bare = compare_runs(plain, tmp_path / "bare")  # no eval JSON yet: the last logged evaluation, ACT capped at N
    assert "ACT (cap; mean segments)" in bare["tables"]["final"] and "% (cap 3; " in bare["tables"]["final"]
    logged = [r["curve"][-1]["eval/count"] for r in bare["runs"]]
    assert "segments" not in bare["tables"] and bare["summary"]["sudoku4-hrm"]["counts"] == logged == [16, 16]

    def hrm_eval(run: Path, *args: str) -> dict:
        code, err = hrm_in_process(capsys, monkeypatch, "eval", "--run", str(run), "--quiet", *args)
        assert code == 0, err
        return json.loads(Path(args[args.index("--json") + 1]).read_text())

    evals = []
    for run in plain:
        evals.append(hrm_eval(run, "--mmax", "5", "--json", str(run / "eval5.json")))
        hrm_eval(run, "--mmax", "2", "--json", str(run / "eval2.json"))  # fewer segments: not the one
        test_time = ("--mmax", "8", "--samples", "2", "--noise", "0.1", "--json", str(run / "eval-samples.json"))
        assert "test_time" in hrm_eval(run, *test_time)["extra"]  # test-time compute: not it
        elsewhere = {**evals[-1], "mmax": 9, "exact_accuracy": [0.0] * 9, "token_accuracy": [0.0] * 9}
        elsewhere["provenance"] = {**evals[-1]["provenance"], "data_path": "data/another"}
        (run / "eval-other-data.json").write_text(json.dumps(elsewhere))  # another dataset's: not it
        older = {**elsewhere, "provenance": {**evals[-1]["provenance"], "step": 2}}
        (run / "eval-older.json").write_text(json.dumps(older))  # an older checkpoint's: not it
        (run / "notes.json").write_text('["not an evaluation"]')
    got = compare_runs(plain, tmp_path / "with-evals")
    assert [r["eval_json"] for r in got["runs"]] == ["eval5.json", "eval5.json"]
    entry = got["summary"]["sudoku4-hrm"]
    assert entry["mmax"] == 5 and entry["act_caps"] == [5] and entry["counts"] == [e["count"] for e in evals]
    assert entry["at_mmax"]["mean"] == pytest.approx(statistics.fmean(e["exact_accuracy"][4] for e in evals))
    assert entry["per_seed"] == [e["exact_accuracy"][2] for e in evals]  # at the trained 3 segments
    assert entry["act"]["mean"] == pytest.approx(statistics.fmean(e["act_exact_accuracy"] for e in evals))
    row = next(line for line in got["tables"]["final"].splitlines() if line.startswith("| sudoku4-hrm |"))
    assert f"| {evals[0]['count']:,} |" in row and "(@5)" in row and "(cap 5; " in row
    assert "| sudoku4-hrm |" in got["tables"]["segments"]
    plots = {Path(p).name for p in got["plots"]}
    assert {"accuracy_vs_segments.png", "act_vs_fixed_segments.png", "accuracy_vs_time.png"} <= plots
    text = (tmp_path / "with-evals" / "results.md").read_text()
    assert compare_tables.ACT_DEFINITION in text and "## Final evaluation (exact accuracy)\n" in text


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
    assert again["summary"]["trm_tiny"]["at_trained"] == pytest.approx(results["summary"]["trm_tiny"]["at_trained"])
    first, rerun = results["runs"][0]["eval"], again["runs"][0]["eval"]  # same seed: the same run again
    assert rerun["exact_accuracy"] == first["exact_accuracy"] and rerun["token_accuracy"] == pytest.approx(
        first["token_accuracy"]
    )


def test_bad_requests_are_one_line_errors(study, tmp_path: Path) -> None:
    _, configs, _ = study
    out = tmp_path / "study"
    with pytest.raises(UserError, match="sets seed"):
        compare(configs, 1, out, overrides=["seed=3"], progress=False)
    twin = tmp_path / "other"
    twin.mkdir()
    shutil.copy(configs[0], twin / configs[0].name)
    with pytest.raises(UserError, match="two configs are named hrm_tiny"):
        compare([configs[0], twin / configs[0].name], 1, out, progress=False)
    with pytest.raises(UserError, match="arch.hidden_size"):
        compare(configs, 1, out, overrides=["arch.hidden_size=-1"], progress=False)
    assert not out.exists()  # nothing trains before every config is valid
    assert_one_line_error(
        run_hrm("compare", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "o")), "missing.yaml", "not found"
    )


def test_compare_command(study, tmp_path: Path) -> None:
    _, configs, _ = study
    proc = run_hrm(
        "compare", str(configs[1]), "--seeds", "1", "--out", str(tmp_path / "o"), "--mmax", "4", "--quiet", *TINY
    )
    assert proc.returncode == 0, proc.stderr
    assert "| trm_tiny | trm |" in proc.stdout and f"wrote {tmp_path / 'o' / 'results.json'}" in proc.stdout
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    entry = results["summary"]["trm_tiny"]
    assert entry["mmax"] == 4 and entry["at_trained"]["std"] is None
    assert "(@3) |" in proc.stdout and "(@4) |" in proc.stdout  # trained with 3, evaluated up to 4
    low = run_hrm(
        "compare", str(configs[1]), "--seeds", "1", "--out", str(tmp_path / "low"), "--mmax", "2", "--quiet", *TINY
    )
    assert low.returncode == 0, low.stderr
    low_entry = json.loads((tmp_path / "low" / "results.json").read_text())["summary"]["trm_tiny"]
    assert low_entry["segments"] == 2 and "(@2) |" in low.stdout and "(@3)" not in low.stdout  # labelled as computed
    assert results["command"].startswith("hrm compare ") and "epochs=2" in results["command"]


def test_parallel_jobs_give_the_runs_of_the_sequential_study(study, tmp_path: Path) -> None:
    _, configs, _ = study
    run = dict(configs=configs, seeds=2, overrides=TINY, progress=False, command="hrm compare (test)")
    with torch_threads(max(1, (os.cpu_count() or 1) // 2)):  # what each of the 2 jobs gets: the same float reductions
        sequential = compare(out=tmp_path / "sequential", **run)
    parallel = compare(out=tmp_path / "parallel", jobs=2, **run)
    for a, b in zip(sequential["runs"], parallel["runs"], strict=True):
        assert (a["label"], a["seed"], a["steps"]) == (b["label"], b["seed"], b["steps"])
        assert a["eval"] == b["eval"]  # CPU training is deterministic per seed, in whichever process it runs


def point(step: int, accuracy: float | None, wall: float | None = None) -> dict:
    """An evaluation of a hand-made curve: wall and CPU seconds, examples and FLOPs in proportion to the step."""
    return {
        "step": step,
        "train_wall_seconds": 0.5 * step if wall is None else wall,
        "train_cpu_seconds": 1.0 * step,
        "examples_seen": 8 * step,
        "train_flops": 1e9 * step,
        "eval/exact_accuracy": accuracy,
    }


def test_reach_interpolates_between_evaluations() -> None:
    curve = [point(10, 0.2), point(20, 0.6), point(30, 0.4), point(40, 0.9)]
    at = reach(curve, 0.5)  # between steps 10 and 20, three quarters of the way: the first crossing, not the dip
    assert at == pytest.approx(
        {
            "step": 17.5,
            "train_wall_seconds": 8.75,
            "train_cpu_seconds": 17.5,
            "examples_seen": 140,
            "train_flops": 1.75e10,
        }
    )
    assert reach(curve, 0.1) == {k: v for k, v in point(10, 0.2).items() if k != "eval/exact_accuracy"}  # at the first
    assert reach(curve, 0.9)["step"] == 40 and reach(curve, 0.7)["step"] == pytest.approx(36)  # 0.4 -> 0.9 at 30 -> 40
    assert reach(curve, 0.95) is None and reach([], 0.5) is None
    # A log from before the clock: steps still interpolate, the times are unknown.
    old = [{**point(10, 0.0), "train_wall_seconds": None}, {**point(20, 1.0), "train_wall_seconds": None}]
    assert reach(old, 0.5)["step"] == 15 and reach(old, 0.5)["train_wall_seconds"] is None
    # Another metric: its own eval/ key.
    maze = [{**point(10, 0.0), "eval/optimal_path_accuracy": 0.6}]
    assert reach(maze, 0.5, "optimal_path_accuracy")["step"] == 10 and reach(maze, 0.5) is None


def test_time_to_accuracy_over_seeds() -> None:
    def run(label: str, seed: int, accuracies: list[float]) -> dict:
        return {"label": label, "seed": seed, "curve": [point(10 * (i + 1), a) for i, a in enumerate(accuracies)]}

    records = [
        run("fast", 0, [0.3, 0.7]),  # 0.5 at step 15
        run("fast", 1, [0.5, 0.9]),  # at step 10, the first evaluation
        run("fast", 2, [0.1, 0.2]),  # never
        run("slow", 0, [0.0, 0.1]),
    ]
    records[0]["matmul_peak_flops"] = 1e11
    tta = time_to_accuracy(records, [0.5, 0.8], "exact_accuracy")
    fast, slow = tta["per_config"]["fast"], tta["per_config"]["slow"]
    assert (fast["runs"], fast["0.5"]["reached"], fast["0.8"]["reached"], slow["0.5"]["reached"]) == (3, 2, 1, 0)
    assert fast["0.5"]["step"] == pytest.approx({"mean": 12.5, "std": statistics.stdev([15, 10])})
    assert fast["0.5"]["train_wall_seconds"]["mean"] == pytest.approx(6.25)
    assert fast["0.8"]["step"] == {"mean": pytest.approx(17.5), "std": None}  # one seed: no deviation
    assert slow["0.5"]["step"] is None and slow["matmul_peak_flops"] is None
    assert fast["matmul_peak_flops"] == {"mean": 1e11, "std": None}
    assert [r["reached"]["0.5"] is not None for r in tta["per_run"]] == [True, True, False, False]
    text = compare_tables.time_table(tta)
    assert "| fast | 50% | 2/3 | 12 ± 4 | 12 ± 4 | 0.0 ± 0.0 | 6 ± 2 | 100 |" in text
    assert "| slow | 50% | 0/1 | - | - | - | - | - |" in text
    # Numbers for people: thousands separators, fixed decimals.
    assert compare_tables.num({"mean": 1234567.8, "std": 2345.6}) == "1,234,568 ± 2,346"
    assert compare_tables.num({"mean": 3.2e13, "std": None}, 1, 1e12) == "32.0" and compare_tables.pct(None) == "-"


def test_a_per_segment_metric_gets_its_own_table_and_the_plots(tmp_path: Path) -> None:
    """A maze study's headline is optimal-path accuracy: the summary keeps it per segment, results.md tables it beside
    exact accuracy, and the plots draw it when --metric names it."""

    def record(label: str, seed: int, paths: list[float] | None) -> dict:
        exact = [0.1 * (seed + 1), 0.2 * (seed + 1), 0.3 * (seed + 1)]
        extra = {} if paths is None else {"optimal_path_accuracy": paths, "act_optimal_path_accuracy": paths[1] + 0.01}
        return {
            "label": label,
            "arch": "hrm",
            "config": f"{label}.yaml",
            "data_path": "data/maze",
            "seed": seed,
            "num_params": 1000,
            "halt_max_steps": 2,
            "steps": 10,
            "train_seconds": 1.0,
            "eval": {
                "count": 50,
                "mmax": 3,
                "exact_accuracy": exact,
                "token_accuracy": [0.9, 0.9, 0.9],
                "act_exact_accuracy": exact[1],
                "act_mean_segments": 2.0,
                "extra": extra,
            },
        }

    records = [record("maze", 0, [0.4, 0.6, 0.5]), record("maze", 1, [0.5, 0.8, 0.7])]
    for r in records:
        r["curve"] = [{**point(10, None), "eval/optimal_path_accuracy": r["eval"]["extra"]["optimal_path_accuracy"][1]}]
    summary = compare_tables.summarise(records, "optimal_path_accuracy")
    paths = summary["maze"]["extra"]["optimal_path_accuracy"]
    assert paths["mean"] == pytest.approx([0.45, 0.7, 0.6]) and paths["std"][1] == pytest.approx(
        statistics.stdev([0.6, 0.8])
    )
    assert summary["maze"]["per_segment"] == paths and summary["maze"]["act"]["mean"] == pytest.approx(0.71)
    tta = time_to_accuracy(records, [0.5], "optimal_path_accuracy")
    text = compare_tables.markdown(summary, tta, compare_tables.tables(summary, tta), "hrm compare (test)")
    row = next(line for line in text.splitlines() if line.startswith("| maze | hrm |"))
    # tests, metric at the trained 2 segments per seed, mean ± sd, at mmax 3, ACT (cap; segments), exact at 2.
    assert row == (
        "| maze | hrm | 1,000 | 2 | 10 ± 0 | 1.000 ± 0.000 | 50 | 60.0 / 80.0% (@2) | 70.0 ± 14.1% | "
        "60.0 ± 14.1% (@3) | 71.0 ± 14.1% (cap 3; 2.00 ± 0.00) | 30.0 ± 14.1% |"
    )
    assert "| maze | 45.0 | 70.0 | 60.0 |" in text and "## Optimal path accuracy after m segments" in text
    # A run whose evaluation lacks the metric is named, not silently drawn with another.
    with pytest.raises(UserError, match="--metric optimal_path_accuracy: the evaluation of sudoku seed 0 has no"):
        compare_tables.summarise([*records, {**record("sudoku", 0, None), "curve": []}], "optimal_path_accuracy")
    written = compare_module.plot_all(records, summary, tta, tmp_path, "optimal_path_accuracy")
    assert sorted(p.name for p in written) == [
        "accuracy_vs_segments.png",
        "accuracy_vs_time.png",
        "act_vs_fixed_segments.png",
        "exact_accuracy.png",
    ]
