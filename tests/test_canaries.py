"""Canaries: run a graph that holds a recognisable value in every kind of state, then grep the
store's raw bytes for them.

The graph (tests/canary_support.py) has str, int, float, bool, list, dict and message channels,
an ``interrupt()`` value and its resume value, a subgraph with its own state and a
``DeltaChannel``. PostgreSQL is checked through ``pg_dump`` (text and the hex it writes for
bytea), SQLite through the database file's bytes. Each "nothing found" test has a twin showing
the same search does find canaries in a store written without our protection.

The sealed savers are `secure_serde.savers`' (`SealedSaver` around the stock ones). Metadata
keys stay visible by design (their values are sealed, or blind-index tokens, unless named in
``plaintext_metadata``); the tests pin exactly which keys are there, and SECURITY.md lists the
same keys.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from psycopg.rows import dict_row

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers.postgres import AsyncPostgresSaver, PostgresSaver
from secure_serde.savers.sqlite import AsyncSqliteSaver as SealedAsyncSqliteSaver
from secure_serde.savers.sqlite import SqliteSaver as SealedSqliteSaver
from tests import canary_support as canary
from tests.fixtures_services import PostgresServer, pg_dump

KEY = b"canary-tests-key-0123456789abcde"
SUFFIX = b"+aesgcm"
# pg_dump writes bytea as hex: how a sealed cell's header, which names its cipher, shows there.
HEX_SUFFIX = SUFFIX.hex().encode()

# What a LangGraph 1.2 run of the canary graph leaves in the plaintext metadata (SECURITY.md,
# "What stays plaintext at rest", states the same lists). The first four are langgraph's own
# (the counters only in graphs with a DeltaChannel). "run_id" is copied from config["metadata"],
# "api_key" and "tenant" from config["configurable"], as is every str/int/float/bool there.
LANGGRAPH_METADATA_KEYS = ["counters_since_delta_snapshot", "parents", "source", "step"]
COPIED_FROM_CONFIG = ["api_key", "run_id", "tenant"]
DEFAULT_PLAINTEXT_METADATA = sorted(LANGGRAPH_METADATA_KEYS + COPIED_FROM_CONFIG)
# The sealed savers' metadata keys: langgraph's and run_id (all but "parents" as blind-index
# tokens, secure_serde.sealing.DEFAULT_INDEXED_METADATA), the sealed entry of every other key,
# and on the store identity's own row its entry.
SEALED_METADATA_KEY = "__secure_serde__"
IDENTITY_METADATA_KEY = "__secure_serde_store__"
IDENTITY_THREAD = "__secure_serde_store__"
SEALED_PLAINTEXT_METADATA = sorted(
    [*LANGGRAPH_METADATA_KEYS, "run_id", SEALED_METADATA_KEY, IDENTITY_METADATA_KEY]
)
# The config canaries: values langgraph copies from config into every checkpoint's metadata.
CONFIG_CANARIES = {"api_key": [canary.API_KEY.encode()], "run_id": [canary.RUN_ID.encode()]}

# What the stock PostgresSaver leaks even with our EncryptedSerializer: the primitive channels
# it keeps inline (top level and subgraph), the resume value among them.
STOCK_POSTGRES_LEAKS = {
    canary.STR,
    canary.RESUME,
    canary.SUBGRAPH,
    "int",
    "float",
    "sub_int",
    "inline-bool",
    "inline-int",
    "inline-float",
}


def serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY))


def every_canary() -> dict[str, list[bytes]]:
    return {**canary.state_canaries(), **canary.inline_json_patterns()}


def postgres_metadata_keys(url: str) -> list[str]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        found = conn.execute(
            "SELECT DISTINCT jsonb_object_keys(metadata) AS k FROM checkpoints"
        ).fetchall()
    return sorted(r["k"] for r in found)


def assert_graph_stored_everything(url: str, dump: bytes) -> None:
    """The store is not trivially clean: the run wrote the subgraph, delta writes and blobs."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        namespaces = conn.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints").fetchall()
        delta_writes = conn.execute(
            "SELECT count(*) AS n FROM checkpoint_writes WHERE channel = 'deltas'"
        ).fetchone()
    assert any(r["checkpoint_ns"].startswith("child:") for r in namespaces)
    assert delta_writes is not None
    assert delta_writes["n"] >= 4
    assert dump.count(HEX_SUFFIX) >= 40


# --------------------------------------------------------------------------------------------
# PostgreSQL


@pytest.fixture
def migrated(postgres_url: str) -> str:
    with psycopg.connect(postgres_url, autocommit=True, row_factory=dict_row) as conn:
        StockPostgresSaver(conn).setup()
    return postgres_url


