"""The inner stores of the SealedStore matrix: one storage per kind, stores opened on it, raw rows.

Issue 26 asks for InMemoryStore, SqliteStore (a real file), PostgresStore and AsyncPostgresStore
(the real PostgreSQL of tests/fixtures_services.py). A `StoreEnv` is one fresh storage of one
kind: ``env.store(sealed=...)`` is the inner store alone (bare) or ``SealedStore(inner)`` on the
same rows, and ``env.call(store, "put", ...)`` drives it through its sync helpers or, for the
async lane, through the ``a``-prefixed twins on one event loop. Below any wrapper, ``rows()``,
``write_row()`` and ``delete_row()`` touch the stored rows themselves (SQL, or the in-memory
store's dicts), and ``at_rest()`` is everything the storage holds, for canary scans.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from langgraph.store.base import BaseStore, Item
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
from langgraph.store.sqlite import SqliteStore

from secure_serde.sealing import SealedStore
from tests.fixtures_services import PostgresServer, pg_dump
from tests.serdes_support import env_serde

KEY = b"sealed-store-matrix-key-01234567"
OTHER_KEY = b"sealed-store-matrix-other-key-01"
LANES = ("memory", "sqlite", "postgres", "apostgres")
RESERVED = ("__secure_serde_store__",)


class StoreEnv:
    """One fresh storage of one kind, with stores opened on it and raw access to its rows."""

    def __init__(
        self,
        lane: str,
        tmp_path: Path,
        server: PostgresServer | None,
        url: str | None,
        index: dict[str, Any] | None = None,
    ) -> None:
        self.lane = lane
        self.tmp_path = tmp_path
        self.server = server
        self.url = url
        self.index = index
        self._stack = contextlib.ExitStack()
        self._loop = asyncio.new_event_loop() if lane == "apostgres" else None
        self.inner = self._open_inner()

    def _open_inner(self) -> BaseStore:
        if self.lane == "memory":
            return InMemoryStore(index=self.index)  # type: ignore[arg-type]
        if self.lane == "sqlite":
            conn = sqlite3.connect(
                str(self.tmp_path / "store.sqlite"), check_same_thread=False, isolation_level=None
            )
            self._stack.callback(conn.close)
            store = SqliteStore(conn, index=self.index)  # type: ignore[arg-type]
            store.setup()
            return store
        assert self.url is not None
        if self.lane == "postgres":
            pg = self._stack.enter_context(PostgresStore.from_conn_string(self.url))
            pg.setup()
            return pg
        assert self._loop is not None
        cm = AsyncPostgresStore.from_conn_string(self.url)
        apg = self._loop.run_until_complete(cm.__aenter__())
        self._stack.callback(lambda: self.run(cm.__aexit__(None, None, None)))
        self.run(apg.setup())
        return apg

    def run(self, coro: Any) -> Any:
        assert self._loop is not None
        return self._loop.run_until_complete(coro)

    def store(
        self,
        *,
        sealed: bool,
        key: bytes = KEY,
        indexed: Sequence[str] = (),
        searchable: Sequence[str] = (),
    ) -> BaseStore:
        if not sealed:
            return self.inner
        return SealedStore(
            self.inner, serde=env_serde(key), indexed_fields=indexed, searchable_fields=searchable
        )

    def call(self, store: BaseStore, method: str, *args: Any, **kwargs: Any) -> Any:
        """``store.<method>(...)``, or ``await store.a<method>(...)`` on the async lane."""
        if self._loop is None:
            return getattr(store, method)(*args, **kwargs)
        return self.run(getattr(store, "a" + method)(*args, **kwargs))

    def close(self) -> None:
        self._stack.close()
        if self._loop is not None:
            self._loop.close()

    # -- below any wrapper ---------------------------------------------------------------

    def rows(self) -> dict[tuple[tuple[str, ...], str], dict[str, Any]]:
        """Every stored item's value as the storage keeps it, by (namespace, key)."""
        if self.lane == "memory":
            data = self.inner._data  # type: ignore[attr-defined]
            return {
                (ns, k): dict(item.value) for ns, items in data.items() for k, item in items.items()
            }
        out = {}
        for prefix, key, value in self._sql("SELECT prefix, key, value FROM store"):
            loaded = json.loads(value) if isinstance(value, (str, bytes)) else value
            out[(tuple(prefix.split(".")), key)] = loaded
        return out

    def write_row(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        """Insert or overwrite a stored row's value, with no store in between."""
        if self.lane == "memory":
            now = datetime.now(UTC)
            data = self.inner._data  # type: ignore[attr-defined]
            data[namespace][key] = Item(
                value=value, key=key, namespace=namespace, created_at=now, updated_at=now
            )
            return
        prefix, text = ".".join(namespace), json.dumps(value)
        if self.lane == "sqlite":
            self._sql(
                "INSERT INTO store (prefix, key, value) VALUES (?, ?, ?) ON CONFLICT (prefix, key)"
                " DO UPDATE SET value = excluded.value",
                (prefix, key, text),
            )
        else:
            self._sql(
                "INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s::jsonb)"
                " ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value",
                (prefix, key, text),
            )

    def delete_row(self, namespace: tuple[str, ...], key: str) -> None:
        if self.lane == "memory":
            del self.inner._data[namespace][key]  # type: ignore[attr-defined]
            return
        query = "DELETE FROM store WHERE prefix = ? AND key = ?"
        if self.lane != "sqlite":
            query = query.replace("?", "%s")
        self._sql(query, (".".join(namespace), key))

    def ttl_rows(self) -> dict[tuple[str, str], Any]:
        """(prefix, key) -> ttl_minutes of the SQL stores (TTL is not in InMemoryStore)."""
        return {
            (prefix, key): ttl
            for prefix, key, ttl in self._sql("SELECT prefix, key, ttl_minutes FROM store")
            if prefix != RESERVED[0]
        }

    def expire_all(self) -> None:
        """Move every expiry into the past, so the store's own sweep removes the items."""
        if self.lane == "sqlite":
            self._sql(
                "UPDATE store SET expires_at = datetime('now', '-1 hour')"
                " WHERE expires_at IS NOT NULL"
            )
        else:
            self._sql(
                "UPDATE store SET expires_at = NOW() - interval '1 hour'"
                " WHERE expires_at IS NOT NULL"
            )

    def sweep(self) -> int:
        if self.lane == "apostgres":
            return int(self.run(self.inner.sweep_ttl()))  # type: ignore[attr-defined]
        return int(self.inner.sweep_ttl())  # type: ignore[attr-defined]

    def _sql(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self.lane == "sqlite":
            with contextlib.closing(sqlite3.connect(str(self.tmp_path / "store.sqlite"))) as conn:
                cur = conn.execute(query, tuple(params))
                rows = cur.fetchall()
                conn.commit()
                return rows
        assert self.url is not None
        with psycopg.connect(self.url, autocommit=True) as conn:
            pg_cur = conn.execute(query.encode(), tuple(params))
            return pg_cur.fetchall() if pg_cur.description else []

    def at_rest(self) -> bytes:
        """Everything the storage keeps: the SQLite file, a pg_dump, or the in-memory dicts."""
        if self.lane == "memory":
            inner = self.inner
            return (repr(inner._data) + repr(inner._vectors)).encode()  # type: ignore[attr-defined]
        if self.lane == "sqlite":
            base = self.tmp_path / "store.sqlite"
            return b"".join(
                p.read_bytes() for p in (base, base.with_name(base.name + "-wal")) if p.exists()
            )
        assert self.server is not None
        assert self.url is not None
        return pg_dump(self.server, self.url)


EnvFactory = Callable[..., StoreEnv]


@contextlib.contextmanager
def envs(lane: str, tmp_path: Path, request: Any) -> Iterator[EnvFactory]:
    """Makes fresh storages of ``lane`` (a new file or database each), closed afterwards."""
    made: list[StoreEnv] = []
    count = [0]

    def make(index: dict[str, Any] | None = None) -> StoreEnv:
        server = url = None
        if lane in ("postgres", "apostgres"):
            server = request.getfixturevalue("postgres_server")
            url = _new_database(server)
        count[0] += 1
        folder = tmp_path / f"env{count[0]}"
        folder.mkdir(parents=True)
        env = StoreEnv(lane, folder, server, url, index)
        made.append(env)
        return env

    try:
        yield make
    finally:
        for env in made:
            env.close()


def _new_database(server: PostgresServer) -> str:
    import uuid

    from psycopg import sql

    name = f"store_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.url(name)


def comparable(result: Any) -> Any:
    """A store result without timestamps (they differ between two stores by nature)."""
    if isinstance(result, Item):
        return (tuple(result.namespace), result.key, result.value)
    if isinstance(result, list):
        return [comparable(r) for r in result]
    return result
