"""The README's Python code runs as pasted after `./run quickstart` (issue 44, item 1): every ```python block of
README.md is executed here, against a tiny 6x6 Sudoku dataset and a tiny run of the same layout put where the
quickstart puts its own (the block's paths replaced by theirs). A block that breaks, or that points at anything the
quickstart does not make, fails this test."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from hrm_reason.commands.quickstart import quickstart_paths
from hrm_reason.tasks.sudoku import is_valid_solution
from hrm_reason.train.loop import train
from tests.helpers import REPO, tiny_config

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(path: Path = REPO / "README.md") -> list[str]:
    return BLOCK.findall(path.read_text())


@pytest.fixture(scope="module")
def quickstart_like(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(data, run) shaped as the quickstart's: generated 6x6 Sudoku with 2x3 boxes, an HRM trained a few steps."""
    from datasets_build import sudoku as S

    root = tmp_path_factory.mktemp("readme")
    options = S.SudokuBuildOptions(
        out=root / "data", source="generate", box="2x3", min_givens=20, train_size=16, test_size=4
    )
    data = S.build_sudoku(options)
    return data, train(tiny_config(data, root / "run", "epochs=2"), progress=False)


def test_the_readme_python_blocks_run_after_the_quickstart(
    quickstart_like: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data, run = quickstart_like
    quick_data, quick_run = (str(p) for p in quickstart_paths([]))  # where ./run quickstart puts them
    blocks = python_blocks()
    assert blocks, "README.md has no ```python block"
    for code in blocks:
        named = set(re.findall(r'"((?:runs|data)/[^"]*)"', code))
        assert named <= {quick_data, quick_run}, f"the README's code names {named - {quick_data, quick_run}}"
        capsys.readouterr()
        exec(compile(code.replace(quick_run, str(run)).replace(quick_data, str(data)), "README.md", "exec"), {})
        out = capsys.readouterr().out
        if quick_run in code:  # the API example: a held-out puzzle of the quickstart's data, decoded to digits
            test = np.load(data / "test" / "all__inputs.npy")
            labels = np.load(data / "test" / "all__labels.npy")
            assert str((torch.from_numpy(test[:1].astype("int32")) - 1).view(6, 6)) in out
            assert is_valid_solution(labels[0].astype(np.int64).reshape(6, 6) - 1, 2, 3)  # what "solved" compares to
            (last,) = [line for line in out.splitlines() if line.startswith("solved: ")]
            solved, _, confidence = last.removeprefix("solved: ").partition(" confidence: ")
            assert solved in ("True", "False") and 0.0 <= float(confidence) <= 1.0


def section(name: str) -> str:
    """The text of the README's `## name` section."""
    text = (REPO / "README.md").read_text()
    assert f"\n## {name}\n" in text, f"README.md has no section '## {name}'"
    return text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]


SPAN = re.compile(r"`([^`]+)`")
MODULE = re.compile(r"^[a-z_][a-z0-9_]*$")


def test_the_layout_names_modules_that_exist() -> None:
    """Each Layout line `PACKAGE/`: `name`, ... names modules or subpackages of PACKAGE; a path names a file or folder of
    the repository (issue 59: a name the code lacks fails)."""
    lines = re.split(r"\n- ", "\n" + section("Layout"))[1:]
    assert lines, "README.md's Layout lists nothing"
    for line in lines:
        spans = SPAN.findall(line)
        package = REPO / spans[0] if spans[0].endswith("/") else None
        for span in spans:
            if span.endswith(("/", ".py", ".md")) or span in ("run", ".ci/"):
                assert (REPO / span).exists(), f"README.md Layout: {span} does not exist"
            elif package is not None and MODULE.match(span):
                assert (package / f"{span}.py").is_file() or (package / span / "__init__.py").is_file(), (
                    f"README.md Layout: {span} is not a module of {package.relative_to(REPO)}/"
                )
            elif span.startswith("hrm_reason."):
                module, _, attr = span.removesuffix("()").rpartition(".")
                assert hasattr(__import__(module, fromlist=[attr]), attr), f"README.md Layout: no {span}"


def test_adding_a_model_names_what_the_code_has() -> None:
    """The paths, modules and names "Adding a model or a task" points a contributor to exist (issue 59)."""
    import hrm_reason.models.spec as spec
    from hrm_reason import tasks
    from hrm_reason.models import registry
    from hrm_reason.tasks import declared

    text = section("Adding a model or a task")
    for span in SPAN.findall(text):
        if "/" in span:
            assert (REPO / span).exists(), f"README.md, Adding a model or a task: {span} does not exist"
    assert "`models()`" in text and callable(registry.models)
    assert "`ModelSpec`" in text and hasattr(spec, "ModelSpec")
    assert "`DeclaredTask`" in text and hasattr(declared, "DeclaredTask")
    assert "`SPEC`" in text and all(hasattr(module, "SPEC") for module in registry.models().values())
    assert "`hrm_reason.tasks`" in text and tasks.ENTRY_POINTS == "hrm_reason.tasks"
