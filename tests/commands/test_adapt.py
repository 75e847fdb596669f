"""`hrm adapt`: new puzzle-embedding rows for ARC tasks the model never saw, trained on their demonstrations alone.

A tiny HRM (hidden 32, one layer per level, one cycle each, a few steps) on a tiny ARC rung (new-tasks split: the
evaluation tasks' identifiers never train) adapts to an evaluation task's JSON file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import cli
from hrm_reason.commands import adapt as A
from hrm_reason.config import load_config
from hrm_reason.train.loop import train
from tests.helpers import hrm_in_process, on_cpu, tiny_config

TASK = "eval-0000-geometry"
STEPS = 30
FAST = ("global_batch_size=8", "epochs=2", "eval_interval=2", "arch.H_cycles=1", "arch.L_cycles=1")


@pytest.fixture(scope="module")
def rung(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run, folder of the evaluation tasks' JSON files) of a tiny HRM on a tiny ARC rung."""
    from datasets_build import arc as B
    from datasets_build import arc_rung

    root = tmp_path_factory.mktemp("adapt")
    opts = B.ArcBuildOptions(
        out=root / "d", source="generate", split="new-tasks", rung_tasks=8, rung_eval_tasks=2, num_aug=2, quiet=True
    )
    data = B.build_arc(opts)
    folder = arc_rung.write_task_files(root / "tasks", arc_rung.generate(42, 8, 2, "new-tasks", []))
    run = train(tiny_config(data, root / "run", *FAST), progress=False)
    return run, folder / "evaluation"


def options(**changes) -> A.AdaptOptions:
    return A.AdaptOptions(**{"steps": STEPS, **changes})


def hrm(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["hrm", *on_cpu(args)])
    with pytest.raises(SystemExit) as stop:
        cli.main()
    out = capsys.readouterr()
    return stop.value.code, out.out, out.err


def rows(out: Path) -> torch.Tensor:
    return load_file(out / "adapted.safetensors")["rows"]


def test_one_task_gives_a_kaggle_submission_and_its_rows_then_loads_them(rung, tmp_path, capsys, monkeypatch) -> None:
    run, tasks = rung
    task = tasks / f"{TASK}.json"
    out = tmp_path / "a"
    code, text, err = hrm(capsys, monkeypatch, "adapt", str(run), str(task), "--steps", str(STEPS), "--out", str(out))
    assert code == 0, err
    assert "demonstration loss" in text and f"{TASK} test 0" in text and "attempt 2" in text
    tests = json.loads(task.read_text())["test"]
    submission = json.loads((out / "submission.json").read_text())
    assert list(submission) == [TASK] and len(submission[TASK]) == len(tests)
    for attempts in submission[TASK]:
        assert set(attempts) == {"attempt_1", "attempt_2"}
        for grid in attempts.values():
            assert grid and all(isinstance(row, list) and all(0 <= v <= 9 for v in row) for row in grid)
    record = json.loads((out / "adapted.json").read_text())
    num_aug = 2  # the dataset's, from its builder record
    assert rows(out).shape == (num_aug + 1, 32) and len(record["identifiers"]) == num_aug + 1
    assert record["seed"] == 0 and record["options"]["num_aug"] == num_aug and record["tasks"][0]["name"] == TASK
    # A second call with the same task and options reads the rows back and gives the same answers.
    code, again, err = hrm(capsys, monkeypatch, "adapt", str(run), str(task), "--steps", str(STEPS), "--out", str(out))
    assert code == 0, err
    assert again.startswith("loaded the adapted rows") and again.splitlines()[1:] == text.splitlines()[1:]


def test_only_the_new_rows_train_and_they_start_at_the_mean_of_the_trained_rows(rung) -> None:
    run_dir, tasks = rung
    run = A.load_adapt_run(run_dir, "cpu")
    task = A.read_task(tasks / f"{TASK}.json", run.arc.size)
    plan = A.plan_augmentations(task, 2, 42)
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    weights = run.model.puzzle_emb.weights
    first = A.append_rows(run, A.mean_rows(run, len(plan)))
    new = run.model.puzzle_emb.weights[first:].clone()
    assert torch.equal(new[0], weights[torch.as_tensor(run.trained_ids)].mean(0))
    examples = A._examples([task], [plan], first, run.arc.size, 0, test=False)
    losses, cpu_seconds = A.adapt_rows(run, examples, options(steps=5), progress=False)
    assert len(losses) == 5 and cpu_seconds > 0
    after = run.model.state_dict()
    for key, value in before.items():
        if key.endswith("puzzle_emb.weights"):
            assert torch.equal(after[key][:first], value)  # the trained rows, bit for bit
            assert not torch.equal(after[key][first:], new)  # the new rows moved
        else:
            assert torch.equal(after[key], value), key
    assert all(p.grad is None for p in run.model.parameters())


