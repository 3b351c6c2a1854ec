"""Metadata sealed by default, blind indexes for filters, and tamper checks (issue 11).

Real PostgreSQL (the suite's server), real graphs, and a real SQLite file for the SQLite
side of the filter translation.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Literal

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointMetadata,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.checkpoint.postgres import PostgresSaver as StockSaver
from psycopg.types.json import Jsonb

from secure_serde import (
    BindingError,
    BlindIndexError,
    ConfigurationError,
    EncryptedSerializer,
    MetadataDowngradeError,
    MetadataMovedError,
    Migration,
)
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from secure_serde.savers._blind_index import INDEX_METADATA_KEY
from secure_serde.savers._index_sql import sqlite_search_where
from secure_serde.savers._metadata import MetadataOpener, MetadataSealer
from secure_serde.savers._v03_postgres import AsyncPostgresSaver, PostgresSaver
from secure_serde.stores import SEALED_METADATA_KEY
from tests import canary_support as canary
from tests.fixtures_services import PostgresServer, pg_dump, saver_connection

KEY_A = b"index-tests-key-a-0123456789abcd"
KEY_B = b"index-tests-key-b-0123456789abcd"
OPTIONS: dict[str, Any] = {"plaintext_metadata": ["tenant"], "indexed_metadata": ["user_id"]}
# Each thread's metadata: a structural source, a plaintext tenant, an indexed user_id and a
# sealed api_key; user ids repeat across threads, as filters must find them.
Source = Literal["input", "loop"]
PUTS: list[tuple[str, Source, str, str | int, int]] = [
    ("t1", "input", "acme", "u1", 1),
    ("t1", "loop", "acme", "u2", 2),
    ("t2", "input", "acme", "u1", 3),
    ("t3", "loop", "globex", "u1", 4),
    ("t3", "loop", "globex", 7, 5),
]
FILTERS: list[dict[str, Any]] = [
    {"source": "input"},
    {"tenant": "acme"},
    {"user_id": "u1"},
    {"user_id": 7},
    {"user_id": 7.0},
    {"user_id": "nobody"},
    {"user_id": "u1", "tenant": "globex"},
    {"user_id": "u1", "source": "input", "tenant": "acme"},
]


def serde(*keys: bytes) -> EncryptedSerializer:
    if len(keys) <= 1:
        return EncryptedSerializer(EnvKeyCipher(keys[0] if keys else KEY_A))
    ids = {f"k{i}": k for i, k in enumerate(keys)}
    return EncryptedSerializer(KeyRotationCipher(ids, "k0"))


def put(
    saver: BaseCheckpointSaver[Any], thread: str, source: Source, tenant: str, user: Any, step: int
) -> RunnableConfig:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": [step]}
    checkpoint["channel_versions"] = {"x": step}
    config: RunnableConfig = {
        "configurable": {
            "thread_id": thread,
            "checkpoint_ns": "",
            "tenant": tenant,
            "user_id": user,
            "api_key": f"sk-{thread}-{step}",
        }
    }
    return saver.put(config, checkpoint, {"source": source, "step": step, "parents": {}}, {"x": 1})


def found(tuples: Iterable[CheckpointTuple]) -> list[tuple[str, int]]:
    return sorted((t.config["configurable"]["thread_id"], t.metadata["step"]) for t in tuples)


def stored(url: str, thread: str, step: int) -> dict[str, Any]:
    with saver_connection(url) as conn:
        row = conn.execute(
            "SELECT metadata FROM checkpoints WHERE thread_id = %s AND metadata->>'step' = %s",
            (thread, str(step)),
        ).fetchone()
    assert row is not None
    return dict(row["metadata"])


def overwrite(url: str, thread: str, step: int, metadata: dict[str, Any]) -> None:
    """Rewrite a row's metadata and strip its record seal.

    A bound record's seal covers its plaintext metadata, so any rewrite fails
    it first (`test_metadata_rewrite_fails_the_record_seal_first`); stripped,
    the row models a record written before binding, read under
    ``Migration(unbound=True)``, so the metadata checks themselves are reached.
    """
    with saver_connection(url) as conn:
        conn.execute(
            "UPDATE checkpoints SET metadata = %s,"
            " checkpoint = checkpoint - '__secure_serde_record__'"
            " WHERE thread_id = %s AND metadata->>'step' = %s",
            (Jsonb(metadata), thread, str(step)),
        )


def config_of(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


# --------------------------------------------------------------------------------------------
# Canaries through config


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_config_canaries_stay_out_of_the_dump(
    postgres_server: PostgresServer, postgres_url: str, is_async: bool
) -> None:
    options: dict[str, Any] = {"plaintext_metadata": ["tenant"], "indexed_metadata": ["api_key"]}
    if is_async:
        async with AsyncPostgresSaver.from_conn_string(
            postgres_url, serde=serde(), **options
        ) as saver:
            await saver.setup()
            graph = canary.build_canary_graph(saver)
            canary.check_final_state(await canary.run_async(graph, "canary"))
            hits = [t async for t in saver.alist(None, filter={"api_key": canary.API_KEY})]
    else:
        with PostgresSaver.from_conn_string(postgres_url, serde=serde(), **options) as sync:
            sync.setup()
            graph = canary.build_canary_graph(sync)
            canary.check_final_state(canary.run_sync(graph, "canary"))
            hits = list(sync.list(None, filter={"api_key": canary.API_KEY}))
    with saver_connection(postgres_url) as conn:
        total = conn.execute("SELECT count(*) AS n FROM checkpoints").fetchone()
    assert total is not None
    assert len(hits) == total["n"] > 5
    assert all(t.metadata.get("api_key") == canary.API_KEY for t in hits)
    dump = pg_dump(postgres_server, postgres_url)
    config_canaries = {
        "api_key": [canary.API_KEY.encode()],
        "run_id": [canary.RUN_ID.encode()],
        **canary.state_canaries(),
    }
    assert canary.leaks(dump, config_canaries, hex_too=True) == set()
    # The key the user left plaintext is there: the search can find what it looks for.
    assert dump.count(b'"tenant": "acme"') == total["n"]


# --------------------------------------------------------------------------------------------
# Filters: the same checkpoints as the stock saver with plaintext metadata


def _clear(conn: psycopg.Connection[Any]) -> None:
    conn.execute("DELETE FROM checkpoints")
    conn.execute("DELETE FROM checkpoint_blobs")
    conn.execute("DELETE FROM checkpoint_writes")


def _stock_results(conn: psycopg.Connection[Any]) -> dict[Any, Any]:
    """What the stock saver's filters return over PUTS, globally and per thread; then cleared."""
    stock = StockSaver(conn, serde=serde())
    stock.setup()
    for row in PUTS:
        put(stock, *row)
    expected: dict[tuple[int, str | None], list[tuple[str, int]]] = {}
    for n, flt in enumerate(FILTERS):
        expected[n, None] = found(stock.list(None, filter=flt))
        for thread in ("t1", "t3"):
            expected[n, thread] = found(stock.list(config_of(thread), filter=flt))
    _clear(conn)
    return expected


