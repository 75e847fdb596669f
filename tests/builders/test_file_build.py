"""`hrm build-data file` (datasets_build/file.py) as a user runs it, in this process: JSON Lines, CSV and .npz files
build datasets whose declaration and tokens give the file's values back, the split keeps groups whole, augmentation
copies keep the task's rules, and every bad file is one line naming the file, the line and the field."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from datasets_build.file import summary
from hrm_reason.tasks.declared import Declaration, DeclaredTask
from tests.helpers import DIHEDRAL_REFERENCE, assert_one_line_error, hrm_in_process, latin_4x4, write_csv_file


def build(capsys: Any, monkeypatch: Any, *args: str) -> subprocess.CompletedProcess:
    """`hrm build-data file ARGS --quiet` in this process, as a finished process (exit code, stderr)."""
    code, err = hrm_in_process(capsys, monkeypatch, "build-data", "file", *args, "--quiet")
    return subprocess.CompletedProcess(["hrm", "build-data", "file", *args], code, "", err)


def built(capsys: Any, monkeypatch: Any, *args: str) -> None:
    proc = build(capsys, monkeypatch, *args)
    assert proc.returncode == 0, proc.stderr


def write_jsonl(path: Path, examples: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in examples))
    return path


def dataset(out: Path, split: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(dataset.json, arrays by name) of one split."""
    meta = json.loads((out / split / "dataset.json").read_text())
    names = ("inputs", "labels", "puzzle_identifiers", "puzzle_indices", "group_indices")
    return meta, {n: np.load(out / split / f"all__{n}.npy") for n in names}


def task_of(meta: dict[str, Any]) -> DeclaredTask:
    return DeclaredTask(Declaration.model_validate(meta["builder"]["declaration"]))


def decoded(out: Path, split: str) -> list[tuple[Any, Any]]:
    """The (input, output) values of a split's examples, as the file writes them."""
    meta, arrays = dataset(out, split)
    task = task_of(meta)
    return [
        (task.file_value(x, "input"), task.file_value(y, "output")) for x, y in zip(arrays["inputs"], arrays["labels"])
    ]


def assert_plain_split(meta: dict[str, Any], arrays: dict[str, np.ndarray], n: int) -> None:
    """A split of `n` examples, each its own puzzle and group, identifier 0, seq_len and vocab as declared."""
    d = Declaration.model_validate(meta["builder"]["declaration"])
    assert meta["seq_len"] == d.seq_len and meta["vocab_size"] == d.vocab_size
    assert arrays["inputs"].shape == arrays["labels"].shape == (n, d.seq_len)
    np.testing.assert_array_equal(arrays["puzzle_identifiers"], np.zeros(n))
    np.testing.assert_array_equal(arrays["puzzle_indices"], np.arange(n + 1))
    np.testing.assert_array_equal(arrays["group_indices"], np.arange(n + 1))
    assert meta["builder"]["counts"] == {"originals": n, "examples": n}


# ---------------------------------------------------------------------------------------------- the formats


