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
left as they are. As in _sealed.py, no key and no cell parsing here
(secure_serde/passes/_items.py re-encrypts).

The names below repeat `SealedStore`'s, as stores must not import sealing;
tests/passes/test_store_rotation.py pins them equal.

A table is only ever read as sealed items when it holds the identity item:
a bare store's table is not this layout, and nothing here seals it.
"""

from __future__ import annotations

import json
from typing import Any, Final

from secure_serde.stores._base import (
    ALL_THREADS,
    Cell,
    RowRef,
    Store,
    StoreError,
    TableSpec,
    ThreadRange,
)

__all__ = [
    "IDENTITY_ITEM_KEY",
    "IDENTITY_PREFIX",
    "ITEMS",
    "SEALED_FIELD",
    "ItemsLayout",
    "identity_item_ref",
    "is_items_layout",
    "namespace_of",
]

# sealing/_store_codec.py SEALED_FIELD: the entry of each item value that holds its cell.
SEALED_FIELD: Final = "__secure_serde__"
# sealing/_store_identity.py RESERVED_NAMESPACE (one label) and IDENTITY_ITEM_KEY.
IDENTITY_PREFIX: Final = "__secure_serde_store__"
IDENTITY_ITEM_KEY: Final = "identity"
ITEMS: Final = "store"


class ItemsLayout(Store):
    """The stores of this module: SealedStore's items, not checkpoint rows.

    ``holds_checkpoints`` says whether the same database also has langgraph's
    checkpoint tables (one application, one database). An empty ``tables``
    means the database has no ``store`` table. Items have no thread: thread
    ranges are not used.
    """

    holds_checkpoints: bool = False

    def _discover(self) -> tuple[TableSpec, ...]:
        self.holds_checkpoints = bool(self._catalog("checkpoints")[0])
        columns = self._catalog(ITEMS)[0]
        if not columns:
            return ()
        if not {"prefix", "key", "value"} <= columns:
            raise StoreError(f"the store table in {self.display} is not langgraph's")
        return (TableSpec(ITEMS, "value", "value", ("prefix", "key"), SEALED_FIELD),)

    def _range(self, thread_range: ThreadRange) -> tuple[str, list[Any]]:
        return self._TRUE, []

    def reload(self, ref: RowRef) -> Cell | None:
        return super().reload(ref) if self.tables else None

    @staticmethod
    def _dump_entry(value: object, raw: object) -> str | bytes:
        # As langgraph's SqliteStore writes the column (orjson: compact, UTF-8 bytes).
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return text if isinstance(raw, str) else text.encode("utf-8")

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
