"""Pins on the private langgraph names the pickle fallback builds on (secure_serde/_langgraph.py).

If one of these fails after a langgraph upgrade, secure_serde.pickling needs
revisiting before the upgrade ships: the container layouts it reproduces,
the ext codes it must not collide with, or the hooks it delegates to.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import pathlib
import re
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

from secure_serde import _langgraph as lg
from secure_serde.pickling import EXT_NESTED, EXT_PICKLE, PickleFallbackSerializer
from secure_serde.pickling._codec import container_payload


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
