"""The hostile user's battery (issues 35 and 43): each input that once hung, left a traceback, lost data or was taken
silently, as one row of a table (command, exit code, the culprit its line must name). Every row must end in one
`error: ...` line with its exit code (2) that names the flag, key, file or path at fault, or (valid but too large) do
what its one-line notice says. Rows that once hung run in a child with a time limit; the rest run in this process.

OUTPUTS is the table of every command's outputs: pointed at a dataset, a run directory or a user's file that the
command did not write, each is refused in one line naming it, and the target is byte-identical afterwards.

Faults that need a process killed are tested beside their code: tests/builders/test_workers.py (kill -9 of a build
with workers), tests/train/test_lifecycle.py (a stop or a kill -9 at a step due an evaluation, then resume),
tests/commands/test_bad_inputs.py (full disks, read-only folders)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from hrm_reason.config import load_config
from hrm_reason.train.loop import train
from tests.commands.test_bad_inputs import read_only
from tests.data.test_puzzle_checks import _empty, _floats, _no_sets
from tests.helpers import REPO, TINY_CLI, TINY_HRM_TEXT, hrm_in_process, run_hrm, tiny_config, tiny_lm_run

GARBAGE = bytes(range(128, 256)) * 3  # never UTF-8, never JSON


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]  # `hrm ARGS`, with {sudoku}, {maze}, {lm}, {arc}, {task}, {hf}, {data}, {garbage}, {tmp}
    says: str  # the culprit: a fragment of the error line (or of the notice, with `notice`)
    child: bool = False  # once hung: run in a child process with a time limit
    notice: bool = False  # valid but large: exit 0 with a one-line notice of what was done instead
    setup: Callable[[dict[str, Path]], None] | None = None  # damages a copy before the command runs
    code: int = 2  # the exit code


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


def adapted(damage: Callable[[Path], None]) -> Callable[[dict[str, Path]], None]:
    """A copy of hrm adapt's output for {arc} and {task} (its default --out's content) at {tmp}/adapted, damaged."""

    def setup(paths: dict[str, Path]) -> None:
        shutil.copytree(paths["adapted"], paths["tmp"] / "adapted")
        damage(paths["tmp"] / "adapted" / "adapted.safetensors")

    return setup


def hf_with(weights: Callable[[bytes], bytes]) -> Callable[[dict[str, Path]], None]:
    """A copy of the transformers HrmText directory {hf} whose model.safetensors is `weights` of its bytes."""

    def setup(paths: dict[str, Path]) -> None:
        copy = paths["tmp"] / "hf"
        shutil.copytree(paths["hf"], copy)
        (copy / "model.safetensors").write_bytes(weights((copy / "model.safetensors").read_bytes()))
        paths["hf"] = copy

    return setup


def non_utf8_task(paths: dict[str, Path]) -> None:
    """A folder of tasks holding a task file whose name is not UTF-8 (byte 0xff), a copy of {task}."""
    (paths["tmp"] / "tasks").mkdir()
    shutil.copy(paths["task"], paths["tmp"] / "tasks" / os.fsdecode(b"t\xff.json"))


def non_utf8_corpus(paths: dict[str, Path]) -> None:
    """{tmp}/corpus: three documents and one whose file name is not UTF-8; {tmp}/arc/evaluation: a task, likewise."""
    (paths["tmp"] / "corpus").mkdir()
    for name in (b"a.txt", b"b.txt", b"c.txt", b"d\xff.txt"):
        (paths["tmp"] / "corpus" / os.fsdecode(name)).write_text("a document\n")
    (paths["tmp"] / "arc" / "evaluation").mkdir(parents=True)
    shutil.copy(paths["task"], paths["tmp"] / "arc" / "evaluation" / os.fsdecode(b"e\xff.json"))


def bert_folder(paths: dict[str, Path]) -> None:
    (paths["tmp"] / "bert").mkdir()
    (paths["tmp"] / "bert" / "config.json").write_text('{"model_type": "bert", "hidden_size": 8}')


def laughs(levels: int) -> Callable[[dict[str, Path]], None]:
    """A YAML config whose `arch` is `levels` levels of 9 aliases of the level below ("billion laughs")."""

    def setup(paths: dict[str, Path]) -> None:
        lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
        (paths["tmp"] / "laughs.yaml").write_text("\n".join([*lines, f"arch: *l{levels - 1}"]) + "\n")

    return setup


def damaged_log(paths: dict[str, Path]) -> None:
    copy = paths["tmp"] / "copy"
    shutil.copytree(paths["sudoku"], copy)
    lines = (copy / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    (copy / "metrics.jsonl").write_bytes(lines[0] + GARBAGE + b"\n" + b"".join(lines[1:]))
    paths["sudoku"] = copy


def puzzle_file(text: str) -> Callable[[dict[str, Path]], None]:
    def setup(paths: dict[str, Path]) -> None:
        (paths["tmp"] / "puzzle.txt").write_text(text)

    return setup


def tiny_yaml(paths: dict[str, Path]) -> None:
    """{tmp}/tiny.yaml: a config of a tiny HRM on {data} that trains in seconds (hrm compare's study of it)."""
    arch = "{hidden_size: 32, num_heads: 2, H_layers: 1, L_layers: 1, halt_max_steps: 3}"
    keys = [f"data_path: {paths['data']}", "global_batch_size: 8", "epochs: 2", "eval_interval: 2"]
    keys += ["lr_warmup_steps: 2", "augment: none", "device: cpu", f"arch: {arch}"]
    (paths["tmp"] / "tiny.yaml").write_text("\n".join(keys) + "\n")


DUPLICATE_GIVEN = "1 1 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0\n"
NO_CANDIDATE = "1 2 0 0\n3 0 0 0\n0 0 0 0\n0 4 0 0\n"
BUILD_4X4 = ("build-data", "sudoku", "--source", "generate", "--box", "2x2", "--workers", "1", "--quiet")
TRAIN = ("train", "--data", "{data}", "--run-dir", "{tmp}/run", *TINY_CLI)
QUICKSTART = str(REPO / "configs" / "quickstart.yaml")
BENCH = ("bench", "--config", QUICKSTART)
ADAPT = ("adapt", "{arc}", "{task}", "--out", "{tmp}/adapted", "--quiet")
RUNG = ("build-data", "arc", "--source", "generate", "--out", "{tmp}/rung")

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
    "generate --run of a puzzle model": Case(
        ("generate", "--run", "{sudoku}"),
        "not a language-model head (hrm generate needs one of hrm_lm, unitf_lm, transformer_lm, hrm_text, ham_lm)",
    ),
    "generate --data of puzzles": Case(("generate", "--run", "{lm}", "--data", "{data}"), "--data"),
    "generate --data missing": Case(("generate", "--run", "{lm}", "--data", "{tmp}/nowhere"), "--data"),
    "--subsample-size > --train-size": Case(
        (*BUILD_4X4, "--train-size", "20", "--test-size", "5", "--subsample-size", "50", "--out", "{tmp}/sub"),
        "--subsample-size 50",
    ),
    "eval --samples 100000": Case(("eval", "--run", "{sudoku}", "--samples", "100000"), "--samples 100000"),
    "maze --tta 1000": Case(("eval", "--run", "{maze}", "--tta", "1000", "--mmax", "2"), "using 8", notice=True),
    # errors that did not name their culprit
    "--resume of a missing run": Case(("train", "--resume", "--run-dir", "{tmp}/nowhere"), "nowhere"),
    "--resume without --run-dir": Case(("train", "--resume"), "--run-dir"),
    "--resume without config.yaml": Case(
        ("train", "--resume", "--run-dir", "{sudoku}"), "config.yaml", setup=without("config.yaml")
    ),
    # issue 43. Hangs on huge counts: each count bounded, with its reason, before any work.
    "adapt --steps 1e9": Case((*ADAPT, "--steps", "1000000000"), "--steps 1000000000: expected 0 to", child=True),
    "bench --steps 1e9": Case((*BENCH, "--steps", "1000000000", "device=cpu"), "--steps 1000000000", child=True),
    "bench --warmup 1e9": Case((*BENCH, "--warmup", "1000000000", "device=cpu"), "--warmup 1000000000", child=True),
    "compare --seeds 1e9": Case(
        ("compare", QUICKSTART, "--seeds", "1000000000", "--out", "{tmp}/cmp"), "--seeds 1000000000", child=True
    ),
    "arc --rung-tasks 1e9": Case((*RUNG, "--rung-tasks", "1000000000"), "--rung-tasks 1000000000", child=True),
    "build-data --workers 1e9": Case(
        (*BUILD_4X4, "--workers", "1000000000", "--out", "{tmp}/w"), "--workers 1000000000", child=True
    ),
    # tracebacks
    "adapt --num-aug 1e9": Case((*ADAPT, "--num-aug", "1000000000"), "--num-aug 1000000000", child=True),
    "arc --num-aug 1e9": Case((*RUNG, "--num-aug", "1000000000"), "--num-aug 1000000000", child=True),
    "adapt over garbage adapted.safetensors": Case(
        (*ADAPT, "--steps", "1"),
        "adapted.safetensors: not a readable safetensors file",
        setup=adapted(lambda f: f.write_bytes(GARBAGE)),
    ),
    "adapt over wrongly shaped rows": Case(
        (*ADAPT, "--steps", "1"),
        "adapted.safetensors: holds rows of shape (3, 7)",
        setup=adapted(lambda f: save_file({"rows": torch.zeros(3, 7)}, str(f))),
    ),
    "convert a garbage model.safetensors": Case(
        ("convert", "--from", "{hf}", "--to", "{tmp}/c"),
        "model.safetensors: not a readable",
        setup=hf_with(lambda b: GARBAGE),
    ),
    "convert a truncated model.safetensors": Case(
        ("convert", "--from", "{hf}", "--to", "{tmp}/c"),
        "model.safetensors: not a readable",
        setup=hf_with(lambda b: b[: len(b) // 2]),
    ),
    "task file name not UTF-8": Case(("adapt", "{arc}", "{tmp}/t\udcff.json"), "t\\xff.json: not valid UTF-8"),
    "a task file name in a folder not UTF-8": Case(
        ("adapt", "{arc}", "{tmp}/tasks", "--steps", "1"), "t\\xff.json: not valid UTF-8", setup=non_utf8_task
    ),
    "build-data text: a file name not UTF-8": Case(
        ("build-data", "text", "--input", "{tmp}/corpus", "--out", "{tmp}/t"),
        "d\\xff.txt: not valid",
        setup=non_utf8_corpus,
    ),
    "build-data arc --source json: a file name not UTF-8": Case(
        ("build-data", "arc", "--source", "json", "{tmp}/arc", "--out", "{tmp}/a"),
        "e\\xff.json: not valid",
        setup=non_utf8_corpus,
    ),
    "generate --prompt not UTF-8": Case(("generate", "--run", "{lm}", "--prompt", "ab\udcffc"), "--prompt ab\\xffc"),
    # nonsense accepted
    "adapt --seed -1": Case((*ADAPT, "--seed", "-1"), "--seed -1: expected 0 to"),
    "adapt --lr nan": Case((*ADAPT, "--lr", "nan"), "--lr nan: expected a finite rate"),
    "adapt --lr -1": Case((*ADAPT, "--lr", "-1"), "--lr -1.0: expected a finite rate"),
    "adapt --lr-whole inf": Case((*ADAPT, "--whole", "--lr-whole", "inf"), "--lr-whole inf: expected a finite rate"),
    "adapt --lr-whole without --whole": Case((*ADAPT, "--lr-whole", "0.01"), "--lr-whole 0.01: only with --whole"),
    "solve --adapt --allow-unsolvable": Case(
        ("solve", "--run", "{arc}", "--file", "{task}", "--adapt", "1", "--allow-unsolvable"),
        "--adapt: not with --allow-unsolvable",
    ),
    # errors that blamed the wrong thing
    "--rung-tasks 0 with a strict split": Case(
        (*RUNG, "--rung-tasks", "0", "--rung-eval-tasks", "1", "--split", "new-tasks"), "--rung-tasks 0"
    ),
    "bench --seq-len too large": Case(
        (*BENCH, "--seq-len", "100000000", "device=cpu", "data_path={tmp}/none"), "--seq-len 100000000"
    ),
    "bench --vocab-size too large": Case(
        (*BENCH, "--vocab-size", "1000000000", "device=cpu", "data_path={tmp}/none"), "--vocab-size 1000000000"
    ),
    "convert from a BERT folder": Case(
        ("convert", "--from", "{tmp}/bert", "--to", "{tmp}/c"), "model_type 'bert'", setup=bert_folder
    ),
    "viz --count 1e9": Case(
        ("viz", "puzzle", "--data", "{data}", "--count", "1000000000", "--out", "{tmp}/viz"), "--count 1000000000"
    ),
    "viz --count past the split": Case(
        ("viz", "puzzle", "--data", "{data}", "--index", "2", "--count", "7", "--out", "{tmp}/viz"),
        "--count 7: the test split",
    ),
    "YAML billion laughs": Case(
        ("train", "--config", "{tmp}/laughs.yaml", "--run-dir", "{tmp}/run"),
        "its aliases (*name) expand to",
        setup=laughs(9),
    ),
    # checks before work
    "adapt --json where a file is in the way": Case(
        (*ADAPT, "--steps", "1", "--json", "{garbage}/r.json"), "cannot write {garbage}/r.json"
    ),
    "eval --adapt --submission where a file is in the way": Case(
        ("eval", "--run", "{arc}", "--adapt", "1", "--submission", "{garbage}/s.json"), "cannot write {garbage}/s.json"
    ),
    "--resume over a damaged metrics.jsonl": Case(
        ("train", "--resume", "--run-dir", "{sudoku}", "epochs=4"), "metrics.jsonl: line 2", setup=damaged_log
    ),
    # issue 60: counts that regressed (0 read as "not given"), and a note printed before a refusal
    "compare --seeds 0": Case(
        ("compare", "{tmp}/tiny.yaml", "--seeds", "0", "--out", "{tmp}/cmp"), "--seeds 0", setup=tiny_yaml
    ),
    "compare --jobs 0": Case(
        ("compare", "{tmp}/tiny.yaml", "--seeds", "1", "--jobs", "0", "--out", "{tmp}/cmp"), "--jobs 0", setup=tiny_yaml
    ),
    "compare --runs --metric unknown": Case(
        ("compare", "--runs", "{sudoku}", "--out", "{tmp}/cmp", "--metric", "no_such_metric"), "--metric no_such_metric"
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
    paths["corpus"] = root / "lm" / "c"
    paths["garbage"] = root / "garbage.bin"
    paths["garbage"].write_bytes(GARBAGE)
    paths |= arc_run(root)
    paths["hf"] = hf_hrm_text(root / "hf")
    return paths


def arc_run(root: Path) -> dict[str, Path]:
    """A tiny HRM on a tiny ARC rung, an evaluation task of it and hrm adapt's output for that task."""
    from datasets_build import arc as B
    from hrm_reason.commands import adapt as A

    opts = B.ArcBuildOptions(
        out=root / "arc-data", source="generate", split="new-tasks", rung_tasks=6, rung_eval_tasks=1, num_aug=2
    )
    data = B.build_arc(opts)
    fast = ("epochs=2", "eval_interval=2", "arch.H_cycles=1", "arch.L_cycles=1", "arch.H_layers=1", "arch.L_layers=1")
    run = train(tiny_config(data, root / "arc", *fast), progress=False)
    task = sorted((data / "test_tasks").glob("*.json"))[0]
    out = A.adapt(run, [task], A.AdaptOptions(steps=1), root / "adapted", progress=False).out
    return {"arc": run, "arc-data": data, "task": task, "adapted": out}


def hf_hrm_text(path: Path) -> Path:
    """A transformers HrmText directory of a tiny random HRM-Text."""
    from hrm_reason.models.lm.hrm_text import HRMText, HRMTextConfig
    from hrm_reason.models.lm.hrm_text_convert import save_hf_hrm_text

    torch.manual_seed(0)
    save_hf_hrm_text(HRMText(HRMTextConfig(vocab_size=32, **TINY_HRM_TEXT)), path)
    return path


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
    assert code == case.code, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert case.says.format(**paths) in lines[0], lines[0]
    assert len(lines[0]) <= 520, len(lines[0])  # capped (hrm_reason.errors.MAX_LINE)
    # issue 60: a refusal is its one line alone, no note, notice or progress bar before it
    assert [line for line in err.replace("\r", "\n").splitlines() if line.strip()] == lines, err
    assert not (tmp_path / "cmp" / "runs").exists()  # hrm compare refused before training anything


def is_chatter(line: str) -> bool:
    """What a command says before its error: the default-config notice, a builder's source line, a progress bar."""
    return line.startswith(("no --config given", "sudoku: source", "maze: source", "random tokens")) or "it/s" in line


# --- issue 43: every output a command writes. Pointed at a dataset, a run directory or a user's file it did not write,
# the command refuses in one line naming it, before any work, and leaves it byte-identical (`--overwrite` included:
# it replaces only the command's own output). {target} is the path; `dataset` names the dataset used as a target
# (another builder's where the command builds datasets: its own would be replaced, as documented).
@dataclass(frozen=True)
class Target:
    args: tuple[str, ...]
    dataset: str = "data"


SOLVE_FILE = "{tmp}/puzzle.txt"
OUTPUTS: dict[str, Target] = {
    "adapt --out": Target(("adapt", "{arc}", "{task}", "--steps", "1", "--out", "{target}", "--quiet")),
    "adapt --json": Target(("adapt", "{arc}", "{task}", "--steps", "1", "--out", "{tmp}/a", "--json", "{target}")),
    "eval --json": Target(("eval", "--run", "{sudoku}", "--json", "{target}")),
    "eval --submission": Target(("eval", "--run", "{arc}", "--submission", "{target}")),
    "eval --adapt --json": Target(("eval", "--run", "{arc}", "--adapt", "1", "--json", "{target}")),
    "eval --adapt --submission": Target(("eval", "--run", "{arc}", "--adapt", "1", "--submission", "{target}")),
    "solve --png": Target(("solve", "--run", "{sudoku}", "--file", SOLVE_FILE, "--png", "{target}")),
    "bench --json": Target((*BENCH, "--steps", "1", "--warmup", "1", "--json", "{target}", "device=cpu")),
    "compare --out": Target(("compare", QUICKSTART, "--seeds", "1", "--out", "{target}")),
    "compare --runs --out": Target(("compare", "--runs", "{sudoku}", "--out", "{target}")),
    "convert --to --overwrite": Target(("convert", "--from", "{hf}", "--to", "{target}", "--overwrite")),
    "build-data sudoku --overwrite": Target(
        (*BUILD_4X4, "--train-size", "10", "--test-size", "5", "--out", "{target}", "--overwrite"), dataset="maze-data"
    ),
    "build-data arc --overwrite": Target(
        (
            *RUNG[:-2],
            "--rung-tasks",
            "2",
            "--rung-eval-tasks",
            "1",
            "--num-aug",
            "0",
            "--out",
            "{target}",
            "--overwrite",
        )
    ),
    "build-data text --overwrite": Target(
        ("build-data", "text", "--input", "{corpus}", "--out", "{target}", "--overwrite")
    ),
    "train --run-dir": Target(("train", "--data", "{data}", "--run-dir", "{target}", *TINY_CLI)),
    "viz puzzle --out": Target(("viz", "puzzle", "--data", "{data}", "--out", "{target}")),
    "viz run --out": Target(("viz", "run", "{sudoku}", "--out", "{target}")),
    "viz html --out": Target(("viz", "html", "{sudoku}", "--count", "0", "--out", "{target}")),
}


def checksum(path: Path) -> str:
    """Every name and byte under `path` (a file or a folder)."""
    digest = hashlib.sha256()
    for p in sorted([path, *path.rglob("*")]) if path.is_dir() else [path]:
        digest.update(str(p.relative_to(path.parent)).encode())
        digest.update(p.read_bytes() if p.is_file() else b"/")
    return digest.hexdigest()


@pytest.mark.parametrize("kind", ["dataset", "run", "file"])
@pytest.mark.parametrize("name", list(OUTPUTS))
def test_an_output_that_is_not_the_commands_is_refused_and_left_byte_identical(
    name: str,
    kind: str,
    runs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = OUTPUTS[name]
    target = tmp_path / "target"
    if kind == "file":
        target.write_text("my notes\n")
    paths = {**runs, "data": runs["sudoku-data"], "tmp": tmp_path, "target": target}
    if kind != "file":
        shutil.copytree(paths[case.dataset if kind == "dataset" else "sudoku"], target)
    (tmp_path / "puzzle.txt").write_text("0 0 0 0\n" * 4)
    before = checksum(target)
    code, err = hrm_in_process(capsys, monkeypatch, *[a.format(**paths) for a in case.args])
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip() and not is_chatter(line)]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert str(target) in lines[0], lines[0]
    assert checksum(target) == before
    assert not (tmp_path / "a").exists()  # adapt --json: refused before the adaptation wrote its folder


@pytest.mark.parametrize(
    "args",
    [
        ("eval", "--run", "{sudoku}", "--mmax", "2", "--max-examples", "2", "--json", "{tmp}/out/r.json"),
        ("viz", "puzzle", "--data", "{data}", "--out", "{tmp}/out"),
        ("adapt", "{arc}", "{task}", "--steps", "1", "--out", "{tmp}/out", "--json", "{tmp}/r.json", "--quiet"),
        ("convert", "--from", "{hf}", "--to", "{tmp}/out", "--overwrite"),
        ("compare", "--runs", "{sudoku}", "--out", "{tmp}/out"),
    ],
    ids=["eval --json", "viz --out", "adapt --out --json", "convert --to", "compare --runs --out"],
)
def test_a_commands_own_output_is_replaced(
    args: tuple[str, ...],
    runs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paths = {**runs, "data": runs["sudoku-data"], "tmp": tmp_path}
    for _ in range(2):  # the second call finds the first one's output: its own
        code, err = hrm_in_process(capsys, monkeypatch, *[a.format(**paths) for a in args])
        assert code == 0, err


def test_a_read_only_out_is_found_before_any_puzzle_is_generated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets_build.sudoku

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a puzzle was generated before the output was checked")

    monkeypatch.setattr(datasets_build.sudoku, "_generate_split", never)
    locked = tmp_path / "locked"
    locked.mkdir()
    with read_only(locked):
        code, err = hrm_in_process(capsys, monkeypatch, *BUILD_4X4, "--out", str(locked / "s"))
    assert code == 2 and err.strip() == f"error: permission denied writing {locked / 's'}", err


def test_a_smaller_alias_bomb_gives_one_capped_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    laughs(4)({"tmp": tmp_path})  # 9^4 values: within the bound, refused by validation with the value echoed
    code, err = hrm_in_process(capsys, monkeypatch, "train", "--config", str(tmp_path / "laughs.yaml"))
    lines = [line for line in err.splitlines() if line.strip() and not is_chatter(line)]
    assert code == 2 and len(lines) == 1 and str(tmp_path / "laughs.yaml") in lines[0], err
    assert len(lines[0]) <= 520 and "more characters)" in lines[0], lines[0]
