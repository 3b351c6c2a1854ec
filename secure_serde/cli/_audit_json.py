"""What audit reads besides the serialized cells: the plaintext JSON columns of ``checkpoints``.

`secure_serde.stores` deliberately leaves these out (the serializer never
sees them): ``checkpoints.metadata`` in both stores, and, in PostgreSQL,
``checkpoints.checkpoint``, the JSONB where the stock saver inlines
``None``/``str``/``int``/``float``/``bool`` channel values. Key names and
channel names are counted by the database itself (``GROUP BY``), so memory
does not grow with the store and no value ever reaches this process. Our
sealed-metadata envelope (ciphertext) is a store cell
(``checkpoints.metadata``), audited with the others.

A value inline in ``channel_values`` is a leak unless a non-empty blob of
the same channel and version backs it: that is the ``true`` marker the stock
saver writes beside a ``DeltaChannel`` snapshot, and the test is the one
langgraph's own prune SQL uses to recognise such snapshots.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from secure_serde.stores import Store, StoreError

__all__ = ["InlineChannel", "JsonColumns", "MetadataKeys", "first_line"]

# Distinct metadata keys and inline channels listed; one more is fetched to
# tell whether there were more.
MAX_NAMES: Final = 1000
_LIMIT: Final = str(MAX_NAMES + 1)

_SQLITE_METADATA_ROWS: Final = """
SELECT count(*),
       coalesce(sum(CASE WHEN json_valid(CAST(metadata AS TEXT))
                          AND json_type(CAST(metadata AS TEXT)) = 'object' THEN 0 ELSE 1 END), 0)
FROM checkpoints
"""
_SQLITE_METADATA_KEYS: Final = """
SELECT j.key, count(*)
FROM (SELECT CAST(metadata AS TEXT) AS m FROM checkpoints
      WHERE json_valid(CAST(metadata AS TEXT)) AND json_type(CAST(metadata AS TEXT)) = 'object'
     ) AS c, json_each(c.m) AS j
GROUP BY j.key ORDER BY j.key LIMIT {limit}
"""
_PG_METADATA_ROWS: Final = """
SELECT count(*),
       count(*) FILTER (WHERE metadata IS NULL OR jsonb_typeof(metadata) <> 'object')
FROM checkpoints
"""
_PG_METADATA_KEYS: Final = """
SELECT k, count(*)
FROM checkpoints AS c
CROSS JOIN LATERAL jsonb_object_keys(
    CASE WHEN jsonb_typeof(c.metadata) = 'object' THEN c.metadata ELSE '{}'::jsonb END) AS k
GROUP BY k ORDER BY k LIMIT {limit}
"""
# Names of the blind-indexed (sealed) keys: the entries of __secure_serde_index__.
_PG_INDEXED_KEYS: Final = """
SELECT k, count(*)
FROM checkpoints AS c
CROSS JOIN LATERAL jsonb_object_keys(
    CASE WHEN jsonb_typeof(c.metadata -> '__secure_serde_index__') = 'object'
         THEN c.metadata -> '__secure_serde_index__' ELSE '{}'::jsonb END) AS k
GROUP BY k ORDER BY k LIMIT {limit}
"""
_SQLITE_INDEXED_KEYS: Final = """
SELECT j.key, count(*)
FROM (SELECT json_extract(CAST(metadata AS TEXT), '$.__secure_serde_index__') AS m
      FROM checkpoints
      WHERE json_valid(CAST(metadata AS TEXT))
        AND json_type(CAST(metadata AS TEXT), '$.__secure_serde_index__') = 'object'
     ) AS c, json_each(c.m) AS j
GROUP BY j.key ORDER BY j.key LIMIT {limit}
"""
_PG_INLINE: Final = """
SELECT v.key, array_agg(DISTINCT jsonb_typeof(v.value)), count(*), count(DISTINCT c.thread_id)
FROM checkpoints AS c
CROSS JOIN LATERAL jsonb_each(
    CASE WHEN jsonb_typeof(c.checkpoint -> 'channel_values') = 'object'
         THEN c.checkpoint -> 'channel_values' ELSE '{}'::jsonb END) AS v
{backed}
GROUP BY 1 ORDER BY 1 LIMIT {limit}
"""
# A non-empty blob of the same channel (and version, where blobs have one) backs the value.
_PG_BACKED: Final = """
WHERE NOT EXISTS (
    SELECT 1 FROM checkpoint_blobs AS b
    WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
      AND b.channel = v.key AND b.type <> 'empty' {version})