def test_whole_trains_the_network_too(rung) -> None:
    run_dir, tasks = rung
    run = A.load_adapt_run(run_dir, "cpu")
    task = A.read_task(tasks / f"{TASK}.json", run.arc.size)
    plan = A.plan_augmentations(task, 1, 42)
    before = {k: v.clone() for k, v in run.model.named_parameters()}
    first = A.append_rows(run, A.mean_rows(run, len(plan)))
    examples = A._examples([task], [plan], first, run.arc.size, 0, test=False)
    A.adapt_rows(run, examples, options(steps=2, whole=True, lr_whole=1e-3), progress=False)
    assert any(not torch.equal(v, before[k]) for k, v in run.model.named_parameters())


def test_test_outputs_are_never_read(rung, tmp_path) -> None:
    run, tasks = rung
    data = json.loads((tasks / f"{TASK}.json").read_text())
    variants = {
        "none": [{"input": t["input"]} for t in data["test"]],
        "garbage": [{"input": t["input"], "output": "garbage"} for t in data["test"]],
        "wrong": [{"input": t["input"], "output": [[9] * 3] * 2} for t in data["test"]],
    }
    results = []
    for name, test in variants.items():
        path = tmp_path / name / f"{TASK}.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"train": data["train"], "test": test}))
        result = A.adapt(run, [path], options(), tmp_path / f"out-{name}", progress=False)
        results.append((rows(result.out), result.submission))
    original = A.adapt(run, [tasks / f"{TASK}.json"], options(), tmp_path / "out-original", progress=False)
    results.append((rows(original.out), original.submission))
    for r, submission in results[1:]:
        assert torch.equal(r, results[0][0]) and submission == results[0][1]


def test_the_same_seed_gives_the_same_rows(rung, tmp_path) -> None:
    run, tasks = rung
    task = [tasks / f"{TASK}.json"]
    a = A.adapt(run, task, options(seed=3), tmp_path / "a", progress=False)
    b = A.adapt(run, task, options(seed=3), tmp_path / "b", progress=False)
    c = A.adapt(run, task, options(seed=4), tmp_path / "c", progress=False)
    assert torch.equal(rows(a.out), rows(b.out)) and a.submission == b.submission and a.losses == b.losses
    assert not torch.equal(rows(a.out), rows(c.out))


def test_the_demonstration_loss_falls(rung, tmp_path) -> None:
    run, tasks = rung
    result = A.adapt(run, [tasks / f"{TASK}.json"], options(steps=60), tmp_path / "o", progress=False)
    losses = np.array(result.losses)
    assert losses.shape == (60,) and result.record["losses"] == result.losses
    assert losses[-6:].mean() < losses[:6].mean() - 0.1, losses


def test_blank_init_starts_every_new_row_at_the_blank_row(rung, tmp_path) -> None:
    """--steps 0 --init blank: the rows are the blank identifier's, so the answers are those of --puzzle-id blank."""
    run, tasks = rung
    result = A.adapt(run, [tasks / f"{TASK}.json"], options(steps=0, init="blank"), tmp_path / "o", progress=False)
    table = A.load_adapt_run(run, "cpu").model.puzzle_emb.weights
    assert result.losses == [] and result.cpu_seconds == 0.0
    assert torch.equal(rows(result.out), table[0].expand(3, -1))  # identifier 0 is the blank one
    assert not torch.equal(table[0], table[1:].mean(0))  # which the mean start is not


