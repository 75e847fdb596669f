"""The test suite's device guard (tests/conftest.py): a test must name its device.

`device` left at `auto` runs on the CPU here and on CUDA (in bf16) on a machine with a GPU, so a test that leaves it
and asserts CPU numbers passes on a CPU machine and fails on a GPU one. Under the suite every `resolve_device("auto")`
(hrm_reason/runtime/device.py: the one place where `auto` becomes a device, for `hrm train`, `eval`, `solve`, `bench`
and the Python entry points alike) is reported, as if CUDA were present, and the test that caused it fails.

This file is both the module tests/conftest.py loads in the test process and, under this name on PYTHONPATH, the
`sitecustomize` every Python child of the suite imports at start (`hrm` commands, torchrun and its workers), so runs
in child processes are guarded too. It acts only with $HRM_TEST_DEVICE_GUARD set (the file reports are appended to),
and imports nothing heavy: it wraps `resolve_device` when hrm_reason.runtime.device is first imported, before any
module binds the name.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from typing import Any

ENV = "HRM_TEST_DEVICE_GUARD"
TARGET = "hrm_reason.runtime.device"


def report(message: str) -> None:
    with open(os.environ[ENV], "a") as f:
        f.write(message.replace("\n", " ") + "\n")


def where() -> str:
    """The test line that led here (in the test process), else the command line (in a child)."""
    frame = sys._getframe(2)
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename).startswith("test_"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "command: " + " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300]


def guarded(resolve: Any) -> Any:
    def resolve_device(name: str, local_rank: int = 0) -> Any:
        if name == "auto" and os.environ.get(ENV):
            report(
                f"device left at auto ({where()}): on a machine with CUDA this runs on the GPU in bf16, not on the "
                "CPU in fp32; pin device=cpu (--device cpu) where the test asserts CPU numbers, or parametrise over "
                "the devices present"
            )
        return resolve(name, local_rank)

    resolve_device.__wrapped__ = resolve  # type: ignore[attr-defined]
    resolve_device.__doc__ = resolve.__doc__
    return resolve_device


def patch(module: types.ModuleType) -> None:
    original = module.resolve_device
    if hasattr(original, "__wrapped__"):
        return
    module.resolve_device = guarded(original)
    # Modules imported before the guard (none in the suite: it is installed first) bound the original by name.
    for other in list(sys.modules.values()):
        if getattr(other, "resolve_device", None) is original:
            other.resolve_device = module.resolve_device


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, ...: the file's own loader
        return getattr(self.loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds hrm_reason.runtime.device as the other finders do, and patches it once executed."""

    device_guard = True  # one finder per process, whichever copy of this file installed it

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        for finder in sys.meta_path:
            if not getattr(finder, "device_guard", False) and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                    return spec
        return None


def install() -> None:
    if TARGET in sys.modules:
        patch(sys.modules[TARGET])
    elif not any(getattr(f, "device_guard", False) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


if os.environ.get(ENV):
    install()
