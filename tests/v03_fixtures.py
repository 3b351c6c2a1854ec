"""The frozen stores secure_serde 0.3 wrote (tests/vectors/v03/), for tests of the tools that
still read that layout (inspect, adopt) and of those that refuse it (audit, rewrap).

0.3's savers are gone, so nothing can write these stores any more; a test takes a fresh copy
(`sqlite_copy`, `load_postgres`), keeping only the threads it needs, and damages the copy where
it must. `history` is what LangGraph's own ``get_state_history`` said of a thread when it was
written, the oracle for what inspect shows. tests/vectors/v03/README.md lists the threads and
the saver options each was written with.
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from collections.abc import Collection
from functools import cache
from pathlib import Path
from typing import Any, Final

from psycopg.types.json import Jsonb

from secure_serde import EncryptedSerializer
from tests import canary_support as canary
from tests.fixtures_services import saver_connection
from tests.passes.rewrap_support import KEY_A, rotation_serde

VECTORS: Final = Path(__file__).resolve().parent / "vectors" / "v03"
SQLITE_STORE: Final = VECTORS / "store.sqlite"
POSTGRES_ROWS: Final = VECTORS / "postgres.json"
# The only key the stores were written under (a test key, committed with them), as the
# KeyRotationCipher label "a".
KEY: Final = KEY_A
# Threads of the chat graph (tests/passes/rewrap_support.py) written with the default metadata
# policy, 3 turns each, the last left at its interrupt.
CHAT_THREADS: Final = ("t0", "t1", "t2", "t3")
# Threads langgraph's stock saver wrote (same serializer, so encrypted but bound to no row),
# 2 turns each, before any of 0.3's threads.
STOCK_THREADS: Final = ("stock-1", "stock-2")
# The API key copied from config into the metadata of threads m1..m3 and indexed-1.
API_KEY: Final = "sk-sealed-api-key-0123456789"
_SQLITE_TABLES: Final = ("checkpoints", "writes")


def serde() -> EncryptedSerializer:
    """The serializer the stores were written with."""
    return rotation_serde({"a": KEY}, "a")


def sqlite_copy(dest: Path, threads: Collection[str]) -> Path:
    """A copy of the SQLite store at ``dest`` holding only ``threads``' rows."""
    shutil.copy(SQLITE_STORE, dest)
    marks = ", ".join("?" for _ in threads)
    with sqlite3.connect(dest) as conn:
        for table in _SQLITE_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE thread_id NOT IN ({marks})", tuple(threads))  # noqa: S608
        kept = {row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    conn.close()
    missing = set(threads) - kept
    assert not missing, f"no such thread in {SQLITE_STORE.name}: {sorted(missing)}"
    return dest


@cache
def _postgres_tables() -> dict[str, Any]:
    tables: dict[str, Any] = json.loads(POSTGRES_ROWS.read_text())["tables"]
    return tables


def load_postgres(url: str, threads: Collection[str]) -> None:
    """Create the stock schema in the (empty) database at ``url`` and insert ``threads``' rows."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with saver_connection(url) as conn:
        PostgresSaver(conn).setup()
        loaded: set[str] = set()
        for table, dump in _postgres_tables().items():
            columns, types = dump["columns"], dump["types"]
            thread_at = columns.index("thread_id")
            rows = [
                tuple(_decode(kind, value) for kind, value in zip(types, row, strict=True))
                for row in dump["rows"]
                if row[thread_at] in threads
            ]
            loaded.update(row[thread_at] for row in rows)
            insert = (
                f"INSERT INTO {table} ({', '.join(columns)})"  # noqa: S608
                f" VALUES ({', '.join('%s' for _ in columns)})"
            )
            with conn.cursor() as cursor:
                cursor.executemany(insert, rows)
    missing = set(threads) - loaded
    assert not missing, f"no such thread in {POSTGRES_ROWS.name}: {sorted(missing)}"


def _decode(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "bytea":
        return base64.b64decode(value)
    if kind == "jsonb":
        return Jsonb(value)
    return value


@cache
def _histories() -> dict[str, Any]:
    histories: dict[str, Any] = json.loads((VECTORS / "histories.json").read_text())
    return histories


def history(backend: str, thread_id: str) -> list[dict[str, Any]]:
    """LangGraph's history of the root namespace of ``thread_id`` in the ``backend`` ("sqlite"
    or "postgres") store, newest first, as JSON: checkpoint_id, parent_checkpoint_id, next
    (sorted), metadata and values."""
    entries: list[dict[str, Any]] = _histories()[backend][thread_id]
    return entries


def assert_shown(entries: list[dict[str, Any]], history: list[dict[str, Any]]) -> None:
    """``secure-serde inspect --json``'s checkpoints equal ``history`` (in `history`'s form),
    entry by entry: ids, parents, ``next``, metadata and values, each DeltaChannel folded by
    its reducer."""
    assert [e["checkpoint_id"] for e in entries] == [s["checkpoint_id"] for s in history]
    reducers = {"deltas": canary._extend}
    for entry, snapshot in zip(entries, history, strict=True):
        assert entry["error"] is None
        assert sorted(entry["next"]) == snapshot["next"], entry["checkpoint_id"]
        assert entry["metadata"] == snapshot["metadata"]
        shown = dict(entry["values"])
        for channel, delta in entry["delta_channels"].items():
            shown[channel] = reducers[channel](delta["seed"] or [], delta["writes"])
        want = snapshot["values"]
        # A reducer channel never written holds its empty default, which only the graph knows.
        assert all(want[k] == [] for k in set(want) - set(shown))
        assert shown == {k: v for k, v in want.items() if k in shown}
        assert entry["step"] == snapshot["metadata"]["step"]
        assert entry["parent_checkpoint_id"] == snapshot["parent_checkpoint_id"]
