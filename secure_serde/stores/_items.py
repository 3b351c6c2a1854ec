"""The items of a `secure_serde.SealedStore` kept in langgraph's ``store`` table, as cells.

langgraph's ``SqliteStore`` and ``PostgresStore`` keep every item in one
``store`` table keyed by ``(prefix, key)``: ``prefix`` is the namespace's
labels joined by ``"."`` (langgraph refuses labels holding a period), and
``value`` is the item's JSON (TEXT or BLOB written by ``orjson`` in SQLite,
JSONB in PostgreSQL). Under `SealedStore` each value is an object whose
`SEALED_FIELD` entry is the base64 text of a sealed cell
(secure_serde/sealing/_store_codec.py), beside index tokens and searchable
fields. The store identity is the item `IDENTITY_PREFIX` / `IDENTITY_ITEM_KEY`.

==================  ======================================================================
``Cell``            what it holds
==================  ======================================================================
``ref``             ``RowRef("store", (("prefix", ...), ("key", ...)))``: ids only
``type_tag``        always `SEALED_FIELD` (the one entry a swap may replace)
``data``            that entry's text as UTF-8, or ``None`` when the value holds no such
                    text (plaintext, damaged): a failure for rotation, never work
==================  ======================================================================

A swap replaces that one entry only, and only while it still holds the text
read (compare-and-swap); tokens, searchable fields, timestamps and TTLs are
left as they are. This module holds no key and never parses a cell: working
out each item's place and re-encrypting it is rewrap's job
(secure_serde/passes/_items.py).

The names are `SealedStore`'s (secure_serde/sealing/_store_codec.py and
_store_identity.py); stores must not import sealing, so they are repeated
here, and tests/passes/test_store_rotation.py pins them equal.

A table is only ever read as sealed items when it holds the identity item:
a bare store's table is not this layout, and nothing here seals it.
"""

from __future__ import annotations

import json
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

__all__ = [
    "IDENTITY_ITEM_KEY",
    "IDENTITY_PREFIX",
    "ITEMS",
    "SEALED_FIELD",
    "ItemsLayout",
    "SealedItemsSqliteStore",
    "identity_item_ref",
    "is_items_layout",
    "namespace_of",
]

# sealing/_store_codec.py SEALED_FIELD: the entry of each item value that holds its cell.
SEALED_FIELD: Final = "__secure_serde__"
# sealing/_store_identity.py RESERVED_NAMESPACE (one label) and IDENTITY_ITEM_KEY.
IDENTITY_PREFIX: Final = "__secure_serde_store__"
IDENTITY_ITEM_KEY: Final = "identity"
# The table (and RowRef/TableSpec name) of the items.
ITEMS: Final = "store"
ITEM_KEY: Final = ("prefix", "key")
_BUSY_TIMEOUT_MS: Final = 30_000
_SELECT: Final = "SELECT prefix, key, value FROM store"
_SWAP: Final = "UPDATE store SET value = ? WHERE prefix = ? AND key = ? AND value IS ?"


class ItemsLayout(Store):
    """The stores of this module: SealedStore's items, not checkpoint rows.

    ``holds_checkpoints`` says whether the same database also has langgraph's
    checkpoint tables (one application, one database).
    """

    layout: Final = "items"
    holds_checkpoints: bool = False
    # Each database's statements over ``store``, with its own parameter marker.
    _FIRST: str
    _PAGE: str
    _RELOAD: str

    def _fetch(self, query: str, params: Sequence[object]) -> list[Any]:
        raise NotImplementedError

    @staticmethod
    def _value(raw: object) -> object:
        """The decoded JSON of a ``value`` column (PostgreSQL's driver already decodes it)."""
        return raw

    def count(self, table: TableSpec, thread_range: ThreadRange = ALL_THREADS) -> int:
        if not self.tables:
            return 0
        return int(self._fetch("SELECT count(*) FROM store", ())[0][0])

    def iter_batches(
        self,
        table: TableSpec,
        batch_size: int = DEFAULT_BATCH_SIZE,
        thread_range: ThreadRange = ALL_THREADS,
    ) -> Iterator[list[Cell]]:
        """Every item, by ``(prefix, key)``; items have no thread, so ``thread_range`` is unused."""
        check_batch_size(batch_size)
        rows = self._fetch(self._FIRST, (batch_size,))
        while rows:
            yield [item_cell(r[0], r[1], self._value(r[2])) for r in rows]
            if len(rows) < batch_size:
                return
            rows = self._fetch(self._PAGE, (rows[-1][0], rows[-1][1], batch_size))

    def reload(self, ref: RowRef) -> Cell | None:
        if not self.tables:
            return None
        rows = self._fetch(self._RELOAD, ref.key_values)
        return item_cell(rows[0][0], rows[0][1], self._value(rows[0][2])) if rows else None

    def thread_ranges(self, parts: int) -> list[ThreadRange]:
        return [ALL_THREADS]

    def thread_ids(self) -> list[str]:
        return []

    def holds_thread(self, thread_id: str) -> bool:
        return False


