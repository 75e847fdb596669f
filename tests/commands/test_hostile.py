"""The hostile user's battery (issue 35): each input that once hung, left a traceback or was taken silently, as one row
of a table. Every row must end in one `error: ...` line with exit code 2 that names the flag, key, file or path at
fault, or (valid but too large) do what its one-line notice says. Rows that once hung run in a child with a time
limit; the rest run in this process. Faults that need a process killed are tested beside their code:
tests/builders/test_workers.py (kill -9 of a build with workers), tests/train/test_lifecycle.py (a stop or a kill -9
at a step due an evaluation, then resume), tests/commands/test_bad_inputs.py (full disks, read-only folders)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from hrm_reason.config import load_config
from hrm_reason.train.loop import train
from tests.data.test_puzzle_checks import _empty, _floats, _no_sets
from tests.helpers import REPO, TINY_CLI, hrm_in_process, run_hrm, tiny_lm_run

GARBAGE = bytes(range(128, 256)) * 3  # never UTF-8, never JSON


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]  # `hrm ARGS`, with {sudoku}, {maze}, {lm}, {data}, {garbage}, {tmp} filled in
    says: str  # a fragment of the error line (or of the notice, with `notice`)
    child: bool = False  # once hung: run in a child process with a time limit
    notice: bool = False  # valid but large: exit 0 with a one-line notice of what was done instead
    setup: Callable[[dict[str, Path]], None] | None = None  # damages a copy before the command runs


def garbage_at(key: str, relative: str) -> Callable[[dict[str, Path]], None]:
    def setup(paths: dict[str, Path]) -> None:
        copy = paths["tmp"] / "copy"
        shutil.copytree(paths[key], copy)
        (copy / relative).write_bytes(GARBAGE)
        paths[key] = copy

    return setup


def damaged_data(damage: Callable[[Path], None]) -> Callable[[dict[str, Path]], None]:
    def setup(paths: dict[str, Path]) -> None:
        copy = paths["tmp"] / "data"
        shutil.copytree(paths["data"], copy)
        damage(copy)
        paths["data"] = copy

    return setup


def without(relative: str) -> Callable[[dict[str, Path]], None]:
    def setup(paths: dict[str, Path]) -> None:
        copy = paths["tmp"] / "copy"
        shutil.copytree(paths["sudoku"], copy)
        (copy / relative).unlink()
        paths["sudoku"] = copy

    return setup


def empty_metrics(paths: dict[str, Path]) -> None:
    copy = paths["tmp"] / "copy"
    shutil.copytree(paths["sudoku"], copy)
    (copy / "metrics.jsonl").write_text("")
    paths["sudoku"] = copy


def puzzle_file(text: str) -> Callable[[dict[str, Path]], None]:
    def setup(paths: dict[str, Path]) -> None:
        (paths["tmp"] / "puzzle.txt").write_text(text)

    return setup


DUPLICATE_GIVEN = "1 1 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0\n"
NO_CANDIDATE = "1 2 0 0\n3 0 0 0\n0 0 0 0\n0 4 0 0\n"
BUILD_4X4 = ("build-data", "sudoku", "--source", "generate", "--box", "2x2", "--workers", "1", "--quiet")
TRAIN = ("train", "--data", "{data}", "--run-dir", "{tmp}/run", *TINY_CLI)

CASES: dict[str, Case] = {
    # hangs
    "eval --mmax 1e9": Case(("eval", "--run", "{sudoku}", "--mmax", "1000000000"), "--mmax 1000000000", child=True),
    "solve --mmax 1e9": Case(
        ("solve", "--run", "{sudoku}", "--file", "{tmp}/puzzle.txt", "--mmax", "1000000000"),
        "--mmax 1000000000",
        child=True,
        setup=puzzle_file("0 0 0 0\n" * 4),
    ),
    "eval --tta 100000": Case(("eval", "--run", "{sudoku}", "--tta", "100000"), "--tta 100000", child=True),
    "build more 4x4 puzzles than exist": Case(
        (*BUILD_4X4, "--train-size", "100000", "--test-size", "10", "--out", "{tmp}/cap"), "--test-size 10", child=True
    ),
    # tracebacks: binary garbage where text is expected
    "garbage checkpoints/latest": Case(
        ("eval", "--run", "{sudoku}"), "checkpoints/latest", setup=garbage_at("sudoku", "checkpoints/latest")
    ),
    "garbage solve --file": Case(("solve", "--run", "{sudoku}", "--file", "{garbage}"), "--file"),
    "garbage metrics.jsonl for viz run": Case(
        ("viz", "run", "{sudoku}", "--out", "{tmp}/viz"), "metrics.jsonl", setup=garbage_at("sudoku", "metrics.jsonl")
    ),
    "garbage viz run --eval": Case(("viz", "run", "{sudoku}", "--eval", "{garbage}", "--out", "{tmp}/viz"), "--eval"),
    "garbage viz test-time": Case(("viz", "test-time", "{garbage}", "--out", "{tmp}/viz"), "garbage.bin"),
    "garbage compare.json": Case(
        ("compare", "--runs", "{sudoku}", "--out", "{tmp}/cmp"),
        "compare.json",
        setup=garbage_at("sudoku", "compare.json"),
    ),
    # tracebacks: overrides and sizes
    "arch=5": Case((*TRAIN, "arch=5"), "'arch' is a section"),
    "seed=-1": Case((*TRAIN, "seed=-1"), "field 'seed'"),
    "seed=10**23": Case((*TRAIN, "seed=99999999999999999999999"), "field 'seed'"),
    "arch.hidden_size=10**6": Case((*TRAIN, "arch.hidden_size=1000000"), "arch.hidden_size 1000000: needs at least"),
    "bench --batch-size 1e9": Case(
        ("bench", "--config", str(REPO / "configs" / "quickstart.yaml"), "--batch-size", "1000000000", "device=cpu"),
        "--batch-size 1000000000: needs at least",
    ),
    # silent nonsense
    "solve a repeated given": Case(
        ("solve", "--run", "{sudoku}", "--file", "{tmp}/puzzle.txt"),
        "appears twice in row 1",
        setup=puzzle_file(DUPLICATE_GIVEN),
    ),
    "solve a cell without candidate": Case(
        ("solve", "--run", "{sudoku}", "--file", "{tmp}/puzzle.txt"),
        "has no candidate",
        setup=puzzle_file(NO_CANDIDATE),
    ),
    "eval --device tpu": Case(("eval", "--run", "{sudoku}", "--device", "tpu"), "--device tpu"),
    "solve --device tpu": Case(
        ("solve", "--run", "{sudoku}", "--file", "{tmp}/puzzle.txt", "--device", "tpu"),
        "--device tpu",
        setup=puzzle_file(DUPLICATE_GIVEN),
    ),
    "global_batch_size=true": Case((*TRAIN, "global_batch_size=true"), "field 'global_batch_size'"),
    "lr=nan": Case((*TRAIN, "lr=nan"), "field 'lr'"),
    "float inputs": Case(TRAIN, "all__inputs.npy", setup=damaged_data(_floats)),
    "empty sets": Case(TRAIN, "sets is empty", setup=damaged_data(_no_sets)),
    "0 training examples": Case(TRAIN, "train: 0 examples", setup=damaged_data(_empty("train"))),
    "0 test examples": Case(
        ("eval", "--run", "{sudoku}", "--data", "{data}"), "test: 0 examples", setup=damaged_data(_empty("test"))
    ),
    "compare a run with empty metrics": Case(
        ("compare", "--runs", "{sudoku}", "--out", "{tmp}/cmp"), "metrics.jsonl", setup=empty_metrics
    ),
    "generate --temperature inf": Case(("generate", "--run", "{lm}", "--temperature", "inf"), "--temperature inf"),
    "generate --data of puzzles": Case(("generate", "--run", "{lm}", "--data", "{data}"), "--data"),
    "generate --data missing": Case(("generate", "--run", "{lm}", "--data", "{tmp}/nowhere"), "--data"),
    "--subsample-size > --train-size": Case(
        (*BUILD_4X4, "--train-size", "20", "--test-size", "5", "--subsample-size", "50", "--out", "{tmp}/sub"),
        "--subsample-size 50",
    ),
    "eval --samples 100000": Case(("eval", "--run", "{sudoku}", "--samples", "100000"), "--samples 100000"),
    "maze --tta 1000": Case(("eval", "--run", "{maze}", "--tta", "1000"), "using 8", notice=True),
    # errors that did not name their culprit
    "--resume of a missing run": Case(("train", "--resume", "--run-dir", "{tmp}/nowhere"), "nowhere"),
    "--resume without --run-dir": Case(("train", "--resume"), "--run-dir"),
    "--resume without config.yaml": Case(
        ("train", "--resume", "--run-dir", "{sudoku}"), "config.yaml", setup=without("config.yaml")
    ),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny trained Sudoku run (with its data) and maze run, a tiny language-model run, a file of garbage."""
    root = tmp_path_factory.mktemp("hostile")
    paths: dict[str, Path] = {}
    tiny = [*TINY_CLI, "epochs=2", "eval_interval=2", "seed=0"]
    for task, build in [
        ("sudoku", ("sudoku", "--box", "2x2", "--train-size", "24", "--test-size", "8")),
        ("maze", ("maze", "--size", "6", "--train-size", "24", "--test-size", "8")),
    ]:
        data = root / f"{task}-data"
        done = run_hrm("build-data", *build, "--source", "generate", "--workers", "1", "--quiet", "--out", str(data))
        assert done.returncode == 0, done.stderr
        overrides = [*tiny, f"data_path={data}", f"run_dir={root / task}"]
        paths[task] = train(load_config(None, overrides), progress=False)
        paths[f"{task}-data"] = data
    paths["lm"] = tiny_lm_run(root / "lm")[0]
    paths["garbage"] = root / "garbage.bin"
    paths["garbage"].write_bytes(GARBAGE)
    return paths


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_gets_one_line_naming_its_culprit(
    name: str,
    runs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = CASES[name]
    paths = {**runs, "data": runs["sudoku-data"], "tmp": tmp_path}
    if case.setup is not None:
        case.setup(paths)
    args = [a.format(**paths) for a in case.args]
    if case.child:
        proc = run_hrm(*args, timeout=120)
        code, err = proc.returncode, proc.stderr
    else:
        code, err = hrm_in_process(capsys, monkeypatch, *args)
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip() and not is_chatter(line)]
    assert "Traceback" not in err, err
    if case.notice:
        assert code == 0, err
        assert [line for line in lines if case.says in line], err
        return
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert case.says in lines[0], lines[0]


def is_chatter(line: str) -> bool:
    """What a command says before its error: the default-config notice, a builder's source line, a progress bar."""
    return line.startswith(("no --config given", "sudoku: source", "maze: source", "random tokens")) or "it/s" in line
