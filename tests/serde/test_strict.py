"""The strict decoder: JsonPlus values come back as data; nothing the bytes name is imported."""

from __future__ import annotations

import dataclasses
import datetime
import json
import uuid
from collections import deque
from decimal import Decimal
from typing import Any

import numpy as np
import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde import _msgpack
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_NUMPY_ARRAY,
    JsonPlusSerializer,
)
from langgraph.types import Interrupt, Send

from secure_serde import PickleRefusedError, StrictDecodeError
from secure_serde.pickling import NUMPY, PickleFallbackSerializer
from secure_serde.serde import _langgraph as lg
from secure_serde.serde._strict import MAX_DEPTH, StrictDecoder, allowlist_of
from tests.planted_msgpack import (
    CONSTRUCTOR_CASES,
    SENTINEL_MODULE,
    SENTINEL_NAME,
    PlantedCall,
    os_system_value,
    planted_value,
)


@pytest.fixture(autouse=True)
def _reset() -> None:
    PlantedCall.reset()


@dataclasses.dataclass
class Thing:
    name: str
    size: int


JSONPLUS = JsonPlusSerializer()

DATA_VALUES: dict[str, Any] = {
    "primitives": {"a": [1, 2.5, "x", None, True], "b": {"nested": [b"raw"]}},
    "messages": [HumanMessage(content="hi", id="h1"), AIMessage(content="yo", id="a1")],
    "datetime": datetime.datetime(2026, 12, 1, 6, 0, tzinfo=datetime.UTC),
    "date-and-delta": [datetime.date(2026, 1, 2), datetime.timedelta(seconds=5)],
    "uuid": uuid.UUID(int=7),
    "decimal": Decimal("1.25"),
    "set": {1, 2, 3},
    "frozenset": frozenset({"a"}),
    "deque": deque([1, 2]),
    "send": Send("node", {"x": 1}),
    "interrupt": Interrupt(value={"q": 1}, id="i1"),
    "delta-snapshot": lg.DeltaSnapshot(value=[1, {"a": 2}]),
}


@pytest.mark.parametrize("name", sorted(DATA_VALUES))
def test_jsonplus_data_values_come_back_identical(name: str) -> None:
    value = DATA_VALUES[name]
    decoded = StrictDecoder().loads_typed(JSONPLUS.dumps_typed(value))
    assert decoded == value
    assert type(decoded) is type(value)


def test_delta_snapshot_keeps_its_type_inside_a_state() -> None:
    state = {"channel": lg.DeltaSnapshot(value=[HumanMessage(content="x", id="1")])}
    decoded = StrictDecoder().loads_typed(JSONPLUS.dumps_typed(state))
    assert type(decoded["channel"]) is lg.DeltaSnapshot
    assert decoded == state


@pytest.mark.parametrize("value", [None, b"bytes", bytearray(b"ba")])
def test_untyped_tags_as_jsonplus(value: Any) -> None:
    decoded = StrictDecoder().loads_typed(JSONPLUS.dumps_typed(value))
    assert decoded == value
    assert type(decoded) is type(value)


@pytest.mark.parametrize("case", sorted(CONSTRUCTOR_CASES))
def test_planted_constructor_is_refused_and_never_called(case: str) -> None:
    code, arg = CONSTRUCTOR_CASES[case]
    payload = planted_value(code, arg=arg)
    # Permissive JsonPlus (langgraph's default) calls it: the row is a real attack.
    JSONPLUS.loads_typed(("msgpack", payload))
    assert PlantedCall.ran
    PlantedCall.reset()
    with pytest.raises(StrictDecodeError) as caught:
        StrictDecoder().loads_typed(("msgpack", payload))
    assert caught.value.type_name == f"{SENTINEL_MODULE}.{SENTINEL_NAME}"
    assert not PlantedCall.ran


def test_langgraph_strict_mode_returns_the_payload_where_we_raise() -> None:
    payload = planted_value(arg="raw payload")
    strict_langgraph = JsonPlusSerializer(allowed_msgpack_modules=None)
    assert strict_langgraph.loads_typed(("msgpack", payload))["channel_values"]["x"] == (
        "raw payload"
    )
    with pytest.raises(StrictDecodeError):
        StrictDecoder().loads_typed(("msgpack", payload))
    assert not PlantedCall.ran


def test_os_system_is_refused(tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    payload = os_system_value(str(marker))
    # Permissive JsonPlus runs the command: the marker proves the payload is live.
    JSONPLUS.loads_typed(("msgpack", payload))
    assert marker.exists()
    marker.unlink()
    with pytest.raises(StrictDecodeError, match=r"os\.system"):
        StrictDecoder().loads_typed(("msgpack", payload))
    assert not marker.exists()


def test_methods_outside_langgraphs_safe_list_are_refused() -> None:
    allowed = JSONPLUS.dumps_typed(datetime.datetime(2026, 1, 1))
    assert StrictDecoder().loads_typed(allowed) == datetime.datetime(2026, 1, 1)
    planted = ormsgpack.packb(
        ormsgpack.Ext(
            EXT_METHOD_SINGLE_ARG,
            ormsgpack.packb([SENTINEL_MODULE, "PlantedCall", "x", "reset"]),
        )
    )
    with pytest.raises(StrictDecodeError, match="not an allowed msgpack method"):
        StrictDecoder().loads_typed(("msgpack", planted))


def test_allowlisted_type_with_bad_arguments_is_refused_not_returned_raw() -> None:
    planted = ormsgpack.packb(
        ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(["uuid", "UUID", "not hex"]))
    )
    with pytest.raises(StrictDecodeError, match="do not construct"):
        StrictDecoder().loads_typed(("msgpack", planted))


