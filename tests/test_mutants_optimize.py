"""Checks that hold under ``python -O``, where CI runs the security tests a second time.

``-O`` strips ``assert`` statements and sets ``__debug__`` to False. langgraph's
built-in cipher check is an ``assert`` and vanishes under it; ours must not
depend on either. The tests themselves still check under ``-O`` because pytest
rewrites the asserts of test modules into explicit raises.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import secure_serde
from secure_serde import EncryptedSerializer, PlaintextRefusedError, UnknownCipherError
from secure_serde.ciphers import EnvKeyCipher

PACKAGE = Path(secure_serde.__file__).parent


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_package_has_no_assert_and_no_debug_branch() -> None:
    assert len(_sources()) > 20
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assert) or (
                isinstance(node, ast.Name) and node.id == "__debug__"
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


def test_test_asserts_still_check_in_this_interpreter() -> None:
    """Under ``-O`` a plain assert would pass silently; pytest's rewritten one must not."""
    with pytest.raises(AssertionError):
        assert sys.flags.optimize < 0


@pytest.mark.parametrize(
    "support", ["tests.graphs_support", "tests.ciphers.kms_support", "tests.cli.cli_support"]
)
def test_support_modules_are_rewritten_too(support: str) -> None:
    """Their asserts are checks as well; tests/conftest.py registers them for rewriting."""
    module = importlib.import_module(support)
    assert type(module.__loader__).__name__ == "AssertionRewritingHook"


def test_refusals_do_not_depend_on_the_interpreter_mode() -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=b"o" * 32))
    with pytest.raises(UnknownCipherError):
        serde.loads_typed(("msgpack+rot13", b"anything"))
    with pytest.raises(PlaintextRefusedError):
        serde.loads_typed(JsonPlusSerializer().dumps_typed({"planted": True}))
