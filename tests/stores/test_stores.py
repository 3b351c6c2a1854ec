"""The store layer on real SQLite files and a real PostgreSQL: discovery, pages, swaps."""

from __future__ import annotations

import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from secure_serde import SecureSerdeError
from secure_serde.stores import (
    ALL_THREADS,
    PostgresStore,
    SqliteStore,
    Store,
    StoreError,
    Swap,
    ThreadRange,
    open_store,
)
from secure_serde.stores._postgres import display_url
from tests.fixtures_services import saver_connection
from tests.passes.rewrap_support import (
    KEY_A,
    build_graph,
    postgres_graph,
    rotation_serde,
    run_turns,
    sqlite_graph,
)

SQLITE_KEYS = {
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id"),
    "writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
}
POSTGRES_KEYS = {
    "checkpoint_blobs": ("thread_id", "checkpoint_ns", "channel", "version"),
    "checkpoint_writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
}


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite"
    with sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        for thread in ("t1", "t2", "t3"):
            run_turns(graph, thread, 2)
    return path


@pytest.fixture
def pg_url(postgres_url: str) -> str:
    with postgres_graph(postgres_url, rotation_serde({"a": KEY_A}, "a")) as graph:
        for thread in ("t1", "t2", "t3"):
            run_turns(graph, thread, 2)
    return postgres_url


def _direct_sqlite(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(path) as conn:
        return {
            table: sorted(
                conn.execute(
                    f"SELECT {', '.join(key)}, type, {data} FROM {table}"  # noqa: S608
                ).fetchall()
            )
            for (table, key), data in zip(SQLITE_KEYS.items(), ("checkpoint", "value"), strict=True)
        }


@pytest.mark.parametrize("batch_size", [1, 3, 10_000])
def test_sqlite_pages_cover_every_row_once_in_key_order(sqlite_path: Path, batch_size: int) -> None:
    expected = _direct_sqlite(sqlite_path)
    with open_store(sqlite_path) as store:
        assert isinstance(store, SqliteStore)
        # The two tables of serialized values, nothing else (metadata is plain JSON).
        assert {t.name: t.key_columns for t in store.tables} == SQLITE_KEYS
        for table in store.tables:
            batches = list(store.iter_batches(table, batch_size))
            assert all(0 < len(b) <= batch_size for b in batches)
            got = [(*c.ref.key_values, c.type_tag, c.data) for b in batches for c in b]
            assert got == expected[table.name]  # already sorted: primary-key order
            assert store.count(table) == len(got)
        assert store.thread_ranges(4) == [ALL_THREADS]


def test_sqlite_thread_range_filters(sqlite_path: Path) -> None:
    with SqliteStore(sqlite_path) as store:
        inside = [c.ref.thread_id for c in store.iter_cells(2, ThreadRange("t2", "t3"))]
        assert set(inside) == {"t2"}
        assert store.count_all(ThreadRange("t2", "t3")) == len(inside)
        assert {c.ref.thread_id for c in store.iter_cells(5, ThreadRange(low="t2"))} == {"t2", "t3"}


def _cas_round(store: Store, change: Any) -> None:
    """Read two cells, change the first behind the store's back, swap both."""
    table = store.tables[-1]
    first, second = next(store.iter_batches(table, 2))
    change(first)
    result = store.compare_and_swap(
        [Swap(first, "msgpack+aesgcm", b"ours-1"), Swap(second, "msgpack+aesgcm", b"ours-2")]
    )
    assert result == [False, True]
    now_first, now_second = store.reload(first.ref), store.reload(second.ref)
    assert now_first is not None
    assert now_second is not None
    assert now_first.data == b"theirs"
    assert (now_second.type_tag, now_second.data) == ("msgpack+aesgcm", b"ours-2")
    # A swap based on a stale read of the second row is refused too.
    assert store.compare_and_swap([Swap(second, "x", b"stale")]) == [False]
    # Swapping from a fresh read works.
    assert store.compare_and_swap([Swap(now_first, "msgpack+aesgcm", b"fresh")]) == [True]
    fresh = store.reload(first.ref)
    assert fresh is not None
    assert fresh.data == b"fresh"


def test_sqlite_compare_and_swap_never_clobbers(sqlite_path: Path) -> None:
    def change(cell: Any) -> None:
        with sqlite3.connect(sqlite_path) as other:
            other.execute(
                "UPDATE writes SET value = ? WHERE thread_id = ? AND checkpoint_id = ?"
                " AND task_id = ? AND idx = ?",
                (b"theirs", cell.ref.thread_id, cell.ref.checkpoint_id, *cell.ref.key_values[3:]),
            )

    with SqliteStore(sqlite_path) as store:
        _cas_round(store, change)
        # A row deleted since it was read: nothing is swapped, nothing comes back.
        cell = next(store.iter_cells())
        with sqlite3.connect(sqlite_path) as other:
            other.execute(
                "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
                (cell.ref.thread_id, cell.ref.checkpoint_id),
            )
        assert store.compare_and_swap([Swap(cell, "x", b"y")]) == [False]
        assert store.reload(cell.ref) is None


def test_sqlite_text_planted_in_a_blob_column_is_still_a_cell(sqlite_path: Path) -> None:
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value) VALUES ('zz', '', 'c', 't', 0, 'ch', 'msgpack', 'some text')"
        )
    with SqliteStore(sqlite_path) as store:
        (cell,) = [c for c in store.iter_cells() if c.ref.thread_id == "zz"]
        assert cell.data == b"some text"
        assert store.compare_and_swap([Swap(cell, "msgpack+aesgcm", b"sealed")]) == [True]
        sealed = store.reload(cell.ref)
        assert sealed is not None
        assert sealed.data == b"sealed"