def test_filters_match_the_stock_saver(postgres_url: str) -> None:
    with saver_connection(postgres_url) as conn:
        expected = _stock_results(conn)
        ours = PostgresSaver(conn, serde=serde(), **OPTIONS)
        for row in PUTS:
            put(ours, *row)
        for n, flt in enumerate(FILTERS):
            assert found(ours.list(None, filter=flt)) == expected[n, None], flt
            for thread in ("t1", "t3"):
                got = found(ours.list(config_of(thread), filter=flt))
                assert got == expected[n, thread], flt
        assert expected[FILTERS.index({"user_id": "u1"}), None] == [("t1", 1), ("t2", 3), ("t3", 4)]
        with pytest.raises(ConfigurationError, match="api_key"):
            list(ours.list(None, filter={"api_key": "sk-t1-1"}))
    raw = stored(postgres_url, "t1", 1)
    assert set(raw) == {
        "source",
        "step",
        "parents",
        "tenant",
        SEALED_METADATA_KEY,
        INDEX_METADATA_KEY,
    }
    assert "'u1'" not in str(raw[INDEX_METADATA_KEY])  # quoted: a token may hold the letters


async def test_async_filters_match_the_stock_saver(postgres_url: str) -> None:
    with saver_connection(postgres_url) as conn:
        expected = _stock_results(conn)
    async with AsyncPostgresSaver.from_conn_string(postgres_url, serde=serde(), **OPTIONS) as ours:
        for row in PUTS:
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"x": [row[4]]}
            checkpoint["channel_versions"] = {"x": row[4]}
            config: RunnableConfig = {
                "configurable": {
                    "thread_id": row[0],
                    "checkpoint_ns": "",
                    "tenant": row[2],
                    "user_id": row[3],
                    "api_key": f"sk-{row[0]}-{row[4]}",
                }
            }
            metadata: CheckpointMetadata = {"source": row[1], "step": row[4], "parents": {}}
            await ours.aput(config, checkpoint, metadata, {"x": 1})
        for n, flt in enumerate(FILTERS):
            assert found([t async for t in ours.alist(None, filter=flt)]) == expected[n, None]
            for thread in ("t1", "t3"):
                got = found([t async for t in ours.alist(config_of(thread), filter=flt)])
                assert got == expected[n, thread], flt


