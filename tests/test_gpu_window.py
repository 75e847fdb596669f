"""The GPU window (scripts/gpu_window.sh, issue 47) on the CPU: a GPU machine comes for minutes, so the script that
uses them must be proved here. Its smoke run fills summary.json with this run's own figures and stays within what the
device tool brings back; bad arguments stop it in one line; its pytest plugin counts a suite cut by its time limit and
names the failures; the profiler's CUDA kernel classes and the evaluation cadence follow their rules."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from torch.autograd import DeviceType

from tests.helpers import REPO

SCRIPT = REPO / "scripts" / "gpu_window.sh"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


gpu_window = load(REPO / "scripts" / "gpu_window.py")


def window(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    """The script as a GPU session runs it, on this environment's Python (its `hrm` first on the PATH)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PYTHON": sys.executable, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_smoke_window_fills_the_summary_within_the_limits(tmp_path: Path) -> None:
    out = tmp_path / "out"
    head = lambda: subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)  # noqa: E731
    before, started = head(), time.monotonic()
    proc = window("--smoke", "--part", "all", str(out))
    seconds, after = time.monotonic() - started, head()
    assert (out / "summary.json").is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    suite, bench, train, meta = summary["suite"], summary["bench"], summary["train"], summary["window"]
    assert suite is not None and bench is not None and train is not None
    assert meta["mode"] == "smoke" and meta["part"] == "all" and meta["seconds"] <= 180 and seconds < 240

    # Every step but the tests themselves must work; the exit code says whether all passed.
    steps = [
        bench["hrm"],
        bench["trm_mlp"],
        bench["profile_hrm"],
        *(train[k] for k in train if k not in ("recipe", "rate")),
    ]
    assert all(step["status"] == "ok" for step in steps), [(s["command"], s["status"]) for s in steps]
    tests_ok = all(part["failed"] + part["errors"] == 0 and part["status"] == "ok" for part in suite.values())
    assert proc.returncode == (0 if tests_ok else 1), proc.stderr[-3000:]

    # The suite: counts of this run (the smoke hides any GPU, so test_cuda.py skips whole).
    cuda = suite["cuda_tests"]
    assert cuda["collected"] > 0 and cuda["not_run"] == 0 and cuda["skipped"] == cuda["collected"]
    rest = suite["suite"]
    assert (
        rest["collected"] > 0
        and rest["passed"] + rest["failed"] + rest["errors"] + rest["skipped"] == rest["collected"]
    )
    assert "-p gpu_window" in rest["command"] and "tests/test_cuda.py" in cuda["command"]

    # The benches: the summary's figures are those of the JSON hrm bench wrote in this run.
    for name, model in (("hrm", "hrm"), ("trm_mlp", "trm")):
        figures = bench[name]
        record = json.loads((out / figures["file"]).read_text())
        assert record["model"] == model and figures["model"] == model
        for key in ("train_examples_per_s", "eval_examples_per_s", "mfu", "peak_memory_bytes"):
            assert figures[key] == record[key] and record[key] > 0, key
        assert record["device"] == "cpu" and record["compile"] is False and record["batch_size"] == 8
    profile = bench["profile_hrm"]
    assert profile["steps"] == 2 and profile["step_ms"] > 0
    assert abs(sum(profile["share"].values()) - 1) < 1e-3 and profile["ms_per_step"]["matrix products"] > 0
    assert "matrix products" in (out / profile["file"]).read_text()

    # The training part: a strict held-out split, the cadence from this run's measured rate, every evaluation.
    build = train["build"]
    assert (build["train_puzzles"], build["test_puzzles"]) == (32, 16)
    assert build["test_solution_classes_in_train"] == 0 and build["train_difficulty"]["min"] >= 1
    rate = train["rate"]
    assert rate["source"].startswith("measured") and rate["train_examples_per_s"] == round(
        bench["hrm"]["train_examples_per_s"], 1
    )
    assert rate["eval_every_steps"] == max(1, round(bench["hrm"]["train_examples_per_s"] / 8 * rate["period_s"]))
    run = train["run"]
    assert run["steps"] > 0 and run["train_wall_seconds"] > 0 and run["train_examples_per_s"] > 0
    evals = run["evaluations"]
    assert evals and evals[-1]["step"] == run["steps"] and all(e["count"] == 16 for e in evals)
    assert all(e["step"] % rate["eval_every_steps"] == 0 for e in evals[:-1])
    for flag in ("augment=symmetry", "budget_clock=wall", "max_seconds=", "configs/sudoku_fast.yaml", "device=cpu"):
        assert flag in run["command"], flag
    assert train["recipe"] == "configs/sudoku_fast.yaml"
    mmax = train["eval_mmax16"]
    assert mmax["count"] == 16 and len(mmax["exact_accuracy"]) == 16 and "--mmax 16" in mmax["command"]
    tta = train["eval_tta8_vote"]
    assert tta["test_time"]["options"]["tta"] == 8 and tta["test_time"]["options"]["select"] == "vote"

    # The window: the commit, every command (in the log too), and what comes back from a GPU machine.
    if before.returncode == 0:  # a commit may land while it runs
        assert meta["git"]["commit"] in (before.stdout.strip(), after.stdout.strip())
    log = (out / "log.txt").read_text()
    assert len(meta["commands"]) == 9 and all(command in log for command in meta["commands"])
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8, files
    for path in files:
        assert path.stat().st_size < 16 * 2**20 and len(path.relative_to(out).parts) <= 3, path


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--part", "nope", "{out}"], "--part 'nope' is not one of check, train, all"),
        (["--smoke", "--part"], "--part needs a value"),
        (["--smoke"], "OUT is missing"),
        (["--bogus", "{out}"], "unknown option --bogus"),
        (["{out}", "{out}2"], "one OUT folder expected"),
        (["--smoke", "{file}/sub"], "cannot be created"),
        (["--smoke", "{file}"], "is not a folder"),
        (["--smoke", "/proc"], "OUT /proc is not writable"),
        (["--smoke", "{full}"], "is not empty"),
    ],
)
def test_bad_arguments_stop_in_one_line_with_exit_2(tmp_path: Path, args: list[str], fragment: str) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.json").write_text("{}")
    paths = {"out": str(tmp_path / "out"), "file": str(tmp_path / "file"), "full": str(tmp_path / "full")}
    proc = window(*(a.format(**paths) for a in args), timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("recipe", "fragment"),
    [
        ("{tmp}/missing.yaml", "missing.yaml not found"),
        ("{tmp}/bad.yaml", "field 'arch.bogus_key': unknown key"),
    ],
)
def test_a_recipe_that_does_not_load_stops_the_train_part_in_one_line_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recipe: str, fragment: str
) -> None:
    (tmp_path / "bad.yaml").write_text("arch:\n  bogus_key: 1\n")
    monkeypatch.setenv("GPU_WINDOW_RECIPE", recipe.format(tmp=tmp_path))
    out = tmp_path / "out"
    proc = window("--smoke", "--part", "train", str(out), timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: GPU_WINDOW_RECIPE: ") and fragment in lines[0], proc.stderr
    assert list(out.iterdir()) == []  # no log, no step: it stopped before the data build


PLANTED = """
import pytest

def test_passes():
    pass

def test_fails():
    assert 1 == 2, "planted"

@pytest.mark.skip(reason="planted")
def test_skipped():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

def test_setup_errors(broken):
    pass
"""


def test_plugin_counts_results_and_names_failures(tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(PLANTED)
    results = tmp_path / "results.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'scripts'}:{REPO}",
        "GPU_WINDOW_RESULTS": str(results),
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "gpu_window", "-p", "no:cacheprovider", "test_planted.py"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:]
    counts = gpu_window.suite_counts(results)
    assert {k: counts[k] for k in ("passed", "failed", "errors", "skipped", "collected", "not_run")} == {
        "passed": 1,
        "failed": 1,
        "errors": 1,
        "skipped": 1,
        "collected": 4,
        "not_run": 0,
    }
    failures = {f["test"]: f for f in counts["failures"]}
    assert set(failures) == {"test_planted.py::test_fails", "test_planted.py::test_setup_errors"}
    assert "planted" in failures["test_planted.py::test_fails"]["message"]
    assert failures["test_planted.py::test_setup_errors"]["phase"] == "setup"
    assert "setup broke" in failures["test_planted.py::test_setup_errors"]["message"]

    # A run cut by its limit: a test that only set up is not counted, a line cut in half is skipped, and a guard
    # failure (tests/conftest.py's message) is counted as one.
    with open(results, "a") as f:
        f.write(json.dumps({"collected": 6}) + "\n")
        f.write(json.dumps({"test": "t.py::cut", "when": "setup", "outcome": "passed", "seconds": 0}) + "\n")
        guard = {"test": "t.py::auto", "when": "call", "outcome": "failed", "seconds": 0}
        f.write(json.dumps({**guard, "message": "device guard: device left at auto (t.py:3)"}) + "\n")
        f.write('{"test": "t.py::half", "wh')
    counts = gpu_window.suite_counts(results)
    assert (counts["failed"], counts["collected"], counts["not_run"], counts["device_guard_failures"]) == (2, 6, 1, 1)


def test_cuda_kernels_are_classed_by_name_and_timed_once() -> None:
    profile = load(REPO / "benchmarks" / "profile_cpu.py")
    names = {
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas": "matrix products",
        "nvjet_tst_128x64_64x8_1x2_h_bz_TNN": "matrix products",
        "triton_tem_fused_mm_0": "matrix products",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>": "attention",
        "fmha_cutlassB_bf16_aligned_64x64_k128_sm80": "attention",
        "triton_poi_fused__to_copy_add_mul_rsqrt_silu_0": "fused by compile",
        "triton_red_fused_add_mean_pow_1": "fused by compile",
        "Memcpy DtoD (Device -> Device)": "optimizer and copies",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>>": (
            "optimizer and copies"
        ),
        "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel_cuda>": "norms and activations",
        "void at::native::index_elementwise_kernel<128, 4>": "other",
    }
    for name, expected in names.items():
        assert profile.cuda_kernel_class(name) == expected, name
    events = [
        SimpleNamespace(key="nvjet_tst_128x64", device_type=DeviceType.CUDA, self_device_time_total=3_000_000),
        SimpleNamespace(key="triton_poi_fused_add_0", device_type=DeviceType.CUDA, self_device_time_total=1_000_000),
        # the operator that launched the product: its device time is the kernel's, not counted again
        SimpleNamespace(key="aten::mm", device_type=DeviceType.CPU, self_device_time_total=3_000_000),
    ]
    seconds = profile.cuda_seconds(events, steps=10)
    assert seconds == {"matrix products": 0.3, "fused by compile": 0.1}


