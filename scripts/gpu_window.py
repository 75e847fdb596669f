"""The GPU window's pytest plugin and summary (scripts/gpu_window.sh). A GPU machine comes rarely and for minutes, so
whatever one window measures must come back as a few files whose figures can replace docs/gpu.md's, each traced to
the exact command, GPU and commit that made it, and a window cut short must still say what it got.

As a pytest plugin (`-p gpu_window`, this folder on PYTHONPATH, $GPU_WINDOW_RESULTS set) it appends every test
phase's result to that file as it comes (from the xdist controller only), so that a suite cut by its time limit still
counts what ran and names what failed. As a program (run by gpu_window.sh; no torch import, so it costs nothing):

    python scripts/gpu_window.py eval-steps --bench FILE --compile true --batch 768 --assumed 8380 --period 60 \
        --source-note TEXT --out RATE.json        # eval_every_steps from a measured or an assumed rate
    python scripts/gpu_window.py summary WORK OUT --mode gpu --part check    # OUT/summary.json from WORK's ledger
    python scripts/gpu_window.py fit OUT          # the returned files' limits: count, size, depth
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

RESULTS_ENV = "GPU_WINDOW_RESULTS"
MAX_FILES = 8
MAX_BYTES = 16 * 2**20
MAX_FOLDERS = 2  # OUT/a/b/file comes back, OUT/a/b/c/file does not
GUARD = "device guard:"  # how tests/conftest.py marks a test that left `device` at auto


# --- the pytest plugin ------------------------------------------------------------------------------------------------


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get(RESULTS_ENV)
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):  # workers' reports reach the controller: count them once
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")


def _message(report: pytest.TestReport) -> str:
    """One line of why a test failed: the guard's message, else the first `E   ` line, else the report's last line."""
    lines = [line.strip() for line in report.longreprtext.splitlines() if line.strip()]
    chosen = next((line for line in lines if line.startswith(GUARD)), None)
    chosen = chosen or next((line[1:].strip() for line in lines if line.startswith("E ")), None)
    return (chosen or (lines[-1] if lines else ""))[:300]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = {"test": report.nodeid, "when": report.when, "outcome": report.outcome, "seconds": report.duration}
    if report.failed:
        entry["message"] = _message(report)
    _record(entry)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.items:  # the xdist controller collects nothing itself: its workers' count comes below
        _record({"collected": len(session.items)})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    _record({"collected": len(ids)})


def status_of(phases: dict[str, dict[str, Any]]) -> str | None:
    """passed, failed, errors (setup or teardown failed) or skipped; None for a test cut before its call ended."""
    setup, call, teardown = (phases.get(w) for w in ("setup", "call", "teardown"))
    if setup is not None and setup["outcome"] == "failed":
        return "errors"
    if setup is not None and setup["outcome"] == "skipped":
        return "skipped"
    if call is None:
        return None
    if call["outcome"] != "passed":
        return "failed" if call["outcome"] == "failed" else "skipped"
    return "errors" if teardown is not None and teardown["outcome"] == "failed" else "passed"


def suite_counts(results: Path) -> dict[str, Any]:
    """Counts of a (maybe cut) pytest run from the plugin's file, and each failure's name and one-line reason."""
    collected, phases = 0, defaultdict(dict)
    lines = results.read_text().splitlines() if results.is_file() else []
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # a line cut by the kill that ended the run
            continue
        if "collected" in entry:
            collected = max(collected, entry["collected"])
        else:
            phases[entry["test"]][entry["when"]] = entry
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures = []
    for test, by_phase in phases.items():
        status = status_of(by_phase)
        if status is None:
            continue
        counts[status] += 1
        if status in ("failed", "errors"):
            failed = next(p for p in by_phase.values() if p["outcome"] == "failed")
            failures.append({"test": test, "phase": failed["when"], "message": failed.get("message", "")})
    ran = sum(counts.values())
    return {
        **counts,
        "collected": collected,
        "not_run": max(collected - ran, 0),
        "device_guard_failures": sum(f["message"].startswith(GUARD) for f in failures),
        "failures": failures,
    }


# --- reading what the steps left -----------------------------------------------------------------------------------------


def read_ledger(work: Path) -> dict[str, dict[str, Any]]:
    """gpu_window.sh's ledger (name, rc, seconds, limit, cpus, command; tab-separated, one line per step) by name."""
    steps: dict[str, dict[str, Any]] = {}
    path = work / "steps.tsv"
    for line in path.read_text().splitlines() if path.is_file() else []:
        name, rc, seconds, limit, cpus, command = line.split("\t", 5)
        status = {"0": "ok", "124": "timed out", "137": "timed out", "skipped": "skipped: no time left"}.get(
            rc, f"failed (exit {rc})"
        )
        steps[name] = {
            "status": status,
            "seconds": round(float(seconds), 1),
            "limit_s": int(limit),
            **({"cpus": cpus} if cpus else {}),
            "command": command,
        }
    return steps


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def step_with(steps: dict[str, dict[str, Any]], name: str, /, **figures: Any) -> dict[str, Any] | None:
    """A step's ledger entry and its figures; None when the step never started (its part was not run)."""
    if name not in steps:
        return None
    return {**steps[name], **figures}


