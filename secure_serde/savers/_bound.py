"""Bind every value a sealed saver stores to its row, and authenticate each checkpoint record.

`Binder` is what the sealed savers (PostgreSQL and SQLite) share: it writes
each channel value, pending write and sealed-metadata envelope with
`EncryptedSerializer.dumps_typed_at` at its `Location`, reads it back only
at the location being read, and seals each checkpoint record.

A checkpoint *record* is what the database keeps outside the values: the
ids, the parent link, ``channel_versions`` (which blob each channel reads),
``versions_seen`` and the plaintext metadata. Its seal is the serializer's
encryption of ``None`` at ``Location.checkpoint(thread, ns, id, parent,
canonical(record))``: an AEAD tag over the canonical record, so re-pointing
a channel at another version, re-parenting, or editing a plaintext metadata
key fails it. Reusing the cipher gives the seal key ids, rotation and KMS
for free. The seal names the parent it was made with, so a link that
pruning nulled (``keep_latest`` orphans the checkpoint it keeps) still
verifies; a link to any other checkpoint does not.

`canonical` and `metadata_record`, the record's encoding, live in
secure_serde/stores/_record.py: tools locate records from the same bytes.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from langgraph.checkpoint.serde.base import SerializerProtocol

from secure_serde._binding import Location
from secure_serde._errors import (
    BindingError,
    DecryptionError,
    UnboundValueError,
)
from secure_serde._migration import Migration
from secure_serde._readrule import ReadRule
from secure_serde._serializer import EncryptedSerializer
from secure_serde.stores import RECORD_KEY, canonical, metadata_record

__all__ = [
    "RECORD_KEY",
    "Binder",
    "BoundSerde",
    "binder_for",
    "canonical",
    "metadata_record",
]

_TYPE: Final = "type"
_DATA: Final = "data"
_PARENT: Final = "parent"


class BoundSerde:
    """A `SerializerProtocol` view of a serializer at one location (for the metadata sealer)."""

    __slots__ = ("_location", "_migration", "_serde")

    def __init__(
        self, serde: EncryptedSerializer, location: Location, migration: Migration
    ) -> None:
        self._serde = serde
        self._location = location
        self._migration = migration

    @property
    def read_rule(self) -> ReadRule:
        """The serializer's read rule (`seals` asks it whether a tag is encrypted)."""
        return self._serde.read_rule

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self._serde.dumps_typed_at(obj, self._location)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self._serde.loads_typed_at(data, self._location, migration=self._migration)


def _checked(data: tuple[Any, Any]) -> tuple[str, bytes]:
    type_tag, payload = data
    if not isinstance(type_tag, str) or not isinstance(payload, (bytes, bytearray, memoryview)):
        raise DecryptionError("stored value has no type tag or no bytes")
    return type_tag, bytes(payload) if not isinstance(payload, bytes) else payload


@dataclass(frozen=True)
class Binder:
    """Writes and reads one saver's values at their locations."""

    serde: EncryptedSerializer
    migration: Migration

    def at(self, location: Location) -> BoundSerde:
        return BoundSerde(self.serde, location, self.migration)

    def dump(self, value: Any, location: Location) -> tuple[str, bytes]:
        return self.serde.dumps_typed_at(value, location)

    def load(self, data: tuple[Any, Any], location: Location) -> Any:
        return self.serde.loads_typed_at(_checked(data), location, migration=self.migration)

    def seal_record(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        record: Any,
    ) -> dict[str, str | None]:
        """The seal of one checkpoint record, as a JSON-ready envelope."""
        location = Location.checkpoint(
            thread_id, checkpoint_ns, checkpoint_id, parent_id, canonical(record)
        )
        type_tag, data = self.serde.dumps_typed_at(None, location)
        return {
            _TYPE: type_tag,
            _DATA: base64.b64encode(data).decode("ascii"),
            _PARENT: parent_id,
        }

    def check_record(  # noqa: PLR0913 - the record is named by its ids and parent
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        record: Any,
        seal: Any,
    ) -> None:
        """Authenticate a record against its seal.

        Raises:
            UnboundValueError: no seal (a stock saver or an older secure_serde
                wrote the record), outside ``Migration(unbound=True)``.
            BindingError: the seal does not authenticate this record here.
        """
        if seal is None:
            if self.migration.unbound:
                return
            raise UnboundValueError(
                "checkpoint record carries no seal; read it under Migration(unbound=True)"
            )
        parsed = _parse_seal(seal)
        if parent_id is None:
            # Pruning (keep_latest) cuts a kept checkpoint loose from its deleted
            # parent by nulling the link: accepted, as deleting rows is; any
            # other parent than the sealed one is not.
            sealed_parent = seal.get(_PARENT)
            parent_id = sealed_parent if isinstance(sealed_parent, str) else None
        location = Location.checkpoint(
            thread_id, checkpoint_ns, checkpoint_id, parent_id, canonical(record)
        )
        if self.serde.loads_typed_at(parsed, location, migration=Migration.NONE) is not None:
            raise BindingError("checkpoint record seal holds a value")


def _parse_seal(seal: Any) -> tuple[str, bytes]:
    if isinstance(seal, Mapping) and isinstance(seal.get(_TYPE), str):
        data = seal.get(_DATA)
        if isinstance(data, str):
            try:
                raw: bytes | None = base64.b64decode(data, validate=True)
            except ValueError:
                raw = None
            if raw is not None:
                return seal[_TYPE], raw
    raise BindingError("malformed checkpoint record seal")


def binder_for(serde: SerializerProtocol, migration: Migration) -> Binder | None:
    """The binder for a saver's serde; ``None`` when the serde cannot bind values to rows."""
    if isinstance(serde, EncryptedSerializer) and serde.binds_locations:
        return Binder(serde, migration)
    return None
