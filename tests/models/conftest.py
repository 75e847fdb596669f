"""The model-generic tests: a test that takes `model_name` runs once for every model the registry names, read when
the tests are collected, so that a model added to the registry is tested with no other edit (its module's `SPEC`
gives what the tests need: tests/models/test_toy_model.py checks that this holds)."""

from __future__ import annotations

import pytest

from hrm_reason.models import registry


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "model_name" in metafunc.fixturenames:
        metafunc.parametrize("model_name", list(registry.models()))
