"""`SqliteStore`: the schema of langgraph-checkpoint-sqlite (``SqliteSaver`` and its async twin).

Serialized values live in ``checkpoints(type, checkpoint)`` and
``writes(type, value)``; ``checkpoints.metadata`` is JSON written without
the serializer.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Final

from secure_serde.stores._base import (
    Store,
    StoreError,
    Swap,
    TableSpec,
    entry_data,
    json_or_none,
    quote,
)
from secure_serde.stores._items import ItemsLayout
from secure_serde.stores._sealed import CHECKPOINT_KEY, RECORDS_SPEC, SealedLayout

__all__ = ["SealedItemsSqliteStore", "SealedSqliteStore", "SqliteStore"]

# A live application holds the write lock for one checkpoint at a time:
# wait for it rather than fail the batch.
_BUSY_TIMEOUT_MS: Final = 30_000


class SqliteStore(Store):
    """A SQLite checkpoint file, opened read-write; it is never created.

    The connection runs in autocommit mode: each page is one ``SELECT``,
    and each `compare_and_swap` one ``BEGIN IMMEDIATE`` ... ``COMMIT``, so
    the write lock is held only while a batch's updates run, never while
    values are being decrypted. CAST makes a TEXT or number planted in the
    BLOB column come back as bytes, and the swap compares through the same
    CAST, so such a row is still reported and swapped like any other.
    """

    kind = "sqlite"
    _MARK, _TRUE, _SAME = "?", "1", "IS"
    _TEXT, _BLOB = "CAST({} AS TEXT)", "CAST({} AS BLOB)"
    _conn: sqlite3.Connection
    _WANTED: ClassVar[tuple[TableSpec, ...]] = (
        TableSpec("checkpoints", "type", "checkpoint", ()),
        TableSpec("writes", "type", "value", ()),
    )

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
            self.close()
            raise StoreError(f"cannot open {self._path} as a SQLite store: {exc}") from None
        except BaseException:
            self.close()
            raise
        self._sql = {spec.name: self._statements(spec) for spec in self.tables}

    def _catalog(self, relation: str) -> tuple[set[str], tuple[str, ...]]:
        info = self._conn.execute(f"PRAGMA table_info({quote(relation)})").fetchall()
        key = tuple(row[1] for row in sorted((r for r in info if r[5] > 0), key=lambda r: r[5]))
        return {row[1] for row in info}, key

    @property
    def display(self) -> str:
        return str(self._path)

    @property
    def location(self) -> str:
        return str(self._path)

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
        """One swap, inside the transaction: whether the row still held the cell read.

        A JSON entry is replaced in Python, the rest of the value kept, and the
        whole column swapped while it still holds exactly what was read.
        """
        cell = swap.cell
        statements = self._sql[cell.ref.table]
        if self.table(cell.ref.table).envelope_key is None:
            return self._conn.execute(statements.swap, self._swap_params(swap)).rowcount == 1
        key = self._checked_key(swap)
        found = self._conn.execute(statements.reload, cell.ref.key_values).fetchone()
        if found is None:
            return False
        raw = found[-1]
        value = json_or_none(raw)
        if not isinstance(value, dict) or entry_data(value, key) != cell.data:
            return False
        value[key] = swap.new_data.decode("utf-8")
        new = self._dump_entry(value, raw)
        return self._conn.execute(statements.swap, (new, *cell.ref.key_values, raw)).rowcount == 1

    @staticmethod
    def _dump_entry(value: object, raw: object) -> str | bytes:
        # As the stock SqliteSaver encodes the metadata column.
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "ignore")

    def _fetch(self, query: str, params: Sequence[Any]) -> list[Any]:
        try:
            return self._conn.execute(query, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self._path} failed: {exc}") from None


class SealedSqliteStore(SealedLayout, SqliteStore):
    """A SQLite file `SealedSaver` over langgraph's ``SqliteSaver`` wrote."""

    _WANTED = (
        TableSpec("checkpoints", "type", "checkpoint", CHECKPOINT_KEY),
        RECORDS_SPEC,
        TableSpec("writes", "type", "value", (), extra_columns=("channel",)),
    )


class SealedItemsSqliteStore(ItemsLayout, SqliteStore):
    """The ``store`` table of a SQLite file langgraph's ``SqliteStore`` wrote under SealedStore."""
