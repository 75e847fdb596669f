"""`hrm eval` refuses a flag that the evaluation it runs does not read (docs/commands.md, `hrm eval`; issue #32): each
is one line naming the flag, exit 2, where it used to be ignored and the numbers printed as if it had applied."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from datasets_build.text import TextBuildOptions, build_text
from hrm_reason.config import load_config
from hrm_reason.train.loop import train
from tests.helpers import hrm_in_process, tiny_config, write_original_layout


@pytest.fixture(scope="module")
def puzzles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("flags") / "sudoku4")


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flags")
    rng = np.random.default_rng(0)
    (root / "c").mkdir()
    for i in range(4):
        (root / "c" / f"{i}.txt").write_text("".join(rng.choice(["the cat sat. ", "a dog ran. "], size=40)))
    return build_text(TextBuildOptions(input=[str(root / "c")], out=root / "ds", val_fraction=0.25), progress=False)


@pytest.fixture(scope="module")
def runs(puzzles: Path, text: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A puzzle model and a language-model head, one optimizer step each."""
    root = tmp_path_factory.mktemp("flags")
    act = train(tiny_config(puzzles, root / "act", "epochs=2", "eval_interval=2", "max_steps=1"), progress=False)
    lm_overrides = [
        "arch.name=hrm_lm",
        *("arch.hidden_size=32", "arch.num_heads=2", "arch.N=1", "arch.T=1", "arch.K=1", "arch.max_seq_len=64"),
        f"data_path={text}",
        f"run_dir={root / 'lm'}",
        *("seq_len=16", "global_batch_size=4", "max_steps=1", "eval_every_steps=1", "eval_max_tokens=64"),
        *("lr=1e-3", "lr_warmup_steps=0", "device=cpu"),
    ]
    lm = train(load_config(None, lm_overrides), progress=False)
    return {"act": act, "lm": lm}


# (run, extra arguments, the flag the error names, what the run is)
REFUSED = [
    ("act", ["--max-tokens", "64"], "--max-tokens", "an ACT puzzle model"),
    ("act", ["--seq-len", "8"], "--seq-len", "an ACT puzzle model"),
    ("lm", ["--mmax", "4"], "--mmax", "a language-model head"),
    ("lm", ["--max-examples", "3"], "--max-examples", "text dataset"),
    ("lm", ["--data", "PUZZLES", "--max-tokens", "64"], "--max-tokens", "puzzle dataset"),
    ("lm", ["--data", "PUZZLES", "--seq-len", "8"], "--seq-len", "puzzle dataset"),
]


@pytest.mark.parametrize(("kind", "args", "flag", "what"), REFUSED, ids=[f"{r[0]}{r[2]}" for r in REFUSED])
def test_a_flag_the_evaluation_does_not_read_is_a_one_line_error(
    runs: dict[str, Path],
    puzzles: Path,
    kind: str,
    args: list[str],
    flag: str,
    what: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = [str(puzzles) if a == "PUZZLES" else a for a in args]
    code, err = hrm_in_process(capsys, monkeypatch, "eval", "--run", str(runs[kind]), "--device", "cpu", *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"error: {flag}: {runs[kind]} is ") and what in lines[0], lines[0]


def test_the_flags_each_evaluation_reads_still_apply(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "act.json"
    args = ["--mmax", "2", "--max-examples", "5", "--quiet", "--json", str(out)]
    code, err = hrm_in_process(capsys, monkeypatch, "eval", "--run", str(runs["act"]), "--device", "cpu", *args)
    assert code == 0, err
    result = json.loads(out.read_text())
    assert len(result["exact_accuracy"]) == 2 and result["count"] == 5
    out = tmp_path / "lm.json"
    args = ["--max-tokens", "40", "--seq-len", "8", "--quiet", "--json", str(out)]
    code, err = hrm_in_process(capsys, monkeypatch, "eval", "--run", str(runs["lm"]), "--device", "cpu", *args)
    assert code == 0, err
    assert json.loads(out.read_text())["tokens"] == 40
