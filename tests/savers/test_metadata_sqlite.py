"""Metadata sealed by default on the sealed SQLite savers, as on PostgreSQL (issues 10 and 11).

Real SQLite files. Filters are compared with the stock ``SqliteSaver`` over the same puts
(plaintext, indexed and structural keys, sync and async); tampering is refused with a typed
error.

A sealed SQLite checkpoint blob is bound to its row *and* its plaintext metadata, so every
metadata rewrite fails the blob first (`BindingError`). To reach the metadata checks
themselves, `unbind` rewrites the blob as the stock saver would (no binding), and the row is
read under ``Migration(unbound=True)``, as the PostgreSQL tests strip the record seal.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver as StockSaver

from secure_serde import (
    BindingError,
    BlindIndexError,
    ConfigurationError,
    EncryptedSerializer,
    MetadataDowngradeError,
    Migration,
)
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from secure_serde.savers._blind_index import INDEX_METADATA_KEY
from secure_serde.savers._v03_sqlite import (
    STRUCTURAL_METADATA_KEYS,
    AsyncSqliteSaver,
    SqliteSaver,
)
from secure_serde.stores import METADATA_TABLE, SEALED_METADATA_KEY, SqliteStore, Swap
from tests.cli.cli_support import run_main

KEY_A = b"sqlite-meta-key-a-0123456789abcd"
KEY_B = b"sqlite-meta-key-b-0123456789abcd"
OPTIONS: dict[str, Any] = {"plaintext_metadata": ["tenant"], "indexed_metadata": ["user_id"]}
# (thread, source, tenant, user_id, step): user ids repeat across threads; one is an int, one
# is None and one thread has no user_id at all (the stock `IS NULL` matches both).
PUTS: list[tuple[str, str, str, Any, int]] = [
    ("t1", "input", "acme", "u1", 1),
    ("t1", "loop", "acme", "u2", 2),
    ("t2", "input", "acme", "u1", 3),
    ("t3", "loop", "globex", "u1", 4),
    ("t3", "loop", "globex", 7, 5),
    ("t4", "loop", "globex", None, 6),
    ("t4", "update", "globex", "<absent>", 7),
]
FILTERS: list[dict[str, Any]] = [
    {"source": "input"},
    {"step": 3},
    {"tenant": "acme"},
    {"user_id": "u1"},
    {"user_id": 7},
    {"user_id": 7.0},
    {"user_id": None},
    {"user_id": "nobody"},
    {"user_id": "u1", "tenant": "globex"},
    {"user_id": "u1", "source": "input", "tenant": "acme"},
    {"parents.sub": "p"},  # a dotted path into the structural "parents" key
    {"source": "loop", "step": 5},
]


def serde(*keys: bytes) -> EncryptedSerializer:
    if len(keys) <= 1:
        return EncryptedSerializer(EnvKeyCipher(keys[0] if keys else KEY_A))
    return EncryptedSerializer(KeyRotationCipher({f"k{i}": k for i, k in enumerate(keys)}, "k0"))


def _args(thread: str, source: str, tenant: str, user: Any, step: int) -> tuple[Any, ...]:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1f0000000000000000000{step:03d}"
    checkpoint["channel_values"] = {"x": [step]}
    checkpoint["channel_versions"] = {"x": step}
    configurable: dict[str, Any] = {
        "thread_id": thread,
        "checkpoint_ns": "",
        "tenant": tenant,
        "api_key": f"sk-{thread}-{step}",
    }
    metadata: dict[str, Any] = {"source": source, "step": step, "parents": {"sub": "p"}}
    if user is None:
        metadata["user_id"] = None  # langgraph copies no None from config; metadata may hold one
    elif user != "<absent>":
        configurable["user_id"] = user
    return {"configurable": configurable}, checkpoint, metadata, {"x": 1}


def put(saver: Any, *row: Any) -> Any:
    return saver.put(*_args(*row))


def found(tuples: Any) -> list[tuple[str, int]]:
    return sorted((t.config["configurable"]["thread_id"], t.metadata["step"]) for t in tuples)


def config_of(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def meta(tup: Any) -> dict[str, Any]:
    """A tuple's metadata as the plain dict it is (our keys are not in langgraph's TypedDict)."""
    return dict(tup.metadata)


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        yield conn


def stored(path: Path, thread: str, step: int) -> dict[str, Any]:
    with connect(path) as conn:
        row = conn.execute(
            "SELECT metadata FROM checkpoints WHERE thread_id = ?"
            " AND json_extract(CAST(metadata AS TEXT), '$.step') = ?",
            (thread, step),
        ).fetchone()
    assert row is not None
    return dict(json.loads(row[0]))


def overwrite(path: Path, thread: str, step: int, metadata: dict[str, Any]) -> None:
    """Rewrite a row's metadata only: its bound blob then fails (see the module docstring)."""
    with connect(path) as conn:
        conn.execute(
            "UPDATE checkpoints SET metadata = ? WHERE thread_id = ?"
            " AND json_extract(CAST(metadata AS TEXT), '$.step') = ?",
            (json.dumps(metadata).encode(), thread, step),
        )
        conn.commit()