def test_rotated_keyring_still_matches_old_rows(postgres_url: str) -> None:
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
        old = PostgresSaver(conn, serde=serde(KEY_A), **OPTIONS)
        put(old, "t-old", "input", "acme", "u1", 1)
        # B promoted; A still readable: a filter is an OR over both index keys.
        new = PostgresSaver(conn, serde=serde(KEY_B, KEY_A), **OPTIONS)
        put(new, "t-new", "input", "acme", "u1", 2)
        assert found(new.list(None, filter={"user_id": "u1"})) == [("t-new", 2), ("t-old", 1)]
        # A saver that only knows B cannot open A's rows, nor match them.
        only_b = PostgresSaver(conn, serde=serde(KEY_B), **OPTIONS)
        assert found(only_b.list(config_of("t-new"), filter={"user_id": "u1"})) == [("t-new", 2)]
    tokens = {
        stored(postgres_url, t, s)[INDEX_METADATA_KEY]["user_id"]
        for t, s in [("t-old", 1), ("t-new", 2)]
    }
    assert len(tokens) == 2  # the same value, under two index keys


# --------------------------------------------------------------------------------------------
# Tampering


@contextmanager
def _two_rows(url: str) -> Iterator[PostgresSaver]:
    """A saver holding the threads "victim" and "other", one checkpoint each, for tampering."""
    with saver_connection(url) as conn:
        # Unbound: `overwrite` strips the record seal (see there).
        saver = PostgresSaver(conn, serde=serde(), migration=Migration(unbound=True), **OPTIONS)
        saver.setup()
        put(saver, "victim", "input", "acme", "u1", 1)
        put(saver, "other", "input", "acme", "u2", 2)
        yield saver


def test_metadata_rewrite_fails_the_record_seal_first(postgres_url: str) -> None:
    with _two_rows(postgres_url) as saver:
        strict = PostgresSaver(saver.conn, serde=serde(), **OPTIONS)
        victim, other = stored(postgres_url, "victim", 1), stored(postgres_url, "other", 2)
        other[INDEX_METADATA_KEY] = victim[INDEX_METADATA_KEY]
        with saver_connection(postgres_url) as conn:
            conn.execute(
                "UPDATE checkpoints SET metadata = %s WHERE thread_id = 'other'", (Jsonb(other),)
            )
        assert strict.get_tuple(config_of("victim")) is not None
        with pytest.raises(BindingError, match="checkpoint row"):
            strict.get_tuple(config_of("other"))
        with pytest.raises(BindingError, match="checkpoint row"):
            saver.get_tuple(config_of("other"))  # a present seal is checked under unbound too