def test_eval_cadence_uses_the_measured_rate_only_when_it_fits(tmp_path: Path) -> None:
    bench = tmp_path / "bench-hrm.json"
    bench.write_text(json.dumps({"compile": True, "batch_size": 768, "train_examples_per_s": 9216.0}))
    rate = tmp_path / "rate.json"

    def every(compile: str, batch: int) -> dict:
        args = ["eval-steps", "--bench", str(bench), "--compile", compile, "--batch", str(batch)]
        args += ["--assumed", "3840", "--source-note", "docs", "--period", "60", "--out", str(rate)]
        assert gpu_window.main(args) == 0
        return json.loads(rate.read_text())

    measured = every("true", 768)  # 9216 / 768 = 12 steps/s, 720 steps a minute
    assert measured["source"].startswith("measured") and measured["eval_every_steps"] == 720
    eager = every("false", 768)  # the bench was compiled: its rate says nothing of an eager run
    assert eager["source"] == "assumed: docs" and eager["eval_every_steps"] == 300
    assert every("true", 512)["source"] == "assumed: docs"
    bench.unlink()
    assert every("true", 768)["eval_every_steps"] == 300


def test_fit_trims_large_logs_and_reports_what_would_not_come_back(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"head\n" + b"x" * (17 * 2**20) + b"\ntail\n")
    assert gpu_window.fit(tmp_path) == []
    text = log.read_bytes()
    assert len(text) < 16 * 2**20 and text.startswith(b"head\n") and text.endswith(b"\ntail\n") and b"cut by" in text
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "f.json").write_text("{}")
    for i in range(8):
        (tmp_path / f"{i}.json").write_text("{}")
    problems = gpu_window.fit(tmp_path)
    assert any("10 files" in p for p in problems) and any("folders down" in p for p in problems)
