"""PickleFallbackSerializer: per-value pickles inside JsonPlus msgpack, exact round trips.

Values come from tests/strategies.py and tests/strategies_pandas.py. Reads
go through `EncryptedSerializer`, the only layer allowed to vouch for the
bytes (tests/pickling/test_fallback_auth.py covers that gate).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import io
import pickle
import subprocess
from collections import deque
from typing import Any, NamedTuple

import numpy as np
import ormsgpack
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command, Interrupt, Send

from secure_serde import (
    ConfigurationError,
    EncryptedSerializer,
    PickleFallbackSerializer,
    PickleNotAllowedError,
    SecureSerdeError,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import EXT_NESTED, EXT_PICKLE, NUMPY, PANDAS, TAG
from secure_serde.serde import langgraph_internals as lg
from tests import strategies as cs
from tests import strategies_pandas as ps

KEY = b"p" * 32
SETTINGS: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def jsonplus() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=cs.MSGPACK_ALLOWLIST)


def fallback(allowed: Any = (PANDAS,)) -> PickleFallbackSerializer:
    return PickleFallbackSerializer(jsonplus(), allowed=allowed)


def encrypted(allowed: Any = (PANDAS,)) -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY), fallback(allowed))


SERDE = encrypted()


def roundtrip(value: Any, serde: Any = SERDE) -> Any:
    return serde.loads_typed(serde.dumps_typed(value))


class Ext(NamedTuple):
    code: int
    body: Any


def structure(payload: bytes) -> Any:
    """The msgpack tree of ``payload``, ext values shown as `Ext` (their own bodies decoded)."""

    def hook(code: int, data: bytes) -> Any:
        if code == EXT_PICKLE:
            return Ext(code, "<pickle>")
        if code == EXT_NESTED:
            return Ext(code, (data[0], ormsgpack.unpackb(data[1:], ext_hook=hook)))
        return Ext(code, ormsgpack.unpackb(data, ext_hook=hook))

    return ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)


def frame(n: int = 3) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "when": pd.date_range("2024-03-31 01:00", periods=n, freq="h", tz="Europe/Paris"),
            "kind": pd.Categorical(["a", "b", "a"][:n], ordered=True),
            "count": pd.array([1, None, 3][:n], dtype="Int64"),
            "name": pd.array(["x", None, "z"][:n], dtype="string"),
        },
        index=pd.MultiIndex.from_arrays([["k"] * n, list(range(n))], names=["key", "pos"]),
    )


# --- Round trips ----------------------------------------------------------------------------


# numpy's own pickle drops a strided view's non-native byte order; the fallback keeps it.
STRIDED_BIG_ENDIAN = np.zeros(4, ">i2")[::2]


@settings(max_examples=120, **SETTINGS)
@example(value={"view": STRIDED_BIG_ENDIAN, "n": [np.arange(6, dtype=">f4")[::3]]})
@given(
    value=cs.checkpoint_values(
        exact=True,
        extra_leaves=[ps.pandas_values()],
        extra_containers=[lambda _: ps.tool_messages_with_artifacts(ps.pandas_values())],
    )
)
def test_values_with_pandas_and_numpy_come_back_identical(value: Any) -> None:
    cs.assert_same(roundtrip(value), value)


@settings(max_examples=60, **SETTINGS)
@example(value=STRIDED_BIG_ENDIAN)
@given(value=ps.pandas_values())
def test_pandas_and_numpy_leaves_come_back_identical(value: Any) -> None:
    """Leaves alone, drawn far more often than inside nested values."""
    tag, _ = fallback().dumps_typed(value)
    assert tag == TAG
    cs.assert_same(roundtrip(value), value)


def _no_bytearray(channels: dict[str, Any]) -> bool:
    # channel_values(exact=True) may nest a bytearray drawn for the top level; nested,
    # JsonPlus (and so this layer) returns bytes, which is not what this test is about.
    return cs.count_instances(channels, bytearray) == 0


@settings(max_examples=40, **SETTINGS)
@given(
    channels=cs.channel_values(
        exact=True, with_delta_snapshot=True, extra_leaves=[ps.pandas_values()]
    ).filter(_no_bytearray)
)
def test_channel_values_keep_their_delta_snapshot(channels: dict[str, Any]) -> None:
    out = roundtrip(channels)
    assert type(out["history"]) is lg.DeltaSnapshot
    cs.assert_same(out, channels)


@settings(max_examples=120, **SETTINGS)
@given(value=cs.checkpoint_values())
def test_without_pickles_the_bytes_are_jsonplus_bytes(value: Any) -> None:
    """No allowed value in it: exactly what JsonPlus writes, and reads back the same."""
    plain = jsonplus()
    ours = fallback()
    assert ours.dumps_typed(value) == plain.dumps_typed(value)
    cs.assert_same(roundtrip(value), plain.loads_typed(plain.dumps_typed(value)))


@settings(max_examples=40, **SETTINGS)
@given(value=cs.unencodable_values())
def test_values_jsonplus_refuses_are_refused_alike(value: Any) -> None:
    with pytest.raises(TypeError):
        jsonplus().dumps_typed(value)
    with pytest.raises(TypeError):
        fallback().dumps_typed(value)


# --- Per value, where it stands -------------------------------------------------------------


def test_one_frame_among_many_messages_is_the_only_pickle() -> None:
    messages = [
        (HumanMessage if i % 2 else AIMessage)(content=f"message {i}", id=str(i))
        for i in range(200)
    ]
    state = {"messages": messages, "table": frame(), "step": 7}
    tag, payload = fallback().dumps_typed(state)
    assert tag == TAG
    tree = structure(payload)
    assert tree["table"] == Ext(EXT_PICKLE, "<pickle>")
    assert {type(m) for m in tree["messages"]} == {Ext}
    assert {m.code for m in tree["messages"]} == {5}  # JsonPlus's pydantic v2 code
    assert tree["step"] == 7
    # Byte for byte: JsonPlus's encoding, with the frame's own pickle where the frame stood.
    expected = ormsgpack.packb(
        {**state, "table": ormsgpack.Ext(EXT_PICKLE, pickle.dumps(frame(), protocol=5))},
        default=lg.msgpack_default,
        option=lg.MSGPACK_OPTION,
    )
    assert payload == expected
    cs.assert_same(roundtrip(state), state)


@pytest.mark.parametrize(
    ("value", "nested_code"),
    [
        (ToolMessage(content="r", tool_call_id="c1", artifact=frame()), 5),
        (Send("worker", {"chunk": frame(), "n": 1}), 1),
        (Interrupt(value={"table": frame()}, id="i1"), 2),
        (cs.TreeNode(name="t", at=cs.Point(1, 2.0), payload=np.arange(4)), 2),
        ({np.int64(1), np.int64(2)}, 0),
        (deque([np.float32(1.5)]), 0),
        (Command(update={"t": frame()}, resume=np.datetime64("2024-01-01"), goto="n"), 2),
    ],
    ids=["tool-artifact", "send", "interrupt", "dataclass", "set", "deque", "command"],
)
def test_containers_holding_pickles_keep_their_jsonplus_shape(value: Any, nested_code: int) -> None:
    tag, payload = fallback().dumps_typed(value)
    assert tag == TAG
    tree = structure(payload)
    assert tree.code == EXT_NESTED
    assert tree.body[0] == nested_code
    cs.assert_same(roundtrip(value), value)


def test_container_without_pickles_keeps_jsonplus_code() -> None:
    value = [Send("worker", {"n": 1}), ToolMessage(content="r", tool_call_id="c", artifact=[1])]
    tag, payload = fallback().dumps_typed(value)
    assert (tag, payload) == jsonplus().dumps_typed(value)
    assert [node.code for node in structure(payload)] == [1, 5]


@pytest.mark.parametrize(
    "value",
    [
        lg.DeltaSnapshot([1, "a"]),
        lg.DeltaSnapshot(frame()),
        {"history": lg.DeltaSnapshot(frame()), "other": lg.DeltaSnapshot([frame(), 2])},
        {"channel_values": {"log": lg.DeltaSnapshot({"t": frame(), "arr": np.ones(2)})}},
    ],
    ids=["plain", "frame", "in-channel-values", "nested-dict"],
)
@pytest.mark.parametrize("layer", ["jsonplus", "fallback", "encrypted"])
def test_delta_snapshot_is_exact_through_every_layer(value: Any, layer: str) -> None:
    has_frame = cs.count_instances(value, pd.DataFrame) > 0
    if layer == "jsonplus":
        if has_frame:
            with pytest.raises(TypeError):
                jsonplus().dumps_typed(value)
            return
        serde: Any = jsonplus()
    elif layer == "fallback":
        serde = PickleFallbackSerializer(jsonplus(), allowed=[PANDAS], allow_unauthenticated=True)
    else:
        serde = SERDE
    tag, payload = serde.dumps_typed(value)
    out = serde.loads_typed((tag, payload))
    cs.assert_same(out, value)
    if layer != "encrypted":
        codes = [code for code in _ext_codes(structure(payload))]
        assert codes.count(lg.EXT_DELTA_SNAPSHOT) == cs.count_instances(value, lg.DeltaSnapshot)


def _ext_codes(tree: Any) -> Any:
    if isinstance(tree, Ext):
        yield tree.code
        yield from _ext_codes(tree.body)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _ext_codes(item)
    elif isinstance(tree, (list, tuple)):
        for item in tree:
            yield from _ext_codes(item)


def test_strict_allowlist_applies_to_containers_holding_pickles() -> None:
    """A container type outside a strict allowlist comes back as its fields, as in JsonPlus."""
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    plain_node = cs.TreeNode(name="t", at=cs.Point(1, 2.0), payload=1)
    expected = strict.loads_typed(strict.dumps_typed(plain_node))
    assert type(expected) is dict
    serde = EncryptedSerializer(
        EnvKeyCipher(KEY), PickleFallbackSerializer(strict, allowed=[PANDAS])
    )
    out = roundtrip(dataclasses.replace(plain_node, payload=frame()), serde)
    assert type(out) is dict
    assert out.keys() == expected.keys()
    cs.assert_same(out["payload"], frame())


# --- numpy and pandas specifics -------------------------------------------------------------


def test_jsonplus_numpy_path_is_what_the_preset_replaces() -> None:
    """Why numpy arrays are pickled when allowed: JsonPlus's own path loses them."""
    plain = jsonplus()
    structured = np.array([(1, 2.5)], dtype=[("a", "i4"), ("b", "f8")])
    objects = np.array([1, "x", None], dtype=object)
    assert not plain.loads_typed(plain.dumps_typed(np.arange(3))).flags.writeable
    assert plain.loads_typed(plain.dumps_typed(structured)).dtype != structured.dtype
    assert plain.loads_typed(plain.dumps_typed(objects)) is None
    assert type(plain.loads_typed(plain.dumps_typed(pd.Timestamp("2024", tz="UTC")))) is str
    for value in (np.arange(3), structured, objects):
        out = roundtrip(value, encrypted([NUMPY]))
        assert out.flags.writeable
        cs.assert_same(out, value)


