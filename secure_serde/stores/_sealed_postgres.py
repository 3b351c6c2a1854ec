"""`SealedPostgresStore`: the rows `SealedSaver` over langgraph's ``PostgresSaver`` writes.

The layout is described in secure_serde/stores/_sealed.py. Blobs and
writes are swapped as the stock layout's (type and bytes, compare-and-swap);
a record or identity cell is swapped inside the ``metadata`` JSONB with
``jsonb_set`` on its one key, while that key still holds the text read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Final

from secure_serde.stores._base import SEALED_STORE_THREAD, Cell, RowRef, StoreError, Swap, TableSpec
from secure_serde.stores._postgres import _COLUMNS_SQL, _PK_SQL, PostgresStore, _Statements
from secure_serde.stores._sealed import (
    IDENTITY_KEY,
    RECORD_KEY,
    RECORDS,
    SealedLayout,
    SealedRow,
    entry_key,
)

with contextlib.suppress(ImportError):  # PostgresStore refuses first without the extra
    from psycopg import sql

__all__ = ["SealedPostgresStore"]

_BLOB_KEY: Final = ("thread_id", "checkpoint_ns", "channel", "version")
_WRITE_KEY: Final = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
_CHECKPOINT_KEY: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")


class _RecordStatements(_Statements):
    """The SQL of `RECORDS`: every checkpoints row, and its one sealed metadata key."""

    def __init__(self) -> None:  # no super().__init__: only first and page are shared
        keys = [sql.Identifier(c) for c in _CHECKPOINT_KEY]
        cols = sql.SQL(", ").join(keys)
        where_key = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(k) for k in keys)
        entry = sql.SQL(
            "CASE WHEN thread_id = {} THEN metadata -> {} ELSE metadata -> {} END"
        ).format(
            sql.Literal(SEALED_STORE_THREAD), sql.Literal(IDENTITY_KEY), sql.Literal(RECORD_KEY)
        )
        self.only: sql.Composable = sql.SQL("TRUE")
        self._select = sql.SQL("SELECT {}, {} FROM checkpoints").format(cols, entry)
        self._cols = cols
        self._marks = sql.SQL(", ").join(sql.Placeholder() for _ in keys)
        self.reload = sql.SQL("{} WHERE {}").format(self._select, where_key)
        # Only that key changes, and only while it still holds the text read.
        self.swap = sql.SQL(
            "UPDATE checkpoints SET metadata = jsonb_set(metadata, ARRAY[%s::text],"
            " to_jsonb(%s::text)) WHERE {} AND metadata ->> %s::text = %s::text RETURNING 1"
        ).format(where_key)

    def swap_params(self, swap: Swap) -> tuple[Any, ...]:
        cell = swap.cell
        key = entry_key(cell.ref.thread_id)
        if cell.data is None or cell.type_tag != key or swap.new_type != key:
            raise StoreError(f"{cell.ref} holds no sealed text to replace")
        return (
            key,
            swap.new_data.decode("utf-8"),
            *cell.ref.key_values,
            key,
            cell.data.decode("utf-8"),
        )


class SealedPostgresStore(SealedLayout, PostgresStore):
    """A PostgreSQL database `SealedSaver` over langgraph's ``PostgresSaver`` wrote."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        statements: dict[str, Any] = {
            spec.name: _Statements(spec) for spec in self.tables if spec.name != RECORDS
        }
        statements[RECORDS] = _RecordStatements()
        self._sql = statements

    def _discover(self) -> tuple[TableSpec, ...]:
        specs = []
        wanted = (("checkpoint_blobs", _BLOB_KEY), ("checkpoint_writes", _WRITE_KEY))
        for name, key_wanted in wanted:
            columns = {r[0] for r in self._conn.execute(_COLUMNS_SQL, (name,)).fetchall()}
            key = tuple(r[0] for r in self._conn.execute(_PK_SQL, (name,)).fetchall())
            if key != key_wanted or not {"type", "blob"} <= columns:
                raise StoreError(
                    f"{name} in {self.display} is not the table langgraph's PostgresSaver"
                    " creates (the shallow saver's layout is not read here)"
                )
            extras = ("channel",) if name == "checkpoint_writes" else ()
            specs.append(TableSpec(name, "type", "blob", key, extra_columns=extras))
        key = tuple(r[0] for r in self._conn.execute(_PK_SQL, ("checkpoints",)).fetchall())
        if key != _CHECKPOINT_KEY:
            raise StoreError(f"checkpoints in {self.display} is not keyed as the stock one")
        specs.append(TableSpec(RECORDS, "metadata", "metadata", key, RECORD_KEY))
        return tuple(specs)

    @staticmethod
    def _cell(table: TableSpec, row: Sequence[Any], nkey: int) -> Cell:
        ref = RowRef(table.name, tuple(zip(table.key_columns, row[:nkey], strict=True)))
        if table.name == RECORDS:
            entry = row[nkey]
            data = entry.encode("utf-8") if isinstance(entry, str) else None
            return SealedRow(ref, entry_key(ref.thread_id), data)
        data = row[nkey + 1]
        channel = str(row[nkey + 2]) if table.extra_columns and row[nkey + 2] is not None else None
        return SealedRow(ref, row[nkey], None if data is None else bytes(data), channel)