def test_index_moved_to_another_row_is_refused(postgres_url: str) -> None:
    with _two_rows(postgres_url) as saver:
        victim, other = stored(postgres_url, "victim", 1), stored(postgres_url, "other", 2)
        # Make "other" match the victim's filter by copying the victim's token.
        other[INDEX_METADATA_KEY] = victim[INDEX_METADATA_KEY]
        overwrite(postgres_url, "other", 2, other)
        assert saver.get_tuple(config_of("victim")) is not None
        with pytest.raises(BlindIndexError, match="does not match") as caught:
            list(saver.list(None, filter={"user_id": "u1"}))
        assert caught.value.key == "user_id"
        with pytest.raises(BlindIndexError):
            saver.get_tuple(config_of("other"))


def test_index_without_its_value_is_refused(postgres_url: str) -> None:
    with _two_rows(postgres_url) as saver:
        other = stored(postgres_url, "other", 2)
        other[INDEX_METADATA_KEY] = {**other[INDEX_METADATA_KEY], "nonexistent": "x"}
        overwrite(postgres_url, "other", 2, other)
        with pytest.raises(BlindIndexError, match="no sealed value"):
            saver.get_tuple(config_of("other"))


def test_sealed_entry_deleted_is_refused(postgres_url: str) -> None:
    with _two_rows(postgres_url) as saver:
        victim = stored(postgres_url, "victim", 1)
        del victim[SEALED_METADATA_KEY]
        overwrite(postgres_url, "victim", 1, victim)
        with pytest.raises(BlindIndexError, match="without a sealed entry"):
            saver.get_tuple(config_of("victim"))
        del victim[INDEX_METADATA_KEY]
        overwrite(postgres_url, "victim", 1, victim)
        with pytest.raises(MetadataDowngradeError, match="removed or bypassed"):
            saver.get_tuple(config_of("victim"))


def test_sealed_key_rewritten_in_plaintext_is_refused(postgres_url: str) -> None:
    with _two_rows(postgres_url) as saver:
        victim = stored(postgres_url, "victim", 1)
        victim["api_key"] = "sk-attacker"
        overwrite(postgres_url, "victim", 1, victim)
        with pytest.raises(MetadataDowngradeError) as caught:
            saver.get_tuple(config_of("victim"))
        assert caught.value.keys == ("api_key",)
    # Under the migration switch, the sealed value still wins.
    with saver_connection(postgres_url) as conn:
        migrating = PostgresSaver(
            conn,
            serde=serde(),
            migration=Migration(plaintext_metadata=True, unbound=True),
            **OPTIONS,
        )
        tup = migrating.get_tuple(config_of("victim"))
        assert tup is not None
        assert tup.metadata.get("api_key") == "sk-victim-1"


def test_unbound_entry_naming_another_row_is_refused() -> None:
    """An entry sealed without a location (a plain serde) is still tied to its row by name."""
    sealer = MetadataSealer.from_options(**OPTIONS)
    assert sealer is not None
    sealer = sealer.with_keys(serde(), None)
    config: Any = {"configurable": {"thread_id": "victim", "checkpoint_ns": ""}}
    metadata: Any = {"source": "input", "step": 1, "parents": {}, "api_key": "sk-v"}
    _, stored_metadata = sealer.seal(serde(), config, metadata, "c1")
    opener = MetadataOpener(sealer, Migration(unbound=True))
    assert opener.open(serde(), stored_metadata, ("victim", "", "c1")).get("api_key") == "sk-v"
    with pytest.raises(MetadataMovedError, match="another checkpoint"):
        opener.open(serde(), stored_metadata, ("other", "", "c1"))