async def _run_ours(url: str, *, is_async: bool, **options: Any) -> None:
    if is_async:
        async with AsyncPostgresSaver.from_conn_string(url, serde=serde(), **options) as saver:
            await saver.asetup()
            graph = canary.build_canary_graph(saver)
            canary.check_final_state(await canary.run_async(graph, "canary"))
    else:
        with PostgresSaver.from_conn_string(url, serde=serde(), **options) as sync_saver:
            sync_saver.setup()
            graph = canary.build_canary_graph(sync_saver)
            canary.check_final_state(canary.run_sync(graph, "canary"))


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_postgres_dump_holds_no_canary_at_all(
    postgres_server: PostgresServer, migrated: str, is_async: bool
) -> None:
    await _run_ours(migrated, is_async=is_async)
    dump = pg_dump(postgres_server, migrated)
    assert_graph_stored_everything(migrated, dump)
    # Metadata is sealed by default: configurable values are not in the dump either.
    config_canaries = {**CONFIG_CANARIES, "tenant": [b'"acme"']}
    assert canary.leaks(dump, {**every_canary(), **config_canaries}, hex_too=True) == set()
    assert postgres_metadata_keys(migrated) == SEALED_PLAINTEXT_METADATA


async def test_postgres_plaintext_metadata_dump_shows_those_keys(
    postgres_server: PostgresServer, migrated: str
) -> None:
    """Keys named in ``plaintext_metadata`` are kept in the clear: the search finds them, and
    still no state canary."""
    await _run_ours(migrated, is_async=False, plaintext_metadata=COPIED_FROM_CONFIG)
    dump = pg_dump(postgres_server, migrated)
    assert canary.leaks(dump, every_canary(), hex_too=True) == set()
    assert canary.leaks(dump, CONFIG_CANARIES) == set(CONFIG_CANARIES)
    assert postgres_metadata_keys(migrated) == sorted(
        {*SEALED_PLAINTEXT_METADATA, *COPIED_FROM_CONFIG}
    )


def test_stock_postgres_saver_dump_shows_canaries(
    postgres_server: PostgresServer, migrated: str
) -> None:
    """The same search on the stock saver with the same serde: the inline values show."""
    with psycopg.connect(migrated, autocommit=True, row_factory=dict_row) as conn:
        graph = canary.build_canary_graph(StockPostgresSaver(conn, serde=serde()))
        canary.check_final_state(canary.run_sync(graph, "canary"))
    dump = pg_dump(postgres_server, migrated)
    assert canary.leaks(dump, every_canary(), hex_too=True) == STOCK_POSTGRES_LEAKS


def test_unencrypted_serde_dump_shows_every_canary(
    postgres_server: PostgresServer, migrated: str
) -> None:
    """Without encryption every canary is found: the values kept in blobs only by the hex search
    (the sealed savers take no unencrypted serializer, so this is the stock saver)."""
    with psycopg.connect(migrated, autocommit=True, row_factory=dict_row) as conn:
        saver = StockPostgresSaver(conn, serde=JsonPlusSerializer())
        canary.check_final_state(canary.run_sync(canary.build_canary_graph(saver), "canary"))
    dump = pg_dump(postgres_server, migrated)
    assert canary.leaks(dump, canary.state_canaries(), hex_too=True) == set(canary.state_canaries())
    in_blobs = set(canary.state_canaries()) - STOCK_POSTGRES_LEAKS
    assert in_blobs
    assert canary.leaks(dump, canary.state_canaries()) & in_blobs == set()


# --------------------------------------------------------------------------------------------
# SQLite


def store_bytes(directory: Path) -> bytes:
    """The database file and any journal or WAL beside it."""
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