def test_numpy_str_scalars_are_written_as_str_by_msgpack() -> None:
    """``np.str_`` subclasses str, which msgpack encodes before any fallback sees it."""
    out = roundtrip([np.str_("x"), np.float64(1.5), np.bool_(True)])
    assert [type(v) for v in out] == [str, np.float64, np.bool_]


@pytest.mark.parametrize(
    "view",
    [
        STRIDED_BIG_ENDIAN,
        np.arange(12, dtype=">f8").reshape(3, 4)[:, ::2],
        np.arange(4, dtype=">c16")[::-1],
        np.array(["ab", "cd", "ef"], dtype=">U2")[::2],
        np.zeros(4, dtype=[("a", ">i4"), ("b", "<u2")])[1::2],
    ],
    ids=["int16", "2d-float64", "reversed-complex", "str", "structured"],
)
def test_strided_views_keep_their_byte_order(view: np.ndarray[Any, Any]) -> None:
    """The promise: an array comes back with its dtype, byte order included, as a fresh copy.

    numpy's own pickle turns a view that is neither C- nor Fortran-contiguous
    native-endian; the fallback pickles a contiguous copy of such a view.
    """
    assert not view.flags.c_contiguous
    assert not view.flags.f_contiguous
    if view.dtype.names is None:
        # Control: numpy's own pickle loses this view's byte order.
        assert pickle.loads(pickle.dumps(view, protocol=5)).dtype != view.dtype
    for serde in (encrypted(), encrypted([NUMPY])):
        out = roundtrip(view, serde)
        assert out.dtype == view.dtype
        assert out.dtype.descr == view.dtype.descr
        assert out.tobytes() == view.tobytes()
        assert out.flags.writeable
        cs.assert_same(out, view)


