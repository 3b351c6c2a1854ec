"""Pins on every private langgraph name secure_serde uses (see secure_serde/_langgraph.py).

If one of these fails after a langgraph upgrade, the allowlist or
_DeltaSnapshot handling needs revisiting before the upgrade ships.
"""

from __future__ import annotations

import logging

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, _with_msgpack_allowlist
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from secure_serde import EncryptedSerializer
from secure_serde._langgraph import EXT_DELTA_SNAPSHOT, DeltaSnapshot
from secure_serde.ciphers import EnvKeyCipher


def test_delta_snapshot_names_are_unchanged() -> None:
    assert DeltaSnapshot is _DeltaSnapshot
    assert EXT_DELTA_SNAPSHOT == 7
    assert DeltaSnapshot._fields == ("value",)


def test_delta_snapshot_round_trips_through_our_serializer() -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=b"k" * 32))
    value = {"channel": DeltaSnapshot(value=[1, {"a": 2}])}
    out = serde.loads_typed(serde.dumps_typed(value))
    assert type(out["channel"]) is DeltaSnapshot
    assert out == value


def test_with_allowlist_reaches_through_our_serializer(caplog: pytest.LogCaptureFixture) -> None:
    """langgraph only recognises JsonPlus (and its own EncryptedSerializer) here."""
    serde = EncryptedSerializer(
        EnvKeyCipher(key=b"k" * 32), JsonPlusSerializer(allowed_msgpack_modules=None)
    )
    assert isinstance(serde, JsonPlusSerializer)
    saver = InMemorySaver(serde=serde)
    with caplog.at_level(logging.WARNING):
        clone = saver.with_allowlist([("tests.test_langgraph_private", "Thing")])
    assert "does not support msgpack allowlist" not in caplog.text
    assert clone is not saver
    assert isinstance(clone.serde, EncryptedSerializer)
    assert clone.serde.cipher is serde.cipher
    inner = clone.serde.serde
    assert isinstance(inner, JsonPlusSerializer)
    assert ("tests.test_langgraph_private", "Thing") in inner._allowed_msgpack_modules  # type: ignore[operator]


def test_langgraph_allowlist_dispatch_is_the_one_we_hook() -> None:
    class Opaque:
        def dumps_typed(self, obj: object) -> tuple[str, bytes]:
            return "x", b""

        def loads_typed(self, data: tuple[str, bytes]) -> object:
            return None

    opaque = Opaque()
    assert _with_msgpack_allowlist(opaque, [("m", "C")]) is opaque
    assert hasattr(BaseCheckpointSaver, "with_allowlist")


def test_the_only_jsonplus_isinstance_checks_are_the_allowlist_dispatch() -> None:
    """Registering our wrappers as virtual JsonPlusSerializers is safe only while the checks
    that see them are `_with_msgpack_allowlist`'s two; a new one could call JsonPlus-only
    attributes on our wrappers. Fails loudly when langgraph adds one."""
    import re
    from pathlib import Path

    import langchain_core
    import langgraph.checkpoint.base

    pattern = re.compile(r"isinstance\([^)]*JsonPlusSerializer")
    roots = {
        Path(langgraph.checkpoint.base.__file__).parents[2],  # the langgraph namespace
        Path(langchain_core.__file__).parent,
    }
    found = sorted(
        f"{path.relative_to(path.parents[3])}:{number}"
        for root in roots
        for path in root.rglob("*.py")
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if pattern.search(line)
    )
    assert len(found) == 2, found
    assert all("checkpoint/base/__init__.py" in place for place in found), found