def sqlite_metadata_keys(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        found = conn.execute(
            "SELECT DISTINCT j.key FROM checkpoints, json_each(checkpoints.metadata) AS j"
        ).fetchall()
    return sorted(r[0] for r in found)


def _run_sqlite(path: Path, saver_serde: Any) -> None:
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        graph = canary.build_canary_graph(SqliteSaver(conn, serde=saver_serde))
        canary.check_final_state(canary.run_sync(graph, "canary"))
        namespaces = {r[0] for r in conn.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints")}
        assert any(ns.startswith("child:") for ns in namespaces)


def test_sqlite_file_holds_no_state_canary(tmp_path: Path) -> None:
    path = tmp_path / "store" / "canary.sqlite"
    path.parent.mkdir()
    _run_sqlite(path, serde())
    raw = store_bytes(path.parent)
    assert raw.count(SUFFIX) >= 40
    assert canary.leaks(raw, canary.state_canaries()) == set()
    # SQLite keeps metadata as plaintext JSON too, configurable values included.
    assert sqlite_metadata_keys(path) == DEFAULT_PLAINTEXT_METADATA
    assert canary.API_KEY.encode() in raw


def test_sqlite_file_without_encryption_shows_every_canary(tmp_path: Path) -> None:
    path = tmp_path / "store" / "canary.sqlite"
    path.parent.mkdir()
    _run_sqlite(path, JsonPlusSerializer())
    raw = store_bytes(path.parent)
    assert canary.leaks(raw, canary.state_canaries()) == set(canary.state_canaries())


# The sealed SQLite savers: config canaries sealed too, by default and with an index.
# The store identity's row is not a checkpoint of the graph.


async def _run_sealed_sqlite(path: Path, *, is_async: bool, **options: Any) -> tuple[bytes, int]:
    """Run the canary graph; the store's bytes while the saver is open (WAL included), and
    how many checkpoints an indexed filter on the API key finds."""
    if is_async:
        async with SealedAsyncSqliteSaver.from_conn_string(
            str(path), serde=serde(), **options
        ) as saver:
            canary.check_final_state(await canary.run_async(canary.build_canary_graph(saver), "c"))
            hits = [t async for t in saver.alist(None, filter=_api_key_filter(options))]
            raw, files = store_bytes(path.parent), _files(path)
    else:
        with SealedSqliteSaver.from_conn_string(str(path), serde=serde(), **options) as sync:
            canary.check_final_state(canary.run_sync(canary.build_canary_graph(sync), "c"))
            hits = list(sync.list(None, filter=_api_key_filter(options)))
            raw, files = store_bytes(path.parent), _files(path)
    assert f"{path.name}-wal" in files  # the write-ahead log was grepped too
    assert all(dict(t.metadata)["api_key"] == canary.API_KEY for t in hits)
    return raw, len(hits)


def _files(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()}


def _api_key_filter(options: dict[str, Any]) -> dict[str, Any]:
    return {"api_key": canary.API_KEY} if options else {}


def _sqlite_checkpoints(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        namespaces = {r[0] for r in conn.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints")}
        assert any(ns.startswith("child:") for ns in namespaces)
        (count,) = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id <> ?", (IDENTITY_THREAD,)
        ).fetchone()
        return int(count)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_sealed_sqlite_file_holds_no_config_canary(tmp_path: Path, is_async: bool) -> None:
    """Canaries in configurable and config["metadata"]: only the key left plaintext shows."""
    path = tmp_path / "store" / "canary.sqlite"
    path.parent.mkdir()
    options = {"plaintext_metadata": ["tenant"], "indexed_metadata": ["api_key"]}
    raw, hits = await _run_sealed_sqlite(path, is_async=is_async, **options)
    after = store_bytes(path.parent)
    total = _sqlite_checkpoints(path)
    assert hits == total > 5  # the index finds every checkpoint, by a value it never stores
    for data in (raw, after):
        assert data.count(SUFFIX) >= 40
        assert canary.leaks(data, {**canary.state_canaries(), **CONFIG_CANARIES}) == set()
    # api_key as a blind-index token; tenant left in plaintext.
    assert sqlite_metadata_keys(path) == sorted([*SEALED_PLAINTEXT_METADATA, "api_key", "tenant"])
    # The key the user left plaintext is there: the search finds what it looks for.
    assert after.count(b'"tenant": "acme"') == total


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_sealed_sqlite_seals_metadata_by_default(tmp_path: Path, is_async: bool) -> None:
    path = tmp_path / "store" / "canary.sqlite"
    path.parent.mkdir()
    raw, _ = await _run_sealed_sqlite(path, is_async=is_async)
    config_canaries = {**CONFIG_CANARIES, "tenant": [b'"acme"']}
    for data in (raw, store_bytes(path.parent)):
        assert canary.leaks(data, {**canary.state_canaries(), **config_canaries}) == set()
    _sqlite_checkpoints(path)
    assert sqlite_metadata_keys(path) == SEALED_PLAINTEXT_METADATA


async def test_sealed_sqlite_plaintext_metadata_shows_those_keys(tmp_path: Path) -> None:
    """``plaintext_metadata``: the same search finds the config canaries, state stays sealed."""
    path = tmp_path / "store" / "canary.sqlite"
    path.parent.mkdir()
    await _run_sealed_sqlite(path, is_async=False, plaintext_metadata=COPIED_FROM_CONFIG)
    raw = store_bytes(path.parent)
    assert canary.leaks(raw, canary.state_canaries()) == set()
    assert canary.leaks(raw, CONFIG_CANARIES) == set(CONFIG_CANARIES)
    assert sqlite_metadata_keys(path) == sorted({*SEALED_PLAINTEXT_METADATA, *COPIED_FROM_CONFIG})
