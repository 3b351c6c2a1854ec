"""0.3's sealed rows, decoded: each value read only where 0.3 bound it, the record first.

What 0.3's sealed savers wrote, and so what a row must prove here (the
`Location` of each value is built here; the record is encoded by `canonical`):

* SQLite: the ``checkpoints`` blob is the whole checkpoint, bound to
  ``Location.checkpoint(thread, ns, id, parent, canonical(metadata record))``,
  so its one tag authenticates the ids, the parent link and the plaintext
  metadata; the metadata column must be JSON (`BindingError`).
* PostgreSQL: the record (``checkpoint`` JSON minus its seal, and the
  metadata record) is sealed under `RECORD_KEY`: the seal is the serde's
  encryption of ``None`` at the record's location, naming the parent it was
  made with (a link that pruning nulled still verifies). No seal raises
  `UnboundValueError` outside ``Migration.unbound``. Each blob is read at
  ``Location.blob(thread, ns, channel, version)``, the version being the one
  the authenticated record names. Channel values found inline in the
  checkpoint JSON (a stock saver kept them there; 0.3 never did) raise
  `PlaintextRefusedError` outside ``Migration.inline_values``, and even then
  anything but a JSON primitive raises `StrictDecodeError`.
* Both: each pending write at ``Location.write(thread, ns, checkpoint, task,
  task path, idx, channel)``, in ``writes_sort_key`` order; then the
  metadata (`V03Metadata`), its entry at ``Location.metadata``.

Errors come in 0.3's order: inline values, record, values, writes, metadata.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from functools import partial
from typing import Any, Final, cast

from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, PendingWrite, writes_sort_key

from secure_serde._errors import (
    BindingError,
    DecryptionError,
    EncryptionError,
    PlaintextRefusedError,
    StrictDecodeError,
    UnboundValueError,
)
from secure_serde._ratelog import RateLimitedWarning
from secure_serde.crypto import Location
from secure_serde.serde import EncryptedSerializer, Migration
from secure_serde.stores._v03_metadata import (
    RECORD_KEY,
    SEALED_METADATA_KEY,
    V03Metadata,
    parse_envelope,
)

__all__ = ["V03Rows", "canonical", "metadata_record"]

_EMPTY: Final = "empty"
# What langgraph-checkpoint-postgres keeps inline (its put's primitive test).
_INLINE_TYPES: Final = (type(None), str, int, float, bool)


def _text(value: Any) -> str:
    return bytes(value).decode() if isinstance(value, (bytes, bytearray, memoryview)) else value


class V03Rows:
    """Decodes the rows of a 0.3 store into `CheckpointTuple`s, as 0.3's savers did."""

    __slots__ = ("_inline_log", "_metadata", "migration", "serde")

    def __init__(
        self, serde: EncryptedSerializer, migration: Migration, metadata: V03Metadata
    ) -> None:
        self.serde = serde
        self.migration = migration
        self._metadata = metadata
        self._inline_log = RateLimitedWarning(
            "secure_serde read plaintext inline channel values %d time(s) (latest channels %s)"
            " because Migration.inline_values is on; finish migrating and turn it off"
        )

    def load(self, data: tuple[Any, Any], location: Location) -> Any:
        type_tag, payload = data
        if not isinstance(type_tag, str) or not isinstance(payload, (bytes, bytearray, memoryview)):
            raise DecryptionError("stored value has no type tag or no bytes")
        return self.serde.loads_typed_at(
            (type_tag, bytes(payload)), location, migration=self.migration
        )

    def _writes(self, row: tuple[str, str, str], writes: Iterable[Sequence[Any]]) -> list[Any]:
        """``(task_id, channel, type, value, task_path, idx)`` rows, decoded in replay order."""
        decoded = [
            (_text(t), _text(c), _text(ty), v, _text(p), int(_text(i)))
            for t, c, ty, v, p, i in writes
        ]
        pending: list[PendingWrite] = []
        for task_id, channel, type_tag, value, task_path, idx in sorted(
            decoded, key=lambda w: writes_sort_key(w[4], w[0], w[5])
        ):
            at = Location.write(*row, task_id, task_path, idx, channel)
            pending.append((task_id, channel, self.load((type_tag, value), at)))
        return pending

    def _tuple(
        self,
        row: tuple[str, str, str],
        parent_id: str | None,
        checkpoint: Any,
        metadata: Any,
        writes: Iterable[Sequence[Any]],
    ) -> CheckpointTuple:
        pending = self._writes(row, writes)
        opened = self._metadata.open(
            partial(self.load, location=Location.metadata(*row)), metadata, row
        )
        ids = {"thread_id": row[0], "checkpoint_ns": row[1]}
        return CheckpointTuple(
            {"configurable": {**ids, "checkpoint_id": row[2]}},
            cast(Checkpoint, checkpoint),
            opened,
            {"configurable": {**ids, "checkpoint_id": parent_id}} if parent_id else None,
            pending,
        )

    def sqlite(self, row: Sequence[Any], writes: Iterable[Sequence[Any]]) -> CheckpointTuple:
        """A tuple from ``(thread, ns, id, parent, type, checkpoint, metadata)`` and its writes."""
        thread_id, checkpoint_ns, checkpoint_id, parent_id, type_tag, blob, stored = row
        metadata = _sqlite_metadata(stored)
        location = Location.checkpoint(
            thread_id, checkpoint_ns, checkpoint_id, parent_id, canonical(metadata_record(metadata))
        )
        checkpoint = self.load((type_tag, blob), location)
        if not isinstance(checkpoint, dict):
            raise BindingError("checkpoint blob does not hold a checkpoint")
        ids = (thread_id, checkpoint_ns, checkpoint_id)
        return self._tuple(ids, parent_id, checkpoint, metadata, writes)

    def postgres(self, value: Mapping[str, Any]) -> CheckpointTuple:
        """A tuple from a row of the stock ``SELECT_SQL`` (as a mapping of its columns)."""
        thread_id, checkpoint_ns = value["thread_id"], value["checkpoint_ns"]
        checkpoint_id, parent_id = value["checkpoint_id"], value["parent_checkpoint_id"]
        stored: Mapping[str, Any] = value["checkpoint"]
        blobs = [(_text(c), _text(t), b) for c, t, b in value["channel_values"] or ()]
        self._check_inline(stored.get("channel_values"), {c for c, t, _ in blobs if t != _EMPTY})
        record = {k: v for k, v in stored.items() if k != RECORD_KEY}
        self._check_record(
            (thread_id, checkpoint_ns, checkpoint_id),
            parent_id,
            [record, metadata_record(value["metadata"])],
            stored.get(RECORD_KEY),
        )
        versions: Mapping[str, Any] = record.get("channel_versions") or {}
        channel_values = dict(record.get("channel_values") or {})
        for channel, type_tag, blob in blobs:
            if type_tag == _EMPTY:
                continue
            if channel not in versions:
                raise BindingError(f"blob of channel {channel!r} has no version in its record")
            location = Location.blob(thread_id, checkpoint_ns, channel, versions[channel])
            channel_values[channel] = self.load((type_tag, blob), location)
        checkpoint = {**record, "channel_values": channel_values}
        ids = (thread_id, checkpoint_ns, checkpoint_id)
        return self._tuple(
            ids, parent_id, checkpoint, value["metadata"], value["pending_writes"] or ()
        )

    def _check_inline(self, inline: Mapping[str, Any] | None, loaded: set[str]) -> None:
        values = {ch: v for ch, v in (inline or {}).items() if ch not in loaded}
        if not values:
            return
        channels = sorted(values)
        if not self.migration.inline_values:
            raise PlaintextRefusedError(
                f"refusing plaintext value(s) of channel(s) {channels} stored inline in the"
                " checkpoint JSON (Migration.inline_values is off);"
                " a stock saver wrote them, or someone planted them"
            )
        if planted := sorted(ch for ch, v in values.items() if type(v) not in _INLINE_TYPES):
            raise StrictDecodeError(
                f"refusing inline value(s) of channel(s) {planted} in the checkpoint JSON: the"
                " stock saver only inlines None, str, int, float and bool, so these were planted"
            )
        self._inline_log.record(channels)

    def _check_record(
        self, row: tuple[str, str, str], parent_id: str | None, record: Any, seal: Any
    ) -> None:
        if seal is None:
            if self.migration.unbound:
                return
            raise UnboundValueError(
                "checkpoint record carries no seal; read it under Migration(unbound=True)"
            )
        parsed = _parse_seal(seal)
        if parent_id is None:
            # Pruning (keep_latest) nulls the link of the checkpoint it keeps:
            # the parent the seal names is accepted then, no other.
            sealed_parent = seal.get("parent")
            parent_id = sealed_parent if isinstance(sealed_parent, str) else None
        location = Location.checkpoint(*row, parent_id, canonical(record))
        if self.serde.loads_typed_at(parsed, location, migration=Migration.NONE) is not None:
            raise BindingError("checkpoint record holds a value")


