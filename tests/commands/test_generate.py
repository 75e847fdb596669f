"""`hrm generate` refuses what it cannot use in one line naming the flag: a temperature that is not a finite number
(or one too small to divide the logits by), a seed out of range, and a --data that is missing, not a folder, a puzzle
dataset or a folder without a tokenizer (each used to be passed over for the run's own tokenizer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import hrm_in_process, tiny_lm_run, write_original_layout


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return tiny_lm_run(tmp_path_factory.mktemp("gen"))


def generate(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, run: Path, *args: str) -> tuple[int, str]:
    return hrm_in_process(capsys, monkeypatch, "generate", "--run", str(run), "--max-new-tokens", "3", *args)


def one_line_error(code: int, err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    "value,message",
    [
        ("inf", "--temperature inf: expected a finite number, 0 (greedy decoding) or more"),
        ("-inf", "'--temperature'"),
        ("nan", "'--temperature'"),
        ("1e-300", "--temperature 1e-300: too small to divide the logits by; use 0 for greedy decoding or at least"),
    ],
)
def test_a_temperature_that_is_not_a_usable_number_is_refused(
    value: str, message: str, lm: tuple[Path, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert message in one_line_error(*generate(capsys, monkeypatch, lm[0], "--temperature", value))


@pytest.mark.parametrize("value", ["-1", str(2**64)])
def test_a_seed_out_of_range_is_refused(
    value: str, lm: tuple[Path, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "'--seed'" in one_line_error(*generate(capsys, monkeypatch, lm[0], "--seed", value))


def test_data_must_be_a_text_dataset(
    lm: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, data = lm
    puzzles = write_original_layout(tmp_path / "sudoku")
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    cases = {
        tmp_path / "nowhere": "no such directory; expected the text dataset the run was trained on",
        tmp_path / "file.txt": "not a directory",
        puzzles: "a puzzle dataset, which has no tokenizer",
        tmp_path / "empty": "no tokenizer in it",
    }
    for path, message in cases.items():
        line = one_line_error(*generate(capsys, monkeypatch, run, "--data", str(path)))
        assert line.startswith(f"error: --data {path}: ") and message in line, line
    code, err = generate(capsys, monkeypatch, run, "--data", str(data), "--prompt", "the ", "--temperature", "0")
    assert code == 0, err  # the text dataset it was trained on is taken