def unbind(path: Path, thread: str, step: int, metadata: dict[str, Any]) -> None:
    """Rewrite a row's metadata and its blob as the stock saver writes one (no binding)."""
    with connect(path) as conn:
        # A viewer (no policy), as the row may be tampered with already.
        saver = SqliteSaver(
            conn, serde=serde(), migration=Migration.EVERYTHING, seal_metadata=False
        )
        at: RunnableConfig = {
            "configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": _id(step)}
        }
        tup = saver.get_tuple(at)
        assert tup is not None
        type_tag, blob = serde().dumps_typed(tup.checkpoint)
        conn.execute(
            "UPDATE checkpoints SET type = ?, checkpoint = ?, metadata = ?"
            " WHERE thread_id = ? AND checkpoint_id = ?",
            (type_tag, blob, json.dumps(metadata).encode(), thread, _id(step)),
        )
        conn.commit()


def _id(step: int) -> str:
    return f"1f0000000000000000000{step:03d}"


# --------------------------------------------------------------------------------------------
# Defaults and options


def test_sealed_by_default_with_the_postgres_keywords(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with SqliteSaver.from_conn_string(str(path), serde=serde()) as saver:
        put(saver, "t1", "input", "acme", "u1", 1)
        assert saver.metadata_sealer is not None
        assert saver.metadata_sealer.plaintext == STRUCTURAL_METADATA_KEYS
        tup = saver.get_tuple(config_of("t1"))
        assert tup is not None
        assert meta(tup)["api_key"] == "sk-t1-1"
        assert meta(tup)["tenant"] == "acme"
    raw = stored(path, "t1", 1)
    assert set(raw) == {"source", "step", "parents", SEALED_METADATA_KEY}
    assert b"sk-t1-1" not in path.read_bytes()
    with SqliteSaver.from_conn_string(str(path), serde=serde(), seal_metadata=False) as plain:
        assert plain.metadata_sealer is None
        put(plain, "t2", "input", "acme", "u1", 2)
    assert stored(path, "t2", 2)["api_key"] == "sk-t2-2"


def test_options_are_checked_before_connecting(tmp_path: Path) -> None:
    path = tmp_path / "never.sqlite"
    opening = SqliteSaver.from_conn_string(
        str(path), serde=serde(), plaintext_metadata=["a"], indexed_metadata=["a"]
    )
    with pytest.raises(ConfigurationError, match="only sealed keys"), opening:
        pass
    with (
        pytest.raises(ConfigurationError, match="seal_metadata=False"),
        SqliteSaver.from_conn_string(
            str(path), serde=serde(), seal_metadata=False, plaintext_metadata=["a"]
        ),
    ):
        pass
    assert not path.exists()


# --------------------------------------------------------------------------------------------
# Filters: the same checkpoints as the stock SqliteSaver with plaintext metadata


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[Any, list[tuple[str, int]]]:
    path = tmp_path_factory.mktemp("stock") / "stock.sqlite"
    with connect(path) as conn:
        stock = StockSaver(conn, serde=serde())
        for row in PUTS:
            put(stock, *row)
        results: dict[Any, list[tuple[str, int]]] = {}
        for n, flt in enumerate(FILTERS):
            results[n, None] = found(stock.list(None, filter=flt))
            for thread in ("t1", "t3", "t4"):
                results[n, thread] = found(stock.list(config_of(thread), filter=flt))
    # The comparisons below are not vacuous.
    assert results[FILTERS.index({"user_id": "u1"}), None] == [("t1", 1), ("t2", 3), ("t3", 4)]
    assert results[FILTERS.index({"user_id": None}), None] == [("t4", 6), ("t4", 7)]
    assert results[FILTERS.index({"user_id": 7.0}), None] == [("t3", 5)]
    assert len(results[FILTERS.index({"parents.sub": "p"}), None]) == len(PUTS)
    return results


def test_filters_match_the_stock_saver(
    tmp_path: Path, expected: dict[Any, list[tuple[str, int]]]
) -> None:
    path = tmp_path / "ours.sqlite"
    with SqliteSaver.from_conn_string(str(path), serde=serde(), **OPTIONS) as ours:
        for row in PUTS:
            put(ours, *row)
        for n, flt in enumerate(FILTERS):
            assert found(ours.list(None, filter=flt)) == expected[n, None], flt
            for thread in ("t1", "t3", "t4"):
                assert found(ours.list(config_of(thread), filter=flt)) == expected[n, thread], flt
        limited = list(ours.list(None, filter={"user_id": "u1"}, limit=2))
        assert found(limited) == [("t2", 3), ("t3", 4)]  # newest first, as the stock saver
        with pytest.raises(ConfigurationError, match="api_key"):
            list(ours.list(None, filter={"api_key": "sk-t1-1"}))
    raw = stored(path, "t1", 1)
    assert set(raw) == {
        "source",
        "step",
        "parents",
        "tenant",
        SEALED_METADATA_KEY,
        INDEX_METADATA_KEY,
    }
    assert '"u1"' not in json.dumps(raw)  # quoted: base64 may hold the letters by chance


async def test_async_filters_match_the_stock_saver(
    tmp_path: Path, expected: dict[Any, list[tuple[str, int]]]
) -> None:
    path = tmp_path / "ours.sqlite"
    async with AsyncSqliteSaver.from_conn_string(str(path), serde=serde(), **OPTIONS) as ours:
        for row in PUTS:
            await ours.aput(*_args(*row))
        for n, flt in enumerate(FILTERS):
            assert found([t async for t in ours.alist(None, filter=flt)]) == expected[n, None]
            for thread in ("t1", "t3", "t4"):
                got = found([t async for t in ours.alist(config_of(thread), filter=flt)])
                assert got == expected[n, thread], flt
        with pytest.raises(ConfigurationError, match="api_key"):
            [t async for t in ours.alist(None, filter={"api_key": "x"})]


def test_rotated_keyring_still_matches_old_rows(tmp_path: Path) -> None:
    path = tmp_path / "rotated.sqlite"
    with connect(path) as conn:
        put(SqliteSaver(conn, serde=serde(KEY_A), **OPTIONS), "t-old", "input", "acme", "u1", 1)
        # B promoted, A still readable: a filter is an OR over both index keys.
        new = SqliteSaver(conn, serde=serde(KEY_B, KEY_A), **OPTIONS)
        put(new, "t-new", "input", "acme", "u1", 2)
        assert found(new.list(None, filter={"user_id": "u1"})) == [("t-new", 2), ("t-old", 1)]
        only_b = SqliteSaver(conn, serde=serde(KEY_B), **OPTIONS)
        assert found(only_b.list(config_of("t-new"), filter={"user_id": "u1"})) == [("t-new", 2)]
    tokens = {
        stored(path, t, s)[INDEX_METADATA_KEY]["user_id"] for t, s in [("t-old", 1), ("t-new", 2)]
    }
    assert len(tokens) == 2  # the same value, under two index keys


# --------------------------------------------------------------------------------------------
# Tampering


@pytest.fixture
def two_rows(tmp_path: Path) -> Path:
    path = tmp_path / "tamper.sqlite"
    with connect(path) as conn:
        saver = SqliteSaver(conn, serde=serde(), **OPTIONS)
        put(saver, "victim", "input", "acme", "u1", 1)
        put(saver, "other", "input", "acme", "u2", 2)
    return path


@contextmanager
def reader(path: Path, migration: Migration = Migration.NONE) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(
        str(path), serde=serde(), migration=migration, **OPTIONS
    ) as saver:
        yield saver


def test_any_metadata_rewrite_fails_the_bound_blob_first(two_rows: Path) -> None:
    victim, other = stored(two_rows, "victim", 1), stored(two_rows, "other", 2)
    other[INDEX_METADATA_KEY] = victim[INDEX_METADATA_KEY]
    overwrite(two_rows, "other", 2, other)
    with reader(two_rows) as strict:
        assert strict.get_tuple(config_of("victim")) is not None
        with pytest.raises(BindingError):
            strict.get_tuple(config_of("other"))
        with pytest.raises(BindingError):
            list(strict.list(None, filter={"user_id": "u1"}))
    # A present binding is checked under every migration switch too.
    with reader(two_rows, Migration.EVERYTHING) as migrating, pytest.raises(BindingError):
        migrating.get_tuple(config_of("other"))


def test_index_moved_to_another_row_is_refused(two_rows: Path) -> None:
    victim, other = stored(two_rows, "victim", 1), stored(two_rows, "other", 2)
    other[INDEX_METADATA_KEY] = victim[INDEX_METADATA_KEY]
    unbind(two_rows, "other", 2, other)
    with reader(two_rows, Migration(unbound=True)) as saver:
        assert saver.get_tuple(config_of("victim")) is not None
        with pytest.raises(BlindIndexError, match="does not match") as caught:
            list(saver.list(None, filter={"user_id": "u1"}))
        assert caught.value.key == "user_id"
        with pytest.raises(BlindIndexError):
            saver.get_tuple(config_of("other"))


def test_sealed_entry_deleted_is_refused(two_rows: Path) -> None:
    victim = stored(two_rows, "victim", 1)
    del victim[SEALED_METADATA_KEY]
    unbind(two_rows, "victim", 1, victim)
    with reader(two_rows, Migration(unbound=True)) as saver:
        with pytest.raises(BlindIndexError, match="without a sealed entry"):
            saver.get_tuple(config_of("victim"))
        del victim[INDEX_METADATA_KEY]
        unbind(two_rows, "victim", 1, victim)
        with pytest.raises(MetadataDowngradeError, match="removed or bypassed"):
            saver.get_tuple(config_of("victim"))


def test_sealed_key_rewritten_in_plaintext_is_refused(two_rows: Path) -> None:
    victim = stored(two_rows, "victim", 1)
    victim["api_key"] = "sk-attacker"
    unbind(two_rows, "victim", 1, victim)
    with reader(two_rows, Migration(unbound=True)) as saver:
        with pytest.raises(MetadataDowngradeError) as caught:
            saver.get_tuple(config_of("victim"))
        assert caught.value.keys == ("api_key",)
    # Under the migration switch it is read, and the sealed value wins.
    with reader(two_rows, Migration(unbound=True, plaintext_metadata=True)) as migrating:
        tup = migrating.get_tuple(config_of("victim"))
        assert tup is not None
        assert meta(tup)["api_key"] == "sk-victim-1"


def test_sealed_entry_moved_to_another_row_is_refused(two_rows: Path) -> None:
    victim, other = stored(two_rows, "victim", 1), stored(two_rows, "other", 2)
    other[SEALED_METADATA_KEY] = victim[SEALED_METADATA_KEY]
    other[INDEX_METADATA_KEY] = victim[INDEX_METADATA_KEY]
    unbind(two_rows, "other", 2, other)
    with (
        reader(two_rows, Migration(unbound=True)) as saver,
        pytest.raises(BindingError, match="at its metadata row"),
    ):
        saver.get_tuple(config_of("other"))


# --------------------------------------------------------------------------------------------
# The stores layer and the tools


def test_store_swaps_a_sealed_entry_only_while_it_is_unchanged(tmp_path: Path) -> None:
    """rewrap's view of SQLite: each row's sealed entry is a cell, swapped compare-and-swap."""
    path = tmp_path / "cells.sqlite"
    with connect(path) as conn:
        saver = SqliteSaver(conn, serde=serde(), **OPTIONS)
        put(saver, "t", "input", "acme", "u1", 1)
        put(saver, "bad", "loop", "acme", "u1", 2)
        conn.execute("UPDATE checkpoints SET metadata = X'00' WHERE thread_id = 'bad'")
        conn.commit()  # not JSON: skipped, not an error
    with SqliteStore(path) as store:
        table = store.table(METADATA_TABLE)
        (cell,) = next(iter(store.iter_batches(table)))
        assert store.count(table) == 1
        assert cell.location is not None
        assert cell.location.kind == "metadata"
        assert cell.data is not None
        # The same ciphertext, so the saver still reads the row after the swap.
        assert store.compare_and_swap([Swap(cell, cell.type_tag or "", cell.data)]) == [True]
        stale = Swap(cell, "msgpack+aesgcm", b"\x00" * 40)
        overwrite(path, "t", 1, {**stored(path, "t", 1), "tenant": "changed"})
        assert store.compare_and_swap([stale]) == [True]  # the entry itself is still the same
        moved = store.reload(cell.ref)
        assert moved is not None
        assert moved.data == b"\x00" * 40
        assert store.compare_and_swap([stale]) == [False]  # no longer the entry read
    assert stored(path, "t", 1)["tenant"] == "changed"


def test_inspect_and_audit_read_a_sealed_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's viewer opens the sealed saver with no metadata policy: it unseals, and
    audit authenticates every sealed entry as a cell."""
    for var in ("SECURE_SERDE_KEYRING_FILE", "SECURE_SERDE_KMS_KEY_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A.decode())
    path = tmp_path / "cli.sqlite"
    with SqliteSaver.from_conn_string(str(path), serde=serde(), **OPTIONS) as saver:
        put(saver, "t", "input", "acme", "u1", 1)
        put(saver, "t", "loop", "acme", "u2", 2)
    code, out, err = run_main(capsys, "inspect", str(path), "--thread", "t", "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert all(e["error"] is None for e in shown["checkpoints"])
    assert sorted(e["metadata"]["api_key"] for e in shown["checkpoints"]) == ["sk-t-1", "sk-t-2"]
    code, out, err = run_main(capsys, "audit", str(path))
    # Every value authenticated; the one finding is the key the user chose to leave plaintext.
    assert "checkpoints.metadata 2" in out
    assert "cannot decrypt: 0" in out
    assert "findings: 1" in out
    assert "not written by LangGraph: ['tenant']" in out
    assert code == 1, err
