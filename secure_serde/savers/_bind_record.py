"""Sealing one PostgreSQL checkpoint record of a stock store, as the sealed saver's ``put`` would.

A record without a seal has its inline channel values moved into bound blob
rows and is sealed with `seal_stored_record`, the function ``put`` seals
with, over the checkpoint JSON it leaves: the same JSON the sealed saver
stores, whose ``channel_values`` keep only ``DeltaChannel`` snapshot markers.
A record with a seal is checked, with no migration switch, and left alone.
Nothing here touches the database: ``_bind_postgres`` reads the rows and
writes the plans.

An inline entry whose blob row already exists is either the ``true``
marker the stock saver leaves beside a ``DeltaChannel`` snapshot (kept, as
the sealed saver keeps it) or a primitive an earlier run moved already
(dropped, once the blob is read back equal to it). Anything else (a
different value, an ``empty`` row) means the row does not say what the
stock saver would have written: it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from secure_serde._binding import Location
from secure_serde._errors import (
    BindingError,
    PlaintextRefusedError,
    StrictDecodeError,
    UnboundValueError,
)
from secure_serde._langgraph import DeltaSnapshot
from secure_serde._migration import Migration
from secure_serde.savers._bound import RECORD_KEY, Binder, metadata_record
from secure_serde.savers._postgres_bound import seal_stored_record

__all__ = ["BlobInsert", "BlobKey", "PlannedCheckpoint", "plan_checkpoint"]

_EMPTY: Final = "empty"
# What the stock PostgreSQL saver keeps inline (its put's primitive test).
_INLINE_TYPES: Final = (type(None), str, int, float, bool)
_SNAPSHOT: Final = cast(type, DeltaSnapshot)

# Where a blob row is: thread, namespace, channel, version.
BlobKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class BlobInsert:
    """A bound blob row for a moved inline value."""

    channel: str
    version: str
    type_tag: str
    data: bytes


@dataclass(frozen=True)
class PlannedCheckpoint:
    """The checkpoint JSON to store, the blobs to insert first, and the values moved."""

    row: Mapping[str, Any]
    checkpoint: dict[str, Any]
    inserts: tuple[BlobInsert, ...]
    moved: int


def plan_checkpoint(
    binder: Binder,
    migration: Migration,
    row: Mapping[str, Any],
    existing: Mapping[BlobKey, tuple[str, bytes | None]],
    pending: dict[BlobKey, tuple[Any, BlobInsert]] | None = None,
) -> PlannedCheckpoint | None:
    """What sealing one checkpoint row writes; ``None`` when its seal verifies already.

    ``existing`` holds the stored blob rows at the row's inline values'
    locations; ``pending`` the inserts planned for earlier rows of the page
    (this row's are added to it).

    Raises:
        DecryptionError: the row cannot be sealed (see the module docstring).
    """
    thread_id, checkpoint_ns = row["thread_id"], row["checkpoint_ns"]
    checkpoint_id, parent_id = row["checkpoint_id"], row["parent_checkpoint_id"]
    stored: Mapping[str, Any] = row["checkpoint"]
    record = {k: v for k, v in stored.items() if k != RECORD_KEY}
    seal = stored.get(RECORD_KEY)
    if seal is not None:
        # Checked without any migration switch: a seal must verify, or the row is refused.
        Binder(binder.serde, Migration.NONE).check_record(
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent_id,
            [record, metadata_record(row["metadata"])],
            seal,
        )
        return None
    if not migration.unbound:
        raise UnboundValueError("checkpoint record carries no seal, and Migration.unbound is off")
    pending = {} if pending is None else pending
    versions: Mapping[str, Any] = record.get("channel_versions") or {}
    kept: dict[str, Any] = {}
    inserts: list[BlobInsert] = []
    planned: dict[BlobKey, tuple[Any, BlobInsert]] = {}
    for channel, value in (record.get("channel_values") or {}).items():
        version = versions.get(channel)
        if version is None:
            raise BindingError(f"inline value of channel {channel!r} has no version")
        key = (thread_id, checkpoint_ns, channel, str(version))
        location = Location.blob(thread_id, checkpoint_ns, channel, version)
        found = existing.get(key)
        if found is not None:
            if _is_marker(binder, channel, value, found, location):
                kept[channel] = value  # the snapshot's marker: the sealed saver writes it too
            continue
        _check_inline(migration, channel, value)
        earlier = pending.get(key)
        if earlier is not None:
            if not _same(earlier[0], value):
                raise BindingError(
                    f"inline value of channel {channel!r} differs from another checkpoint's"
                    " at the same version"
                )
            continue  # inserted with that earlier checkpoint
        type_tag, data = binder.dump(value, location)
        insert = BlobInsert(channel, str(version), type_tag, data)
        inserts.append(insert)
        planned[key] = (value, insert)
    pending.update(planned)
    new_record = {**record, "channel_values": kept} if "channel_values" in record else record
    new_seal = seal_stored_record(
        binder, thread_id, checkpoint_ns, checkpoint_id, parent_id, new_record, row["metadata"]
    )
    moved = len(record.get("channel_values") or {}) - len(kept)
    return PlannedCheckpoint(row, {**new_record, RECORD_KEY: new_seal}, tuple(inserts), moved)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _is_marker(
    binder: Binder, channel: str, value: Any, found: tuple[str, bytes | None], at: Location
) -> bool:
    """True for a snapshot's marker; False for a value moved already (by an earlier run)."""
    if found[0] == _EMPTY or found[1] is None:
        raise BindingError(f"inline value of channel {channel!r} sits beside an empty blob")
    stored_value = binder.load(found, at)
    if value is True and isinstance(stored_value, _SNAPSHOT):
        return True
    if _same(stored_value, value):
        return False
    raise BindingError(f"inline value of channel {channel!r} differs from its blob at that version")


def _check_inline(migration: Migration, channel: str, value: Any) -> None:
    if not migration.inline_values:
        raise PlaintextRefusedError(
            f"channel {channel!r} has a value inline in the checkpoint JSON, and"
            " Migration.inline_values is off"
        )
    if type(value) not in _INLINE_TYPES:
        raise StrictDecodeError(
            f"inline value of channel {channel!r} is not a JSON primitive: the stock saver"
            " never writes one there, so it was planted"
        )
