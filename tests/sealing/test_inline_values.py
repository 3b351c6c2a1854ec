"""Inline values in the checkpoint record (secure_serde/sealing/_codec.py), and the record's layout.

A checkpoint's small scalar values (None, bool, float, 64-bit int, short UTF-8 str, each of
exactly that type) are sealed inside its record rather than as cells of their own. The frozen
vector (tests/vectors/sealed_record.json) pins the record's plaintext, its location and a record
cell sealed with a fixed nonce, in the inline layout and in the cell layout every store written
before it uses; both must keep opening. The attacks are those the layout adds: a record (and
the values in it) moved to another checkpoint, a cell planted for an inline channel, and a
record that names an inline value it does not hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import BindingError, EncryptedSerializer, SealedSaver
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.crypto import Location
from secure_serde.sealing import DEFAULT_INDEXED_METADATA, _cell, _codec
from secure_serde.sealing._identity import StoreIdentity
from secure_serde.sealing._index import BlindIndex

VECTORS = json.loads(
    (Path(__file__).resolve().parent.parent / "vectors" / "sealed_record.json").read_text()
)
KEY = b"inline-values-key-0123456789abcd"


def serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY))


def cid(n: int) -> str:
    return f"1f0d0000-0000-6000-8000-{n:012d}"


def config(thread: str, n: int | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if n is not None:
        configurable["checkpoint_id"] = cid(n)
    return {"configurable": configurable}


def put(saver: SealedSaver, thread: str, n: int, values: dict[str, Any]) -> RunnableConfig:
    checkpoint = Checkpoint(
        v=4,
        id=cid(n),
        ts="2026-12-03T00:00:00+00:00",
        channel_values=values,
        channel_versions={channel: n for channel in values},
        versions_seen={},
        updated_channels=None,
    )
    parent = config(thread, n - 1) if n > 1 else config(thread)
    return saver.put(
        parent,
        checkpoint,
        cast(CheckpointMetadata, {"source": "loop", "step": n}),
        dict(checkpoint["channel_versions"]),
    )


def read(saver: SealedSaver, thread: str, n: int) -> CheckpointTuple:
    found = saver.get_tuple(config(thread, n))
    assert found is not None
    return found


def raw(saver: SealedSaver, thread: str, n: int) -> CheckpointTuple:
    found = saver.inner.get_tuple(config(thread, n))
    assert found is not None
    return found


# -- the frozen layout --------------------------------------------------------------------------


def _vector_sealer() -> tuple[_codec.Sealer, EncryptedSerializer]:
    encrypting = EncryptedSerializer(EnvKeyCipher(bytes.fromhex(VECTORS["key"])))
    identity = StoreIdentity(
        bytes.fromhex(VECTORS["store_id"]), BlindIndex(bytes.fromhex(VECTORS["index_key"]))
    )
    return _codec.Sealer(encrypting, identity, DEFAULT_INDEXED_METADATA | {"user_id"}, ()), (
        encrypting
    )


def _vector_row(vector: dict[str, Any], sealer: _codec.Sealer) -> CheckpointTuple:
    """The row an inner saver returns for the vector: its cells, tokens and record text."""
    record = vector["record"]
    metadata = sealer._inner_metadata(record["m"])
    metadata[_codec.RECORD_KEY] = _cell.to_text(bytes.fromhex(vector["record_cell"]))
    structure = {k: v for k, v in record["c"].items()}
    cells = {ch: bytes.fromhex(cell) for ch, cell in vector["value_cells"].items()}
    ids = {"thread_id": VECTORS["thread_id"], "checkpoint_ns": VECTORS["checkpoint_ns"]}
    return CheckpointTuple(
        {"configurable": {**ids, "checkpoint_id": VECTORS["checkpoint_id"]}},
        cast(Checkpoint, {**structure, "channel_values": cells}),
        cast(CheckpointMetadata, metadata),
        {"configurable": {**ids, "checkpoint_id": VECTORS["parent_id"]}},
        [],
    )


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: str(v["comment"]))
def test_the_record_layout_is_frozen(vector: dict[str, Any]) -> None:
    record = vector["record"]
    assert JsonPlusSerializer().dumps_typed(record) == (
        "msgpack",
        bytes.fromhex(vector["record_plaintext"]),
    )
    location = Location.checkpoint(
        VECTORS["thread_id"], VECTORS["checkpoint_ns"], VECTORS["checkpoint_id"], None, b""
    ).in_store(bytes.fromhex(VECTORS["store_id"]))
    assert location.encode().hex() == vector["location"]
    cipher = EnvKeyCipher(bytes.fromhex(VECTORS["key"]))
    sealed = cipher.keyring._seal_v3_with_nonce(
        bytes.fromhex(vector["record_plaintext"]),
        "msgpack",
        bytes.fromhex(vector["nonce"]),
        bytes.fromhex(vector["location"]),
    )
    cell = _cell.unpack(bytes.fromhex(vector["record_cell"]), _cell.RECORD)
    assert cell.ciphertext == sealed
    assert cell.type_tag == "msgpack+" + cipher.encrypt(b"")[0]


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: str(v["comment"]))
def test_both_layouts_open_to_the_same_checkpoint(vector: dict[str, Any]) -> None:
    sealer, _ = _vector_sealer()
    opened = sealer.open(_vector_row(vector, sealer))
    values = opened.tuple.checkpoint["channel_values"]
    assert values == VECTORS["values"]
    assert [type(values[k]) for k in "bfnsz"] == [bool, float, int, str, type(None)]
    assert opened.with_values == sorted(vector["value_cells"])
    assert opened.inline == vector["record"].get("iv", {})
    assert opened.parent_id == VECTORS["parent_id"]
    assert dict(opened.tuple.metadata) == vector["record"]["m"]


def test_a_put_writes_the_inline_layout_of_the_vector() -> None:
    sealer, _ = _vector_sealer()
    inline_vector = VECTORS["vectors"][0]
    structure = inline_vector["record"]["c"]
    ids = {"thread_id": VECTORS["thread_id"], "checkpoint_ns": VECTORS["checkpoint_ns"]}
    _, inner_checkpoint, inner_metadata = sealer.seal_checkpoint(
        {"configurable": {**ids, "checkpoint_id": VECTORS["parent_id"]}},
        cast(Checkpoint, {**structure, "channel_values": VECTORS["values"]}),
        cast(CheckpointMetadata, inline_vector["record"]["m"]),
    )
    assert sorted(inner_checkpoint["channel_values"]) == ["messages"]
    record_cell = _cell.from_text(dict(inner_metadata)[_codec.RECORD_KEY], _cell.RECORD)
    location = Location.checkpoint(
        VECTORS["thread_id"], VECTORS["checkpoint_ns"], VECTORS["checkpoint_id"], None, b""
    ).in_store(bytes.fromhex(VECTORS["store_id"]))
    assert sealer._open_raw(record_cell, location) == inline_vector["record"]


# -- what a put stores --------------------------------------------------------------------------


def test_inline_values_have_no_cell_and_no_blob_row() -> None:
    inner = InMemorySaver()
    saver = SealedSaver(inner, serde=serde())
    values = {"n": 7, "s": "secret-inline-canary", "f": 1.5, "b": False, "z": None, "l": [1]}
    put(saver, "t", 1, values)
    assert sorted(raw(saver, "t", 1).checkpoint["channel_values"]) == ["l"]
    assert sorted(channel for (_, _, channel, _) in inner.blobs) == ["l"]
    assert b"secret-inline-canary" not in repr((inner.storage, inner.blobs)).encode()
    assert read(saver, "t", 1).checkpoint["channel_values"] == values


def test_a_store_of_the_cell_layout_still_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    inner = InMemorySaver()
    saver = SealedSaver(inner, serde=serde())
    with monkeypatch.context() as patched:
        patched.setattr(_codec, "inlined", lambda value: False)  # what 0.4 before inline wrote
        put(saver, "t", 1, {"n": 1, "s": "x", "l": [1]})
    assert sorted(raw(saver, "t", 1).checkpoint["channel_values"]) == ["l", "n", "s"]
    put(saver, "t", 2, {"n": 2, "s": "x", "l": [1]})
    assert sorted(raw(saver, "t", 2).checkpoint["channel_values"]) == ["l"]
    assert read(saver, "t", 1).checkpoint["channel_values"] == {"n": 1, "s": "x", "l": [1]}
    assert read(saver, "t", 2).checkpoint["channel_values"] == {"n": 2, "s": "x", "l": [1]}
    history = saver.get_delta_channel_history(config=config("t", 2), channels=["n", "l"])
    assert history == {"n": {"writes": [], "seed": 1}, "l": {"writes": [], "seed": [1]}}


def test_copy_prune_and_reseal_keep_the_inline_values() -> None:
    class Pruning(InMemorySaver):
        def prune(self, thread_ids: Any, *, strategy: str = "keep_latest") -> None:
            for thread in thread_ids:
                rows = self.storage[str(thread)][""]
                for checkpoint_id in [c for c in rows if c != max(rows)]:
                    del rows[checkpoint_id]

    saver = SealedSaver(Pruning(), serde=serde())
    put(saver, "t", 1, {"n": 1, "l": [1]})
    put(saver, "t", 2, {"n": 2, "s": "two", "l": [2]})
    saver.copy_thread("t", "u")
    assert read(saver, "u", 2).checkpoint["channel_values"] == {"n": 2, "s": "two", "l": [2]}
    assert read(saver, "u", 1).checkpoint["channel_values"] == {"n": 1, "l": [1]}
    saver.prune(["t"])
    assert read(saver, "t", 2).checkpoint["channel_values"] == {"n": 2, "s": "two", "l": [2]}


# -- attacks on what the layout adds ------------------------------------------------------------


def _rewrite(saver: SealedSaver, thread: str, n: int, **changes: Any) -> None:
    """Rewrite one row through the bare inner saver's public ``put``, as an attacker can."""
    found = raw(saver, thread, n)
    checkpoint = dict(changes.get("checkpoint", found.checkpoint))
    metadata = changes.get("metadata", found.metadata)
    parent = found.parent_config or config(thread)
    saver.inner.put(parent, cast(Checkpoint, checkpoint), metadata, {})