"""
_PG_BACKED_VERSION: Final = "AND b.version = c.checkpoint -> 'channel_versions' ->> v.key"


@dataclass(frozen=True)
class MetadataKeys:
    """Key names of the metadata JSON and in how many checkpoints each appears."""

    checkpoints: int
    not_objects: int
    counts: dict[str, int]
    truncated: bool = False
    # Sealed keys with a blind index (secure_serde/savers/_blind_index.py), by name.
    indexed: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class InlineChannel:
    """A channel with values inline in the checkpoint JSONB: counts and JSON types, no values."""

    channel: str
    checkpoints: int
    threads: int
    json_types: tuple[str, ...]


class JsonColumns:
    """A read-only connection of its own to ``store``, for the JSON columns."""

    def __init__(self, store: Store) -> None:
        self._kind = store.kind
        self._display = store.display
        self._blobs = next((t for t in store.tables if t.name == "checkpoint_blobs"), None)
        self._conn: Any
        if store.kind == "postgres":
            import psycopg

            try:
                self._conn = psycopg.connect(store.location, autocommit=True)
                # Belt and braces: nothing here writes, and now nothing can.
                self._conn.execute("SET default_transaction_read_only = on")
            except psycopg.Error as exc:
                raise StoreError(f"cannot connect to {self._display}: {first_line(exc)}") from None
            self._error: type[Exception] = psycopg.Error
        else:
            uri = f"{Path(store.location).resolve().as_uri()}?mode=ro"
            try:
                self._conn = sqlite3.connect(uri, uri=True)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open {self._display}: {exc}") from None
            self._error = sqlite3.Error
        self.has_checkpoints = self._has_checkpoints()

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return list(self._conn.execute(sql, params).fetchall())
        except self._error as exc:
            raise StoreError(f"reading {self._display} failed: {first_line(exc)}") from None

    def _has_checkpoints(self) -> bool:
        if self._kind == "postgres":
            return self._query("SELECT to_regclass('checkpoints') IS NOT NULL")[0][0] is True
        found = self._query(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", ("checkpoints",)
        )
        return bool(found)

    def metadata_keys(self) -> MetadataKeys:
        if not self.has_checkpoints:
            return MetadataKeys(0, 0, {})
        if self._kind == "postgres":
            count_sql, keys_sql = _PG_METADATA_ROWS, _PG_METADATA_KEYS
            indexed_sql = _PG_INDEXED_KEYS
        else:
            count_sql, keys_sql = _SQLITE_METADATA_ROWS, _SQLITE_METADATA_KEYS
            indexed_sql = _SQLITE_INDEXED_KEYS
        total, not_objects = self._query(count_sql)[0]
        rows = self._query(keys_sql.replace("{limit}", _LIMIT))
        counts = {str(k): int(n) for k, n in rows[:MAX_NAMES]}
        indexed_rows = self._query(indexed_sql.replace("{limit}", _LIMIT))
        indexed = {str(k): int(n) for k, n in indexed_rows[:MAX_NAMES]}
        truncated = len(rows) > MAX_NAMES or len(indexed_rows) > MAX_NAMES
        return MetadataKeys(int(total), int(not_objects), counts, truncated, indexed)

    def inline_channels(self) -> list[InlineChannel] | None:
        """Channels with unbacked values inline in the checkpoint JSON; ``None`` for SQLite.

        SQLite keeps the whole checkpoint in one serialized cell, so it has
        no such column.
        """
        if self._kind != "postgres":
            return None
        if not self.has_checkpoints:
            return []
        backed = ""
        if self._blobs is not None:
            # The shallow saver keeps one blob per channel, with no version column.
            keyed = "version" in self._blobs.key_columns
            backed = _PG_BACKED.replace("{version}", _PG_BACKED_VERSION if keyed else "")
        # replace(), not format(): the SQL holds JSON braces.
        sql = _PG_INLINE.replace("{backed}", backed).replace("{limit}", _LIMIT)
        return [
            InlineChannel(str(channel), int(checkpoints), int(threads), tuple(sorted(types)))
            for channel, types, checkpoints, threads in self._query(sql)[:MAX_NAMES]
        ]

    def close(self) -> None:
        self._conn.close()


def first_line(exc: BaseException) -> str:
    # Driver messages may quote SQL on later lines; the first names the failure.
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