def test_big_endian_datetime_arrays_come_back_native_endian() -> None:
    """A numpy pickle quirk, pinned: the values survive, the byte order becomes native."""
    value = np.array([1, 2], dtype=">M8[s]")
    out = roundtrip(value)
    assert out.dtype == np.dtype("<M8[s]")
    assert out.tolist() == value.tolist()


def test_arrays_stay_jsonplus_when_numpy_is_not_allowed() -> None:
    serde = fallback([pd.DataFrame])
    assert serde.dumps_typed(np.arange(3)) == jsonplus().dumps_typed(np.arange(3))


# --- What is refused ------------------------------------------------------------------------


class Opaque:
    def __init__(self, label: str) -> None:
        self.label = label

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.label == self.label

    __hash__ = None  # type: ignore[assignment]


cs.register_same_check(
    Opaque,
    lambda actual, expected, path: (
        None
        if actual == expected
        else (cs.assert_same(actual.label, expected.label, f"{path}.label"))
    ),
)


@pytest.mark.parametrize(
    "value",
    [
        Opaque("x"),
        {"deep": [1, {"x": Opaque("x")}]},
        Send("n", {"x": Opaque("x")}),
        lg.DeltaSnapshot([Opaque("x")]),
    ],
    ids=["top", "nested", "in-send", "in-snapshot"],
)
def test_types_not_allowed_are_refused_by_name(value: Any) -> None:
    with pytest.raises(PickleNotAllowedError) as raised:
        SERDE.dumps_typed(value)
    assert isinstance(raised.value, SecureSerdeError)
    assert isinstance(raised.value, TypeError)
    name = f"{__name__}.Opaque"
    assert raised.value.type_name == name
    assert f"allowed=[..., {name}]" in str(raised.value)
    cs.assert_same(roundtrip(value, encrypted([PANDAS, Opaque])), value)