def test_sqlite_open_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(StoreError, match="no SQLite file"):
        open_store(missing)
    assert not missing.exists(), "opening must never create a store"
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        open_store(garbage)
    odd = tmp_path / "odd.sqlite"
    with sqlite3.connect(odd) as conn:
        conn.execute("CREATE TABLE writes (thread_id TEXT, something TEXT)")
    with pytest.raises(StoreError, match="lacks the stock columns"):
        open_store(odd)
    with pytest.raises(StoreError):
        open_store(42)  # type: ignore[arg-type]
    assert issubclass(StoreError, SecureSerdeError)


def test_sqlite_cas_waits_for_a_writer_instead_of_failing(sqlite_path: Path) -> None:
    # An application transaction holds the write lock briefly; the swap waits for it.
    blocker = sqlite3.connect(sqlite_path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    events: list[str] = []
    swapping = threading.Event()

    def release() -> None:
        swapping.wait()
        time.sleep(0.3)  # lets the swap reach the lock; what is checked is the order below
        events.append("commit")
        blocker.execute("COMMIT")

    with SqliteStore(sqlite_path) as store:
        cell = next(store.iter_cells())
        releaser = threading.Thread(target=release)
        releaser.start()
        swapping.set()
        assert store.compare_and_swap([Swap(cell, cell.type_tag or "", b"x")]) == [True]
        events.append("swapped")
        releaser.join()
    blocker.close()
    # The swap could not commit while the lock was held: it ended after the release began.
    assert events == ["commit", "swapped"]


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def test_postgres_discovery_and_pages(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        expected = {
            table: sorted(
                conn.execute(
                    f"SELECT {', '.join(key)}, type, blob FROM {table}"  # noqa: S608
                ).fetchall()
            )
            for table, key in POSTGRES_KEYS.items()
        }
    with open_store(pg_url) as store:
        assert isinstance(store, PostgresStore)
        # The two tables of serialized values, nothing else (metadata is plain JSONB).
        assert {t.name: t.key_columns for t in store.tables} == POSTGRES_KEYS
        for table in store.tables:
            got = [
                (*c.ref.key_values, c.type_tag, c.data)
                for b in store.iter_batches(table, 4)
                for c in b
            ]
            assert sorted(got) == expected[table.name]
            assert got == sorted(got, key=lambda row: row[: len(table.key_columns)])
        blob = next(store.iter_cells())
        assert blob.ref.checkpoint_id is None
        assert blob.ref.get("channel") is not None


def test_postgres_compare_and_swap_never_clobbers(pg_url: str) -> None:
    def change(cell: Any) -> None:
        where = " AND ".join(f"{name} = %s" for name, _ in cell.ref.key)
        with psycopg.connect(pg_url, autocommit=True) as other:
            other.execute(
                f"UPDATE {cell.ref.table} SET blob = %s WHERE {where}",  # noqa: S608
                (b"theirs", *cell.ref.key_values),
            )

    with PostgresStore(pg_url) as store:
        _cas_round(store, change)


def test_postgres_swap_gives_up_on_a_locked_row_instead_of_blocking(pg_url: str) -> None:
    with PostgresStore(pg_url) as store, psycopg.connect(pg_url) as holder:
        cell = next(store.iter_cells())
        where = " AND ".join(f"{name} = %s" for name, _ in cell.ref.key)
        holder.execute(
            f"SELECT 1 FROM {cell.ref.table} WHERE {where} FOR UPDATE",  # noqa: S608
            cell.ref.key_values,
        )
        # Were the swap to wait for the lock, the guard would free it (by closing the holder)
        # and the swap would then succeed: the test fails instead of hanging.
        guard = threading.Timer(60, holder.close)
        guard.start()
        try:
            assert store.compare_and_swap([Swap(cell, "x+aesgcm", b"new")]) == [False]
        finally:
            guard.cancel()
        # It gave up while the row was still locked: the holder's transaction is still open.
        assert holder.info.transaction_status == TransactionStatus.INTRANS
        holder.rollback()
        assert store.compare_and_swap([Swap(cell, "x+aesgcm", b"new")]) == [True]


def test_postgres_errors_never_show_the_password(postgres_server: Any) -> None:
    url = f"postgresql://postgres:s3cr3tpass@127.0.0.1:{postgres_server.port}/no_such_db"
    with pytest.raises(StoreError) as info:
        open_store(url)
    assert "s3cr3tpass" not in str(info.value)
    assert "no_such_db" in str(info.value)
    assert display_url("postgresql://u:pw@h:5/d?sslmode=disable") == "postgresql://u@h:5/d"


def test_postgres_without_langgraph_tables_is_refused(postgres_url: str) -> None:
    with pytest.raises(StoreError, match="no langgraph checkpoint tables"):
        open_store(postgres_url)


def test_shallow_saver_schema_is_read_from_the_catalog(postgres_url: str) -> None:
    from langgraph.checkpoint.postgres.shallow import ShallowPostgresSaver

    from secure_serde import rewrap

    serde = rotation_serde({"a": KEY_A}, "a")
    with saver_connection(postgres_url) as conn:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            saver = ShallowPostgresSaver(conn, serde=serde)
        saver.setup()
        graph = build_graph(saver)
        run_turns(graph, "s", 2)
        before = graph.get_state({"configurable": {"thread_id": "s"}})
        with open_store(postgres_url) as store:
            keys = {t.name: t.key_columns for t in store.tables}
        assert keys["checkpoint_blobs"] == ("thread_id", "checkpoint_ns", "channel")
        target = rotation_serde({"a": KEY_A, "b": "rotation-test-key-B-0123456789ab"}, "b")
        report = rewrap(postgres_url, target)
        assert report.ok
        assert report.rewrapped > 0
        saver.serde = target
        graph = build_graph(saver)
        assert graph.get_state({"configurable": {"thread_id": "s"}}).values == before.values