def test_numpy_arrays_round_trip_and_object_dtypes_are_refused() -> None:
    array = np.arange(12, dtype="<i4").reshape(3, 4)
    decoded = StrictDecoder().loads_typed(JSONPLUS.dumps_typed(array))
    assert np.array_equal(decoded, array)
    assert decoded.dtype == array.dtype

    def numpy_ext(dtype: str, shape: list[int], buf: bytes) -> bytes:
        return ormsgpack.packb(
            ormsgpack.Ext(EXT_NUMPY_ARRAY, ormsgpack.packb([dtype, shape, "C", buf]))
        )

    with pytest.raises(StrictDecodeError, match="object dtype"):
        StrictDecoder().loads_typed(("msgpack", numpy_ext("|O", [1], b"\0" * 8)))
    with pytest.raises(StrictDecodeError, match="do not match"):
        StrictDecoder().loads_typed(("msgpack", numpy_ext("<i4", [2**20], b"\0" * 8)))
    with pytest.raises(StrictDecodeError, match="unknown dtype"):
        StrictDecoder().loads_typed(("msgpack", numpy_ext("no such dtype", [1], b"\0")))


def test_embedded_pickles_and_unknown_extensions_are_refused() -> None:
    authenticated_only = PickleFallbackSerializer(allowed=[NUMPY], allow_unauthenticated=True)
    tag, payload = authenticated_only.dumps_typed({"x": np.float32(1.5)})
    assert tag == "msgpack+pickle"
    with pytest.raises(PickleRefusedError):
        StrictDecoder().loads_typed((tag, payload))
    # The same bytes relabelled plain msgpack: the embedded pickle extension is refused.
    with pytest.raises(StrictDecodeError, match="embedded pickle"):
        StrictDecoder().loads_typed(("msgpack", payload))
    with pytest.raises(StrictDecodeError, match="extension code 42"):
        StrictDecoder().loads_typed(("msgpack", ormsgpack.packb(ormsgpack.Ext(42, b""))))


@pytest.mark.parametrize("tag", ["pickle", "msgpack+pickle", "pickle+zlib"])
def test_pickle_tags_are_refused(tag: str) -> None:
    with pytest.raises(PickleRefusedError):
        StrictDecoder().loads_typed((tag, b"\x80\x04N."))


def test_unknown_tags_and_malformed_bytes_are_refused() -> None:
    with pytest.raises(StrictDecodeError, match="reads null, bytes"):
        StrictDecoder().loads_typed(("custom", b""))
    with pytest.raises(StrictDecodeError, match="malformed msgpack"):
        StrictDecoder().loads_typed(("msgpack", b"\xc1"))
    with pytest.raises(StrictDecodeError, match="malformed json"):
        StrictDecoder().loads_typed(("json", b"{"))


def test_deep_nesting_is_refused_with_a_typed_error() -> None:
    payload = ormsgpack.packb(1)
    for _ in range(MAX_DEPTH + 5):
        payload = ormsgpack.packb(ormsgpack.Ext(lg.EXT_DELTA_SNAPSHOT, payload))
    with pytest.raises(StrictDecodeError, match="nested deeper"):
        StrictDecoder().loads_typed(("msgpack", payload))


def test_json_is_plain_data_and_langchain_envelopes_are_refused() -> None:
    assert StrictDecoder().loads_typed(("json", b'{"a": [1, "b"]}')) == {"a": [1, "b"]}
    constructor = {"lc": 1, "type": "constructor", "id": [SENTINEL_MODULE, SENTINEL_NAME]}
    secret = {"lc": 1, "type": "secret", "id": ["LANGGRAPH_AES_KEY"]}
    for envelope in (constructor, secret):
        with pytest.raises(StrictDecodeError, match="LangChain serialized object"):
            StrictDecoder().loads_typed(("json", json.dumps({"x": envelope}).encode()))
    assert not PlantedCall.ran


def test_explicit_allowlists_are_honoured() -> None:
    value = {"thing": Thing("a", 1)}
    typed = JSONPLUS.dumps_typed(value)
    with pytest.raises(StrictDecodeError, match="Thing"):
        StrictDecoder().loads_typed(typed)
    assert StrictDecoder([Thing]).loads_typed(typed) == value
    assert StrictDecoder().with_allowlist([(Thing.__module__, "Thing")]).loads_typed(typed) == value
    # The inner serializer's explicit allowlist counts; permissive True adds nothing.
    explicit = JsonPlusSerializer(allowed_msgpack_modules=[Thing])
    assert allowlist_of(explicit) == {(Thing.__module__, "Thing")}
    assert StrictDecoder.for_serde(explicit).loads_typed(typed) == value
    assert allowlist_of(JsonPlusSerializer(allowed_msgpack_modules=True)) == frozenset()
    wrapped = PickleFallbackSerializer(explicit, allowed=[NUMPY])
    assert allowlist_of(wrapped) == {(Thing.__module__, "Thing")}


def test_pin_langgraph_safe_method_list() -> None:
    assert lg.SAFE_MSGPACK_METHODS is _msgpack.SAFE_MSGPACK_METHODS
    assert ("datetime", "datetime", "fromisoformat") in lg.SAFE_MSGPACK_METHODS
