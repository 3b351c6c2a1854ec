"""Shared fixtures. Service fixtures (PostgreSQL, KMS) live in fixtures_services.py."""

from __future__ import annotations

import pytest

# Support modules (tests/*_support.py and the like) check with assert too; rewrite them
# like test modules, so that they still check when CI runs the suite under python -O.
pytest.register_assert_rewrite("tests")

pytest_plugins = ("tests.fixtures_services",)

# A raw 32-character key, the form langgraph's own LANGGRAPH_AES_KEY takes.
RAW_KEY = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """Set LANGGRAPH_AES_KEY to a raw 32-character key for one test."""
    monkeypatch.setenv("LANGGRAPH_AES_KEY", RAW_KEY)
    return RAW_KEY