def bench_figures(path: Path, out: Path) -> dict[str, Any]:
    record = read_json(path)
    if not isinstance(record, dict):
        return {"file": None}
    keep = (
        "model",
        "device",
        "dtype",
        "batch_size",
        "seq_len",
        "q_target",
        "compile",
        "train_examples_per_s",
        "eval_examples_per_s",
        "mfu",
        "train_flops_per_step",
        "matmul_peak_flops",
        "peak_memory_bytes",
    )
    figures = {k: record.get(k) for k in keep}
    figures["peak_memory_gib"] = round(record.get("peak_memory_bytes", 0) / 2**30, 2)
    return {"file": str(path.relative_to(out)), **figures}


def profile_figures(record: Any, text: Path, out: Path) -> dict[str, Any]:
    if not isinstance(record, dict):
        return {"file": str(text.relative_to(out)) if text.is_file() else None}
    rate, peak = record.get("matmul_flops_per_s", 0.0), record.get("matmul_peak_flops", 0.0)
    return {
        "file": str(text.relative_to(out)),
        "steps": record.get("steps"),
        "compile": record.get("compile"),
        "step_ms": round(1000 * record.get("step_seconds", 0.0), 3),
        "basis": record.get("basis"),
        "ms_per_step": {k: round(1000 * v, 3) for k, v in record.get("seconds_per_step", {}).items()},
        "share": {k: round(v, 4) for k, v in record.get("share", {}).items()},
        # None also where the products ran above the peak: its measurement was disturbed (runtime/peak.py mfu_of)
        "matmul_share_of_peak": round(rate / peak, 4) if peak and rate <= peak else None,
    }


def build_figures(data: Path, seconds: float | None, workers: int, sizing: str) -> dict[str, Any]:
    meta = read_json(data / "train" / "dataset.json")
    if not isinstance(meta, dict):
        return {"sizing": sizing}
    builder = meta.get("builder", {})
    counts = builder.get("counts", {})
    attempts = counts.get("attempts", 0)
    rate = attempts / seconds / workers if seconds and workers else None
    return {
        "sizing": sizing,
        "workers": workers,
        "train_puzzles": counts.get("train_originals"),
        "test_puzzles": counts.get("test_originals"),
        "attempts": attempts,
        "kept_share": round((counts.get("train_originals", 0) + counts.get("test_originals", 0)) / attempts, 3)
        if attempts
        else None,
        "attempts_per_s_per_worker": round(rate, 1) if rate else None,
        "test_solution_classes_in_train": counts.get("test_solution_classes_in_train"),
        "train_difficulty": builder.get("difficulty"),
        "options": builder.get("options"),
    }


def run_figures(metrics: list[dict[str, Any]], out: Path, copied: Path) -> dict[str, Any]:
    """The training run from its metrics.jsonl: steps, rates, and each held-out evaluation."""
    evals = [r for r in metrics if "eval/exact_accuracy" in r]
    last = evals[-1] if evals else {}
    first = metrics[0] if metrics else {}
    train_s = last.get("train_wall_seconds")
    seen = last.get("examples_seen")
    steps = max((r.get("step", 0) for r in metrics), default=0)
    return {
        "file": str(copied.relative_to(out)) if copied.is_file() else None,
        "num_params": first.get("num_params"),
        "steps": steps,
        "train_wall_seconds": train_s,
        "examples_seen": seen,
        "train_examples_per_s": round(seen / train_s, 1) if train_s and seen else None,
        "steps_per_s": round(steps / train_s, 3) if train_s else None,
        "evaluations": [
            {
                "step": r["step"],
                "count": r.get("eval/count"),
                "exact_accuracy": r["eval/exact_accuracy"],
                "token_accuracy": r.get("eval/accuracy"),
                "act_exact_accuracy": r.get("eval/act_exact_accuracy"),
                "train_wall_seconds": r.get("train_wall_seconds"),
                "eval_wall_seconds": r.get("eval_wall_seconds"),
            }
            for r in evals
        ],
    }


def eval_figures(path: Path, out: Path) -> dict[str, Any]:
    record = read_json(path)
    if not isinstance(record, dict):
        return {"file": None}
    figures = {
        "file": str(path.relative_to(out)),
        "count": record.get("count"),
        "mmax": record.get("mmax"),
        "exact_accuracy": record.get("exact_accuracy"),
        "token_accuracy": record.get("token_accuracy"),
        "act_exact_accuracy": record.get("act_exact_accuracy"),
        "act_mean_segments": record.get("act_mean_segments"),
    }
    test_time = record.get("extra", {}).get("test_time")
    if test_time:
        figures["test_time"] = {"options": test_time.get("options"), "act": test_time.get("act")}
    return figures


# --- the summary ----------------------------------------------------------------------------------------------------------