def test_the_curve_answers_along_the_way_without_changing_the_adaptation(rung, tmp_path) -> None:
    run, tasks = rung
    task = [tasks / f"{TASK}.json"]
    plain = A.adapt(run, task, options(steps=6), tmp_path / "plain", progress=False)
    curved = A.adapt(run, task, options(steps=6, curve=(0, 3, 6)), tmp_path / "curve", progress=False)
    assert torch.equal(rows(plain.out), rows(curved.out)) and plain.losses == curved.losses
    assert sorted(curved.curve) == [0, 3, 6] and curved.curve[6] == curved.metrics == plain.metrics
    start = A.adapt(run, task, options(steps=0), tmp_path / "start", progress=False)
    assert curved.curve[0] == start.metrics and set(start.metrics) >= {"pass@1", "pass@2"}
    written = curved.to_dict()
    assert written["curve"]["3"] == curved.curve[3] and written["tasks"] == 1 and written["adapt_cpu_seconds"] > 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--steps", "2", "--curve", "0,5"), "--curve 5: expected step counts from 0 to --steps 2"),
        (("--curve", "a,b"), "--curve 'a,b': expected comma-separated step counts"),
        (("--init", "zeros"), "--init 'zeros': expected one of mean, blank"),
    ],
)
def test_bad_curve_or_init_is_one_line_and_exit_2(rung, tmp_path, capsys, monkeypatch, args, fragment) -> None:
    run, tasks = rung
    argv = ["adapt", str(run), str(tasks / f"{TASK}.json"), "--quiet", "--out", str(tmp_path / "o"), *args]
    code, err = hrm_in_process(capsys, monkeypatch, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and fragment in lines[0], err
    assert not (tmp_path / "o").exists()


def test_json_holds_pass_at_k_the_curve_and_the_time(rung, tmp_path, capsys, monkeypatch) -> None:
    run, tasks = rung
    out = tmp_path / "r.json"
    argv = ["adapt", str(run), str(tasks), "--steps", "2", "--curve", "0,2", "--out", str(tmp_path / "o")]
    code, _, err = hrm(capsys, monkeypatch, *argv, "--quiet", "--json", str(out))
    assert code == 0, err
    written = json.loads(out.read_text())
    assert set(written["curve"]) == {"0", "2"} and written["curve"]["2"] == written["metrics"]
    assert written["tasks"] == 2 and written["provenance"]["argv"][1:3] == ["adapt", str(run)]


def test_a_folder_adapts_every_task_in_it(rung, tmp_path) -> None:
    run, tasks = rung
    result = A.adapt(run, [tasks], options(steps=3), tmp_path / "o", progress=False)
    assert sorted(result.submission) == sorted(p.stem for p in tasks.glob("*.json"))
    assert rows(result.out).shape[0] == len(result.record["identifiers"]) == 2 * 3


def test_the_variants_are_the_builders(rung) -> None:
    """The builder's draws (datasets_build/arc.py) for a task whose test outputs add no colour to what adapt reads."""
    from datasets_build import arc as B

    _, tasks = rung
    task = A.read_task(tasks / f"{TASK}.json", 10)
    data = json.loads((tasks / f"{TASK}.json").read_text())
    built = B.plan_augmentations(B.parse_task(data, TASK, "c", "evaluation", "w"), 8, 42)
    ours = A.plan_augmentations(task, 8, 42)
    assert [(t, c.tolist()) for t, c in ours] == [(t, c.tolist()) for t, c in built]


@pytest.fixture(scope="module")
def sudoku_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from datasets_build import sudoku as S

    root = tmp_path_factory.mktemp("adapt_sudoku")
    data = S.build_sudoku(S.SudokuBuildOptions(out=root / "d", source="generate", box="2x2", train_size=8, test_size=4))
    return train(tiny_config(data, root / "run", *FAST), progress=False)


@pytest.mark.parametrize(
    ("task", "fragments"),
    [
        (
            {"train": [{"input": [[1] * 11] * 11, "output": [[1]]}], "test": [{"input": [[1]]}]},
            ("11x11", "10x10", "bad"),
        ),
        ({"train": [], "test": [{"input": [[1]]}]}, ("task 'bad'", "no demonstration pairs")),
        ({"test": [{"input": [[1]]}]}, ("no demonstration pairs",)),
        ("{not json", ("not valid JSON",)),
        (None, ("not found",)),
    ],
)
def test_bad_tasks_are_one_line_and_exit_2(rung, tmp_path, capsys, monkeypatch, task, fragments) -> None:
    run, _ = rung
    path = tmp_path / "bad.json"
    if task is not None:
        path.write_text(task if isinstance(task, str) else json.dumps(task))
    code, err = hrm_in_process(capsys, monkeypatch, "adapt", str(run), str(path), "--steps", "1", "--quiet")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert all(f in lines[0] for f in fragments), lines[0]


def test_solve_adapt_answers_one_task_as_hrm_adapt_does(rung, tmp_path, capsys, monkeypatch) -> None:
    run, tasks = rung
    task = tasks / f"{TASK}.json"
    code, text, err = hrm(capsys, monkeypatch, "solve", "--run", str(run), "--file", str(task), "--adapt", "5")
    assert code == 0, err
    assert "demonstration loss" in text and f"{TASK} test 0" in text and "attempt 2" in text
    solved = json.loads((run / "adapt" / TASK / "submission.json").read_text())
    code, _, err = hrm(capsys, monkeypatch, "adapt", str(run), str(task), "--steps", "5", "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert solved == json.loads((tmp_path / "a" / "submission.json").read_text())
    code, text, err = hrm(
        capsys, monkeypatch, "solve", "--run", str(run), "--file", str(task), "--adapt", "5", "--json"
    )
    assert code == 0, err
    assert json.loads(text) == solved


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--tta", "2"), "not with --tta"),
        (("--png", "pics"), "not with --png"),
        (("PUZZLE",), "not with PUZZLE"),
        (("--no-file",), "expected --run RUN and --file TASK.json"),
    ],
)
def test_solve_adapt_refuses_what_it_does_not_use(rung, capsys, monkeypatch, args, fragment) -> None:
    run, tasks = rung
    argv = ["solve", "--run", str(run), "--adapt", "1", "--quiet"]
    if args != ("--no-file",):
        argv += ["--file", str(tasks / f"{TASK}.json")]
    if args == ("PUZZLE",):
        argv.insert(1, "[[1]]")
    elif args != ("--no-file",):
        argv += list(args)
    code, err = hrm_in_process(capsys, monkeypatch, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and fragment in lines[0], err


def test_a_run_not_trained_on_arc_is_one_line_and_exit_2(rung, sudoku_run, capsys, monkeypatch) -> None:
    _, tasks = rung
    code, err = hrm_in_process(capsys, monkeypatch, "adapt", str(sudoku_run), str(tasks), "--quiet")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "not ARC data" in lines[0], err


def test_the_build_writes_its_test_split_tasks(rung) -> None:
    """test_tasks/ holds the evaluation tasks the generator wrote, demonstrations and test pairs, and no other."""
    run, tasks = rung
    data = Path(load_config(run / "config.yaml").data_path)
    built = sorted((data / "test_tasks").glob("*.json"))
    assert [p.name for p in built] == sorted(p.name for p in tasks.glob("*.json"))
    builder = json.loads((data / "test" / "dataset.json").read_text())["builder"]
    assert [p.stem for p in built] == [t["name"] for t in builder["tasks"]]
    for path in built:
        generated = json.loads((tasks / path.name).read_text())
        assert json.loads(path.read_text()) == {k: generated[k] for k in ("train", "test")}


def test_eval_adapt_scores_the_test_split_as_hrm_adapt_does(rung, tmp_path, capsys, monkeypatch) -> None:
    run, _ = rung
    data = Path(load_config(run / "config.yaml").data_path)
    argv = ["eval", "--run", str(run), "--adapt", "3", "--quiet", "--json", str(tmp_path / "e.json")]
    code, text, err = hrm(capsys, monkeypatch, *argv, "--submission", str(tmp_path / "s.json"))
    assert code == 0, err
    assert "demonstration loss" in text and "pass@2" in text
    written = json.loads((tmp_path / "e.json").read_text())
    direct = A.adapt(run, [data / "test_tasks"], options(steps=3), tmp_path / "direct", progress=False)
    assert written["metrics"] == direct.metrics and set(written["metrics"]) >= {"pass@1", "pass@2"}
    assert json.loads((tmp_path / "s.json").read_text()) == direct.submission
    assert sorted(direct.submission) == sorted(p.stem for p in (data / "test_tasks").glob("*.json"))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--tta", "2"), "not with --tta"),
        (("--max-examples", "4"), "not with --max-examples"),
        (("--no-run",), "expected --run RUN"),
        (("--data", "SUDOKU"), "not an ARC dataset"),
        (("--data", "OLD"), "no test_tasks/ folder"),
        (("--data", "NOWHERE"), "no dataset there"),
    ],
)
def test_eval_adapt_refuses_in_one_line(rung, sudoku_run, tmp_path, capsys, monkeypatch, args, fragment) -> None:
    import shutil

    run, _ = rung
    data = Path(load_config(run / "config.yaml").data_path)
    old = tmp_path / "old"
    shutil.copytree(data, old, ignore=shutil.ignore_patterns("test_tasks"))
    places = {"SUDOKU": str(Path(load_config(sudoku_run / "config.yaml").data_path)), "OLD": str(old)}
    places["NOWHERE"] = str(tmp_path / "nowhere")
    argv = ["eval", "--adapt", "1", "--quiet"] + ([] if args == ("--no-run",) else ["--run", str(run)])
    argv += [places.get(a, a) for a in args if a != "--no-run"]
    code, err = hrm_in_process(capsys, monkeypatch, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --adapt") and fragment in lines[0], err


@pytest.mark.parametrize(
    ("name", "extra"),
    [("trm", ("arch.H_cycles=1", "arch.L_cycles=1", "arch.L_layers=1")), ("transformer", ()), ("unitf", ())],
)
def test_every_act_family_with_a_puzzle_embedding_adapts(rung, tmp_path, name, extra) -> None:
    run, tasks = rung
    data = Path(load_config(run / "config.yaml").data_path)
    other = train(
        tiny_config(data, tmp_path / name, f"arch.name={name}", "epochs=2", "eval_interval=2", *extra), progress=False
    )
    result = A.adapt(other, [tasks / f"{TASK}.json"], options(steps=3), tmp_path / "o", progress=False)
    assert rows(result.out).shape[0] == 3 and len(result.submission[TASK]) == len(result.tests)