def _parse_seal(seal: Any) -> tuple[str, bytes]:
    # A seal is an envelope that also names its parent.
    envelope = {k: seal.get(k) for k in ("type", "data")} if isinstance(seal, Mapping) else None
    parsed = parse_envelope(envelope)
    if parsed is None:
        raise BindingError("malformed checkpoint record")
    return parsed


def _sqlite_metadata(stored: Any) -> Any:
    if stored is None:
        return {}
    try:
        return json.loads(stored)
    except ValueError:
        raise BindingError("checkpoint metadata is not JSON") from None


# -- The record's encoding, as 0.3 sealed it: tests/vectors/record_seal.json pins it. ---------
# `canonical` encodes JSON values injectively and stably across the databases' own JSON round
# trips: object keys are sorted, and numbers are compared by value (PostgreSQL's ``jsonb`` may
# print ``1e300`` back as an integer with 300 zeros).

_SEALED_MARKER: Final = "<sealed envelope>"


def metadata_record(metadata: Any) -> Any:
    """The metadata as a record covers it: the sealed envelope by its presence only.

    The envelope authenticates itself, bound to its checkpoint; 0.3 left its
    bytes out of the record so that a new key did not invalidate the record,
    while removing or adding one still fails it.
    """
    if isinstance(metadata, Mapping) and SEALED_METADATA_KEY in metadata:
        return {**metadata, SEALED_METADATA_KEY: _SEALED_MARKER}
    return metadata


