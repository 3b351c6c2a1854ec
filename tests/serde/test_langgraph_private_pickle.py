"""Pins on the private langgraph names the pickle fallback builds on (serde/_langgraph.py).

If one of these fails after a langgraph upgrade, secure_serde.pickling needs
revisiting before the upgrade ships: the container layouts it reproduces,
the ext codes it must not collide with, or the hooks it delegates to.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import inspect
import logging
import pathlib
import re
import textwrap
import uuid
from collections import deque
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import ormsgpack
import pydantic
import pydantic.v1
import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.serde import _msgpack, jsonplus
from langgraph.store.base import Item
from langgraph.types import Interrupt, Send

from secure_serde.pickling import EXT_NESTED, EXT_PICKLE, PickleFallbackSerializer
from secure_serde.pickling._codec import container_payload
from secure_serde.serde import _langgraph as lg


def body_digest(function: Any) -> str:
    """A digest of ``function``'s syntax tree: formatting and comments do not count."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def test_ext_codes_are_unchanged_and_ours_are_free() -> None:
    assert (
        lg.EXT_CONSTRUCTOR_SINGLE_ARG,
        lg.EXT_CONSTRUCTOR_POS_ARGS,
        lg.EXT_CONSTRUCTOR_KW_ARGS,
        lg.EXT_METHOD_SINGLE_ARG,
        lg.EXT_PYDANTIC_V1,
        lg.EXT_PYDANTIC_V2,
        lg.EXT_NUMPY_ARRAY,
        lg.EXT_DELTA_SNAPSHOT,
    ) == (0, 1, 2, 3, 4, 5, 6, 7)
    theirs = {
        value
        for name, value in vars(jsonplus).items()
        if name.startswith("EXT_") and isinstance(value, int)
    }
    assert theirs == set(range(8))
    assert {EXT_PICKLE, EXT_NESTED}.isdisjoint(theirs)
    # JsonPlus's own hook knows nothing of them: it returns None, never unpickles.
    hook = lg.unpack_ext_hook(jsonplus.JsonPlusSerializer())
    assert hook(EXT_PICKLE, b"\x80\x05N.") is None
    assert hook(EXT_NESTED, b"\x02\x93\xa1m\xa1n\x80") is None


def test_encoding_names_are_jsonplus_own() -> None:
    assert lg.msgpack_default is jsonplus._msgpack_default
    assert jsonplus._option == lg.MSGPACK_OPTION
    assert lg.reconstruction_fallback is jsonplus._reconstruction_fallback
    assert lg.send_from_args is jsonplus._send_from_args
    assert lg.SAFE_MSGPACK_TYPES is _msgpack.SAFE_MSGPACK_TYPES
    assert lg.DeltaSnapshot._fields == ("value",)


def test_serializer_attributes_we_read() -> None:
    strict = jsonplus.JsonPlusSerializer(allowed_msgpack_modules=None)
    assert lg.msgpack_allowlist(strict) is None
    assert lg.msgpack_allowlist(jsonplus.JsonPlusSerializer(allowed_msgpack_modules=True)) is True
    listed = jsonplus.JsonPlusSerializer(allowed_msgpack_modules=[("m", "C")])
    assert lg.msgpack_allowlist(listed) == {("m", "C")}

    def custom(code: int, data: bytes) -> Any:
        return ("custom", code)

    with_hook = jsonplus.JsonPlusSerializer(__unpack_ext_hook__=custom)
    assert lg.unpack_ext_hook(with_hook) is custom
    assert PickleFallbackSerializer(with_hook, allowed=[]).loads_typed(
        ("msgpack", ormsgpack.packb(ormsgpack.Ext(3, b"")))
    ) == ("custom", 3)


# --- the container layouts the fallback reproduces ------------------------------------------


class Pair(NamedTuple):
    left: int
    right: str


class Shade(enum.Enum):
    DARK = "dark"


@dataclasses.dataclass
class Box:
    size: int
    tags: list[str]


class ModelV2(pydantic.BaseModel):
    name: str


class ModelV1(pydantic.v1.BaseModel):
    name: str


CONTAINERS: list[Any] = [
    AIMessage(content="hi", id="1"),
    ModelV2(name="n"),
    pydantic.SecretStr("s3cret"),
    ModelV1(name="n"),
    Pair(1, "x"),
    {1, 2},
    frozenset({"a"}),
    deque([1, "b"]),
    dt.time(1, 2, 3, 4, tzinfo=ZoneInfo("Europe/Paris"), fold=1),
    Shade.DARK,
    Send("node", {"a": 1}),
    Send("node", [1], timeout=5.0),
    Box(3, ["x"]),
    Interrupt(value={"q": 1}, id="i"),
    Item(value={"v": 1}, key="k", namespace=("ns",), created_at=dt.datetime(2024, 1, 1),
         updated_at=dt.datetime(2024, 1, 2)),
]  # fmt: skip
LEAVES: list[Any] = [
    pathlib.Path("/a/b"),
    re.compile("x+", re.I),
    uuid.UUID(int=5),
    decimal.Decimal("1.5"),
    dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
    dt.timedelta(days=1),
    dt.date(2024, 1, 1),
    dt.timezone(dt.timedelta(hours=3), "X"),
    ZoneInfo("UTC"),
    ValueError("boom"),
]


