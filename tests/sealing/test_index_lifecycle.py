"""The blind-index key's lifecycle (issue 22, item 6): key ids, format-2 identity, re-index.

Over InMemorySaver, SqliteSaver (a real file) and PostgresSaver (the real PostgreSQL fixture),
each driven through langgraph's public API. Raw rows are read with the bare inner saver on the
same storage (what it stores, below any wrapper); tampering re-puts a row through it, as anyone
with write access to the database can.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointMetadata,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.checkpoint.memory import InMemorySaver

from secure_serde import BlindIndexError, SealedSaver, StoreIdentityError
from secure_serde.sealing import _identity
from secure_serde.sealing._reindex import claim_reindex, release_reindex
from tests.serdes_support import env_serde, stock_postgres, stock_sqlite

KEY = b"index-lifecycle-key-0123456789ab"
IDENTITY_THREAD = "__secure_serde_store__"
INDEXED = ("user",)
KINDS = ("memory", "sqlite", "postgres")


def _sealed(inner: BaseCheckpointSaver[Any]) -> SealedSaver:
    return SealedSaver(inner, serde=env_serde(KEY), indexed_metadata=INDEXED)


@pytest.fixture(params=KINDS)
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """A bare inner saver on fresh storage; sealed savers and raw reads share it."""
    kind = request.param
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        with stock_sqlite(tmp_path / "store.db") as saver:
            yield saver
    else:
        with stock_postgres(str(request.getfixturevalue("postgres_url"))) as pg:
            yield pg


# -- writing and reading rows ---------------------------------------------------------------

USERS = ["alice", "bob", "alice", "carol", "alice", "bob"]


def _fill(saver: SealedSaver) -> None:
    """Two threads, three checkpoints each; ``user`` and ``step`` vary."""
    for thread in ("t1", "t2"):
        config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for step in range(3):
            user = USERS[step + (3 if thread == "t2" else 0)]
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"notes": f"{thread}-{step}"}
            checkpoint["channel_versions"] = {"notes": step + 1}
            config = saver.put(
                config,
                checkpoint,
                cast(CheckpointMetadata, {"source": "loop", "step": step, "user": user}),
                {"notes": step + 1},
            )


FILTERS: list[dict[str, Any]] = [
    {"user": "alice"},
    {"user": "bob"},
    {"user": "nobody"},
    {"source": "loop", "step": 1},
    {"user": "alice", "step": 2},
]


def _filtered(saver: SealedSaver) -> list[set[tuple[str, str]]]:
    return [
        {
            (t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_id"])
            for t in saver.list(None, filter=f)
        }
        for f in FILTERS
    ]


def _raw_rows(inner: BaseCheckpointSaver[Any]) -> list[CheckpointTuple]:
    rows = list(inner.list(None))
    return [r for r in rows if r.config["configurable"]["thread_id"] != IDENTITY_THREAD]


def _raw_tokens(inner: BaseCheckpointSaver[Any]) -> list[str]:
    return [
        str(dict(row.metadata)[key])
        for row in _raw_rows(inner)
        for key in ("user", "source", "step")
    ]


def _raw_metadata(inner: BaseCheckpointSaver[Any]) -> dict[tuple[str, str], Any]:
    return {
        (r.config["configurable"]["thread_id"], r.config["configurable"]["checkpoint_id"]): dict(
            r.metadata
        )
        for r in _raw_rows(inner)
    }


def _record(inner: BaseCheckpointSaver[Any]) -> dict[str, Any]:
    """The opened identity record (what the store holds, sealed)."""
    found = inner.get_tuple(_identity.identity_config())
    assert found is not None
    key, at = _identity.IDENTITY_KEY, _identity._LOCATION
    return _identity.open_record(found.metadata, key, at, env_serde(KEY))


def _key_id(key: bytes) -> str:
    mac = HMAC(key, hashes.SHA256())
    mac.update(b"secure_serde/index-key-id")
    return mac.finalize()[:4].hex()


def _digest(key: bytes, name: str, value: Any) -> str:
    mac = HMAC(key, hashes.SHA256())
    raw = name.encode()
    mac.update(struct.pack(">I", len(raw)) + raw)
    mac.update(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())
    return base64.urlsafe_b64encode(mac.finalize()[:16]).decode().rstrip("=")


def _held_ids(inner: BaseCheckpointSaver[Any]) -> list[str]:
    return [_key_id(entry["key"]) for entry in _record(inner)["index_keys"]]


def _kids(tokens: list[str]) -> set[str]:
    return {t.split(":")[1] for t in tokens}


def _reput(inner: BaseCheckpointSaver[Any], row: CheckpointTuple, metadata: Any) -> None:
    """Re-put one raw row with other metadata, through the bare inner saver (an upsert)."""
    config: RunnableConfig = {
        "configurable": {
            "thread_id": row.config["configurable"]["thread_id"],
            "checkpoint_ns": row.config["configurable"].get("checkpoint_ns", ""),
        }
    }
    if row.parent_config is not None:
        config["configurable"]["checkpoint_id"] = row.parent_config["configurable"]["checkpoint_id"]
    inner.put(config, row.checkpoint, metadata, {})


# -- tests ----------------------------------------------------------------------------------


def test_tokens_carry_the_key_id(inner: BaseCheckpointSaver[Any]) -> None:
    saver = _sealed(inner)
    _fill(saver)
    record = _record(inner)
    assert record["format"] == 2
    assert len(record["index_keys"]) == 1
    key = record["index_keys"][0]["key"]
    kid = _key_id(key)
    tokens = _raw_tokens(inner)
    assert len(tokens) == 18
    assert all(t.startswith(f"ssix2:{kid}:") for t in tokens)
    # The digest is the documented HMAC of (len(key) | key | canonical value), under the key.
    for row in _raw_rows(inner):
        opened = saver.get_tuple(row.config)
        assert opened is not None
        for name in ("user", "step", "source"):
            value = dict(opened.metadata)[name]
            assert dict(row.metadata)[name] == f"ssix2:{kid}:{_digest(key, name, value)}"


def test_filters_hold_before_during_and_after_a_reindex(inner: BaseCheckpointSaver[Any]) -> None:
    saver = _sealed(inner)
    _fill(saver)
    before = _filtered(saver)
    assert [len(s) for s in before] == [3, 2, 0, 2, 1]
    (old,) = _held_ids(inner)

    dry = saver.reindex(dry_run=True)
    assert (dry.rewritten, dry.complete, dry.key_id) == (6, False, None)
    assert _held_ids(inner) == [old]
    assert _kids(_raw_tokens(inner)) == {old}

    # Interrupted after two rows: both keys are held, rows are under both.
    first = saver.reindex(max_rows=2)
    assert (first.rotated, first.rewritten, first.remaining, first.complete) == (True, 2, 4, False)
    new = first.key_id
    assert new is not None
    assert new != old
    assert _held_ids(inner) == [new, old]
    assert [t.split(":")[1] for t in _raw_tokens(inner)].count(new) == 6
    assert _kids(_raw_tokens(inner)) == {old, new}
    assert _filtered(saver) == before
    # A saver opened now (another process) reads both.
    other = _sealed(inner)
    assert _filtered(other) == before
    resumed_dry = other.reindex(dry_run=True)
    assert (resumed_dry.rewritten, resumed_dry.key_id) == (4, new)

    # Resumed: only the four rows left are moved; then the old key is dropped.
    done = saver.reindex()
    assert (done.rotated, done.rewritten, done.complete, done.dropped) == (False, 4, True, (old,))
    assert _held_ids(inner) == [new]
    tokens = _raw_tokens(inner)
    assert len(tokens) == 18
    assert all(t.startswith(f"ssix2:{new}:") for t in tokens)
    assert _filtered(saver) == before
    assert _filtered(_sealed(inner)) == before
    # Every row still opens whole (values, parents) after the move.
    for thread in ("t1", "t2"):
        history = list(saver.list({"configurable": {"thread_id": thread}}))
        assert [t.checkpoint["channel_values"]["notes"] for t in history] == [
            f"{thread}-2",
            f"{thread}-1",
            f"{thread}-0",
        ]

    # A second run writes nothing.
    raw = _raw_metadata(inner)
    again = saver.reindex(rotate=False)
    assert (again.rewritten, again.current, again.complete, again.dropped) == (0, 6, True, ())
    assert _raw_metadata(inner) == raw
    assert _held_ids(inner) == [new]


def test_a_token_under_an_unknown_key_id_is_refused(inner: BaseCheckpointSaver[Any]) -> None:
    saver = _sealed(inner)
    _fill(saver)
    (kid,) = _held_ids(inner)
    row = _raw_rows(inner)[0]
    forged = dict(row.metadata)
    digest = str(forged["user"]).split(":")[2]
    unknown = "00000000" if kid != "00000000" else "11111111"
    forged["user"] = f"ssix2:{unknown}:{digest}"
    _reput(inner, row, forged)
    with pytest.raises(BlindIndexError, match="unknown key id") as caught:
        saver.get_tuple(row.config)
    assert caught.value.key == "user"
    with pytest.raises(BlindIndexError):
        list(saver.list({"configurable": {"thread_id": row.config["configurable"]["thread_id"]}}))
    # A format-1 token in a store that holds no format-1 key is refused too.
    forged["user"] = f"ssix1:{digest}"
    _reput(inner, row, forged)
    with pytest.raises(BlindIndexError, match="format-1"):
        saver.get_tuple(row.config)
    # A stored token that is not text at all is the same typed refusal, never AttributeError.
    for planted in (5, None, ["ssix2:", digest], {"ssix1": digest}):
        forged["user"] = planted
        _reput(inner, row, forged)
        with pytest.raises(BlindIndexError, match="not an index token"):
            saver.get_tuple(row.config)


def test_a_row_under_a_dropped_key_is_refused_then_retokenized(
    inner: BaseCheckpointSaver[Any],
) -> None:
    saver = _sealed(inner)
    _fill(saver)
    before = _filtered(saver)
    stale = _raw_rows(inner)[0]  # under the old key: what a writer not yet reopened puts
    assert saver.reindex().complete
    _reput(inner, stale, stale.metadata)
    with pytest.raises(BlindIndexError, match="unknown key id"):
        saver.get_tuple(stale.config)
    # The sealed metadata vouches for the values: the pass re-tokenizes the row.
    repair = saver.reindex(rotate=False)
    assert (repair.rewritten, repair.complete) == (1, True)
    assert saver.get_tuple(stale.config) is not None
    assert _filtered(saver) == before


def test_a_format_1_store_reads_filters_and_reindexes_to_format_2(
    inner: BaseCheckpointSaver[Any],
) -> None:
    # The identity as secure_serde wrote it before key ids: format 1, one index key.
    key = bytes(range(100, 132))
    v1 = {
        "format": 1,
        "store": bytes(range(16)),
        "index_key": key,
        "created": "2026-12-01T00:00:00+00:00",
    }
    inner.put(*_identity._identity_put(env_serde(KEY), v1), {})
    saver = _sealed(inner)
    _fill(saver)
    assert _record(inner)["format"] == 1
    tokens = _raw_tokens(inner)
    assert all(t.startswith("ssix1:") for t in tokens)
    assert f"ssix1:{_digest(key, 'user', 'alice')}" in tokens
    before = _filtered(saver)
    assert [len(s) for s in before] == [3, 2, 0, 2, 1]

    first = saver.reindex(max_rows=3)
    assert not first.complete
    record = _record(inner)
    assert record["format"] == 2
    assert [e["ssix1"] for e in record["index_keys"]] == [False, True]
    assert _filtered(saver) == before
    assert _filtered(_sealed(inner)) == before

    done = saver.reindex()
    assert done.complete
    assert done.dropped == (_key_id(key),)
    record = _record(inner)
    assert record["format"] == 2
    assert record["store"] == v1["store"]
    assert len(record["index_keys"]) == 1
    assert record["index_keys"][0]["ssix1"] is False
    new = _key_id(record["index_keys"][0]["key"])
    assert all(t.startswith(f"ssix2:{new}:") for t in _raw_tokens(inner))
    assert _filtered(saver) == before
    assert _filtered(_sealed(inner)) == before


def test_a_second_reindex_at_once_is_refused(inner: BaseCheckpointSaver[Any]) -> None:
    saver = _sealed(inner)
    _fill(saver)
    claim_reindex(inner)
    try:
        with pytest.raises(StoreIdentityError, match="already running"):
            _sealed(inner).reindex()
    finally:
        release_reindex(inner)
    assert len(_held_ids(inner)) == 1
    assert saver.reindex().complete


def test_areindex_moves_every_row() -> None:
    inner = InMemorySaver()
    saver = _sealed(inner)
    _fill(saver)
    before = _filtered(saver)

    async def run() -> None:
        first = await saver.areindex(max_rows=1)
        assert (first.rewritten, first.complete) == (1, False)
        during = {
            t.config["configurable"]["thread_id"]
            async for t in saver.alist(None, filter=FILTERS[0])
        }
        assert during == {"t1", "t2"}
        done = await saver.areindex()
        assert (done.rewritten, done.complete, len(done.dropped)) == (5, True, 1)
        again = await saver.areindex(rotate=False)
        assert again.rewritten == 0

    asyncio.run(run())
    assert _filtered(saver) == before
    (kid,) = _held_ids(inner)
    assert all(t.startswith(f"ssix2:{kid}:") for t in _raw_tokens(inner))