def canonical(value: Any) -> bytes:
    """An injective byte encoding of a JSON value, stable across JSON round trips.

    Layout, one tagged item per value: ``N`` / ``T`` / ``F`` for null, true
    and false; ``S`` u32be(len) UTF-8 for a string; ``D`` u32be(len) ASCII of
    the normalised decimal for a number; ``L`` u32be(count) then each item
    for an array; ``O`` u32be(count) then, by the keys' UTF-8 bytes, each key
    as a string and its value, for an object.
    """
    parts: list[bytes] = []
    _encode(value, parts)
    return b"".join(parts)


_PACK_LEN: Final = struct.Struct(">I").pack


def _string(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    return b"S" + _PACK_LEN(len(raw)) + raw


def _number(value: int | float) -> bytes:
    number = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    # jsonb has no negative zero; 1.0 and 1 are one jsonb number.
    raw = ("0" if number.is_zero() else str(number.normalize())).encode("ascii")
    return b"D" + _PACK_LEN(len(raw)) + raw


def _encode(value: Any, parts: list[bytes]) -> None:
    if value is None or value is True or value is False:
        parts.append(b"N" if value is None else b"T" if value else b"F")
    elif isinstance(value, str):
        # A str subclass (a StrEnum) encodes as the text it holds, not its str().
        parts.append(_string(str.__str__(value)))
    elif isinstance(value, (int, float)):
        parts.append(_number(value))
    elif isinstance(value, (list, tuple)):
        parts.append(b"L" + _PACK_LEN(len(value)))
        for item in value:
            _encode(item, parts)
    elif isinstance(value, Mapping):
        parts.append(b"O" + _PACK_LEN(len(value)))
        # By the keys' UTF-8 bytes (surrogatepass keeps lone surrogates in place).
        for key in sorted(value, key=lambda k: str(k).encode("utf-8", "surrogatepass")):
            parts.append(_string(str(key)))
            _encode(value[key], parts)
    else:
        raise EncryptionError(f"a checkpoint record holds a {type(value).__name__}, not JSON")