@pytest.mark.parametrize("value", CONTAINERS, ids=lambda v: type(v).__name__)
def test_container_layouts_are_jsonplus_byte_for_byte(value: Any) -> None:
    shape = container_payload(value)
    assert shape is not None
    code, payload = shape
    expected = jsonplus._msgpack_default(value)
    assert isinstance(expected, ormsgpack.Ext)
    ours = ormsgpack.Ext(code, jsonplus._msgpack_enc(payload))
    assert ormsgpack.packb(ours) == ormsgpack.packb(expected)


@pytest.mark.parametrize("value", LEAVES, ids=lambda v: type(v).__name__)
def test_leaves_are_left_to_jsonplus(value: Any) -> None:
    assert container_payload(value) is None
    assert jsonplus._msgpack_default(value) is not None


def test_delta_snapshot_layout() -> None:
    value = lg.DeltaSnapshot([1, {"a": 2}])
    ours = ormsgpack.Ext(lg.EXT_DELTA_SNAPSHOT, jsonplus._msgpack_enc(value.value))
    assert ormsgpack.packb(ours) == ormsgpack.packb(jsonplus._msgpack_default(value))


# --- a container holding a pickle is rebuilt as JsonPlus rebuilds it --------------------------


@dataclasses.dataclass
class Holder:
    """Not in SAFE_MSGPACK_TYPES: what the allowlist decides for is this type."""

    n: int
    array: Any


class Reading(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    array: Any


MODES: dict[str, Any] = {
    "strict": None,
    "permissive": True,
    "listed": [(__name__, "Holder"), (__name__, "Reading")],
    "other-listed": [(__name__, "Elsewhere")],
}


def _plain(value: Any) -> Any:
    """Comparable form: arrays as (dtype, list), containers by type and contents."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.tolist())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, _plain(dataclasses.asdict(value)))
    if isinstance(value, pydantic.BaseModel):
        return (type(value).__name__, _plain(dict(value)))
    if isinstance(value, Send):
        return ("Send", value.node, _plain(value.arg))
    return value


def _observe(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    read: Any,
    data: tuple[str, bytes],
) -> tuple[list[Any], list[str], list[Any]]:
    """Events, JsonPlus warnings and results of reading ``data`` twice, warn-once state fresh."""
    from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener

    for name in ("_warned_blocked_types", "_warned_unregistered_types"):
        monkeypatch.setattr(jsonplus, name, set())
    events: list[Any] = []
    unregister = register_serde_event_listener(events.append)
    caplog.clear()
    try:
        with caplog.at_level(logging.WARNING, logger=jsonplus.logger.name):
            results = [_plain(read(data)) for _ in range(2)]
    finally:
        unregister()
    warnings = [r.getMessage() for r in caplog.records if r.name == jsonplus.logger.name]
    return events, warnings, results


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["dataclass", "pydantic", "safe"])
def test_nested_containers_report_and_rebuild_as_jsonplus_does(
    mode: str, kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The same value through JsonPlus (which stores the array its own way) and through the
    fallback (which pickles it, so the container is rebuilt by our copy of JsonPlus's hook):
    the same serde events, the same warnings (once per type), the same values."""
    import numpy as np

    from secure_serde import EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher
    from secure_serde.pickling import NUMPY

    array = np.arange(3, dtype=np.int64)
    value = {
        "dataclass": Holder(1, array),
        "pydantic": Reading(array=array),
        "safe": Send("node", array),
    }[kind]
    theirs = jsonplus.JsonPlusSerializer(allowed_msgpack_modules=MODES[mode])
    ours = EncryptedSerializer(
        EnvKeyCipher(key=b"p" * 32),
        PickleFallbackSerializer(
            jsonplus.JsonPlusSerializer(allowed_msgpack_modules=MODES[mode]), allowed=[NUMPY]
        ),
    )
    stored = ours.dumps_typed(value)
    assert stored[0].startswith("msgpack+pickle")
    expected = _observe(monkeypatch, caplog, theirs.loads_typed, theirs.dumps_typed(value))
    found = _observe(monkeypatch, caplog, ours.loads_typed, stored)
    assert found == expected
    events, warnings, results = found
    if kind == "safe" or mode == "listed":
        assert (events, warnings) == ([], [])
        assert results[0] == _plain(value)
    else:
        # Reported on every read, warned about once.
        assert len(events) == 2
        assert len(warnings) == 1
        assert events[0]["module"] == __name__


# The JsonPlus bodies secure_serde keeps a copy of: `container_payload` follows
# `_msgpack_default`'s container branches, and `_codec._Decoder._construct` with
# `_langgraph.msgpack_type_allowed` follows `_create_msgpack_ext_hook`. A new digest
# means langgraph changed one: bring the copy in line, then record the digest.
COPIED_BODIES: dict[str, str] = {
    "_msgpack_default": "9f91f2bdea51a3db",
    "_create_msgpack_ext_hook": "973b79aa63dba733",
}


def test_copied_jsonplus_bodies_are_the_ones_we_copied() -> None:
    found = {name: body_digest(getattr(jsonplus, name)) for name in COPIED_BODIES}
    assert found == COPIED_BODIES, "langgraph changed a JsonPlus body we copy: " + repr(found)
