"""The rows of a store `secure_serde.SealedSaver` sealed, seen as cells for rotation (rewrap).

Under `SealedSaver`, the stock SQLite and PostgreSQL savers store nothing
but sealed cells (byte layout: secure_serde/sealing/_cell.py). This module
finds the rows that hold them and swaps them, compare-and-swap, as the
stock layout's stores do (`Store`); it never parses a cell, and holds no key:
working out each cell's place and re-encrypting it is rewrap's job
(secure_serde/passes/_sealed.py).

================================  =============================================================
table (``RowRef.table``)          what the row holds (``Cell.type_tag``, ``Cell.data``)
================================  =============================================================
``checkpoint_blobs`` (PG)         the type column (``"bytes"``; ``"empty"`` with no data for a
                                  channel without a value) and one channel value cell
``checkpoint_writes`` (PG),       the type column (``"bytes"``) and one pending write cell;
``writes`` (SQLite)               `SealedRow.channel` is the row's channel
``checkpoints`` (SQLite)          the type column (``"msgpack"``) and the stock saver's msgpack
                                  of the whole checkpoint, its values as cells
``checkpoints.metadata``          the metadata key of the row's cell (`RECORD_KEY`, or
                                  `IDENTITY_KEY` in the reserved thread) and that key's text
                                  (base64 of a cell) as UTF-8; ``data`` is ``None`` when the
                                  row holds no such text (a failure, never work)
================================  =============================================================

A metadata swap replaces that one key's text only, and only while it is
still the text read: the rest of the metadata (index tokens, ``parents``,
plaintext keys) is left as it is. On SQLite the column is rewritten as the
stock saver writes it (``json.dumps(..., ensure_ascii=False)``, UTF-8).

The keys are `SealedSaver`'s (secure_serde/sealing/_codec.py and
_identity.py); stores must not import sealing, so they are repeated here,
and tests/passes/test_sealed_layout.py pins them equal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from secure_serde.stores._base import (
    SEALED_STORE_THREAD,
    Cell,
    RowRef,
    Store,
    StoreError,
    Swap,
    TableSpec,
)
from secure_serde.stores._items import entry_data, json_or_none
from secure_serde.stores._sqlite import _ENVELOPE_KEY, _ENVELOPE_SWAP, SqliteStore, _quote

__all__ = [
    "IDENTITY_CHECKPOINT_ID",
    "IDENTITY_KEY",
    "RECORDS",
    "RECORD_KEY",
    "SealedLayout",
    "SealedRow",
    "SealedSqliteStore",
    "entry_key",
    "identity_ref",
    "is_sealed_layout",
]

# sealing/_codec.py RECORD_KEY: the metadata key of each checkpoint's record cell.
RECORD_KEY: Final = "__secure_serde__"
# sealing/_identity.py IDENTITY_KEY and IDENTITY_CHECKPOINT_ID (thread: SEALED_STORE_THREAD).
IDENTITY_KEY: Final = "__secure_serde_store__"
IDENTITY_CHECKPOINT_ID: Final = "00000000-0000-0000-0000-000000000000"
# The RowRef/TableSpec name of the record and identity cells.
RECORDS: Final = "checkpoints.metadata"
_CHECKPOINT_KEY: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")


@dataclass(frozen=True, slots=True)
class SealedRow(Cell):
    """A `Cell` of a sealed store; ``channel`` is a write row's channel (not in its key)."""

    channel: str | None = None


class SealedLayout:
    """Marks the stores of this module: the sealed layout, not the 0.3 one."""

    layout: Final = "sealed"


def is_sealed_layout(store: Store) -> bool:
    return isinstance(store, SealedLayout)


def identity_ref() -> RowRef:
    """Where the store identity's cell is: `Store.reload` it."""
    key = (SEALED_STORE_THREAD, "", IDENTITY_CHECKPOINT_ID)
    return RowRef(RECORDS, tuple(zip(_CHECKPOINT_KEY, key, strict=True)))


def entry_key(thread_id: object) -> str:
    """The metadata key a checkpoints row of ``thread_id`` keeps its cell under."""
    return IDENTITY_KEY if str(thread_id) == SEALED_STORE_THREAD else RECORD_KEY


