"""`V03Reader` returns exactly what 0.3's sealed savers return, and refuses what they refuse.

Stores are written now with 0.3's savers (``V03SqliteSaver``, ``V03PostgresSaver``) by
tests/stores/v03_support.py, then read by both: every `CheckpointTuple` must be equal, tuple for
tuple (``list``, ``get_tuple``, ``before``/``limit``, subgraph namespaces, delta history), under
the strict default and under a `Migration`; each tampered row must raise the same error class.
These tests go with the 0.3 savers; the frozen stores (tests/vectors/v03_*) stay.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.serde.types import TASKS
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver
from langgraph.types import Send

from secure_serde import MetadataDowngradeError, Migration
from secure_serde.stores import V03Reader
from tests.fixtures_services import saver_connection
from tests.stores.v03_support import (
    INDEXED,
    LENIENT,
    THREADS,
    serde,
    v03_postgres,
    v03_sqlite,
    write_scenario,
    write_stock_thread,
)

Saver = BaseCheckpointSaver[Any]


def cfg(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def outcome(call: Callable[[], Any]) -> Any:
    """What a read returns, or the class of the error it raises."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return type(exc)


def reads(saver: Saver, keys: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Every read the comparison makes, each as its result or its error class."""
    found: dict[str, Any] = {"list": outcome(lambda: list(saver.list(None)))}
    for thread in sorted({k[0] for k in keys}):
        found[f"latest {thread}"] = outcome(partial(saver.get_tuple, cfg(thread)))
        found[f"list {thread}"] = outcome(partial(_listed, saver, cfg(thread), None))
    for key in keys:
        found[f"get {key}"] = outcome(partial(saver.get_tuple, cfg(*key)))
        found[f"before {key}"] = outcome(partial(_listed, saver, cfg(key[0], key[1]), cfg(*key)))
    return found


def _listed(saver: Saver, config: RunnableConfig, before: RunnableConfig | None) -> Any:
    if before is None:
        return list(
            saver.list({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
        )
    return list(saver.list(config, before=before, limit=2))


def _history(saver: Saver, config: RunnableConfig) -> Any:
    return dict(saver.get_delta_channel_history(config=config, channels=["log", "step"]))


def delta_reads(saver: Saver, keys: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {
        str(key): outcome(partial(_history, saver, cfg(*key)))
        for key in keys
        if key[0] == "delta-1"
    }


def sqlite_keys(path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints ORDER BY 1, 2, 3"
        ).fetchall()


def postgres_keys(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints ORDER BY 1, 2, 3"
        ).fetchall()


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("v03") / "v03.sqlite"
    with v03_sqlite(str(path)) as saver:
        write_scenario(saver)
    with sqlite3.connect(path, check_same_thread=False) as conn:
        stock = StockSqliteSaver(conn, serde=serde())
        write_stock_thread(stock)
    return path


def setup_postgres(url: str) -> None:
    with saver_connection(url) as conn:
        StockPostgresSaver(conn).setup()


@pytest.fixture
def postgres_store(postgres_url: str) -> str:
    setup_postgres(postgres_url)
    with v03_postgres(postgres_url) as saver:
        write_scenario(saver)
    with saver_connection(postgres_url) as conn:
        write_stock_thread(StockPostgresSaver(conn, serde=serde()))
    return postgres_url


@contextmanager
def sqlite_pair(path: Path, **options: Any) -> Iterator[tuple[Saver, Saver]]:
    migration = options.get("migration")
    with (
        v03_sqlite(str(path), **options) as old,
        V03Reader(path, serde=serde(migration), **{"indexed_metadata": INDEXED, **options}) as new,
    ):
        yield old, new


@contextmanager
def postgres_pair(url: str, **options: Any) -> Iterator[tuple[Saver, Saver]]:
    migration = options.get("migration")
    with (
        v03_postgres(url, **options) as old,
        V03Reader(url, serde=serde(migration), **{"indexed_metadata": INDEXED, **options}) as new,
    ):
        yield old, new


UNBOUND: Final = Migration(unbound=True)
OPTIONS: Final[dict[str, dict[str, Any]]] = {
    "strict": {},
    "unbound only": {"migration": UNBOUND},
    "lenient": {"migration": LENIENT},
    "viewer": {"seal_metadata": False, "indexed_metadata": None},
    "viewer, lenient": {"seal_metadata": False, "indexed_metadata": None, "migration": LENIENT},
}


def assert_same(old: Saver, new: Saver, keys: list[tuple[str, str, str]]) -> dict[str, Any]:
    expected = reads(old, keys)
    assert reads(new, keys) == expected
    assert delta_reads(new, keys) == delta_reads(old, keys)
    return expected


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_sqlite_reads_are_those_of_the_0_3_saver(sqlite_store: Path, options: str) -> None:
    keys = sqlite_keys(sqlite_store)
    with sqlite_pair(sqlite_store, **OPTIONS[options]) as (old, new):
        expected = assert_same(old, new, keys)
    ok = [k for k, v in expected.items() if not isinstance(v, type)]
    assert len(ok) > 3 * len(THREADS)
    assert isinstance(expected["latest stock-1"], type) is ("lenient" not in options)
    if options == "unbound only":  # the stock thread's metadata is not sealed
        assert expected["latest stock-1"] is MetadataDowngradeError


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_postgres_reads_are_those_of_the_0_3_saver(postgres_store: str, options: str) -> None:
    keys = postgres_keys(postgres_store)
    with postgres_pair(postgres_store, **OPTIONS[options]) as (old, new):
        expected = assert_same(old, new, keys)
    assert {"", "child:"} <= {k[1].split("|")[0][:6] for k in keys}  # a subgraph namespace
    assert isinstance(expected["latest stock-1"], type) is ("lenient" not in options)


# --- tampering: the same refusal, class for class ----------------------------------------


def sqlite_tamper(path: Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(path) as conn:
        assert conn.execute(sql, params).rowcount >= 1


def newest(keys: list[tuple[str, str, str]], thread: str, ns: str = "") -> str:
    return [k[2] for k in keys if k[0] == thread and k[1] == ns][-1]


def oldest(keys: list[tuple[str, str, str]], thread: str, ns: str = "") -> str:
    return next(k[2] for k in keys if k[0] == thread and k[1] == ns)


SQLITE_TAMPERS: Final[dict[str, str]] = {
    "write moved to another checkpoint": (
        "UPDATE writes SET checkpoint_id = :other WHERE thread_id = 'review-2'"
        " AND checkpoint_id = :newest"
    ),
    "re-parented": "UPDATE checkpoints SET parent_checkpoint_id = :other"
    " WHERE thread_id = 'review-2' AND checkpoint_id = :newest",
    "plaintext metadata edited": "UPDATE checkpoints SET metadata ="
    " json_set(metadata, '$.step', 99) WHERE thread_id = 'review-2' AND checkpoint_id = :newest",
    "sealed metadata stripped": "UPDATE checkpoints SET metadata ="
    " json_remove(metadata, '$.__secure_serde_sealed__') WHERE thread_id = 'review-2'"
    " AND checkpoint_id = :newest",
    "sealed metadata swapped": "UPDATE checkpoints SET metadata = json_set(metadata,"
    " '$.__secure_serde_sealed__', (SELECT json_extract(metadata, '$.__secure_serde_sealed__')"
    " FROM checkpoints WHERE thread_id = 'review-2' AND checkpoint_id = :other))"
    " WHERE thread_id = 'review-2' AND checkpoint_id = :newest",
    "write relabelled": "UPDATE writes SET type = 'msgpack' WHERE thread_id = 'review-2'"
    " AND checkpoint_id = :newest",
    "metadata not JSON": "UPDATE checkpoints SET metadata = X'7B7B'"
    " WHERE thread_id = 'review-2' AND checkpoint_id = :newest",
    "checkpoint from another thread": "UPDATE checkpoints SET (type, checkpoint) ="
    " (SELECT type, checkpoint FROM checkpoints WHERE thread_id = 'review-1'"
    " ORDER BY checkpoint_id DESC LIMIT 1) WHERE thread_id = 'review-2'"
    " AND checkpoint_id = :newest",
}


@pytest.mark.parametrize("tamper", SQLITE_TAMPERS)
def test_sqlite_tampering_is_refused_alike(sqlite_store: Path, tmp_path: Path, tamper: str) -> None:
    path = tmp_path / "tampered.sqlite"
    path.write_bytes(sqlite_store.read_bytes())
    keys = sqlite_keys(path)
    with sqlite3.connect(path) as conn:
        done = conn.execute(
            SQLITE_TAMPERS[tamper],
            {"newest": newest(keys, "review-2"), "other": oldest(keys, "review-2")},
        )
        assert done.rowcount >= 1
    for options in ({}, {"migration": UNBOUND}, {"migration": LENIENT}):
        with sqlite_pair(path, **options) as (old, new):
            expected = reads(old, keys)
            assert reads(new, keys) == expected
        if not options:
            assert any(isinstance(v, type) for v in expected.values()), tamper


def postgres_tamper(url: str, sql: str, params: dict[str, Any]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(sql, params).rowcount >= 1


POSTGRES_TAMPERS: Final[dict[str, str]] = {
    "record seal stripped": "UPDATE checkpoints SET checkpoint = checkpoint"
    " - '__secure_serde_record__' WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "channel re-pointed": "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint,"
    " '{channel_versions,messages}', (SELECT checkpoint -> 'channel_versions' -> 'messages'"
    " FROM checkpoints WHERE thread_id = 'review-2' AND checkpoint_id = %(older)s))"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "re-parented": "UPDATE checkpoints SET parent_checkpoint_id = %(other)s"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "parent cut (pruning's null)": "UPDATE checkpoints SET parent_checkpoint_id = NULL"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "sealed metadata swapped": "UPDATE checkpoints SET metadata = jsonb_set(metadata,"
    " '{__secure_serde_sealed__}', (SELECT metadata -> '__secure_serde_sealed__'"
    " FROM checkpoints WHERE thread_id = 'review-2' AND checkpoint_id = %(older)s))"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "plaintext metadata key planted": "UPDATE checkpoints SET metadata = metadata"
    " || '{\"team\": \"red\"}' WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "inline value planted": "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint,"
    " '{channel_values,verdict}', '\"approved\"') WHERE thread_id = 'review-2'"
    " AND checkpoint_id = %(newest)s",
    "blob moved to another version": "UPDATE checkpoint_blobs SET version = version || 'x'"
    " WHERE thread_id = 'review-2' AND channel = 'messages'",
    "write moved to another task": "UPDATE checkpoint_writes SET task_id = task_id || 'x'"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "index token replaced": "UPDATE checkpoints SET metadata = jsonb_set(metadata,"
    " '{__secure_serde_index__,user_id}', (SELECT metadata -> '__secure_serde_index__'"
    " -> 'user_id' FROM checkpoints WHERE thread_id = 'review-1' LIMIT 1))"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    # With the seal gone, Migration(unbound=True) reaches the metadata checks themselves.
    "seal stripped, index token replaced": "UPDATE checkpoints SET checkpoint = checkpoint"
    " - '__secure_serde_record__', metadata = jsonb_set(metadata,"
    " '{__secure_serde_index__,user_id}', (SELECT metadata -> '__secure_serde_index__'"
    " -> 'user_id' FROM checkpoints WHERE thread_id = 'review-1' LIMIT 1))"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "seal stripped, sealed metadata removed": "UPDATE checkpoints SET checkpoint = checkpoint"
    " - '__secure_serde_record__', metadata = metadata - '__secure_serde_sealed__'"
    " - '__secure_serde_index__' || '{\"team\": \"red\"}'"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
    "seal stripped, index without entry": "UPDATE checkpoints SET checkpoint = checkpoint"
    " - '__secure_serde_record__', metadata = metadata - '__secure_serde_sealed__'"
    " WHERE thread_id = 'review-2' AND checkpoint_id = %(newest)s",
}


@pytest.mark.parametrize("tamper", POSTGRES_TAMPERS)
def test_postgres_tampering_is_refused_alike(postgres_store: str, tamper: str) -> None:
    keys = postgres_keys(postgres_store)
    postgres_tamper(
        postgres_store,
        POSTGRES_TAMPERS[tamper],
        {
            "newest": newest(keys, "review-2"),
            "older": [k[2] for k in keys if k[0] == "review-2" and not k[1]][-2],
            "other": oldest(keys, "review-2"),
        },
    )
    for options in ({}, {"migration": UNBOUND}, {"migration": LENIENT}):
        with postgres_pair(postgres_store, **options) as (old, new):
            expected = reads(old, keys)
            assert reads(new, keys) == expected
        if not options and tamper != "parent cut (pruning's null)":
            assert any(isinstance(v, type) for v in expected.values()), tamper


def test_postgres_pending_sends_of_old_checkpoints_read_alike(postgres_url: str) -> None:
    """A ``v < 4`` checkpoint takes its parent's sends (langgraph's migration), as in 0.3."""
    setup_postgres(postgres_url)
    with v03_postgres(postgres_url) as saver:
        first = empty_checkpoint()
        parent = saver.put(cfg("sends"), first, {"source": "input", "step": -1}, {})
        saver.put_writes(parent, [(TASKS, Send("node", {"n": 1}))], "task-1")
        second = empty_checkpoint()
        saver.put(parent, second, {"source": "loop", "step": 0}, {})
    keys = postgres_keys(postgres_url)
    for options in ({}, {"migration": LENIENT}):
        with postgres_pair(postgres_url, **options) as (old, new):
            expected = reads(old, keys)
            assert reads(new, keys) == expected
    assert isinstance(expected[f"get {keys[-1]}"], type)
    assert TASKS == "__pregel_tasks"  # the literal channel of the reader's SQL


# --- the frozen stores are what their generators (0.3's savers) write ----------------------

ROOT: Final = Path(__file__).resolve().parents[2]


def test_the_sqlite_vector_is_what_make_vector_writes(tmp_path: Path) -> None:
    """tests/vectors/v03_sqlite_store.sqlite has the shape tests.savers.test_adopt gives."""
    from tests.savers.test_adopt import VECTOR

    fresh = tmp_path / "fresh.sqlite"
    subprocess.run(
        [sys.executable, "-m", "tests.savers.test_adopt", str(fresh)], cwd=ROOT, check=True
    )

    def shape(path: Path) -> list[tuple[Any, ...]]:
        with sqlite3.connect(path) as conn:
            return conn.execute(
                "SELECT thread_id, checkpoint_ns, type, length(checkpoint) > 0"
                " FROM checkpoints ORDER BY checkpoint_id"
            ).fetchall()

    assert shape(fresh) == shape(VECTOR)


def test_the_postgres_vector_is_what_make_vector_writes(tmp_path: Path) -> None:
    """tests/vectors/v03_postgres_store.sql has the shape its generator gives."""
    from tests.stores.test_v03_postgres_vector import VECTOR

    fresh = tmp_path / "fresh.sql"
    subprocess.run(
        [sys.executable, "-m", "tests.stores.test_v03_postgres_vector", str(fresh)],
        cwd=ROOT,
        check=True,
    )

    def shape(path: Path) -> list[tuple[str, str]]:
        inserts = [line for line in path.read_text().splitlines() if line.startswith("INSERT")]
        # Table and thread of each row; ids, versions and ciphertexts are fresh each run.
        return sorted((line.split()[2], [*line.split("'"), ""][1]) for line in inserts)

    assert shape(fresh) == shape(VECTOR)