def test_frames_are_refused_without_an_allowlist_entry() -> None:
    with pytest.raises(PickleNotAllowedError, match=r"pandas\.DataFrame"):
        fallback([NUMPY]).dumps_typed({"t": frame()})


def test_a_pickle_that_would_need_another_global_is_refused_on_write() -> None:
    value = pd.DataFrame({"amount": [decimal.Decimal("1.10")]})
    with pytest.raises(PickleNotAllowedError) as raised:
        SERDE.dumps_typed(value)
    assert "('decimal', 'Decimal')" in str(raised.value)
    for allowed in ([PANDAS, decimal.Decimal], [PANDAS, ("decimal", "Decimal")]):
        out = roundtrip(value, encrypted(allowed))
        assert type(out["amount"][0]) is decimal.Decimal
        cs.assert_same(out, value)


def test_values_pickle_cannot_take_are_refused() -> None:
    value = pd.DataFrame({"f": [lambda: None]})
    with pytest.raises(PickleNotAllowedError, match="pickle failed"):
        SERDE.dumps_typed(value)


def test_refused_write_keeps_the_previous_checkpoint() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from typing_extensions import TypedDict

    from tests.graphs_support import linear_graph

    class State(TypedDict, total=False):
        table: Any
        note: str

    def work(state: State) -> dict[str, Any]:
        return {"table": Opaque("x") if state.get("note") == "bad" else frame()}

    graph = linear_graph(State, ("work", work), checkpointer=InMemorySaver(serde=SERDE))
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    graph.invoke({"note": "good"}, config)
    with pytest.raises(PickleNotAllowedError):
        graph.invoke({"note": "bad"}, config)
    cs.assert_same(graph.get_state(config).values["table"], frame())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"serde": EncryptedSerializer(EnvKeyCipher(KEY)), "allowed": [PANDAS]}, "builds on"),
        (
            {"serde": JsonPlusSerializer(pickle_fallback=True), "allowed": [PANDAS]},
            "pickle_fallback",
        ),
        ({"allowed": "pandas"}, "takes a list"),
        ({"allowed": [42]}, "not int"),
        ({"allowed": [("os", "system")]}, "never admitted"),
        ({"allowed": [("builtins", "eval")]}, "never admitted"),
        ({"allowed": [("builtins", "getattr")]}, "never admitted"),
        ({"allowed": [("subprocess", "Popen")]}, "never admitted"),
        # Aliases and relatives of the above, found in review: refused by what they resolve to.
        ({"allowed": [("io", "open")]}, "never admitted"),
        ({"allowed": [("_io", "FileIO")]}, "never admitted"),
        ({"allowed": [("_operator", "attrgetter")]}, "never admitted"),
        ({"allowed": [("_functools", "partial")]}, "never admitted"),
        ({"allowed": [("timeit", "timeit")]}, "never admitted"),
        ({"allowed": [("pdb", "run")]}, "never admitted"),
        ({"allowed": [("builtins", "type")]}, "never admitted"),
        ({"allowed": [("copyreg", "_reconstructor")]}, "never admitted"),
        ({"allowed": [("pandas", "io.pickle.pickle.loads")]}, "dotted names"),
        ({"allowed": [("numpy", "load")]}, "never admitted"),
        ({"allowed": [("pandas", "read_pickle")]}, "never admitted"),
        ({"allowed": [("pandas", "read_csv")]}, "never admitted"),
        ({"allowed": [("pandas", "eval")]}, "never admitted"),
        # Re-exported under harmless modules: refused by the module that defines them.
        ({"allowed": [("bz2", "_builtin_open")]}, "it is io.open"),
        ({"allowed": [("collections", "_itemgetter")]}, "it is operator.itemgetter"),
        ({"allowed": [("enum", "reduce")]}, "it is _functools.reduce"),
        ({"allowed": [subprocess.Popen]}, "never admitted"),
        ({"allowed": [io.FileIO]}, "never admitted"),
    ],
)
def test_bad_configuration_is_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        PickleFallbackSerializer(**kwargs)


def test_single_preset_and_repr() -> None:
    serde = PickleFallbackSerializer(allowed=PANDAS)
    assert repr(serde) == "PickleFallbackSerializer(allowed=[PANDAS])"
    assert ("pandas", "DataFrame") in serde.admitted_globals
    other = PickleFallbackSerializer(allowed=[NUMPY, decimal.Decimal, ("m", "n")])
    assert repr(other) == "PickleFallbackSerializer(allowed=[NUMPY, decimal.Decimal, ('m', 'n')])"
    assert ("pandas", "DataFrame") not in other.admitted_globals


@settings(max_examples=30, **SETTINGS)
@given(stamp=st.datetimes(timezones=st.sampled_from([None, dt.UTC])))
def test_pandas_timestamps_keep_type_and_zone(stamp: dt.datetime) -> None:
    value = pd.Timestamp(stamp)
    cs.assert_same(roundtrip({"at": value}), {"at": value})
