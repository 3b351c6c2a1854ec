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
``checkpoints.metadata``          the metadata key of the row's cell (`SEALED_RECORD_KEY`, or
                                  `IDENTITY_KEY` in the reserved thread) and that key's text
                                  (base64 of a cell) as UTF-8; ``data`` is ``None`` when the
                                  row holds no such text (a failure, never work)
================================  =============================================================

A metadata swap replaces that one key's text only, and only while it is
still the text read: the rest of the metadata (index tokens, ``parents``,
plaintext keys) is left as it is. On SQLite the column is rewritten as the
stock saver writes it (``json.dumps(..., ensure_ascii=False)``, UTF-8).

The keys below repeat `SealedSaver`'s, as stores must not import sealing;
tests/passes/test_sealed_layout.py pins them equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from secure_serde.stores._base import (
    SEALED_STORE_THREAD,
    Cell,
    RowRef,
    Store,
    TableSpec,
)

__all__ = [
    "CHECKPOINT_KEY",
    "IDENTITY_CHECKPOINT_ID",
    "IDENTITY_KEY",
    "RECORDS",
    "SEALED_RECORD_KEY",
    "SealedLayout",
    "SealedRow",
    "entry_key",
    "identity_ref",
    "is_sealed_layout",
]

# sealing/_codec.py RECORD_KEY: the metadata key of each checkpoint's record cell.
SEALED_RECORD_KEY: Final = "__secure_serde__"
# sealing/_identity.py IDENTITY_KEY and IDENTITY_CHECKPOINT_ID (thread: SEALED_STORE_THREAD).
IDENTITY_KEY: Final = "__secure_serde_store__"
IDENTITY_CHECKPOINT_ID: Final = "00000000-0000-0000-0000-000000000000"
RECORDS: Final = "checkpoints.metadata"
CHECKPOINT_KEY: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")
# The checkpoints rows' metadata, seen as the record (or identity) cell under one key.
RECORDS_SPEC: Final = TableSpec(RECORDS, "metadata", "metadata", CHECKPOINT_KEY, SEALED_RECORD_KEY)


@dataclass(frozen=True, slots=True)
class SealedRow(Cell):
    """A `Cell` of a sealed store; ``channel`` is a write row's channel (not in its key)."""

    channel: str | None = None


class SealedLayout(Store):
    """The stores of this module: the sealed layout, whose tables must all be there."""

    _ALL_NEEDED = True

    def _cell(self, table: TableSpec, row: Sequence[Any]) -> Cell:
        cell = super()._cell(table, row)
        extra = row[len(table.key_columns) + 2] if table.extra_columns else None
        return SealedRow(cell.ref, cell.type_tag, cell.data, None if extra is None else str(extra))

    def _entry_key(self, ref: RowRef, table: TableSpec) -> str:
        return entry_key(ref.thread_id)


def is_sealed_layout(store: Store) -> bool:
    return isinstance(store, SealedLayout)


def identity_ref() -> RowRef:
    """Where the store identity's cell is: `Store.reload` it."""
    key = (SEALED_STORE_THREAD, "", IDENTITY_CHECKPOINT_ID)
    return RowRef(RECORDS, tuple(zip(CHECKPOINT_KEY, key, strict=True)))


def entry_key(thread_id: object) -> str:
    """The metadata key a checkpoints row of ``thread_id`` keeps its cell under."""
    return IDENTITY_KEY if str(thread_id) == SEALED_STORE_THREAD else SEALED_RECORD_KEY
