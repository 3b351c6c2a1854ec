"""CI draws the same hypothesis examples on every run, and no test opts out of that.

The profile comes from tests/hypothesis_support.py, loaded by tests/conftest.py.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from hypothesis import settings

from tests.hypothesis_support import CI, DEV, profile_name

TESTS = Path(__file__).parent
# A per-test setting with one of these names would replace the profile's for that test.
_PROFILE_KEYS = frozenset({"derandomize", "database", "parent"})


def test_ci_selects_a_derandomized_profile_without_a_database() -> None:
    assert profile_name({"CI": "true"}) == CI
    ci = settings.get_profile(CI)
    assert ci.derandomize is True
    assert ci.database is None
    assert ci.deadline is None


def test_without_ci_the_dev_profile_draws_at_random() -> None:
    assert profile_name({}) == DEV
    assert profile_name({"CI": ""}) == DEV
    assert settings.get_profile(DEV).derandomize is False


def test_hypothesis_profile_names_the_profile_in_or_out_of_ci() -> None:
    assert profile_name({"CI": "true", "HYPOTHESIS_PROFILE": DEV}) == DEV
    assert profile_name({"HYPOTHESIS_PROFILE": CI}) == CI


def test_the_loaded_profile_is_derandomized_under_ci() -> None:
    loaded = settings()
    expected = settings.get_profile(profile_name(os.environ))
    assert loaded.derandomize is expected.derandomize
    if os.environ.get("CI") and not os.environ.get("HYPOTHESIS_PROFILE"):
        assert loaded.derandomize is True
        assert loaded.database is None


def _overrides(tree: ast.AST) -> list[str]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("settings", "load_profile", "register_profile"):
                keys = {kw.arg for kw in node.keywords}
                if name != "settings" or keys & _PROFILE_KEYS or node.args:
                    found.append((node.lineno, f"{name}(...)"))
        elif isinstance(node, ast.Dict):
            named = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if named & _PROFILE_KEYS:
                found.append((node.lineno, "a settings dict"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_no_test_module_overrides_the_profile() -> None:
    """Settings inherit derandomize and database from the profile unless passed explicitly."""
    own = {Path(__file__).name, "hypothesis_support.py", "conftest.py"}
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if path.name not in own and "hypothesis" in (text := path.read_text(encoding="utf-8"))
        if (found := _overrides(ast.parse(text)))
    }
    assert offenders == {}


def test_the_override_scan_sees_an_override() -> None:
    source = (
        "@settings(max_examples=5, derandomize=False)\ndef a(): ...\n"
        "S = {'database': None}\n"
        "settings.load_profile('dev')\n"
        "@settings(max_examples=5, deadline=None)\ndef b(): ...\n"
    )
    assert [line.split(":")[0] for line in _overrides(ast.parse(source))] == [
        "line 1",
        "line 3",
        "line 4",
    ]
