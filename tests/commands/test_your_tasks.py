"""Your own tasks end to end, as a user runs them (docs/tasks.md): a file of examples built with `hrm build-data file`,
then train, eval (with --tta voting and the task's rules), solve, viz and compare on it; and a task of a user's own
package, found through the `hrm_reason.tasks` entry point without editing this package."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, TINY_CLI, assert_one_line_error, run_hrm

ALPHABET = "abcd"


def reversal_examples(path: Path, count: int, seed: int, avoid: set[str]) -> set[str]:
    """Strings of 3 to 6 letters and the strings reversed: a sequence task of varying length (the strip layout) that
    any permutation of the letters keeps (a sorting task would not: the build refuses --permute on it)."""
    rng = random.Random(seed)
    made: set[str] = set()
    with path.open("w") as f:
        while len(made) < count:
            s = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(3, 6)))
            if s in made or s in avoid:
                continue
            made.add(s)
            f.write(json.dumps({"input": s, "output": s[::-1]}) + "\n")
    return made


# The rules of the task as a user writes them: the input's letters in reverse order. (The plugin's own `valid` below
# is looser on purpose: a permutation of the input, in any order, so that valid answers >= exact.)
RULES = "def valid(given, answer):\n    return isinstance(answer, str) and answer == given[::-1]\n"

PLUGIN = '''
from hrm_reason.tasks.declared import DeclaredTask


class Anagram(DeclaredTask):
    """A user's task: answer with the input's letters in any order (the file's label is the reversed one)."""

    kind = "toy-anagram"

    def valid(self, given, answer):
        return sorted(given) == sorted(answer)

    def describe(self):
        return "toy anagram task"
'''


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("yours")
    seen = reversal_examples(root / "train.jsonl", 300, 0, set())
    reversal_examples(root / "test.jsonl", 40, 1, seen)
    (root / "rules.py").write_text(RULES)
    return root


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PYTHONPATH with a package installed as pip would leave it: the module and its dist-info with the entry point."""
    site = tmp_path_factory.mktemp("site")
    (site / "toy_anagram.py").write_text(PLUGIN)
    info = site / "toy_anagram-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-anagram\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hrm_reason.tasks]\ntoy-anagram = toy_anagram:Anagram\n")
    return {"PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}


def train_tiny(data: Path, run: Path, env: dict[str, str] | None = None, *extra: str) -> None:
    proc = run_hrm(
        "train", "--data", str(data), "--run-dir", str(run), "--quiet", "epochs=4", "eval_interval=2", *TINY_CLI,
        *extra, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def built(files: Path) -> Path:
    out = files / "data"
    proc = run_hrm(
        "build-data", "file", str(files / "train.jsonl"), "--test", str(files / "test.jsonl"), "--out", str(out),
        "--permute", ALPHABET, "--num-aug", "2", "--check", f"{files / 'rules.py'}:valid", "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "task 'file'" in proc.stdout and "check" in proc.stdout
    return out


@pytest.fixture(scope="module")
def run(built: Path, files: Path) -> Path:
    run_dir = files / "run"
    train_tiny(built, run_dir, None, "augment=symmetry")
    return run_dir


def test_eval_reports_valid_answers_and_votes_over_the_declared_symmetries(run: Path, files: Path) -> None:
    out = files / "eval.json"
    proc = run_hrm(
        "eval", "--run", str(run), "--mmax", "3", "--tta", "4", "--select", "vote", "--json", str(out), "--quiet"
    )
    assert proc.returncode == 0, proc.stderr
    assert "valid answers" in proc.stderr and "valid_answers" in proc.stdout
    result = json.loads(out.read_text())
    valid = result["extra"]["valid_answers"]
    assert len(valid) == 3 and all(0.0 <= v <= 1.0 for v in valid)
    # the rules accept exactly the reversed letters, the label: valid answers are the exact ones
    assert valid == pytest.approx(result["exact_accuracy"])
    assert result["extra"]["act_valid_answers"] == pytest.approx(result["act_exact_accuracy"])
    table = result["extra"]["test_time"]
    assert "permutations" in json.dumps(table) or table  # the vote ran over the declared group


def test_solve_reads_and_writes_the_tasks_own_symbols_and_checks_the_rules(run: Path, files: Path) -> None:
    proc = run_hrm("solve", "--run", str(run), "--file", str(files / "test.jsonl"), "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    answers = json.loads(proc.stdout)["puzzles"]
    given = [json.loads(line)["input"] for line in (files / "test.jsonl").read_text().splitlines()]
    assert len(answers) == len(given)
    for g, a in zip(given, answers):
        assert isinstance(a["answer"], str) and set(a["answer"]) <= set(ALPHABET)
        assert a["valid"] == (a["answer"] == g[::-1])  # the user's rules, on the answer as printed
        assert "expected output" in a["check"]
    text = run_hrm("solve", "--run", str(run), "dcba", "--quiet")
    assert text.returncode == 0 and "rules" in text.stdout
    assert_one_line_error(run_hrm("solve", "--run", str(run), "abxd"), "symbol 'x'")
    assert_one_line_error(run_hrm("solve", "--run", str(run), "abcdabcdab"), "10 symbols")


def test_solve_reads_the_csv_form_of_the_test_file_and_keeps_the_ids(run: Path, files: Path) -> None:
    """The same inputs as a CSV (the columns a build reads) and as JSON Lines with ids: the same answers, each JSON
    answer with its id, and the text names it."""
    rows = [json.loads(line) for line in (files / "test.jsonl").read_text().splitlines()][:6]
    (files / "test.csv").write_text("input,output\n" + "".join(f"{r['input']},{r['output']}\n" for r in rows))
    (files / "ids.jsonl").write_text("".join(json.dumps({"input": r["input"], "id": f"q{i}"}) + "\n" for i, r in
                                             enumerate(rows)))  # fmt: skip
    answers = {}
    for name in ("test.csv", "ids.jsonl"):
        proc = run_hrm("solve", "--run", str(run), "--file", str(files / name), "--json", "--quiet")
        assert proc.returncode == 0, proc.stderr
        answers[name] = json.loads(proc.stdout)["puzzles"]
    assert [a["answer"] for a in answers["test.csv"]] == [a["answer"] for a in answers["ids.jsonl"]]
    assert all("expected output" in a["check"] for a in answers["test.csv"])  # the CSV's output column compared
    assert [a.get("id") for a in answers["ids.jsonl"]] == [f"q{i}" for i in range(len(rows))]
    assert "id" not in answers["test.csv"][0]
    text = run_hrm("solve", "--run", str(run), "--file", str(files / "ids.jsonl"), "--quiet")
    assert text.returncode == 0 and f"{files / 'ids.jsonl'} line 2 (id q1):" in text.stdout, text.stdout


def test_solve_names_a_declared_tasks_dataset_that_is_not_found(run: Path, files: Path, tmp_path: Path) -> None:
    config = (run / "config.yaml").read_text()
    moved = tmp_path / "config.yaml"
    moved.write_text(re.sub(r"(?m)^data_path: .*$", "data_path: data/elsewhere", config))
    proc = run_hrm("solve", "--run", str(run), "--config", str(moved), "abc", cwd=tmp_path)
    assert_one_line_error(proc, "its dataset data/elsewhere", f"not found from {tmp_path}", "declared there")


def test_pictures_and_compare_work_on_a_declared_task(run: Path, built: Path, files: Path) -> None:
    proc = run_hrm("viz", "puzzle", "--data", str(built), "--out", str(files / "viz"))
    assert proc.returncode == 0, proc.stderr
    proc = run_hrm("viz", "predictions", "--run", str(run), "--out", str(files / "vizp"))
    assert proc.returncode == 0, proc.stderr
    assert (files / "viz" / "puzzle_test_000000.png").stat().st_size > 0
    assert (files / "vizp" / "predictions_test_000000.png").stat().st_size > 0
    proc = run_hrm("compare", "--runs", str(run), "--out", str(files / "cmp"))
    assert proc.returncode == 0, proc.stderr
    assert (files / "cmp").is_dir()


def test_a_changed_check_file_is_refused(run: Path, built: Path, files: Path) -> None:
    check = built / "check.py"
    kept = check.read_text()
    try:
        check.write_text(kept + "\n# edited\n")
        assert_one_line_error(run_hrm("eval", "--run", str(run), "--mmax", "1"), "check.py", "changed")
    finally:
        check.write_text(kept)


def test_a_task_of_your_own_package_through_the_entry_point(files: Path, plugin_env: dict[str, str]) -> None:
    out, run_dir = files / "plugin-data", files / "plugin-run"
    proc = run_hrm(
        "build-data", "file", str(files / "train.jsonl"), "--test", str(files / "test.jsonl"), "--out", str(out),
        "--task", "toy-anagram", "--quiet", env=plugin_env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "train" / "dataset.json").read_text())["builder"]["name"] == "toy-anagram"
    train_tiny(out, run_dir, plugin_env)
    ev = files / "plugin-eval.json"
    proc = run_hrm("eval", "--run", str(run_dir), "--mmax", "2", "--json", str(ev), "--quiet", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(ev.read_text())
    # the plugin's rules accept any order of the letters, the label only the reversed one
    assert all(v >= e for v, e in zip(result["extra"]["valid_answers"], result["exact_accuracy"]))
    proc = run_hrm("solve", "--run", str(run_dir), "abca", "--json", "--quiet", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)["puzzles"][0]
    assert answer["valid"] == (sorted(answer["answer"]) == sorted("abca"))
    # without the package, the dataset's task is unknown: one line, naming it
    assert_one_line_error(run_hrm("eval", "--run", str(run_dir), "--mmax", "1"), "toy-anagram")


def test_a_task_that_is_not_registered_or_not_declared_is_one_line(files: Path, plugin_env: dict[str, str]) -> None:
    args = ["build-data", "file", str(files / "train.jsonl"), "--test", str(files / "test.jsonl")]
    assert_one_line_error(run_hrm(*args, "--task", "nope", "--out", str(files / "x")), "--task nope", "entry point")
    assert_one_line_error(
        run_hrm(*args, "--task", "sudoku", "--out", str(files / "x")), "--task sudoku", "DeclaredTask"
    )
    assert not (files / "x").exists()


def readme_commands() -> list[list[str]]:
    """The README's "Your own puzzles" commands, as a user pastes them (continued lines joined, comments dropped)."""
    text = (REPO / "README.md").read_text().split("## Your own puzzles", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", " ", block)
    return [shlex.split(line.split("  #", 1)[0]) for line in joined.splitlines() if line.strip()]


def test_the_readme_commands_for_your_own_puzzles_run_as_written(tmp_path: Path) -> None:
    """A user's files in the documented format (the Life example's generator and rules), then the README's commands
    word for word, with a tiny model and a few steps added to `hrm train`."""
    mine = tmp_path / "my-task"
    gen = subprocess.run(
        [sys.executable, str(REPO / "examples/life/generate.py"), "--train", "64", "--test", "8", "--out", str(mine)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    shutil.copy(REPO / "examples/life/check.py", mine / "check.py")
    commands = readme_commands()
    assert [c[:2] for c in commands] == [["hrm", "build-data"], ["hrm", "train"], ["hrm", "eval"], ["hrm", "solve"]]
    for command in commands:
        args = [str(REPO / a) if a.startswith("configs/") else a for a in command[1:]]
        if args[0] == "train":
            args += [
                *TINY_CLI,
                "schedule_over=steps",
                "max_seconds=null",
                "max_steps=4",
                "epochs=4",
                "eval_interval=2",
                "--quiet",
            ]
        proc = run_hrm(*args, cwd=tmp_path)
        assert proc.returncode == 0, (command, proc.stderr)
    answers = proc.stdout.count("valid: the task's rules accept it") + proc.stdout.count("invalid:")
    assert answers == 8  # every test board answered and checked by the rules


def test_a_dataset_too_small_for_a_batch_is_one_line_before_training(built: Path, files: Path) -> None:
    """300 training groups, 2 epochs a round: 600 draws, fewer than a batch of 1,024, though 8 epochs hold 2 batches:
    every round's batch would be dropped."""
    proc = run_hrm(
        "train", "--data", str(built), "--run-dir", str(files / "small"), *TINY_CLI, "global_batch_size=1024",
        "epochs=8", "eval_interval=2",
    )  # fmt: skip
    assert_one_line_error(proc, "eval_interval 2", "global_batch_size 1024", "no step would run")
    assert not (files / "small").exists()


def test_adapt_does_not_apply_and_says_so_in_one_line(run: Path, files: Path) -> None:
    """A file's examples are each their own puzzle under the blank identifier: no ARC task rows to adapt."""
    task = files / "task.json"
    task.write_text(json.dumps({"train": [], "test": [{"input": [[1]]}]}))
    assert_one_line_error(run_hrm("adapt", str(run), str(task)), "builder.name 'file'", "ARC")
