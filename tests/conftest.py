"""Shared fixtures. Service fixtures (PostgreSQL, KMS) live in fixtures_services.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Support modules (tests/*_support.py and the like) check with assert too; rewrite them
# like test modules, so that they still check when CI runs the suite under python -O.
_HERE = Path(__file__).parent
pytest.register_assert_rewrite(
    *(f"tests.{p.stem}" for p in _HERE.glob("*.py") if p.stem not in ("__init__", "conftest")),
    *(f"tests.{p.parent.name}" for p in _HERE.glob("*/__init__.py")),
)

pytest_plugins = ("tests.fixtures_services",)

# Loaded here, before pytest imports any test module, so that every @settings(...) inherits it.
from tests.hypothesis_support import profile_name  # noqa: E402 - after the assert rewrite above

settings.load_profile(profile_name(os.environ))

# A raw 32-character key, the form langgraph's own LANGGRAPH_AES_KEY takes.
RAW_KEY = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """Set LANGGRAPH_AES_KEY to a raw 32-character key for one test."""
    monkeypatch.setenv("LANGGRAPH_AES_KEY", RAW_KEY)
    return RAW_KEY
