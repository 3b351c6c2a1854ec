"""Where tenant keys are kept: one table, in a SQLite file or a PostgreSQL database of its own.

The table (``secure_serde_tenant_keys``) holds one row per tenant key and one
per thread key::

    tenant       TEXT     the tenant id, as the application names it
    scope        TEXT     '' for the tenant's key; 'thread:' + thread id for a thread's
    key_id       TEXT     32 hex digits, random; bound into the wrapped key's associated data
    cipher_name  TEXT     the cipher name the wrapped key is stored under ('aesgcm', 'kms')
    wrapped      BLOB     the wrapped key, or NULL once shredded (the row is the tombstone)
    created      TEXT     ISO 8601
    shredded     TEXT     ISO 8601, or NULL

A tenant key is wrapped under the serializer's primary key; a thread key
under its tenant's key (secure_serde/sealing/_tenants.py). A row is never
deleted: a shredded key keeps its row, with ``wrapped`` NULL, so that the
key is never created again and reads say "shredded", not "unknown".

SQLite runs with ``secure_delete`` on, so a shredded key's bytes are
overwritten in the file rather than left in a free page. PostgreSQL keeps
old row versions until they are vacuumed: a shred runs ``VACUUM`` on the
table. Neither reaches copies made earlier (backups, replicas, WAL
archives): docs/tenants.md says what backup policy the key store needs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import astuple, dataclass, field
from typing import Any, Final

from secure_serde._errors import ConfigurationError

__all__ = ["TABLE", "KeyRow", "KeyTable", "open_table"]

TABLE: Final = "secure_serde_tenant_keys"
TENANT_SCOPE: Final = ""
THREAD_PREFIX: Final = "thread:"
_PG_SCHEMES: Final = ("postgresql://", "postgres://")
_DDL: Final = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    key_id TEXT NOT NULL,
    cipher_name TEXT NOT NULL,
    wrapped BLOB,
    created TEXT NOT NULL,
    shredded TEXT,
    PRIMARY KEY (tenant, scope)
)
"""
_COLUMNS: Final = "tenant, scope, key_id, cipher_name, wrapped, created, shredded"


@dataclass(frozen=True)
class KeyRow:
    """One stored key, a tenant's (``scope`` empty) or a thread's; ``wrapped`` None if shredded."""

    tenant: str
    scope: str
    key_id: str
    cipher_name: str
    wrapped: bytes | None = field(repr=False)
    created: str
    shredded: str | None

    @property
    def thread(self) -> str | None:
        return self.scope[len(THREAD_PREFIX) :] if self.scope.startswith(THREAD_PREFIX) else None


def _row(values: Any) -> KeyRow:
    tenant, scope, key_id, cipher_name, wrapped, created, shredded = values
    return KeyRow(
        str(tenant),
        str(scope),
        str(key_id),
        str(cipher_name),
        None if wrapped is None else bytes(wrapped),
        str(created),
        None if shredded is None else str(shredded),
    )


class KeyTable:
    """The key table, in SQLite or PostgreSQL: statements written once, with SQLite's ``?``."""

    def __init__(self, db: Any, kind: str, mark: str, after_shred: str) -> None:
        self._db, self._kind, self._mark, self._after_shred = db, kind, mark, after_shred
        self._lock = threading.Lock()
        self._run(_DDL.replace("BLOB", "BYTEA") if kind == "postgresql" else _DDL)

    def _run(self, sql: str, params: tuple[object, ...] = ()) -> Any:
        """The rows a statement returns, or the count of rows it changed."""
        with self._lock:
            cursor = self._db.execute(sql.replace("?", self._mark), params)
            return cursor.fetchall() if cursor.description else cursor.rowcount

    def _select(self, where: str, params: tuple[object, ...] = ()) -> list[KeyRow]:
        sql = f"SELECT {_COLUMNS} FROM {TABLE} WHERE {where}"  # noqa: S608 - where: written here
        return [_row(r) for r in self._run(sql, params)]

    def get(self, tenant: str, scope: str) -> KeyRow | None:
        found = self._select("tenant = ? AND scope = ?", (tenant, scope))
        return found[0] if found else None  # (tenant, scope) is the key: one row at most

    def insert(self, row: KeyRow) -> None:
        """Insert ``row`` unless a row of that tenant and scope exists (which is kept)."""
        self._run(
            f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"  # noqa: S608
            " ON CONFLICT (tenant, scope) DO NOTHING",
            astuple(row),  # the fields in _COLUMNS' order
        )

    def shred(self, tenant: str, scope: str, when: str) -> None:
        """Null the wrapped key of that row (and, for a tenant, of all its thread keys)."""
        self._run(
            f"UPDATE {TABLE} SET wrapped = NULL, shredded = COALESCE(shredded, ?)"  # noqa: S608
            " WHERE tenant = ? AND (scope = ? OR ? = '')",
            (when, tenant, scope, scope),
        )
        # SQLite: a WAL, if the file has one, is folded back and emptied too.
        self._run(self._after_shred)

    def swap(self, tenant: str, scope: str, old: bytes, new: bytes, cipher_name: str) -> bool:
        """Replace a wrapped key if it is still ``old``; whether it was."""
        changed = self._run(
            f"UPDATE {TABLE} SET wrapped = ?, cipher_name = ?"  # noqa: S608
            " WHERE tenant = ? AND scope = ? AND wrapped = ?",
            (new, cipher_name, tenant, scope, old),
        )
        return bool(changed == 1)

    def rows(self, scope: str) -> Iterator[KeyRow]:
        return iter(self._select("scope = ? ORDER BY tenant", (scope,)))

    def shredded(self) -> Iterator[KeyRow]:
        return iter(self._select("wrapped IS NULL ORDER BY tenant, scope"))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"KeyTable({self._kind})"


def open_table(location: object) -> KeyTable:
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not isinstance(location, str) or not location:
        raise ConfigurationError("TenantKeys.open takes a SQLite file path or a postgresql:// URL")
    if location.startswith(_PG_SCHEMES):
        try:
            import psycopg
        except ImportError:  # pragma: no cover - the postgres extra
            raise ConfigurationError(
                "a PostgreSQL tenant key store needs psycopg: pip install 'secure_serde[postgres]'"
            ) from None
        return KeyTable(
            psycopg.connect(location, autocommit=True), "postgresql", "%s", f"VACUUM {TABLE}"
        )
    import sqlite3  # here: the postgres extra alone never imports it (test_import_light)

    db = sqlite3.connect(location, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 10000")
    db.execute("PRAGMA secure_delete = ON")
    return KeyTable(db, "sqlite", "?", "PRAGMA wal_checkpoint(TRUNCATE)")
