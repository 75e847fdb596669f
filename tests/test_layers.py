"""The import graph of the package: every import (deferred and type-only ones included) points down the layers of
docs/architecture.md, and no module imports itself back through others. Read from the source with `ast`, so a deferred
import cannot hide a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. A module may import modules of its own layer or of a lower one, never of a higher one.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        ("errors", "atomic", "readers", "losses", "provenance", "version", "hub", "runtime", "limits", "outputs"),
    ),
    ("models", ("models",)),
    ("config", ("config", "checkpoint")),
    ("data", ("data",)),
    ("tasks", ("tasks",)),
    ("load", ("load",)),
    ("evaluate", ("evaluate",)),
    ("train", ("train",)),
    ("commands", ("commands", "viz")),
    ("package", ("__init__",)),
]


def layer_of(module: str) -> int:
    """The layer index of `hrm_reason.<...>` by its first component below the package."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else "__init__"
    for i, (_, heads) in enumerate(LAYERS):
        if head in heads:
            return i
    raise AssertionError(f"{module} is in no layer of tests/test_layers.py: add its first component to one")


def modules(package: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every hrm_reason module `name` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != name:
                found.add(target)
    return found


def graph(package: Path) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items()}


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets if layer_of(b) > layer_of(a))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(graph(ROOT / "hrm_reason")) == []


def test_every_import_points_down_the_layers() -> None:
    assert upward(graph(ROOT / "hrm_reason")) == []


def test_the_package_never_imports_the_cli_or_the_builders() -> None:
    for path in (ROOT / "hrm_reason").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] in ("cli", "datasets_build") for n in names), path


def test_the_registry_imports_every_module_it_names() -> None:
    """The registry holds each model's and each family's module, imported (no "module:attribute" string): every one
    is an edge of the import graph, so the checks above see it, and exports its spec."""
    from hrm_reason.models import registry

    named = {**registry.models(), **registry.families()}
    assert {m.__name__ for m in named.values()} <= graph(ROOT / "hrm_reason")["hrm_reason.models.registry"]
    assert all(hasattr(m, "SPEC") for m in registry.models().values())
    assert all(hasattr(m, "FAMILY") for m in registry.families().values())


def write_package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "hrm_reason"
    for rel, text in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_the_checks_see_a_deferred_cycle_and_an_upward_import(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "config.py": "def f():\n    from hrm_reason.train.loop import g\n",
            "train/__init__.py": "",
            "train/loop.py": "from hrm_reason import config\n",
            "models/__init__.py": "",
            "models/registry.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..config import X\n",
        },
    )
    edges = graph(package)
    assert cycles(edges) == [["hrm_reason.config", "hrm_reason.train.loop"]]
    assert upward(edges) == [
        "hrm_reason.config -> hrm_reason.train.loop",
        "hrm_reason.models.registry -> hrm_reason.config",
    ]


def test_a_module_outside_every_layer_is_named() -> None:
    with pytest.raises(AssertionError, match="hrm_reason.newthing is in no layer"):
        layer_of("hrm_reason.newthing")


def test_hrm_reason_load_stays_the_function_once_its_module_is_imported() -> None:
    """`hrm_reason.load` is both a module and the function the package exports: importing the module from elsewhere
    (evaluation does) must not replace the package's attribute with the module."""
    import hrm_reason
    import hrm_reason.evaluate.run  # noqa: F401  (imports hrm_reason.load's module)
    from hrm_reason.load import load

    assert hrm_reason.load is load and callable(hrm_reason.load)


def test_pyproject_installs_every_subpackage() -> None:
    """A non-editable install ships only the packages pyproject.toml lists: a new subpackage must be listed."""
    import re

    line = re.search(r"^packages = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), flags=re.M)
    assert line is not None, "pyproject.toml: no packages = [...] line under [tool.setuptools]"
    listed = set(re.findall(r'"([^"]+)"', line.group(1)))
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "hrm_reason").rglob("__init__.py")}
    assert on_disk - listed == set()