def summary(work: Path, out: Path, mode: str, part: str, seconds: float) -> dict[str, Any]:
    """OUT/summary.json: {"suite", "bench", "train"} (null for a part not run) and the window: GPU, commit, commands."""
    steps = read_ledger(work)
    machine = read_json(work / "machine.json") or {}
    suite = None
    if part in ("check", "all"):
        suite = {
            "cuda_tests": step_with(steps, "cuda_tests", **suite_counts(work / "cuda_tests.results.jsonl")),
            "suite": step_with(steps, "suite", **suite_counts(work / "suite.results.jsonl")),
        }
    bench = None
    if part in ("check", "all"):
        check = out / "check"
        bench = {
            "hrm": step_with(steps, "bench_hrm", **bench_figures(check / "bench-hrm.json", out)),
            "trm_mlp": step_with(steps, "bench_trm_mlp", **bench_figures(check / "bench-trm_mlp.json", out)),
            "profile_hrm": step_with(
                steps,
                "profile_hrm",
                **profile_figures(read_json(work / "profile-hrm.json"), check / "profile-hrm.txt", out),
            ),
        }
    train = None
    if part in ("train", "all"):
        plan = read_json(work / "train-plan.json") or {}
        data = Path(plan.get("data", work / "data"))
        built = build_figures(
            data, steps.get("build", {}).get("seconds"), plan.get("workers", 0), plan.get("sizing", "")
        )
        metrics_copy = out / "train" / "metrics.jsonl"
        train = {
            "recipe": plan.get("recipe"),
            "build": step_with(steps, "build", **built),
            "rate": read_json(work / "rate.json"),
            "run": step_with(steps, "train", **run_figures(read_jsonl(metrics_copy), out, metrics_copy)),
            "eval_mmax16": step_with(steps, "eval_mmax16", **eval_figures(out / "train" / "eval-mmax16.json", out)),
            "eval_tta8_vote": step_with(
                steps, "eval_tta8_vote", **eval_figures(out / "train" / "eval-tta8-vote.json", out)
            ),
        }
    return {
        "suite": suite,
        "bench": bench,
        "train": train,
        "window": {
            "mode": mode,
            "part": part,
            "seconds": round(seconds, 1),
            **machine,
            "setup": steps.get("setup"),
            "commands": [s["command"] for s in steps.values() if not s["command"].startswith("none:")],
        },
    }


def fit(out: Path) -> list[str]:
    """Hold OUT to what comes back from the GPU machine: text files over the size limit keep their head and tail;
    returns the problems left (too many files, too deep), each one line."""
    files = sorted(p for p in out.rglob("*") if p.is_file())
    for path in files:
        size = path.stat().st_size
        if size >= MAX_BYTES:
            keep = MAX_BYTES // 2 - 4096
            with open(path, "rb") as f:
                head = f.read(keep)
                f.seek(size - keep)
                tail = f.read()
            marker = f"\n[... {size - 2 * keep} bytes cut by gpu_window.py fit ...]\n".encode()
            path.write_bytes(head + marker + tail)
    problems = []
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files under {out}, more than the {MAX_FILES} that come back")
    for path in files:
        if len(path.relative_to(out).parts) - 1 > MAX_FOLDERS:
            problems.append(f"{path} is more than {MAX_FOLDERS} folders down: it would not come back")
    return problems


def eval_steps(args: argparse.Namespace) -> int:
    """Evaluations about every `period` seconds of training: steps = rate / batch * period, the rate measured by the
    check part's hrm bench on this machine when it ran with the same compile and batch, else the assumed one."""
    bench = read_json(args.bench) if args.bench else None
    compiled = args.compile == "true"
    measured = (
        isinstance(bench, dict)
        and bench.get("compile") == compiled
        and bench.get("batch_size") == args.batch
        and bench.get("train_examples_per_s")
    )
    if measured:
        rate, source = float(bench["train_examples_per_s"]), f"measured: hrm bench of --part check ({args.bench})"
    else:
        rate, source = args.assumed, f"assumed: {args.source_note}"
    steps_per_s = rate / args.batch
    every = max(1, round(steps_per_s * args.period))
    record = {
        "source": source,
        "train_examples_per_s": round(rate, 1),
        "batch": args.batch,
        "compile": compiled,
        "steps_per_s": round(steps_per_s, 3),
        "period_s": args.period,
        "eval_every_steps": every,
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(every)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("eval-steps")
    p.add_argument("--bench", type=Path, default=None)
    p.add_argument("--compile", choices=("true", "false"), required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--assumed", type=float, required=True)
    p.add_argument("--source-note", required=True)
    p.add_argument("--period", type=float, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("summary")
    p.add_argument("work", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--mode", choices=("gpu", "smoke"), required=True)
    p.add_argument("--part", choices=("check", "train", "all"), required=True)
    p.add_argument("--seconds", type=float, required=True)
    p = sub.add_parser("fit")
    p.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "eval-steps":
        return eval_steps(args)
    if args.command == "summary":
        record = summary(args.work, args.out, args.mode, args.part, args.seconds)
        (args.out / "summary.json").write_text(json.dumps(record, indent=1) + "\n")
        for name, step in read_ledger(args.work).items():
            print(f"{name:<16}{step['status']:<24}{step['seconds']:>8.1f} s")
        return 0
    problems = fit(args.out)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