def test_jsonl_of_int_grids(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    rng = np.random.default_rng(0)

    def examples(n: int) -> list[dict[str, Any]]:
        xs = [rng.integers(0, 13, (3, 3)) for _ in range(n)]
        return [{"input": x.tolist(), "output": ((x + 1) % 13).tolist()} for x in xs]

    train, test = examples(30), examples(6)
    train[0]["input"][0] = [0, 10, 12]  # every symbol 0..12 is used somewhere
    for i, e in enumerate(train[:5]):
        e["id"] = f"ex{i}" if i % 2 else i  # ids are read (strings or integers) and not stored
    out = tmp_path / "ds"
    built(
        capsys,
        monkeypatch,
        str(write_jsonl(tmp_path / "train.jsonl", train)),
        "--test",
        str(write_jsonl(tmp_path / "test.jsonl", test)),
        "--out",
        str(out),
    )
    meta, arrays = dataset(out, "train")
    d = meta["builder"]["declaration"]
    assert d["input_form"] == d["output_form"] == "grid" and d["cells"] == "int"
    assert d["symbols"] == [str(i) for i in range(13)]  # numeric order, not "0", "1", "10", ...
    assert d["layout"] == "fixed" and d["shape"] == [3, 3]
    assert not d["dihedral"] and d["permute"] == [] and d["check"] is None
    assert meta["vocab_size"] == 15 and meta["seq_len"] == 9
    assert_plain_split(meta, arrays, 30)
    np.testing.assert_array_equal(arrays["inputs"][0], np.array(train[0]["input"]).reshape(-1) + 2)
    assert decoded(out, "train") == [(e["input"], e["output"]) for e in train]
    assert decoded(out, "test") == [(e["input"], e["output"]) for e in test]
    test_meta, test_arrays = dataset(out, "test")
    assert_plain_split(test_meta, test_arrays, 6)
    assert test_meta["builder"]["declaration"] == d


def test_jsonl_of_strings(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    rng = np.random.default_rng(1)

    def examples(n: int) -> list[dict[str, Any]]:
        words = ["".join(rng.choice(list("zyx"), int(rng.integers(1, 7)))) for _ in range(n)]
        return [{"input": w, "output": w[::-1]} for w in words]

    train, test = examples(40), examples(5)
    train[0] = {"input": "xyzxyz", "output": "zyxzyx"}  # the longest: 6 symbols
    out = tmp_path / "ds"
    built(
        capsys,
        monkeypatch,
        str(write_jsonl(tmp_path / "rev.jsonl", train)),
        "--test",
        str(write_jsonl(tmp_path / "rev_test.jsonl", test)),
        "--out",
        str(out),
    )
    meta, arrays = dataset(out, "train")
    d = meta["builder"]["declaration"]
    assert d["input_form"] == d["output_form"] == "text" and d["separator"] is None
    assert d["symbols"] == ["x", "y", "z"]
    assert d["layout"] == "strip" and d["shape"] == [1, 7]  # the longest and its end marker
    assert_plain_split(meta, arrays, 40)
    assert decoded(out, "train") == [(e["input"], e["output"]) for e in train]
    assert decoded(out, "test") == [(e["input"], e["output"]) for e in test]
    assert ((arrays["inputs"] == 1).sum(1) == 1).all()  # one EOS each


def test_jsonl_of_separated_strings_sorts_numeric_symbols(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    train = [{"input": "10 2 3", "output": "3 2 10"}, {"input": "2 3 10", "output": "10 3 2"}]
    test = [{"input": "3 10 2", "output": "2 10 3"}]
    out = tmp_path / "ds"
    built(
        capsys,
        monkeypatch,
        str(write_jsonl(tmp_path / "a.jsonl", train)),
        "--test",
        str(write_jsonl(tmp_path / "b.jsonl", test)),
        "--separator",
        " ",
        "--out",
        str(out),
    )
    meta, _ = dataset(out, "train")
    d = meta["builder"]["declaration"]
    assert d["symbols"] == ["2", "3", "10"] and d["separator"] == " "
    assert d["layout"] == "fixed" and d["shape"] == [1, 3]  # one length: no end marker needed
    assert decoded(out, "train") == [(e["input"], e["output"]) for e in train]
    assert decoded(out, "test") == [(e["input"], e["output"]) for e in test]


def test_symbols_given_set_the_token_order(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    out = tmp_path / "ds"
    built(
        capsys,
        monkeypatch,
        str(write_jsonl(tmp_path / "ex.jsonl", GOOD)),
        *("--test-fraction", "0.5", "--symbols", '["2", "1", "0", "9"]', "--out", str(out)),
    )
    meta, arrays = dataset(out, "train")
    assert meta["builder"]["declaration"]["symbols"] == ["2", "1", "0", "9"]  # as given, an unused one kept
    assert meta["vocab_size"] == 6
    pairs = decoded(out, "train") + decoded(out, "test")
    assert sorted(map(json.dumps, pairs)) == sorted(json.dumps((e["input"], e["output"])) for e in GOOD)
    x = arrays["inputs"][0].reshape(2, 2)
    original = np.array(decoded(out, "train")[0][0])
    np.testing.assert_array_equal(x, np.select([original == 2, original == 1, original == 0], [2, 3, 4]))


def sudoku_rows(rng: np.random.Generator, n: int) -> list[list[str]]:
    rows = []
    for i in range(n):
        sol = latin_4x4(rng)
        quiz = np.where(rng.random((4, 4)) < 0.5, 0, sol)
        rows.append([f"p{i}", "".join(map(str, quiz.reshape(-1))), "".join(map(str, sol.reshape(-1))), str(i % 3)])
    return rows


def test_csv_with_named_columns(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    rng = np.random.default_rng(2)
    header = ["id", "quizzes", "solutions", "rating"]
    train, test = sudoku_rows(rng, 24), sudoku_rows(rng, 6)
    write_csv_file(tmp_path / "s4.csv", header, train)
    write_csv_file(tmp_path / "s4_test.csv", header, test)
    out = tmp_path / "ds"
    built(
        capsys,
        monkeypatch,
        str(tmp_path / "s4.csv"),
        "--test",
        str(tmp_path / "s4_test.csv"),
        *("--input-col", "quizzes", "--output-col", "solutions", "--grid", "4x4", "--blank", "0"),
        "--out",
        str(out),
    )
    meta, arrays = dataset(out, "train")
    d = meta["builder"]["declaration"]
    assert d["input_form"] == d["output_form"] == "flat" and d["grid"] == [4, 4]
    assert d["symbols"] == ["0", "1", "2", "3", "4"] and d["blank"] == "0"
    assert d["layout"] == "fixed" and d["shape"] == [4, 4]
    assert_plain_split(meta, arrays, 24)
    assert decoded(out, "train") == [(r[1], r[2]) for r in train]
    assert decoded(out, "test") == [(r[1], r[2]) for r in test]
    quiz = np.array([int(c) for c in train[3][1]])
    np.testing.assert_array_equal(arrays["inputs"][3], quiz + 2)


def test_npz_with_groups(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    rng = np.random.default_rng(3)
    inputs = rng.integers(0, 6, (40, 3, 4))
    labels = (5 - inputs)[:, :, ::-1]
    groups = np.repeat(np.arange(10), 4)
    np.savez(tmp_path / "grids.npz", inputs=inputs, labels=labels, groups=groups)
    out = tmp_path / "ds"
    built(capsys, monkeypatch, str(tmp_path / "grids.npz"), "--test-fraction", "0.25", "--out", str(out))
    meta, arrays = dataset(out, "train")
    d = meta["builder"]["declaration"]
    assert d["input_form"] == d["output_form"] == "grid" and d["cells"] == "int"
    assert d["symbols"] == [str(i) for i in range(6)]
    assert d["layout"] == "fixed" and d["shape"] == [3, 4]
    assert_plain_split(meta, arrays, 28)  # whole groups of 4 to test until it holds 10 of 40: three
    assert_plain_split(*dataset(out, "test"), 12)
    file_values = {json.dumps([x.tolist(), y.tolist()]): int(g) for x, y, g in zip(inputs, labels, groups)}
    train_groups = [file_values.pop(json.dumps(list(v))) for v in decoded(out, "train")]
    test_groups = [file_values.pop(json.dumps(list(v))) for v in decoded(out, "test")]
    assert not file_values  # every example once, as the file holds it
    assert not set(train_groups) & set(test_groups)


# ----------------------------------------------------------------------------------------------------- the split


def grouped_examples(n_groups: int, per: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(4)
    examples = []
    for g in range(n_groups):
        for _ in range(per):
            x = rng.integers(0, 4, (3, 3))
            examples.append({"input": x.tolist(), "output": x.T.tolist(), "group": f"g{g}"})
    return examples


def test_test_fraction_keeps_groups_whole_and_follows_the_seed(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    examples = grouped_examples(12, 4)
    path = write_jsonl(tmp_path / "grouped.jsonl", examples)
    group_of = {json.dumps([e["input"], e["output"]]): e["group"] for e in examples}

    def split(seed: int, name: str) -> tuple[list[str], list[str]]:
        out = tmp_path / name
        built(capsys, monkeypatch, str(path), "--test-fraction", "0.25", "--seed", str(seed), "--out", str(out))
        return tuple([group_of[json.dumps(list(v))] for v in decoded(out, s)] for s in ("train", "test"))  # type: ignore[return-value]

    train, test = split(0, "a")
    assert len(test) == 12 and len(train) == 36  # three whole groups of 4
    assert not set(train) & set(test)
    assert {g: test.count(g) for g in test} == dict.fromkeys(set(test), 4)
    again = split(0, "b")
    assert again == (train, test)
    for rel in ("train/all__inputs.npy", "test/all__labels.npy", "test/dataset.json"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    other = split(1, "c")
    assert set(other[1]) != set(test)
    assert not set(other[0]) & set(other[1])
    # The held-out examples as the file wrote them (group kept), in the test split's order: what solve --file reads.
    held = [json.loads(line) for line in (tmp_path / "a" / "test_examples.jsonl").read_text().splitlines()]
    assert [json.dumps([e["input"], e["output"]]) for e in held] == [
        json.dumps(list(v)) for v in decoded(tmp_path / "a", "test")
    ]
    assert [e["group"] for e in held] == test
    task = task_of(dataset(tmp_path / "a", "test")[0])
    puzzles = task.parse((tmp_path / "a" / "test_examples.jsonl").read_text(), "test_examples.jsonl")
    np.testing.assert_array_equal(np.stack([p.tokens for p in puzzles]), dataset(tmp_path / "a", "test")[1]["inputs"])


def test_test_fraction_keeps_a_files_duplicates_on_one_side(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """Without groups (a CSV has none), the same example written several times is one group: the split never puts
    a copy on each side, whatever the seed."""
    rows = ["quizzes,solutions"] + [f"{a}{b},{b}{a}" for a in "abc" for b in "abc"] * 3  # 9 examples, 3 copies each
    path = tmp_path / "dup.csv"
    path.write_text("\n".join(rows) + "\n")
    for seed in range(4):
        out = tmp_path / f"s{seed}"
        built(capsys, monkeypatch, str(path), "--test-fraction", "0.3", "--input-col", "quizzes", "--output-col",
              "solutions", "--seed", str(seed), "--out", str(out))  # fmt: skip
        train, test = (decoded(out, split) for split in ("train", "test"))
        assert not set(train) & set(test) and len(train) + len(test) == 27
        assert all(test.count(e) == 3 for e in test)


# ------------------------------------------------------------------------------------------------ augmentation

RULES = """\
import pathlib

CALLS = pathlib.Path(__file__).with_name("calls.log")


def valid(given, answer):
    with CALLS.open("a") as f:
        f.write("call\\n")
    return answer == [[2 if c == 1 else c for c in row] for row in given]
"""


def ones_to_twos(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    xs = [rng.choice([0, 1, 3], (4, 4)) for _ in range(n)]
    xs[0] = np.array([[1, 1, 1, 1]] * 4)  # symmetric under every map: no distinct copy
    xs[1] = np.array([[1, 0, 0, 1], [3, 3, 3, 3], [3, 3, 3, 3], [1, 0, 0, 1]])  # kept by 4 maps: 2 distinct images
    return [{"input": x.tolist(), "output": np.where(x == 1, 2, x).tolist()} for x in xs]


def test_dihedral_augmentation_keeps_the_rules(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    train, test = ones_to_twos(20, 5), ones_to_twos(6, 6)[2:]
    rules = tmp_path / "rules.py"
    rules.write_text(RULES)
    out = tmp_path / "ds"
    built(
        capsys,
        monkeypatch,
        str(write_jsonl(tmp_path / "twos.jsonl", train)),
        "--test",
        str(write_jsonl(tmp_path / "twos_test.jsonl", test)),
        *("--dihedral", "--num-aug", "3", "--check", f"{rules}:valid", "--out", str(out)),
    )
    # the rules were run on every example, and on one copy of each training example moved by a declared symmetry
    assert len((tmp_path / "calls.log").read_text().splitlines()) == len(train) + len(test) + len(train)
    meta, arrays = dataset(out, "train")
    d = meta["builder"]["declaration"]
    assert d["dihedral"] and d["layout"] == "fixed" and d["shape"] == [4, 4] and d["symbols"] == ["0", "1", "2", "3"]
    assert d["check"] == {
        "source": str(rules),
        "function": "valid",
        "sha256": hashlib.sha256(rules.read_bytes()).hexdigest(),
    }
    assert (out / "check.py").read_bytes() == rules.read_bytes()
    x, y, groups = arrays["inputs"], arrays["labels"], arrays["group_indices"]
    assert groups[0] == 0 and groups[-1] == x.shape[0] and len(groups) == len(train) + 1
    sizes = np.diff(groups)
    assert ((sizes >= 1) & (sizes <= 4)).all()
    assert sizes[0] == 1 and sizes[1] == 2  # all ones: no copy; the pattern kept by the flips: its transpose
    assert (sizes[2:] == 4).all()  # random 4x4 grids of 3 symbols have 4 distinct images
    assert meta["builder"]["counts"] == {"originals": len(train), "examples": int(x.shape[0])}
    np.testing.assert_array_equal(arrays["puzzle_indices"], np.arange(x.shape[0] + 1))
    np.testing.assert_array_equal(y, np.where(x == 3, 4, x))  # every stored pair keeps the rule (tokens: symbol + 2)
    for k, e in enumerate(train):
        start, end = groups[k], groups[k + 1]
        original = (np.array(e["input"]) + 2).astype(x.dtype)
        np.testing.assert_array_equal(x[start], original.reshape(-1))  # the original first
        pairs = {x[i].tobytes() + y[i].tobytes() for i in range(start, end)}
        assert len(pairs) == end - start  # none equal
        images = {np.ascontiguousarray(DIHEDRAL_REFERENCE[t](original)).tobytes() for t in range(8)}
        assert all(np.ascontiguousarray(x[i].reshape(4, 4)).tobytes() in images for i in range(start, end))
    test_meta, test_arrays = dataset(out, "test")
    assert_plain_split(test_meta, test_arrays, len(test))  # not augmented
    assert decoded(out, "test") == [(e["input"], e["output"]) for e in test]
    task = DeclaredTask(task_of(meta).declaration, out)  # the rules run from the dataset's check.py
    assert task.valid(test[0]["input"], test[0]["output"]) is True
    assert task.valid(test[0]["input"], test[0]["input"]) is False


# ------------------------------------------------------------------------------------------------- bad files

GOOD = [
    {"input": [[0, 1], [1, 0]], "output": [[0, 2], [2, 0]]},
    {"input": [[1, 1], [1, 0]], "output": [[2, 2], [2, 0]]},
    {"input": [[0, 0], [1, 0]], "output": [[0, 0], [2, 0]]},
    {"input": [[0, 1], [1, 1]], "output": [[0, 2], [2, 2]]},
]
WORDS = [{"input": w, "output": w[::-1]} for w in ("ab", "abc", "ba", "cab")]
TWOS = "def valid(given, answer):\n    return answer == [[2 if c == 1 else c for c in row] for row in given]\n"


def lines(*examples: Any) -> str:
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in examples)


# name -> (files to write: text, or an .npz's arrays; arguments; fragments of the error): "@NAME" stands for the path
# of the file NAME
BadCase = tuple[dict[str, Any], list[str], list[str]]
GRIDS4 = np.arange(16).reshape(4, 2, 2) % 3
SPLIT = ["--test-fraction", "0.5"]
BAD: dict[str, BadCase] = {
    "ragged": (
        {"ex.jsonl": lines(GOOD[0], {"input": [[0, 1], [1]], "output": [[0, 2], [2, 0]]}, *GOOD[2:])},
        SPLIT,
        ["@ex.jsonl line 2", "field 'input'", "ragged", "row 2"],
    ),
    "symbol-outside-symbols": (
        {"ex.jsonl": lines(*GOOD[:2], {"input": [[0, 1], [1, 0]], "output": [[0, 3], [2, 0]]}, GOOD[3])},
        [*SPLIT, "--symbols", "012"],
        ["@ex.jsonl line 3", "field 'output'", "'3'", "--symbols"],
    ),
    "grid-larger-than-canvas": (
        {"ex.jsonl": lines(GOOD[0], {"input": [[0, 1, 0]] * 3, "output": [[0, 2, 0]] * 3}, *GOOD[2:])},
        [*SPLIT, "--canvas", "2"],
        ["@ex.jsonl line 2", "field 'input'", "3x3", "--canvas"],
    ),
    "empty-file": ({"ex.jsonl": ""}, SPLIT, ["@ex.jsonl", "no example"]),
    "blank-lines-only": ({"ex.jsonl": "\n\n  \n"}, SPLIT, ["@ex.jsonl", "no example"]),
    "empty-test-file": ({"ex.jsonl": lines(*GOOD), "t.jsonl": ""}, ["--test", "@t.jsonl"], ["@t.jsonl", "no example"]),
    "fraction-leaves-empty-split": (
        {"ex.jsonl": lines(*GOOD[:3])},
        ["--test-fraction", "0.1"],
        ["--test-fraction 0.1", "@ex.jsonl", "empty"],
    ),
    "csv-column-missing": (
        {"s.csv": "quizzes,solutions\n1030,1234\n0204,1234\n"},
        ["--test-fraction", "0.5", "--input-col", "quizes", "--output-col", "solutions", "--grid", "2x2"],
        ["@s.csv", "--input-col quizes", "'quizzes', 'solutions'"],
    ),
    "csv-ragged-row": (
        {"s.csv": "input,output\n1030,1234\n0204,1234,9\n0000,1234\n"},
        ["--test-fraction", "0.5", "--grid", "2x2"],
        ["@s.csv line 3", "3 fields"],
    ),
    "csv-wrong-cell-count": (
        {"s.csv": "input,output\n1030,1234\n020,1234\n0000,1234\n"},
        ["--test-fraction", "0.5", "--grid", "2x2"],
        ["@s.csv line 3", "field 'input'", "3 symbols", "2x2"],
    ),
    "token-bound": (
        {"ex.jsonl": lines(WORDS[0], {"input": "ab" * 4500, "output": "ba"}, *WORDS[2:])},
        SPLIT,
        ["@ex.jsonl line 2", "9,00"],
    ),
    "same-example-both-sides": (
        {"ex.jsonl": lines(*GOOD), "t.jsonl": lines(GOOD[3], GOOD[1])},
        ["--test", "@t.jsonl"],
        ["2 test examples", "@t.jsonl line 1", "@ex.jsonl line 4", "remove them from one of the files"],
    ),
    "same-example-in-two-groups-across-the-fraction-split": (
        {"ex.jsonl": lines(GOOD[1] | {"group": "a"}, GOOD[1] | {"group": "b"})},
        SPLIT,
        ["1 test example is also in training", "@ex.jsonl line", "their groups differ"],
    ),
    "group-both-sides": (
        {
            "ex.jsonl": lines(*GOOD[:3], GOOD[3] | {"group": "g1"}),
            "t.jsonl": lines({"input": [[1, 0], [0, 0]], "output": [[2, 0], [0, 0]], "group": "g1"}),
        },
        ["--test", "@t.jsonl"],
        ["group 'g1'", "@t.jsonl line 1"],
    ),
    "neither-test-nor-fraction": ({"ex.jsonl": lines(*GOOD)}, [], ["--test", "--test-fraction"]),
    "both-test-and-fraction": (
        {"ex.jsonl": lines(*GOOD), "t.jsonl": lines(GOOD[0])},
        ["--test", "@t.jsonl", "--test-fraction", "0.5"],
        ["--test", "--test-fraction"],
    ),
    "check-does-not-load": (
        {"ex.jsonl": lines(*GOOD), "rules.py": "import no_such_module_here\n"},
        [*SPLIT, "--check", "@rules.py:valid"],
        ["--check @rules.py:valid", "does not load", "no_such_module_here"],
    ),
    "check-missing-file": (
        {"ex.jsonl": lines(*GOOD)},
        [*SPLIT, "--check", "@nowhere.py:valid"],
        ["--check @nowhere.py:valid", "no such file"],
    ),
    "check-without-the-function": (
        {"ex.jsonl": lines(*GOOD), "rules.py": "def other(a, b):\n    return True\n"},
        [*SPLIT, "--check", "@rules.py:valid"],
        ["--check @rules.py:valid", "no function 'valid'", "other"],
    ),
    "check-raises-on-an-example": (
        {
            "ex.jsonl": lines(*GOOD),
            "rules.py": "def valid(given, answer):\n    if given[1][1] == 1:\n        raise ValueError('corner')\n"
            "    return True\n",
        },
        [*SPLIT, "--check", "@rules.py:valid"],
        ["--check @rules.py:valid", "@ex.jsonl line 4", "ValueError: corner"],
    ),
    "check-exits-on-an-example": (
        {
            "ex.jsonl": lines(*GOOD),
            "rules.py": "import sys\n\n\ndef valid(given, answer):\n    if given[1][1] == 1:\n        sys.exit(3)\n"
            "    return True\n",
        },
        [*SPLIT, "--check", "@rules.py:valid"],
        ["--check @rules.py:valid", "@ex.jsonl line 4", "SystemExit: 3"],
    ),
    "check-rejects-an-output": (
        {
            "ex.jsonl": lines(GOOD[0], {"input": [[1, 1], [1, 0]], "output": [[2, 2], [2, 2]]}, *GOOD[2:]),
            "rules.py": TWOS,
        },
        [*SPLIT, "--check", "@rules.py:valid"],
        ["--check @rules.py:valid", "rejects the output of @ex.jsonl line 2"],
    ),
    "not-json": ({"ex.jsonl": lines(GOOD[0], "{oops", *GOOD[2:])}, SPLIT, ["@ex.jsonl line 2", "not JSON"]),
    "no-output": (
        {"ex.jsonl": lines(*GOOD[:2], {"input": [[0, 1], [1, 0]]}, GOOD[3])},
        SPLIT,
        ["@ex.jsonl line 3", "'output'"],
    ),
    "unknown-field": (
        {"ex.jsonl": lines(GOOD[0], GOOD[1] | {"label": 1}, *GOOD[2:])},
        SPLIT,
        ["@ex.jsonl line 2", "unknown field 'label'"],
    ),
    "mixed-forms": (
        {"ex.jsonl": lines(GOOD[0], {"input": "0110", "output": [[2, 2], [2, 0]]}, *GOOD[2:])},
        SPLIT,
        ["@ex.jsonl line 2: field 'input': a string", "where @ex.jsonl line 1 has a grid"],
    ),
    "mixed-cells": (
        {"ex.jsonl": lines(GOOD[0], {"input": [[1, "1"], [1, 0]], "output": [[2, 2], [2, 0]]}, *GOOD[2:])},
        SPLIT,
        ["@ex.jsonl line 2", "field 'input'", "integer and character"],
    ),
    "value-neither-string-nor-grid": (
        {"ex.jsonl": lines(GOOD[0], {"input": 7, "output": [[2, 2], [2, 0]]}, *GOOD[2:])},
        SPLIT,
        ["@ex.jsonl line 2", "field 'input'", "7"],
    ),
    "dihedral-on-sequences": ({"w.jsonl": lines(*WORDS)}, [*SPLIT, "--dihedral"], ["--dihedral", "sequences"]),
    "dihedral-on-strings-of-one-length": (  # the fixed layout, one row: not a square to turn
        {"w.jsonl": lines(*({"input": w, "output": w[::-1]} for w in ("ab", "ba", "aa", "bb")))},
        [*SPLIT, "--dihedral"],
        ["--dihedral", "sequences"],
    ),
    "dihedral-on-string-outputs": (  # a grid in, its count out: the square's maps would turn the count around
        {"c.jsonl": lines(*({"input": g, "output": str(sum(map(sum, g)))} for g in (e["input"] for e in GOOD)))},
        [*SPLIT, "--dihedral"],
        ["--dihedral", "the outputs are strings"],
    ),
    "check-rejects-a-declared-symmetry": (  # mark the top-left cell: a rotation moves the mark, which the rules see
        {
            "m.jsonl": lines(*({"input": e["input"], "output": [[2, e["input"][0][1]], e["input"][1]]} for e in GOOD)),
            "rules.py": "def valid(given, answer):\n    return answer == [[2] + given[0][1:]] + given[1:]\n",
        },
        [*SPLIT, "--dihedral", "--check", "@rules.py:valid"],
        [
            "error: --dihedral: the task does not keep the declared symmetries (the square's 8",
            "@m.jsonl line",
            "--check @rules.py:valid",
        ],
    ),
    "npz-sequences-dihedral": (
        {"s.npz": {"inputs": np.arange(12).reshape(4, 3) % 3, "labels": np.arange(12).reshape(4, 3) % 2}},
        [*SPLIT, "--dihedral"],
        ["--dihedral", "sequences"],
    ),
    "npz-float-groups": (
        {"g.npz": {"inputs": GRIDS4, "labels": GRIDS4, "groups": np.array([0.5, 1.5, 0.5, 2.0])}},
        SPLIT,
        ["@g.npz", "'groups'", "float64", "integers or strings"],
    ),
    "npz-unknown-array": (
        {"g.npz": {"inputs": GRIDS4, "labels": GRIDS4, "ids": np.arange(4)}},
        SPLIT,
        ["@g.npz", "unknown array 'ids'", "inputs, labels, groups"],
    ),
    "num-aug-without-symmetry": ({"ex.jsonl": lines(*GOOD)}, [*SPLIT, "--num-aug", "2"], ["--num-aug 2", "symmetry"]),
    "blank-not-a-symbol": ({"ex.jsonl": lines(*GOOD)}, [*SPLIT, "--blank", "x"], ["--blank", "'x'", "'0', '1', '2'"]),
    "npz-without-labels": ({}, SPLIT, ["@g.npz", "'labels'"]),
}


@pytest.mark.parametrize("name", BAD)
def test_bad_file_is_one_line_and_writes_nothing(name: str, tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    files, args, fragments = BAD[name]
    for file, content in files.items():
        if isinstance(content, dict):
            np.savez(tmp_path / file, **content)
        else:
            (tmp_path / file).write_text(content)
    if not files:
        np.savez(tmp_path / "g.npz", inputs=np.zeros((4, 2, 2), dtype=np.int64))
    before = sorted(tmp_path.iterdir())
    examples = next(iter(files), "g.npz")

    def at(s: str) -> str:
        return s.replace("@", f"{tmp_path}/")

    out = tmp_path / "out"
    proc = build(capsys, monkeypatch, at(f"@{examples}"), *map(at, args), "--out", str(out))
    assert proc.returncode == 2
    assert_one_line_error(proc, *map(at, fragments))
    assert sorted(tmp_path.iterdir()) == before  # no --out, and no temporary folder left beside it


def test_a_directory_given_as_the_examples_is_named_as_one(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "train.jsonl").write_text(lines(*GOOD))
    proc = build(capsys, monkeypatch, str(tmp_path / "task"), *SPLIT, "--out", str(tmp_path / "out"))
    assert_one_line_error(proc, f"EXAMPLES {tmp_path / 'task'}: a directory, not a file of examples")


def test_good_files_of_the_bad_cases_build(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """The bad cases' good lines, with their options, do build: each error is the bad line's, not the setup's."""
    (tmp_path / "ex.jsonl").write_text(lines(*GOOD))
    (tmp_path / "rules.py").write_text(TWOS)
    ex = str(tmp_path / "ex.jsonl")
    for i, extra in enumerate(
        (["--symbols", "012"], ["--canvas", "2"], ["--check", f"{tmp_path}/rules.py:valid"], ["--blank", "0"])
    ):
        built(capsys, monkeypatch, ex, *SPLIT, *extra, "--out", str(tmp_path / f"o{i}"))
    (tmp_path / "w.jsonl").write_text(lines(*WORDS))
    built(capsys, monkeypatch, str(tmp_path / "w.jsonl"), *SPLIT, "--out", str(tmp_path / "w"))


@pytest.mark.parametrize("length", [None, 6], ids=["default", "length-6"])
def test_summary_and_task_state_the_sequence_bound_the_layout_holds(
    length: int | None, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """`hrm build-data file`'s summary and the task's description (hrm solve) give one bound for sequences, the one
    the layout takes, and never below the longest sequence of the dataset. (--length 6 with a sequence of 6 symbols:
    built, or refused on that line where the strip keeps room for its end marker.)"""
    words = ["ab", "abcdef", "b", "ba"]
    path = write_jsonl(tmp_path / "w.jsonl", [{"input": w, "output": w[::-1]} for w in words])
    out = tmp_path / "ds"
    proc = build(
        capsys, monkeypatch, str(path), *SPLIT, *(["--length", str(length)] if length else []), "--out", str(out)
    )
    if length is not None and proc.returncode != 0:
        assert_one_line_error(proc, f"{path} line 2", "--length 6")
        return
    assert proc.returncode == 0, proc.stderr
    task = task_of(dataset(out, "train")[0])
    taken = max(n for n in range(1, 20) if task.layout.fits(np.full((1, n), 2)) is None)
    assert taken >= 6
    assert f"sequences up to {taken} symbols" in summary(out)
    assert f"sequences of up to {taken} symbols" in task.describe()


def test_int_grids_in_and_character_grids_out(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """Each field keeps its own kind of cells: integers in, characters out, both given back as the file wrote them."""
    marks = {0: ".", 1: "#", 2: "o"}
    examples = [
        {"input": g.tolist(), "output": [[marks[int(c)] for c in row] for row in g]}
        for g in np.random.default_rng(0).integers(0, 3, (8, 3, 3))
    ]
    out = tmp_path / "out"
    built(capsys, monkeypatch, str(write_jsonl(tmp_path / "ex.jsonl", examples)), *SPLIT, "--out", str(out))
    meta, _ = dataset(out, "train")
    declaration = meta["builder"]["declaration"]
    assert (declaration["cells"], declaration["output_cells"]) == ("int", "str")
    values = decoded(out, "train") + decoded(out, "test")
    assert sorted(map(json.dumps, values)) == sorted(json.dumps((e["input"], e["output"])) for e in examples)
    # One kind for both fields: no output_cells (the records of such datasets are as they were).
    same = tmp_path / "same"
    built(capsys, monkeypatch, str(write_jsonl(tmp_path / "g.jsonl", GOOD)), *SPLIT, "--out", str(same))
    same_declaration = dataset(same, "train")[0]["builder"]["declaration"]
    assert same_declaration["output_cells"] is None
    assert same_declaration["answer_symbols"] == ["0", "2"]  # outputs never hold a 1: solve never answers one
    assert declaration["answer_symbols"] == [s for s in declaration["symbols"] if s in ".#o"]


def test_an_empty_string_with_a_separator_holds_no_symbol(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    evens = [{"input": ",".join(map(str, xs)), "output": ",".join(str(x) for x in xs if x % 2 == 0)} for xs in
             ([1, 3], [2, 5, 10], [7], [4, 4, 12], [11, 9, 6])]  # fmt: skip
    out = tmp_path / "out"
    path = str(write_jsonl(tmp_path / "evens.jsonl", evens))
    built(capsys, monkeypatch, path, "--test-fraction", "0.4", "--separator", ",", "--out", str(out))
    symbols = dataset(out, "train")[0]["builder"]["declaration"]["symbols"]
    assert symbols == ["1", "2", "3", "4", "5", "6", "7", "9", "10", "11", "12"]  # no '' among them, sorted as numbers
    assert sorted(map(json.dumps, decoded(out, "train") + decoded(out, "test"))) == sorted(
        json.dumps([e["input"], e["output"]]) for e in evens
    )


def test_overwrite_replaces_a_file_dataset_and_nothing_else(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    path = str(write_jsonl(tmp_path / "ex.jsonl", GOOD))
    out = tmp_path / "out"
    built(capsys, monkeypatch, path, *SPLIT, "--out", str(out))
    assert_one_line_error(build(capsys, monkeypatch, path, *SPLIT, "--out", str(out)), "already exists", "--overwrite")
    built(capsys, monkeypatch, path, *SPLIT, "--seed", "3", "--out", str(out), "--overwrite")
    assert json.loads((out / "train" / "dataset.json").read_text())["builder"]["seed"] == 3
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    proc = build(capsys, monkeypatch, path, *SPLIT, "--out", str(mine), "--overwrite")
    assert_one_line_error(proc, f"--out {mine}", "notes.txt")
    assert (mine / "notes.txt").read_text() == "mine\n"


def test_summary_names_the_symbols_only_test_examples_use(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """A symbol of the test file alone is taken (the documented default), and the summary says training never shows
    it; one that --permute's augmented copies bring into training is not named."""
    train = write_jsonl(tmp_path / "train.jsonl", [{"input": "ab", "output": "ba"}, {"input": "bba", "output": "abb"}])
    test = write_jsonl(tmp_path / "test.jsonl", [{"input": "cab", "output": "bac"}, {"input": "ad", "output": "da"}])
    plain, permuted = tmp_path / "plain", tmp_path / "permuted"
    built(capsys, monkeypatch, str(train), "--test", str(test), "--out", str(plain))
    note = summary(plain).splitlines()[1]
    assert note.startswith("note: test examples use 'c', 'd', which no training example") and "them" in note
    built(
        capsys, monkeypatch, str(train), "--test", str(test), "--permute", "abc", "--num-aug", "8", "--out",
        str(permuted),
    )  # fmt: skip
    lines = summary(permuted).splitlines()
    assert len(lines) == 2 and lines[1].startswith("note: test examples use 'd', which") and " it " in lines[1]
    seen = write_jsonl(tmp_path / "seen.jsonl", [{"input": "aab", "output": "baa"}])
    built(capsys, monkeypatch, str(train), "--test", str(seen), "--out", str(tmp_path / "seen"))
    assert "\n" not in summary(tmp_path / "seen")


def test_summary_names_test_examples_beyond_the_training_sizes(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """Sequences longer, or grids taller or wider, than every training example are said (the model never trains on
    that size); a test example within the training sizes in every dimension is not."""
    words = write_jsonl(tmp_path / "w.jsonl", [{"input": w, "output": w[::-1]} for w in ("ab", "abc", "ba", "cab")])
    longer = write_jsonl(tmp_path / "wl.jsonl", [{"input": w, "output": w[::-1]} for w in ("abcab", "bc", "aabc")])
    built(capsys, monkeypatch, str(words), "--test", str(longer), "--out", str(tmp_path / "s"))
    lines = summary(tmp_path / "s").splitlines()
    assert lines[1:] == [
        "note: 2 test examples exceed the training examples' sizes (test up to 5 symbols, training up to 3 symbols): "
        "the model never trains on that size"
    ]

    def grid(rows: int, cols: int) -> dict[str, Any]:
        g = [[(r + c) % 3 for c in range(cols)] for r in range(rows)]
        return {"input": g, "output": [row[::-1] for row in g]}

    grids = write_jsonl(tmp_path / "g.jsonl", [grid(2, 3), grid(3, 2), grid(1, 1)])
    wider = write_jsonl(tmp_path / "gw.jsonl", [grid(2, 2), grid(1, 4)])
    built(capsys, monkeypatch, str(grids), "--test", str(wider), "--out", str(tmp_path / "g"))
    assert (
        summary(tmp_path / "g")
        .splitlines()[1]
        .startswith("note: 1 test example exceeds the training examples' sizes (test up to 2x4, training up to 3x3)")
    )
    within = write_jsonl(tmp_path / "gi.jsonl", [grid(3, 3) | {"input": [[1, 1], [1, 1]]}, grid(2, 2)])
    built(capsys, monkeypatch, str(grids), "--test", str(within), "--out", str(tmp_path / "i"))
    assert "\n" not in summary(tmp_path / "i")


def test_summary_says_when_blanks_are_read_as_symbols(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """Strings that blanks separate, read by another separator or by character, have blanks in their symbols: the
    summary says which separator reads them; with --separator ' ' it says nothing."""
    path = write_jsonl(
        tmp_path / "x.jsonl", [{"input": f"{a} {b}", "output": f"{b} {a}"} for a, b in ("12", "34", "56")]
    )
    test = write_jsonl(tmp_path / "t.jsonl", [{"input": "2 1", "output": "1 2"}])  # symbols training shows too
    cases = {
        ("--separator", ","): "note: blanks are read as symbols or parts of them ('1 2', '2 1', '3 4', ... (6 in all); "
        "--separator ','): if blanks separate your symbols, build with --separator ' '",
        (): "note: blanks are read as symbols or parts of them (' '; one symbol a character): if blanks separate your "
        "symbols, build with --separator ' '",
        ("--separator", " "): None,
    }
    for i, (flags, note) in enumerate(cases.items()):
        out = tmp_path / f"d{i}"
        built(capsys, monkeypatch, str(path), "--test", str(test), *flags, "--out", str(out))
        assert summary(out).splitlines()[1:] == ([note] if note else [])
