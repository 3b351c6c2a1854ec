"""Each cell's `Location`, worked out from its row as 0.3's savers sealed it.

0.3's savers (`secure_serde.savers.V03*`) sealed every value for its
location; a tool reading the store must name the same location to open
it. Most of a location is the row's primary key; the rest is the columns
listed here, which a store selects after the value:

=============================  ===================================================
table                          location
=============================  ===================================================
``checkpoint_blobs``           ``Location.blob(thread, ns, channel, version)``
``checkpoint_writes``          ``Location.write(thread, ns, checkpoint id, task id,
/ ``writes``                   task_path, idx, channel)``
``checkpoints.metadata``       ``Location.metadata(thread, ns, checkpoint id)``
``checkpoints`` (SQLite)       ``Location.checkpoint(thread, ns, id, parent,
                               canonical(record of the metadata JSON))``
``checkpoints.checkpoint``     ``Location.checkpoint(thread, ns, id, parent,
(record, PostgreSQL)           canonical([checkpoint JSON minus the record,
                               record of the metadata JSON]))``, the parent
                               being the record's own when pruning nulled it
=============================  ===================================================

A row that cannot say (a column missing from an older schema, metadata
that is not JSON) has no location; tools then read it as an unbound value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from typing import Any, Final

from secure_serde.crypto import Location
from secure_serde.stores._base import RowRef
from secure_serde.stores._envelope import RECORD_KEY, RECORD_TABLE
from secure_serde.stores._record import canonical, metadata_record

__all__ = ["extra_columns", "locate"]

_WRITE_EXTRAS: Final = ("task_path", "channel")
_CHECKPOINT_EXTRAS: Final = ("parent_checkpoint_id", "metadata")
_RECORD_EXTRAS: Final = ("parent_checkpoint_id", "checkpoint", "metadata")


def extra_columns(table: str, columns: Collection[str], key: Sequence[str]) -> tuple[str, ...]:
    """The non-key columns a store must select to locate the cells of ``table``."""
    wanted: tuple[str, ...]
    if table in ("checkpoint_writes", "writes"):
        wanted = _WRITE_EXTRAS
    elif table == "checkpoints":
        wanted = _CHECKPOINT_EXTRAS
    elif table == RECORD_TABLE:
        wanted = _RECORD_EXTRAS
    else:
        return ()
    if not set(wanted) <= set(columns):
        return ()
    return tuple(c for c in wanted if c not in key)


def locate(table: str, ref: RowRef, extras: Sequence[Any]) -> Location | None:
    """The location a sealed saver binds this row's value to, or ``None``."""
    locator = _LOCATORS.get(table)
    if locator is None:
        return None
    try:
        return locator(ref, extras)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def _required(ref: RowRef, column: str) -> Any:
    value = ref.get(column)
    if value is None:
        raise KeyError(column)
    return value


def _blob(ref: RowRef, extras: Sequence[Any]) -> Location:
    return Location.blob(
        ref.thread_id, ref.checkpoint_ns, str(_required(ref, "channel")), _required(ref, "version")
    )


def _write(ref: RowRef, extras: Sequence[Any]) -> Location:
    task_path, channel = extras
    return Location.write(
        ref.thread_id,
        ref.checkpoint_ns,
        str(_required(ref, "checkpoint_id")),
        str(_required(ref, "task_id")),
        str(task_path),
        int(_required(ref, "idx")),
        str(channel),
    )


def _metadata(ref: RowRef, extras: Sequence[Any]) -> Location:
    return Location.metadata(ref.thread_id, ref.checkpoint_ns, str(_required(ref, "checkpoint_id")))


def _checkpoint(ref: RowRef, extras: Sequence[Any]) -> Location:
    parent, stored = extras
    metadata = (
        {}
        if stored is None
        else json.loads(bytes(stored) if not isinstance(stored, str) else stored)
    )
    return _sealed_checkpoint(ref, parent, metadata_record(metadata))


def _record(ref: RowRef, extras: Sequence[Any]) -> Location:
    parent, checkpoint, metadata = extras
    if parent is None:
        # As the savers check it: pruning may have nulled the link the seal names.
        sealed_parent = checkpoint[RECORD_KEY].get("parent")
        parent = sealed_parent if isinstance(sealed_parent, str) else None
    record = {k: v for k, v in checkpoint.items() if k != RECORD_KEY}
    return _sealed_checkpoint(ref, parent, [record, metadata_record(metadata)])


def _sealed_checkpoint(ref: RowRef, parent: Any, record: Any) -> Location:
    return Location.checkpoint(
        ref.thread_id,
        ref.checkpoint_ns,
        str(_required(ref, "checkpoint_id")),
        None if parent is None else str(parent),
        canonical(record),
    )


_LOCATORS: Final[dict[str, Callable[[RowRef, Sequence[Any]], Location]]] = {
    "checkpoint_blobs": _blob,
    "checkpoint_writes": _write,
    "writes": _write,
    "checkpoints.metadata": _metadata,
    "checkpoints": _checkpoint,
    RECORD_TABLE: _record,
}
