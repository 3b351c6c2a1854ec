"""`SqliteStore`: the schema of langgraph-checkpoint-sqlite (``SqliteSaver`` and its async twin).

Serialized values live in ``checkpoints(type, checkpoint)`` and
``writes(type, value)``; ``checkpoints.metadata`` is JSON written without
the serializer. A store secure_serde 0.3's savers wrote is not read here
(`secure_serde.stores.V03Reader` reads it for ``adopt``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from secure_serde.stores._base import (
    ALL_THREADS,
    DEFAULT_BATCH_SIZE,
    Cell,
    RowRef,
    Store,
    StoreError,
    Swap,
    TableSpec,
    ThreadRange,
    check_batch_size,
)

__all__ = ["SQLITE_TABLES", "SqliteStore"]

# (table, type column, data column), in the order they are visited.
SQLITE_TABLES: Final = (("checkpoints", "type", "checkpoint"), ("writes", "type", "value"))
# A live application holds the write lock for one checkpoint at a time:
# wait for it rather than fail the batch.
_BUSY_TIMEOUT_MS: Final = 30_000


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SqliteStore(Store):
    """A SQLite checkpoint file, opened read-write; it is never created.

    The connection runs in autocommit mode: each page is one ``SELECT``,
    and each `compare_and_swap` one ``BEGIN IMMEDIATE`` ... ``COMMIT``, so
    the write lock is held only while a batch's updates run, never while
    values are being decrypted.
    """

    kind = "sqlite"

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)
        if not self._path.is_file():
            raise StoreError(f"no SQLite file at {self._path}")
        try:
            self._conn = sqlite3.connect(
                f"{self._path.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None
            )
            self._conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            self.tables = self._discover()
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            raise StoreError(f"cannot open {self._path} as a SQLite store: {exc}") from None
        if not self.tables:
            self._conn.close()
            raise StoreError(
                f"{self._path} holds no langgraph checkpoint tables (checkpoints, writes)"
            )
        self._sql: dict[str, tuple[str, str, str, str, str]] = {
            spec.name: self._statements(spec) for spec in self.tables
        }

    def _close_quietly(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()

    def _discover(self) -> tuple[TableSpec, ...]:
        found = []
        for name, type_col, data_col in SQLITE_TABLES:
            info = self._conn.execute(f"PRAGMA table_info({_quote(name)})").fetchall()
            if not info:
                continue
            columns = {row[1] for row in info}
            if not {type_col, data_col, "thread_id"} <= columns:
                raise StoreError(
                    f"table {name} in {self._path} lacks the stock columns"
                    f" thread_id, {type_col}, {data_col}"
                )
            key = tuple(row[1] for row in sorted((r for r in info if r[5] > 0), key=lambda r: r[5]))
            if not key or key[0] != "thread_id":
                raise StoreError(f"table {name} in {self._path} is not keyed by thread_id first")
            found.append(TableSpec(name, type_col, data_col, key))
        return tuple(found)

    @staticmethod
    def _statements(spec: TableSpec) -> tuple[str, str, str, str, str]:
        table = _quote(spec.name)
        cols = ", ".join(_quote(c) for c in spec.key_columns)
        marks = ", ".join("?" for _ in spec.key_columns)
        where_key = " AND ".join(f"{_quote(c)} = ?" for c in spec.key_columns)
        type_col, data_col = _quote(spec.type_column), _quote(spec.data_column)
        # Every name is a fixed constant or a catalog column name, and all are
        # quoted: nothing user-supplied reaches these statements (hence S608).
        # CAST makes a TEXT or number planted in the BLOB column come back as
        # bytes, and the swap compares through the same CAST, so such a row
        # is still reported and swapped like any other.
        extras = "".join(f", {_quote(c)}" for c in spec.extra_columns)
        value = f"CAST({type_col} AS TEXT), CAST({data_col} AS BLOB){extras}"
        select = f"SELECT {cols}, {value} FROM {table}"  # noqa: S608
        page = f"{select} WHERE ({cols}) > ({marks}) AND {{range}} ORDER BY {cols} LIMIT ?"
        first = f"{select} WHERE {{range}} ORDER BY {cols} LIMIT ?"
        reload = f"{select} WHERE {where_key}"
        unchanged = f"CAST({type_col} AS TEXT) IS ? AND CAST({data_col} AS BLOB) IS ?"
        swap = (
            f"UPDATE {table} SET {type_col} = ?, {data_col} = ? WHERE {where_key} AND {unchanged}"  # noqa: S608
        )
        count = f"SELECT count(*) FROM {table} WHERE {{range}}"  # noqa: S608
        return first, page, reload, swap, count

    @property
    def display(self) -> str:
        return str(self._path)

    @property
    def location(self) -> str:
        return str(self._path)

    @staticmethod
    def _range_sql(thread_range: ThreadRange) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if thread_range.low is not None:
            clauses.append("thread_id >= ?")
            params.append(thread_range.low)
        if thread_range.high is not None:
            clauses.append("thread_id < ?")
            params.append(thread_range.high)
        return (" AND ".join(clauses) or "1"), params

    def count(self, table: TableSpec, thread_range: ThreadRange = ALL_THREADS) -> int:
        where, params = self._range_sql(thread_range)
        row = self._execute(self._sql[table.name][4].format(range=where), params).fetchone()
        return int(row[0])

    def iter_batches(
        self,
        table: TableSpec,
        batch_size: int = DEFAULT_BATCH_SIZE,
        thread_range: ThreadRange = ALL_THREADS,
    ) -> Iterator[list[Cell]]:
        check_batch_size(batch_size)
        first, page, _, _, _ = self._sql[table.name]
        where, range_params = self._range_sql(thread_range)
        nkey = len(table.key_columns)
        rows = self._execute(first.format(range=where), [*range_params, batch_size]).fetchall()
        while rows:
            yield [self._cell(table, row, nkey) for row in rows]
            if len(rows) < batch_size:
                return
            after = list(rows[-1][:nkey])
            rows = self._execute(
                page.format(range=where), [*after, *range_params, batch_size]
            ).fetchall()

    @staticmethod
    def _cell(table: TableSpec, row: Sequence[Any], nkey: int) -> Cell:
        ref = RowRef(table.name, tuple(zip(table.key_columns, row[:nkey], strict=True)))
        return Cell(ref, row[nkey], row[nkey + 1])

    def reload(self, ref: RowRef) -> Cell | None:
        table = self.table(ref.table)
        row = self._execute(self._sql[table.name][2], ref.key_values).fetchone()
        return None if row is None else self._cell(table, row, len(table.key_columns))

    def compare_and_swap(self, swaps: Sequence[Swap]) -> list[bool]:
        if not swaps:
            return []
        applied = []
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                applied = [self._swap_one(swap) for swap in swaps]
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"writing to {self._path} failed: {exc}") from None
        return applied

    def _swap_one(self, swap: Swap) -> bool:
        """One swap, inside the transaction: whether the row still held the cell read."""
        cell = swap.cell
        values = (swap.new_type, swap.new_data, *cell.ref.key_values, cell.type_tag, cell.data)
        return self._conn.execute(self._sql[cell.ref.table][3], values).rowcount == 1

    def thread_ranges(self, parts: int) -> list[ThreadRange]:
        # One writer at a time: splitting a SQLite file buys nothing.
        return [ALL_THREADS]

    def thread_ids(self) -> list[str]:
        query = "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
        return [str(row[0]) for row in self._execute(query, []).fetchall()]

    def holds_thread(self, thread_id: str) -> bool:
        query = "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1"
        return self._execute(query, [thread_id]).fetchone() is not None

    def _execute(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self._path} failed: {exc}") from None

    def close(self) -> None:
        self._conn.close()


# One checkpoints row, and its metadata swapped whole while it still holds the text read
# (secure_serde/stores/_sealed.py). Fixed fragments only, values bound (hence S608).
_ENVELOPE_KEY: Final = "thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
_ENVELOPE_SWAP: Final = (
    f"UPDATE checkpoints SET metadata = ? WHERE {_ENVELOPE_KEY} AND CAST(metadata AS TEXT) IS ?"  # noqa: S608
)