def test_sealed_entry_moved_to_another_row_is_refused(postgres_url: str) -> None:
    with _two_rows(postgres_url) as saver:
        victim, other = stored(postgres_url, "victim", 1), stored(postgres_url, "other", 2)
        # The whole entry and its index: every check but the row binding passes.
        other[SEALED_METADATA_KEY] = victim[SEALED_METADATA_KEY]
        other[INDEX_METADATA_KEY] = victim[INDEX_METADATA_KEY]
        overwrite(postgres_url, "other", 2, other)
        # Bound to its row's metadata location, the entry fails its own tag there
        # before its row name (`MetadataMovedError`, for unbound serdes) is read.
        with pytest.raises(BindingError, match="at its metadata row"):
            saver.get_tuple(config_of("other"))


# --------------------------------------------------------------------------------------------
# Configuration


def test_options_are_checked_before_connecting() -> None:
    nowhere = "postgresql://127.0.0.1:1/nothing"
    opening = PostgresSaver.from_conn_string(
        nowhere, plaintext_metadata=["a"], indexed_metadata=["a"]
    )
    with pytest.raises(ConfigurationError, match="only sealed keys"), opening:
        pass
    with pytest.raises(ConfigurationError, match="only sealed keys"):
        MetadataSealer.from_options(indexed_metadata=["step"])
    with pytest.raises(ConfigurationError, match="seal_metadata=False"):
        MetadataSealer.from_options(seal_metadata=False, indexed_metadata=["a"])
    with pytest.raises(ConfigurationError, match="letters, digits"):
        MetadataSealer.from_options(indexed_metadata=["a') OR 1=1 --"])
    assert MetadataSealer.from_options(seal_metadata=False) is None


# --------------------------------------------------------------------------------------------
# SQLite: the stock SqliteSaver's json_extract filter, on the index entry


def test_sqlite_filter_matches_the_index(tmp_path: Path) -> None:
    sealer = MetadataSealer.from_options(**OPTIONS)
    assert sealer is not None
    sealer = sealer.with_keys(serde(KEY_B, KEY_A), None)
    writer = MetadataSealer.from_options(**OPTIONS)
    assert writer is not None
    writer_a = writer.with_keys(serde(KEY_A), None)
    path = tmp_path / "index.sqlite"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "CREATE TABLE checkpoints (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT,"
            " metadata BLOB)"
        )
        for n, (thread, source, tenant, user, step) in enumerate(PUTS):
            use = writer_a if n % 2 else sealer  # rows under both index keys
            config: RunnableConfig = {
                "configurable": {
                    "thread_id": thread,
                    "checkpoint_ns": "",
                    "tenant": tenant,
                    "user_id": user,
                }
            }
            _, metadata = use.seal(
                serde(KEY_B, KEY_A), config, {"source": source, "step": step}, str(step)
            )
            conn.execute(
                "INSERT INTO checkpoints VALUES (?, '', ?, ?)",
                (thread, str(step), json.dumps(metadata).encode()),
            )
        conn.commit()

        def steps(config: Any, flt: dict[str, Any]) -> list[int]:
            where, params = sqlite_search_where(config, sealer.plan_filter(flt))
            # ``where`` is built from fixed fragments; values travel as parameters.
            sql = "SELECT checkpoint_id FROM checkpoints " + where + " ORDER BY checkpoint_id"  # noqa: S608
            return [int(r[0]) for r in conn.execute(sql, params)]

        assert steps(None, {"user_id": "u1"}) == [1, 3, 4]
        assert steps(None, {"user_id": 7.0}) == [5]
        assert steps(None, {"user_id": "u1", "tenant": "globex"}) == [4]
        assert steps(config_of("t1"), {"user_id": "u1"}) == [1]
        assert steps(None, {"source": "loop"}) == [2, 4, 5]
        assert steps(None, {"user_id": "nobody"}) == []