# ---------------------------------------------------------------------------------------------
# SQLite


class SealedSqliteStore(SealedLayout, SqliteStore):
    """A SQLite file `SealedSaver` over langgraph's ``SqliteSaver`` wrote."""

    def _discover(self) -> tuple[TableSpec, ...]:
        found = super()._discover()
        names = {spec.name for spec in found}
        if not {"checkpoints", "writes"} <= names:
            raise StoreError(f"{self.display} lacks the checkpoints or writes table")
        specs = []
        for spec in found:
            if spec.name == "checkpoints":
                if spec.key_columns != _CHECKPOINT_KEY:
                    raise StoreError(f"checkpoints in {self.display} is not keyed as the stock one")
                specs.append(TableSpec("checkpoints", "type", "checkpoint", spec.key_columns))
                specs.append(TableSpec(RECORDS, "metadata", "metadata", spec.key_columns))
            elif spec.name == "writes":
                columns = {
                    row[1] for row in self._conn.execute("PRAGMA table_info(writes)").fetchall()
                }
                if "channel" not in columns:
                    raise StoreError(f"writes in {self.display} has no channel column")
                key = spec.key_columns
                specs.append(TableSpec("writes", "type", "value", key, extra_columns=("channel",)))
        return tuple(specs)

    @staticmethod
    def _statements(spec: TableSpec) -> tuple[str, str, str, str, str]:
        if spec.name != RECORDS:
            return SqliteStore._statements(spec)
        cols = ", ".join(_quote(c) for c in _CHECKPOINT_KEY)
        select = f"SELECT {cols}, CAST(metadata AS TEXT) FROM checkpoints"  # noqa: S608
        first = f"{select} WHERE {{range}} ORDER BY {cols} LIMIT ?"
        page = f"{select} WHERE ({cols}) > (?, ?, ?) AND {{range}} ORDER BY {cols} LIMIT ?"
        reload = f"{select} WHERE {_ENVELOPE_KEY}"
        count = "SELECT count(*) FROM checkpoints WHERE {range}"
        return first, page, reload, "", count

    @staticmethod
    def _cell(table: TableSpec, row: Sequence[Any], nkey: int) -> Cell:
        ref = RowRef(table.name, tuple(zip(table.key_columns, row[:nkey], strict=True)))
        if table.name == RECORDS:
            key = entry_key(ref.thread_id)
            return SealedRow(ref, key, entry_data(json_or_none(row[nkey]), key))
        channel = None
        if table.extra_columns:
            channel = None if row[nkey + 2] is None else str(row[nkey + 2])
        return SealedRow(ref, row[nkey], row[nkey + 1], channel)

    def _swap_one(self, swap: Swap) -> bool:
        """Replace one row's record (or identity) text if it is still the one read."""
        cell = swap.cell
        if cell.ref.table != RECORDS:
            return super()._swap_one(swap)
        if cell.data is None or cell.type_tag != entry_key(cell.ref.thread_id):
            raise StoreError(f"{cell.ref} holds no sealed text to replace")
        if swap.new_type != cell.type_tag:
            raise StoreError(f"{cell.ref}: a swap may not move the sealed text to another key")
        found = self._conn.execute(_RELOAD_TEXT, cell.ref.key_values).fetchone()
        if found is None:
            return False
        metadata = json_or_none(found[0])
        if not isinstance(metadata, dict) or entry_data(metadata, cell.type_tag) != cell.data:
            return False
        metadata[cell.type_tag] = swap.new_data.decode("utf-8")
        # As the stock SqliteSaver encodes the column.
        new = json.dumps(metadata, ensure_ascii=False).encode("utf-8", "ignore")
        cursor = self._conn.execute(_ENVELOPE_SWAP, (new, *cell.ref.key_values, found[0]))
        return cursor.rowcount == 1


# Every row's whole metadata (the identity row too).
_RELOAD_TEXT: Final = f"SELECT CAST(metadata AS TEXT) FROM checkpoints WHERE {_ENVELOPE_KEY}"  # noqa: S608