def is_items_layout(store: Store) -> bool:
    return isinstance(store, ItemsLayout)


def identity_item_ref() -> RowRef:
    """Where the store identity's item is: `Store.reload` it."""
    return RowRef(ITEMS, (("prefix", IDENTITY_PREFIX), ("key", IDENTITY_ITEM_KEY)))


def namespace_of(ref: RowRef) -> tuple[str, ...]:
    """The namespace of the item at ``ref`` (langgraph joins its labels with ``"."``)."""
    return tuple(str(ref.get("prefix")).split("."))


def entry_data(value: object, field: str = SEALED_FIELD) -> bytes | None:
    """The sealed entry's text of a decoded JSON object, as UTF-8; ``None`` when it has none."""
    entry = value.get(field) if isinstance(value, dict) else None
    return entry.encode("utf-8") if isinstance(entry, str) else None


def json_or_none(text: object) -> object:
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def item_cell(prefix: object, key: object, value: object) -> Cell:
    """The cell of one row; ``value`` already decoded from JSON (or ``None``)."""
    ref = RowRef(ITEMS, (("prefix", str(prefix)), ("key", str(key))))
    return Cell(ref, SEALED_FIELD, entry_data(value))


def check_swap(swap: Swap) -> None:
    cell = swap.cell
    if cell.data is None or cell.type_tag != SEALED_FIELD or swap.new_type != SEALED_FIELD:
        raise StoreError(f"{cell.ref} holds no sealed item text to replace")


class SealedItemsSqliteStore(ItemsLayout):
    """The ``store`` table of a SQLite file langgraph's ``SqliteStore`` wrote under SealedStore.

    Autocommit, one ``SELECT`` per page, one ``BEGIN IMMEDIATE`` ... ``COMMIT``
    per `compare_and_swap`, as `secure_serde.stores.SqliteStore`. An empty
    ``tables`` means the file has no ``store`` table.
    """

    kind = "sqlite"
    _FIRST = f"{_SELECT} ORDER BY prefix, key LIMIT ?"
    _PAGE = f"{_SELECT} WHERE (prefix, key) > (?, ?) ORDER BY prefix, key LIMIT ?"
    _RELOAD = f"{_SELECT} WHERE prefix = ? AND key = ?"

    def __init__(self, path: Path) -> None:
        self._path = path
        try:
            self._conn = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None
            )
            self._conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            names = {
                row[0]
                for row in self._conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                ).fetchall()
            }
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(store)")}
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(f"cannot open {path} as a SQLite store: {exc}") from None
        self.holds_checkpoints = "checkpoints" in names
        self.tables: tuple[TableSpec, ...] = ()
        if columns:
            if not {"prefix", "key", "value"} <= columns:
                self.close()
                raise StoreError(f"the store table in {path} is not langgraph's")
            self.tables = (TableSpec(ITEMS, "value", "value", ITEM_KEY),)

    @property
    def display(self) -> str:
        return str(self._path)

    @property
    def location(self) -> str:
        return str(self._path)

    def close(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()

    def _fetch(self, query: str, params: Sequence[object]) -> list[Any]:
        return self._conn.execute(query, params).fetchall()

    @staticmethod
    def _value(raw: object) -> object:
        return json_or_none(raw)

    def compare_and_swap(self, swaps: Sequence[Swap]) -> list[bool]:
        for swap in swaps:
            check_swap(swap)
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                applied = [self._swap(swap) for swap in swaps]
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"writing to {self._path} failed: {exc}") from None
        return applied

    def _swap(self, swap: Swap) -> bool:
        cell = swap.cell
        found = self._conn.execute(self._RELOAD, cell.ref.key_values).fetchone()
        if found is None:
            return False
        raw = found[2]
        value = json_or_none(raw)
        if not isinstance(value, dict) or entry_data(value) != cell.data:
            return False
        value[SEALED_FIELD] = swap.new_data.decode("utf-8")
        # As langgraph's SqliteStore writes the column (orjson: compact, UTF-8 bytes).
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        new: str | bytes = text if isinstance(raw, str) else text.encode("utf-8")
        cursor = self._conn.execute(_SWAP, (new, *cell.ref.key_values, raw))
        return cursor.rowcount == 1
