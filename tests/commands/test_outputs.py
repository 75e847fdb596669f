"""The one rule for a command's outputs (hrm_reason.outputs, issue 43): a new, empty or own output is taken; anything
else is refused in one line naming it, before any work; a folder that cannot take a file is found at once. The
commands' own outputs are checked end to end in tests/commands/test_hostile.py (every command, byte-identical)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hrm_reason.errors import MAX_LINE, UserError, one_line
from hrm_reason.limits import ADAPT_LR, NUM_AUG, Count, Rate
from hrm_reason.outputs import (
    EVAL_JSON,
    SUBMISSION_OUT,
    VIZ_FOLDER,
    Output,
    check_arguments,
    claim,
    folder_of,
    json_object_with,
)
from tests.commands.test_bad_inputs import read_only

ADAPT_LIKE = Output("--out", "hrm test", folder_of(("a.json", "b.bin"), "a test folder"), folder=True)


def refusal(path: Path | None, output: Output) -> str:
    with pytest.raises(UserError) as e:
        claim(path, output)
    return str(e.value)


def test_new_empty_and_own_outputs_are_taken(tmp_path: Path) -> None:
    assert claim(None, EVAL_JSON) is None
    assert claim(tmp_path / "new" / "deeper" / "r.json", EVAL_JSON) == tmp_path / "new" / "deeper" / "r.json"
    assert not (tmp_path / "new").exists()  # checking makes nothing
    (tmp_path / "empty").mkdir()
    assert claim(tmp_path / "empty", ADAPT_LIKE) == tmp_path / "empty"
    own = tmp_path / "own"
    own.mkdir()
    (own / "a.json").write_text("{}")
    (own / ".a.json.0000-1-00000000.tmp").write_text("a dead writer's")  # bookkeeping is not content
    assert claim(own, ADAPT_LIKE) == own
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"count": 3, "provenance": {}}))
    assert claim(result, EVAL_JSON) == result
    result.write_text(json.dumps({"t1": [{"attempt_1": [[1]], "attempt_2": [[2]]}]}))
    assert claim(result, SUBMISSION_OUT) == result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "own", "r.json"]  # no probe left behind


def test_what_is_not_the_commands_is_refused_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    for name in ("train", "test", "identifiers.json", "README"):
        (folder / name).write_text("x")
    message = refusal(folder, ADAPT_LIKE)
    assert message.startswith(
        f"--out {folder}: exists and is not output of hrm test (it holds README, identifiers.json"
    )
    assert "and 1 more" in message
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    assert (
        refusal(mine, ADAPT_LIKE)
        == f"--out {mine}: is a file, expected a directory; nothing was written (choose another path)"
    )
    assert refusal(folder, EVAL_JSON).startswith(f"--json {folder}: is a directory, expected a file")
    assert "not a result of hrm eval" in refusal(mine, EVAL_JSON)
    mine.write_text(json.dumps({"count": 3}))  # JSON, but not the record (no provenance)
    assert "not a result of hrm eval" in refusal(mine, EVAL_JSON)
    assert "not an ARC submission.json" in refusal(mine, SUBMISSION_OUT)
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    assert "a link to nothing" in refusal(link, EVAL_JSON)
    assert mine.read_text() == json.dumps({"count": 3}) and len(list(folder.iterdir())) == 4


def test_a_picture_folder_is_its_own_only_with_its_marked_pictures(tmp_path: Path) -> None:
    from hrm_reason.viz.canvas import new_figure, png_bytes

    folder = tmp_path / "viz"
    folder.mkdir()
    (folder / "a.png").write_bytes(png_bytes(new_figure(1, 1)))
    assert claim(folder, VIZ_FOLDER) == folder
    (folder / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)  # named as ours, from before the marker
    assert claim(folder, VIZ_FOLDER) == folder
    (folder / "holiday.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)  # a PNG, not ours
    assert "it holds holiday.png, which are no pictures of hrm viz" in refusal(folder, VIZ_FOLDER)


def test_a_folder_that_takes_no_file_is_found_before_any_work(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    with read_only(locked):
        assert refusal(locked / "r.json", EVAL_JSON) == f"permission denied writing {locked / 'r.json'}"
        assert refusal(locked / "new" / "r.json", EVAL_JSON) == f"permission denied writing {locked / 'new' / 'r.json'}"
    in_the_way = tmp_path / "file"
    in_the_way.write_text("x")
    assert (
        refusal(in_the_way / "r.json", EVAL_JSON)
        == f"cannot write {in_the_way / 'r.json'}: {in_the_way} is not a directory"
    )
    assert list(locked.iterdir()) == []


def test_counts_and_rates_name_their_flag_and_reason() -> None:
    assert NUM_AUG.check(1000) == 1000 and NUM_AUG.check(None) is None
    with pytest.raises(UserError, match=r"^--num-aug 10001: expected 0 to 10,000 \(ten times the paper's 1000"):
        NUM_AUG.check(10_001)
    with pytest.raises(UserError, match=r"^--adapt -1: expected 0 to 5"):
        Count("--steps", 0, 5, "why").check(-1, flag="--adapt")
    assert ADAPT_LR.check(0.01) == 0.01
    for bad in (float("nan"), float("inf"), -1.0, 0.0, 2.0):
        with pytest.raises(UserError, match=r"^--lr .*: expected a finite rate in \(0, 1\]"):
            ADAPT_LR.check(bad)
    assert Rate("--x", 1.0, "why", zero=True).check(0.0) == 0.0


def test_arguments_that_are_not_utf8_are_refused_naming_them() -> None:
    check_arguments(["adapt", "run", "tâche.json", "--prompt", "héllo"])
    with pytest.raises(UserError, match=r"^--prompt ab\\xffc: not valid UTF-8 \(byte 0xff at position 2\)$"):
        check_arguments(["generate", "--prompt", "ab\udcffc"])
    with pytest.raises(UserError, match=r"^argument 3 t\\xe9.json: not valid UTF-8 \(byte 0xe9"):
        check_arguments(["adapt", "run", "t\udce9.json"])


def test_error_lines_are_capped() -> None:
    assert one_line("a\nb") == "a b"
    long = one_line("x" * 10_000)
    assert len(long) <= MAX_LINE + 10 and long.endswith("(9,540 more characters)")


def test_json_records_are_recognised_by_their_keys(tmp_path: Path) -> None:
    recognise = json_object_with(("a", "b"), ("c",), what="a test record")
    path = tmp_path / "r.json"
    for value, own in (({"a": 1, "b": 2}, True), ({"c": 0}, True), ({"a": 1}, False), ([1], False)):
        path.write_text(json.dumps(value))
        assert (recognise(path) is None) == own, value
    path.write_bytes(b"\xff\xfe")
    assert recognise(path) == "not a test record"
