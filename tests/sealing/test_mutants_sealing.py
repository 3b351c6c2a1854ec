"""Tests written for the mutation run over SealedSaver's parsers and bookkeeping (issue 22).

Each test pins a property a surviving (or untested) mutant of
secure_serde/sealing/_cell.py, _codec.py, _identity.py, _index.py or
_walks.py broke; docs/mutation.md names the mutants. They run on the
in-process savers (InMemorySaver, and one subclass of it that implements
``prune`` and ``delete_for_runs`` the way the SQL savers do, since neither
InMemorySaver nor SqliteSaver has them), so the mutation run stays fast.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import TASKS
from langgraph.types import Send

from secure_serde import (
    BindingError,
    BlindIndexError,
    ConfigurationError,
    EncryptedSerializer,
    HistoryError,
    MetadataDowngradeError,
    SealedSaver,
    SecureSerdeError,
    StoreIdentityError,
)
from secure_serde.crypto import Location
from secure_serde.sealing import _cell, _codec, _identity, _index, _walks
from secure_serde.sealing import _record as record_layout
from tests.serdes_support import dropin_serde

KEY = b"mutants-sealing-key-0123456789ab"


def checkpoint(
    checkpoint_id: str, values: dict[str, Any], *, v: int = 4, version: int = 1
) -> Checkpoint:
    return Checkpoint(
        v=v,
        id=checkpoint_id,
        ts="2026-12-03T00:00:00+00:00",
        channel_values=values,
        channel_versions={channel: version for channel in values},
        versions_seen={},
        updated_channels=None,
    )


def cid(n: int) -> str:
    return f"1f0d0000-0000-6000-8000-{n:012d}"


def put(
    saver: SealedSaver,
    thread: str,
    n: int,
    values: dict[str, Any],
    *,
    parent: int | None = None,
    ns: str = "",
    v: int = 4,
    **metadata: Any,
) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if parent is not None:
        configurable["checkpoint_id"] = cid(parent)
    found = checkpoint(cid(n), values, v=v, version=n)
    return saver.put(
        {"configurable": configurable},
        found,
        cast(CheckpointMetadata, {"source": "loop", "step": n, **metadata}),
        found["channel_versions"],
    )


def config(thread: str, n: int | None = None, ns: str = "") -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if n is not None:
        configurable["checkpoint_id"] = cid(n)
    return {"configurable": configurable}


def thread_config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def read(saver: SealedSaver, thread: str, n: int | None = None, ns: str = "") -> CheckpointTuple:
    found = saver.get_tuple(config(thread, n, ns))
    assert found is not None
    return found


def meta(found: CheckpointTuple) -> dict[str, Any]:
    return dict(found.metadata)


class PruningSaver(InMemorySaver):
    """InMemorySaver with ``prune`` and ``delete_for_runs``, deleting rows as the SQL savers do."""

    def _drop(self, thread: str, ns: str, checkpoint_id: str) -> None:
        del self.storage[thread][ns][checkpoint_id]
        self.writes.pop((thread, ns, checkpoint_id), None)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread in thread_ids:
            for ns, rows in list(self.storage.get(str(thread), {}).items()):
                keep = max(rows) if strategy == "keep_latest" else None
                for checkpoint_id in [c for c in rows if c != keep]:
                    self._drop(str(thread), ns, checkpoint_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        for run_id in run_ids:
            for found in list(self.list(None, filter={"run_id": run_id})):
                c = found.config["configurable"]
                self._drop(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])


# -- _cell: the byte layout and every bound -------------------------------------------------------


def test_cell_layout_is_frozen() -> None:
    assert _cell.pack(_cell.VALUE, "msgpack+aesgcm", b"ct") == (b"SSC1\x01\x00\x0emsgpack+aesgcmct")
    assert _cell.pack_write("json+aesgcm", "p\u00e9", -2, b"ct") == (
        b"SSC1\x02\x00\x0bjson+aesgcm\x00\x03p\xc3\xa9\xff\xff\xff\xfect"
    )
    assert _cell.to_text(b"SSC1") == "U1NDMQ=="
    assert (_cell.VALUE, _cell.WRITE, _cell.RECORD, _cell.IDENTITY, _cell.ITEM) == (1, 2, 3, 4, 5)


@pytest.mark.parametrize("kind", [_cell.VALUE, _cell.RECORD, _cell.IDENTITY, _cell.ITEM])
def test_cells_of_every_kind_round_trip_from_bytes_and_text(kind: int) -> None:
    raw = _cell.pack(kind, "msgpack+aesgcm", b"\x00ciphertext")
    for given in (raw, bytearray(raw), memoryview(raw)):
        assert _cell.unpack(given, kind) == _cell.Cell(kind, "msgpack+aesgcm", b"\x00ciphertext")
    assert _cell.from_text(_cell.to_text(raw), kind) == _cell.unpack(raw, kind)


def test_a_write_cell_carries_its_path_and_index() -> None:
    raw = _cell.pack_write("msgpack+aesgcm", "~a, b", -7, b"ct")
    cell = _cell.unpack(raw, _cell.WRITE)
    assert (cell.type_tag, cell.task_path, cell.idx, cell.ciphertext) == (
        "msgpack+aesgcm",
        "~a, b",
        -7,
        b"ct",
    )
    # Exactly as long as the header needs: an empty ciphertext is still a cell.
    empty = _cell.pack_write("t", "", 0, b"")
    assert _cell.unpack(empty, _cell.WRITE).ciphertext == b""
    with pytest.raises(BindingError, match="pending write cell is truncated"):
        _cell.unpack(empty[:-1], _cell.WRITE)
    # The path length says one more byte than there is before the index.
    short_path = empty[:8] + b"\x01" + empty[9:]
    with pytest.raises(BindingError, match="truncated"):
        _cell.unpack(short_path, _cell.WRITE)
    with pytest.raises(BindingError, match="truncated"):
        _cell.unpack(empty[: len(empty) - 4 - 2], _cell.WRITE)
    bad_path = _cell.pack_write("t", "ab", 0, b"")
    bad_path = bad_path.replace(b"ab", b"\xff\xfe")
    with pytest.raises(BindingError, match="malformed task path"):
        _cell.unpack(bad_path, _cell.WRITE)


def test_the_type_tag_bounds() -> None:
    longest = "t" * 1024
    assert _cell.unpack(_cell.pack(_cell.VALUE, longest, b""), _cell.VALUE).type_tag == longest
    with pytest.raises(ValueError, match="1 to 1024"):
        _cell.pack(_cell.VALUE, longest + "t", b"")
    with pytest.raises(ValueError, match="1 to 1024"):
        _cell.pack(_cell.VALUE, "", b"")
    over = b"SSC1\x01\x04\x01" + b"t" * 1025
    with pytest.raises(BindingError, match="truncated"):
        _cell.unpack(over, _cell.VALUE)
    with pytest.raises(BindingError, match="truncated"):
        _cell.unpack(b"SSC1\x01\x00\x00", _cell.VALUE)
    with pytest.raises(BindingError, match="truncated"):
        _cell.unpack(b"SSC1\x01\x00\x02t", _cell.VALUE)
    assert _cell.unpack(b"SSC1\x01\x00\x02tt", _cell.VALUE).type_tag == "tt"
    with pytest.raises(BindingError, match="malformed type tag"):
        _cell.unpack(b"SSC1\x01\x00\x02t\xff", _cell.VALUE)
    with pytest.raises(ValueError, match="65535"):
        _cell.pack_write("t", "p" * 65536, 0, b"")
    assert _cell.unpack(_cell.pack_write("t", "p" * 65535, 0, b""), _cell.WRITE).task_path == (
        "p" * 65535
    )


def test_cells_that_are_not_cells_are_refused_with_their_reason() -> None:
    with pytest.raises(BindingError, match="is str, not a sealed cell"):
        _cell.unpack("SSC1", _cell.VALUE)
    with pytest.raises(BindingError, match="too short"):
        _cell.unpack(b"SSC1\x01\x00", _cell.VALUE)
    assert _cell.unpack(b"SSC1\x01\x00\x01t", _cell.VALUE).ciphertext == b""
    with pytest.raises(BindingError, match="not a sealed cell"):
        _cell.unpack(b"SSC2\x01\x00\x01t", _cell.VALUE)
    with pytest.raises(BindingError, match="a record cell was found where a channel value"):
        _cell.unpack(_cell.pack(_cell.RECORD, "t", b""), _cell.VALUE)
    with pytest.raises(BindingError, match="a kind 9 cell was found where a pending write"):
        _cell.unpack(b"SSC1\x09\x00\x01t", _cell.WRITE)


def test_cell_text_is_checked_before_it_is_decoded() -> None:
    raw = _cell.pack(_cell.RECORD, "msgpack+aesgcm", b"ct")
    with pytest.raises(BindingError, match="is bytes, not sealed text"):
        _cell.from_text(raw, _cell.RECORD)
    with pytest.raises(BindingError, match="not valid sealed text"):
        _cell.from_text(_cell.to_text(raw) + "!", _cell.RECORD)
    with pytest.raises(BindingError, match="not valid sealed text"):
        _cell.from_text("\u00e9" + _cell.to_text(raw), _cell.RECORD)
    with pytest.raises(BindingError, match="too long"):
        _cell.from_text("A" * (64 * 1024 * 1024 + 4), _cell.RECORD)
    # Exactly at the bound: decoded, then refused for what it holds, not for its length.
    with pytest.raises(BindingError, match="not a sealed cell"):
        _cell.from_text("A" * (64 * 1024 * 1024), _cell.RECORD)


# -- _identity ------------------------------------------------------------------------------------


def _record(**changes: Any) -> dict[str, Any]:
    record = {"format": 1, "store": bytes(16), "index_key": bytes(range(32)), "created": "x"}
    record.update(changes)
    return {k: v for k, v in record.items() if v is not _MISSING}


_MISSING: Any = object()


@pytest.mark.parametrize(
    "changes",
    [
        {"format": 2},
        {"format": _MISSING},
        {"store": bytes(15)},
        {"store": bytes(17)},
        {"store": "0" * 16},
        {"store": _MISSING},
        {"index_key": bytes(31)},
        {"index_key": bytes(33)},
        {"index_key": "k" * 32},
        {"index_key": _MISSING},
    ],
)
def test_an_identity_record_with_any_field_wrong_is_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(StoreIdentityError, match="not one secure_serde wrote"):
        _identity.parse_record(_record(**changes))


def test_an_identity_record_opens_to_its_store_id_and_index_key() -> None:
    identity = _identity.parse_record(_record())
    assert identity.store_id == bytes(16)
    assert identity.index.token("k", 1) == _index.BlindIndex(bytes(range(32))).token("k", 1)
    assert repr(identity) == f"StoreIdentity({'00' * 16})"
    with pytest.raises(StoreIdentityError):
        _identity.parse_record([_record()])


def _identity_tuple(text: Any) -> CheckpointTuple:
    return CheckpointTuple(
        _identity.identity_config(),
        cast(Checkpoint, {}),
        cast(CheckpointMetadata, {_identity.IDENTITY_KEY: text}),
    )


def test_open_identity_refuses_other_keys_and_other_shapes() -> None:
    _, _, metadata = _identity.new_identity_put(dropin_serde(KEY))
    text = dict(metadata)[_identity.IDENTITY_KEY]
    assert len(_identity.open_identity(_identity_tuple(text), dropin_serde(KEY)).store_id) == 16
    other = EncryptedSerializer.from_pycryptodome_aes(key=b"another-key-0123456789abcdefghij")
    with pytest.raises(StoreIdentityError, match="does not open under the configured keys"):
        _identity.open_identity(_identity_tuple(text), other)
    location = Location.identity(_identity.IDENTITY_THREAD)
    for record in ([1, 2], None):
        tag, blob = dropin_serde(KEY).dumps_typed_at(record, location)
        cell = _cell.to_text(_cell.pack(_cell.IDENTITY, tag, blob))
        with pytest.raises(StoreIdentityError):
            _identity.open_identity(_identity_tuple(cell), dropin_serde(KEY))


def test_a_fresh_identity_and_where_it_lives() -> None:
    record = _identity.new_record()
    assert record["format"] == 2
    assert len(record["store"]) == 16
    assert [len(e["key"]) for e in record["index_keys"]] == [32]
    assert [e["ssix1"] for e in record["index_keys"]] == [False]
    assert record["store"] != _identity.new_record()["store"]
    assert _identity.identity_config() == {
        "configurable": {
            "thread_id": "__secure_serde_store__",
            "checkpoint_ns": "",
            "checkpoint_id": "00000000-0000-0000-0000-000000000000",
        }
    }
    put_config, put_checkpoint, put_metadata = _identity.new_identity_put(dropin_serde(KEY))
    assert put_config == {
        "configurable": {"thread_id": "__secure_serde_store__", "checkpoint_ns": ""}
    }
    assert put_checkpoint["id"] == _identity.IDENTITY_CHECKPOINT_ID
    assert put_checkpoint["v"] == 4
    assert put_checkpoint["channel_values"] == {}
    assert list(put_metadata) == ["__secure_serde_store__"]
    assert "__secure_serde_store__" in str(_identity.refuse_unempty())


def test_a_saver_that_cannot_list_every_thread_logs_and_creates_the_identity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class OneThreadAtATime(InMemorySaver):
        def list(self, config: Any, **kwargs: Any) -> Any:
            if config is None:
                raise ValueError("list one thread at a time")
            return super().list(config, **kwargs)

    with caplog.at_level(logging.WARNING, logger="secure_serde"):
        saver = SealedSaver(OneThreadAtATime(), serde=dropin_serde(KEY))
        saver.setup()
    assert "OneThreadAtATime cannot list every thread" in caplog.text
    put(saver, "t", 1, {"a": 1})
    assert read(saver, "t").checkpoint["channel_values"] == {"a": 1}


# -- _index ---------------------------------------------------------------------------------------


def test_canonical_json() -> None:
    assert _index.canonical({"b": 1.0, "a": [2.5, (3.0,)], 1: "\u00e9"}) == (
        '{"1":"\u00e9","a":[2.5,[3]],"b":1}'
    )
    assert _index.canonical(True) == "true"
    assert _index.matches({"k": 1, "j": [1.0]}, {"k": 1.0, "j": [1]})
    assert not _index.matches({"k": 1}, {"k": 1, "j": None})
    assert not _index.matches({"k": 1, "j": 2}, {"k": 1, "j": 3})
    assert _index.matches({"k": None}, {"k": None})
    assert _index.matches({}, {})


def test_tokens_are_keyed_per_key_and_value() -> None:
    index = _index.BlindIndex(bytes(range(32)))
    token = index.token("user", "alice")
    assert token.startswith("ssix1:")
    assert len(token) == len("ssix1:") + 22
    assert "=" not in token
    assert token == index.token("user", "alice")
    assert token == index.token("user", "alice")  # the keyed state is copied, not used up
    assert token != index.token("user", "bob")
    assert token != index.token("users", "alice")
    assert index.token("ab", "c") != index.token("a", "bc")  # the key's length is in the MAC
    assert token != _index.BlindIndex(bytes(32)).token("user", "alice")
    assert index.token("n", 1) == index.token("n", 1.0)
    assert repr(index) == "<BlindIndex>"
    with pytest.raises(ConfigurationError, match="32 bytes"):
        _index.BlindIndex(bytes(31))


def test_filter_plans() -> None:
    index = _index.BlindIndex(bytes(range(32)))
    assert _index.plan_filter(None, index, ["u"], ["p"]) == _index.FilterPlan(None, {}, {})
    assert _index.plan_filter({}, index, ["u"], ["p"]) == _index.FilterPlan(None, {}, {})
    plan = _index.plan_filter({"u": "a", "p": "b", "r": "c"}, index, ["u"], ["p"])
    assert plan.inner == {"u": index.token("u", "a"), "p": "b"}
    # Indexed keys are checked on the sealed metadata; plaintext ones too once F12 is fixed.
    assert plan.checked in ({"u": "a"}, {"u": "a", "p": "b"})
    assert plan.residual == {"r": "c"}
    only_residual = _index.plan_filter({"r": 1}, index, ["u"], ["p"])
    assert only_residual == _index.FilterPlan(None, {}, {"r": 1})


# -- _codec ---------------------------------------------------------------------------------------


def test_ids_and_the_reduced_config() -> None:
    assert _codec.ids({"configurable": {"thread_id": 7}}) == ("7", "", None)
    assert _codec.ids(
        {"configurable": {"thread_id": "t", "checkpoint_ns": "n", "checkpoint_id": 5}}
    ) == ("t", "n", "5")
    with pytest.raises(ConfigurationError, match="thread_id"):
        _codec.ids({"configurable": {}})
    with pytest.raises(ConfigurationError, match="thread_id"):
        _codec.ids({})
    with pytest.raises(ConfigurationError, match="reserved"):
        _codec.ids({"configurable": {"thread_id": "__secure_serde_store__"}})
    wide: RunnableConfig = {
        "configurable": {
            "thread_id": 3,
            "checkpoint_ns": "",
            "checkpoint_id": None,
            "user_id": "secret",
        },
        "metadata": {"x": 1},
    }
    assert _codec.reduced(wide) == {"configurable": {"thread_id": "3", "checkpoint_ns": ""}}
    assert _codec.reduced({}) == {"configurable": {}}


def test_new_versions_are_those_of_the_channels_holding_a_value() -> None:
    found = checkpoint("c", {"a": 1, "b": 2})
    found["channel_versions"] = {"a": 3, "b": 4, "c": 5}
    assert record_layout.new_versions_of(found) == {"a": 3, "b": 4}
    found["channel_values"] = {"a": 1, "z": 0}
    assert record_layout.new_versions_of(found) == {"a": 3}
    found["channel_values"] = {}
    assert record_layout.new_versions_of(found) == {}


@pytest.mark.parametrize(
    "record",
    [
        [1],
        {"c": [], "m": {}, "p": None, "det": False, "vals": []},
        {"c": {}, "m": [], "p": None, "det": False, "vals": []},
        {"c": {}, "m": {}, "p": 5, "det": False, "vals": []},
        {"c": {}, "m": {}, "p": None, "det": 0, "vals": []},
        {"c": {}, "m": {}, "p": None, "det": False, "vals": ("a",)},
        {"c": {}, "m": {}, "p": None, "det": False, "vals": ["a", 1]},
        {"c": {}, "m": {}, "p": None, "vals": []},
    ],
)
def test_a_record_of_the_wrong_shape_is_refused(record: Any) -> None:
    with pytest.raises(BindingError, match="not one secure_serde wrote"):
        record_layout.parse_record(record)


def test_a_record_of_the_right_shape_is_read_field_by_field() -> None:
    assert record_layout.parse_record(
        {"c": {"v": 4}, "m": {"s": 1}, "p": "x", "det": True, "vals": ["a"]}
    ) == ({"v": 4}, {"s": 1}, "x", True, ["a"])
    assert (
        record_layout.parse_record({"c": {}, "m": {}, "p": None, "det": False, "vals": []})[2]
        is None
    )


def test_the_parent_id_and_ids_only_parents() -> None:
    found = CheckpointTuple(config("t"), cast(Checkpoint, {}), cast(CheckpointMetadata, {}))
    assert _codec._parent_id(found) is None
    assert _codec._parent_id(found._replace(parent_config={"configurable": {}})) is None
    assert _codec._parent_id(found._replace(parent_config=config("t", 3))) == cid(3)
    assert _codec._ids_only({"": "a", "ns": "b"})
    assert _codec._ids_only({})
    assert not _codec._ids_only({"": 1})
    assert not _codec._ids_only(["a"])


def test_the_sealers_tokens_are_the_store_identitys() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    sealer = saver._ready()
    index = sealer.identity.index
    assert (
        sealer.index_keys.token("run_id", "r1")
        == f"ssix2:{index.key_id()}:{index.digest('run_id', 'r1')}"
    )
    assert sealer.index_keys.token("run_id", "r1") != sealer.index_keys.token("run_id", "r2")


def test_a_record_cell_under_another_inner_tag_is_refused() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    put(saver, "t", 1, {"a": 1})
    found = next(iter(saver.inner.list(config("t"))))
    record = _cell.from_text(dict(found.metadata)[_codec.RECORD_KEY], _cell.RECORD)
    for tag in ("json+aesgcm", "msgpack", "msgpack+unknown", "bytes+aesgcm"):
        relabelled = _cell.to_text(_cell.pack(_cell.RECORD, tag, record.ciphertext))
        metadata = cast(CheckpointMetadata, {**found.metadata, _codec.RECORD_KEY: relabelled})
        forged = found._replace(metadata=metadata)
        with pytest.raises(BindingError if tag != "msgpack+unknown" else SecureSerdeError):
            saver._ready().open(forged)


def test_a_write_cell_repeated_under_its_task_and_index_is_refused() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    written = put(saver, "t", 1, {"a": 1})
    saver.put_writes(written, [("a", 2), ("b", 3)], "task")
    found = saver.inner.get_tuple(config("t"))
    assert found is not None
    writes = list(found.pending_writes or ())
    doubled = found._replace(pending_writes=[*writes, writes[0]])
    with pytest.raises(BindingError, match="same task and index"):
        saver._ready().open(doubled)
    # Writes come back in langgraph's order, whatever order the inner saver returns.
    reversed_found = found._replace(pending_writes=list(reversed(writes)))
    opened = saver._ready().open(reversed_found)
    assert [(w[1], w[2]) for w in opened.tuple.pending_writes or ()] == [("a", 2), ("b", 3)]


# -- _walks: copy, prune, delete_for_runs, sends, history -----------------------------------------


def _thread_with_history(saver: SealedSaver, thread: str = "src") -> None:
    first = put(saver, thread, 1, {"a": 1, "b": "x"}, run_id="r1")
    saver.put_writes(first, [("a", 10), ("b", "y")], "task-1", "~p")
    saver.put_writes(first, [("a", 11)], "task-2")
    put(saver, thread, 2, {"a": 2}, parent=1, run_id="r2")
    put(saver, thread, 3, {"a": 3, "c": [1]}, parent=2, run_id="r2")
    put(saver, thread, 1, {"n": 1}, ns="child", run_id="r1")


def _view(saver: SealedSaver, thread: str) -> list[tuple[Any, ...]]:
    return [
        (
            found.config["configurable"]["checkpoint_ns"],
            found.config["configurable"]["checkpoint_id"],
            None
            if found.parent_config is None
            else found.parent_config["configurable"].get("checkpoint_id"),
            found.checkpoint["channel_values"],
            found.checkpoint["channel_versions"],
            meta(found),
            found.pending_writes,
        )
        for found in saver.list(thread_config(thread))
    ]


def test_copy_thread_copies_every_value_write_and_parent() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    _thread_with_history(saver)
    before = _view(saver, "src")
    saver.copy_thread("src", "dst")
    assert _view(saver, "src") == before
    assert _view(saver, "dst") == before
    assert len(before) == 4
    # The copy's cells are bound to the copy: moved back to the source thread they do not open.
    dst = saver.inner.get_tuple(config("dst"))
    src = saver.inner.get_tuple(config("src"))
    assert dst is not None
    assert src is not None
    assert dst.checkpoint["channel_values"]["c"] != src.checkpoint["channel_values"]["c"]
    swapped = src._replace(
        checkpoint={**src.checkpoint, "channel_values": dst.checkpoint["channel_values"]}
    )
    with pytest.raises(BindingError):
        saver._ready().open(swapped)
    first = saver.inner.get_tuple(config("dst", 1))
    assert first is not None
    moved = [(task, channel) for task, channel, _ in first.pending_writes or ()]
    assert sorted(moved) == [("task-1", "a"), ("task-1", "b"), ("task-2", "a")]


def test_copy_thread_refuses_a_thread_whose_history_is_cut() -> None:
    inner = InMemorySaver()
    saver = SealedSaver(inner, serde=dropin_serde(KEY))
    _thread_with_history(saver)
    del inner.storage["src"][""][cid(1)]
    with pytest.raises(HistoryError, match="missing"):
        saver.copy_thread("src", "dst")
    assert saver.get_tuple(config("dst")) is None


def test_prune_keeps_the_latest_per_namespace_and_its_history_still_verifies() -> None:
    saver = SealedSaver(PruningSaver(), serde=dropin_serde(KEY))
    _thread_with_history(saver)
    _thread_with_history(saver, "other")
    saver.prune(["src"])
    kept = {
        (f.config["configurable"]["checkpoint_ns"], f.config["configurable"]["checkpoint_id"])
        for f in saver.list(thread_config("src"))
    }
    assert kept == {("", cid(3)), ("child", cid(1))}
    latest = read(saver, "src")
    assert latest.checkpoint["channel_values"] == {"a": 3, "c": [1]}
    assert meta(latest)["run_id"] == "r2"
    # The kept row's parent is gone; its record says so, so history ends there quietly.
    history = saver.get_delta_channel_history(config=config("src"), channels=["a", "b"])
    assert history["a"] == {"writes": []}
    assert history["b"] == {"writes": []}
    assert len(_view(saver, "other")) == 4


def test_prune_with_an_unsealed_parent_cut_is_still_refused() -> None:
    inner = PruningSaver()
    saver = SealedSaver(inner, serde=dropin_serde(KEY))
    _thread_with_history(saver)
    inner.prune(["src"])  # the inner saver alone: nothing was resealed as detached
    with pytest.raises(HistoryError):
        list(saver.list(config("src")))
    with pytest.raises(HistoryError):
        saver.get_delta_channel_history(config=config("src"), channels=["b"])


def test_delete_for_runs_detaches_only_the_children_of_deleted_rows() -> None:
    saver = SealedSaver(PruningSaver(), serde=dropin_serde(KEY))
    _thread_with_history(saver)
    saver.delete_for_runs(["r1"])
    left = [f.config["configurable"]["checkpoint_id"] for f in saver.list(thread_config("src"))]
    assert left == [cid(3), cid(2)]
    assert read(saver, "src", 2).checkpoint["channel_values"] == {"a": 2}
    assert read(saver, "src").checkpoint["channel_values"] == {"a": 3, "c": [1]}
    history = saver.get_delta_channel_history(config=config("src"), channels=["b"])
    assert history == {"b": {"writes": []}}
    # The rows of run r2 stayed as they were written: the newest is not detached.
    inner = saver.inner.get_tuple(config("src"))
    assert inner is not None
    assert not saver._ready().open(inner).detached
    assert saver._ready().open(saver.inner.get_tuple(config("src", 2))).detached  # type: ignore[arg-type]


def test_a_v3_checkpoint_gets_its_pending_sends_from_its_parent() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    parent = put(saver, "t", 1, {"a": 1, "b": 2})
    sends = [Send("node", {"x": 1}), Send("node", {"x": 2})]
    saver.put_writes(parent, [(TASKS, sends[0]), (TASKS, sends[1]), ("a", 5)], "task")
    put(saver, "t", 2, {"a": 2, "b": 3}, parent=1, v=3)
    child = read(saver, "t")
    assert child.checkpoint["channel_values"][TASKS] == sends
    versions = child.checkpoint["channel_versions"]
    assert versions[TASKS] == max(v for k, v in versions.items() if k != TASKS)
    assert child.checkpoint["channel_values"]["a"] == 2
    # A v4 checkpoint, or one whose parent sent nothing, is returned as it is.
    put(saver, "u", 1, {"a": 1})
    put(saver, "u", 2, {"a": 2}, parent=1, v=3)
    assert TASKS not in read(saver, "u").checkpoint["channel_values"]
    put(saver, "w", 1, {"a": 1})
    saver.put_writes(config("w", 1), [(TASKS, sends[0])], "task")
    put(saver, "w", 2, {"a": 2}, parent=1)
    assert TASKS not in read(saver, "w").checkpoint["channel_values"]


def test_add_sends_without_versions_asks_the_saver() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    parent = put(saver, "t", 1, {"a": 1})
    saver.put_writes(parent, [(TASKS, Send("n", 1))], "task")
    opened_parent = saver._ready().open(saver.inner.get_tuple(config("t", 1)))  # type: ignore[arg-type]
    bare = CheckpointTuple(
        config("t", 2),
        cast(Checkpoint, {"channel_values": {}, "channel_versions": {}}),
        cast(CheckpointMetadata, {}),
    )
    out = _walks.add_sends(saver, bare, opened_parent)
    assert out.checkpoint["channel_values"] == {TASKS: [Send("n", 1)]}
    (version,) = out.checkpoint["channel_versions"].values()
    assert list(out.checkpoint["channel_versions"]) == [TASKS]
    assert str(version).split(".")[0] == str(saver.get_next_version(None, None)).split(".")[0]
    assert _walks.add_sends(saver, bare, None) is bare


def test_list_walk_bookkeeping() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    _thread_with_history(saver)
    rows = [(f, saver._ready().open(f)) for f in saver.inner.list(thread_config("src"))]
    assert {_walks.key_of(r[0]) for r in _walks.latest_per_namespace(rows)} == {
        ("src", "", cid(3)),
        ("src", "child", cid(1)),
    }
    doomed = {("src", "", cid(2))}
    assert [_walks.key_of(r[0]) for r in _walks.orphans_after(rows, doomed)] == [
        ("src", "", cid(3))
    ]
    assert _walks.orphans_after(rows, {("src", "", cid(3))}) == []
    assert sorted(_walks.oldest_first(r) for r in rows)[0] == (cid(1), "")
    _walks.check_complete(rows)
    with pytest.raises(HistoryError, match=cid(2)):
        _walks.check_complete([r for r in rows if _walks.key_of(r[0]) != ("src", "", cid(2))])


# -- survivors of the first run (docs/mutation.md) -------------------------------------------------


def test_surrogates_in_keys_task_paths_and_values_are_carried_not_refused() -> None:
    index = _index.BlindIndex(bytes(range(32)))
    assert index.token("k\ud800", "v") != index.token("k", "v")
    assert index.token("k", "v\udfff") != index.token("k", "v")
    raw = _cell.pack_write("t", "p\ud800", 1, b"")
    cell = _cell.unpack(raw, _cell.WRITE)
    assert (cell.kind, cell.task_path) == (_cell.WRITE, "p\ud800")


def _inner_rows(inner: InMemorySaver) -> str:
    return repr((dict(inner.storage), dict(inner.writes), dict(inner.blobs)))


def test_a_record_carries_no_values_and_the_inner_saver_no_sends_or_maps() -> None:
    inner = InMemorySaver()
    saver = SealedSaver(inner, serde=dropin_serde(KEY))
    put(saver, "t", 1, {"a": "x" * 20_000})
    found = inner.get_tuple(config("t"))
    assert found is not None
    assert len(str(dict(found.metadata)[_codec.RECORD_KEY])) < 4_000  # no values in it
    # A v3 checkpoint's pending sends, and a metadata map of strings, stay sealed.
    old = checkpoint(cid(2), {"a": 1}, v=3, version=2)
    old["pending_sends"] = ["send-canary"]  # type: ignore[typeddict-unknown-key]
    saver.put(
        config("t", 1),
        old,
        cast(CheckpointMetadata, {"step": 2, "labels": {"owner": "map-canary"}}),
        {"a": 2},
    )
    rows = _inner_rows(inner)
    assert "send-canary" not in rows
    assert "map-canary" not in rows
    stored = inner.get_tuple(config("t", 2))
    assert stored is not None
    assert stored.checkpoint["v"] == 4  # the inner saver never rebuilds sends from cells
    opened = read(saver, "t", 2)
    assert opened.checkpoint["v"] == 3
    assert meta(opened)["labels"] == {"owner": "map-canary"}


def test_a_channel_put_again_at_its_version_stores_the_new_value() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    first, second = ["first"], ["second"]
    saver.put(config("t"), checkpoint(cid(1), {"a": first}), cast(CheckpointMetadata, {}), {"a": 1})
    saver.put(
        config("t", 1), checkpoint(cid(2), {"a": second}), cast(CheckpointMetadata, {}), {"a": 1}
    )
    assert read(saver, "t", 2).checkpoint["channel_values"] == {"a": ["second"]}


def test_writes_come_back_in_the_stock_savers_order() -> None:
    bare = InMemorySaver()
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    batches: list[tuple[str, str, list[tuple[str, Any]]]] = [
        ("b-task", "~a", [("x", 1), ("__error__", "boom")]),
        ("a-task", "~b", [("x", 2), ("y", 3)]),
        ("c-task", "~a", [("x", 4)]),
    ]
    for target in (bare, saver):
        written = target.put(config("t"), checkpoint(cid(1), {}), cast(CheckpointMetadata, {}), {})
        for task_id, path, writes in batches:
            target.put_writes(written, writes, task_id, path)
    expected = bare.get_tuple(config("t"))
    assert expected is not None
    assert read(saver, "t").pending_writes == expected.pending_writes
    raw = saver.inner.get_tuple(config("t"))
    assert raw is not None
    shuffled = raw._replace(pending_writes=list(reversed(raw.pending_writes or ())))
    assert saver._ready().open(shuffled).tuple.pending_writes == expected.pending_writes


def test_opening_some_channels_opens_only_those() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    written = put(saver, "t", 1, {"a": 1, "b": 2, "c": 3})
    saver.put_writes(written, [("a", 10), ("c", 30)], "task")
    raw = saver.inner.get_tuple(config("t"))
    assert raw is not None
    opened = saver._ready().open(raw, channels=("b", "c"))
    assert opened.tuple.checkpoint["channel_values"] == {"b": 2, "c": 3}
    assert [(w[1], w[2]) for w in opened.tuple.pending_writes or ()] == [("c", 30)]
    assert saver._ready().open(raw, channels=()).tuple.checkpoint["channel_values"] == {}


def test_a_read_returns_the_parent_config() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    put(saver, "t", 1, {"a": 1})
    put(saver, "t", 2, {"a": 2}, parent=1)
    assert read(saver, "t").parent_config == config("t", 1)
    assert read(saver, "t", 1).parent_config is None


def test_tampered_plaintext_metadata_and_parents_are_refused_by_name() -> None:
    inner = InMemorySaver()
    saver = SealedSaver(inner, serde=dropin_serde(KEY), plaintext_metadata=["tenant"])
    put(saver, "t", 1, {"a": 1}, tenant="acme", parents={"": "p-1"})
    raw = inner.get_tuple(config("t"))
    assert raw is not None
    assert dict(raw.metadata)["parents"] == {"": "p-1"}
    sealer = saver._ready()
    for key, forged in (("tenant", "evil"), ("parents", {"": "p-2"}), ("parents", {})):
        metadata = cast(CheckpointMetadata, {**raw.metadata, key: forged})
        with pytest.raises(MetadataDowngradeError) as refused:
            sealer.open(raw._replace(metadata=metadata))
        assert refused.value.keys == (key,)


def test_a_forged_index_token_names_its_key() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY), indexed_metadata=["user_id"])
    put(saver, "t", 1, {"a": 1}, user_id="bob")
    raw = saver.inner.get_tuple(config("t"))
    assert raw is not None
    opened = saver._ready().open(raw).tuple
    with pytest.raises(BlindIndexError) as refused:
        saver._ready().check_filter(opened, {"user_id": "alice", "step": 1})
    assert refused.value.key == "step, user_id"


def test_a_record_under_a_cipher_that_does_not_bind_or_a_composite_tag_is_refused() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    put(saver, "t", 1, {"a": 1})
    raw = saver.inner.get_tuple(config("t"))
    assert raw is not None
    record = _cell.from_text(dict(raw.metadata)[_codec.RECORD_KEY], _cell.RECORD)
    for tag, reason in (("msgpack+aes", "not sealed"), ("msgpack+zlib+aesgcm", "does not write")):
        text = _cell.to_text(_cell.pack(_cell.RECORD, tag, record.ciphertext))
        forged = raw._replace(
            metadata=cast(CheckpointMetadata, {**raw.metadata, _codec.RECORD_KEY: text})
        )
        with pytest.raises(BindingError, match=reason):
            saver._ready().open(forged)


def test_pages_count_their_rows_and_check_the_parents_beyond_them() -> None:
    inner = InMemorySaver()
    saver = SealedSaver(inner, serde=dropin_serde(KEY), indexed_metadata=["team"])
    put(saver, "t", 1, {"a": 1}, team="red")
    for n in range(2, 6):
        put(saver, "t", n, {"a": n}, parent=n - 1, team="blue" if n % 2 else "red")
    put(saver, "t", 1, {"a": 1}, ns="child")
    put(saver, "t", 2, {"a": 2}, ns="child", parent=1)
    for page in (1, 2, 3):
        assert len(list(saver.list(thread_config("t"), limit=page))) == page
        assert len(list(saver.list(None, limit=page))) == page
    assert len(list(saver.list(config("t", ns="child"), limit=1))) == 1
    red = [read_id(f) for f in saver.list(None, filter={"team": "red"})]
    assert red == [cid(4), cid(2), cid(1)]
    assert [read_id(f) for f in saver.list(None, filter={"step": 3})] == [cid(3)]
    # The oldest row of a page lost its parent: the page says so.
    del inner.storage["t"][""][cid(4)]
    for page in (1, 2):
        with pytest.raises(HistoryError):
            list(saver.list(config("t"), limit=page))


def read_id(found: CheckpointTuple) -> str:
    return str(found.config["configurable"]["checkpoint_id"])


def test_history_in_a_namespace_walks_that_namespace() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    first = put(saver, "t", 1, {"a": 1}, ns="child")
    saver.put_writes(first, [("a", 10)], "task")
    put(saver, "t", 2, {"b": 2}, ns="child", parent=1)
    history = saver.get_delta_channel_history(config=config("t", ns="child"), channels=["a"])
    assert history["a"]["seed"] == 1
    assert [w[2] for w in history["a"]["writes"]] == [10]


def test_a_detached_row_moved_under_another_parent_is_refused() -> None:
    inner = PruningSaver()
    saver = SealedSaver(inner, serde=dropin_serde(KEY))
    _thread_with_history(saver)
    saver.prune(["src"])
    stored = inner.storage["src"][""][cid(3)]
    inner.storage["src"][""][cid(3)] = (stored[0], stored[1], cid(9))
    with pytest.raises(BindingError, match="re-parented"):
        read(saver, "src")


def test_delete_for_runs_detaches_every_orphan_of_the_deleted_rows() -> None:
    saver = SealedSaver(PruningSaver(), serde=dropin_serde(KEY))
    put(saver, "t", 1, {"a": 1}, run_id="r1")
    for n, run in ((2, "r2"), (3, "r1"), (4, "r2")):
        put(saver, "t", n, {"a": n}, parent=n - 1, run_id=run)
    saver.delete_for_runs(["r1"])
    assert [read_id(f) for f in saver.list(thread_config("t"))] == [cid(4), cid(2)]


def test_a_prune_that_fails_after_detaching_leaves_every_parent_pointer() -> None:
    class FailingPrune(PruningSaver):
        def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
            raise RuntimeError("the database went away")

    saver = SealedSaver(FailingPrune(), serde=dropin_serde(KEY))
    _thread_with_history(saver)
    with pytest.raises(RuntimeError):
        saver.prune(["src"])
    assert read(saver, "src").parent_config == config("src", 2)
    assert len(list(saver.list(thread_config("src")))) == 4


def test_a_copy_of_a_pruned_thread_stays_detached() -> None:
    saver = SealedSaver(PruningSaver(), serde=dropin_serde(KEY))
    _thread_with_history(saver)
    put(saver, "src", 2, {"n": 2}, ns="child", parent=1)
    saver.prune(["src"])
    saver.copy_thread("src", "dst")
    assert len(list(saver.list(thread_config("dst")))) == 2
    assert saver.get_delta_channel_history(config=config("dst"), channels=["b"]) == {
        "b": {"writes": []}
    }
    assert len(list(saver.list(config("src", ns="child")))) == 1


def test_a_filter_on_a_sealed_only_key_returns_exactly_the_matching_rows() -> None:
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    put(saver, "t", 1, {"a": 1}, colour="red")
    put(saver, "t", 2, {"a": 2}, parent=1, colour="blue")
    put(saver, "t", 3, {"a": 3}, parent=2)
    assert [read_id(f) for f in saver.list(None, filter={"colour": "red"})] == [cid(1)]
    assert [read_id(f) for f in saver.list(None, filter={"colour": "blue"})] == [cid(2)]
    assert list(saver.list(None, filter={"colour": "green"})) == []


def test_a_page_checks_a_parent_beyond_it_in_its_own_namespace() -> None:
    inner = InMemorySaver()
    saver = SealedSaver(inner, serde=dropin_serde(KEY))
    put(saver, "t", 1, {"a": 1}, ns="child")
    put(saver, "t", 2, {"a": 2}, ns="child", parent=1)
    put(saver, "t", 3, {"a": 3}, ns="child", parent=1)  # a fork: 2 is not 3's parent
    page = list(saver.list(config("t", ns="child"), limit=1))
    assert [read_id(f) for f in page] == [cid(3)]
    del inner.storage["t"]["child"][cid(1)]
    with pytest.raises(HistoryError):
        list(saver.list(config("t", ns="child"), limit=1))