def test_a_record_moved_to_another_checkpoint_takes_no_value_with_it() -> None:
    saver = SealedSaver(InMemorySaver(), serde=serde())
    put(saver, "t", 1, {"balance": 100, "l": [1]})
    put(saver, "t", 2, {"balance": 5, "l": [1]})
    # The older, richer record over the newer row: its inline balance must not be read there.
    _rewrite(saver, "t", 2, metadata=raw(saver, "t", 1).metadata)
    with pytest.raises(BindingError):
        saver.get_tuple(config("t", 2))
    # Nor in another thread (same ids, same key, same store).
    put(saver, "v", 1, {"balance": 0, "l": [1]})
    _rewrite(saver, "v", 1, metadata=raw(saver, "t", 1).metadata)
    with pytest.raises(BindingError):
        saver.get_tuple(config("v", 1))


def test_a_cell_planted_for_an_inline_channel_is_never_returned() -> None:
    saver = SealedSaver(InMemorySaver(), serde=serde())
    put(saver, "t", 1, {"flag": [True]})  # a cell of channel "flag" at version 1
    put(saver, "t", 2, {"flag": False})  # inline at version 2
    planted = raw(saver, "t", 1).checkpoint["channel_values"]["flag"]
    found = raw(saver, "t", 2)
    _rewrite(
        saver,
        "t",
        2,
        checkpoint={**found.checkpoint, "channel_values": {"flag": planted}},
    )
    assert read(saver, "t", 2).checkpoint["channel_values"] == {"flag": False}


def test_a_record_naming_a_value_it_holds_nowhere_is_refused() -> None:
    """What a reader that does not know inline values sees: a value missing, not a shorter state."""
    saver = SealedSaver(InMemorySaver(), serde=serde())
    put(saver, "t", 1, {"n": 1})
    sealer = saver._ready()
    found = raw(saver, "t", 1)
    location = Location.checkpoint("t", "", cid(1), None, b"").in_store(sealer.identity.store_id)
    record = sealer._open_raw(
        _cell.from_text(dict(found.metadata)[_codec.RECORD_KEY], _cell.RECORD), location
    )
    assert record["iv"] == {"n": 1}
    assert record["vals"] == ["n"]
    del record["iv"]
    forged = _cell.to_text(sealer._seal_raw(_cell.RECORD, record, location))
    with pytest.raises(BindingError, match="missing from the store"):
        sealer.open(
            found._replace(metadata=cast(Any, {**found.metadata, _codec.RECORD_KEY: forged}))
        )
