"""`Location`: where a stored value lives, as sealed into its associated data.

The sealed savers seal every value for its location, and open it only at
the location they are reading. A value moved, copied or swapped into
another row, whatever the coordinate that differs, fails to authenticate
(`BindingError`) before a byte of it is deserialized.

The canonical encoding (the ``location`` field of format v2's associated
data, see ``_format_v2``) is::

    "SSLOC" | version 0x01 | kind(1) | count(1)
    | for each field: marker(1) | [len(4, big-endian) | bytes]

with kind 1 blob, 2 write, 3 checkpoint record, 4 metadata envelope, 5 store
identity, 6 long-term memory store item; the fields are ``thread_id``,
``checkpoint_ns`` and then the kind's own coordinates, in the order of the
constructors below. A store item (`secure_serde.SealedStore`) has no thread:
its ``thread_id`` and ``checkpoint_ns`` are empty, and its coordinates are
its namespace, as one bytes field, then its key::

    count(4, big-endian) | for each label: len(4, big-endian) | UTF-8

A location in a store that has an identity (everything
`secure_serde.SealedSaver` writes) starts with version 0x02 instead, and its
first field is the store id, so a value copied to another store, even one
under the same key, does not authenticate there::

    "SSLOC" | version 0x02 | kind(1) | count(1) | store id field | fields as above

Marker 0 is ``None`` (no length follows), 1 a UTF-8 string, 2 raw bytes.
Every field is length-prefixed and the kind fixes their count and meaning,
so the encoding is injective: two different locations never share bytes.
An unbound value (written through ``serde=`` on a saver that does not
bind) has the empty location, ``b""``, which no `Location` encodes to.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, get_args

Kind = Literal["blob", "write", "checkpoint", "metadata", "identity", "item"]

_MAGIC: Final = b"SSLOC\x01"
_MAGIC_IN_STORE: Final = b"SSLOC\x02"
# 1 blob, 2 write, ... 6 item: the kinds in Kind's order, as the layout above numbers them.
_KIND_BYTES: Final[dict[str, int]] = {kind: n for n, kind in enumerate(get_args(Kind), start=1)}
_NONE: Final = b"\x00"
_HEAD: Final = struct.Struct(">BI")
_STR: Final = 1
_BYTES: Final = 2

Coordinate = str | bytes | None


@dataclass(frozen=True)
class Location:
    """One place in a checkpoint store: a kind, a thread, a namespace, and coordinates.

    Build one with the constructor for its kind (`blob`, `write`,
    `checkpoint`, `metadata`) so that the coordinates are always the same
    ones, in the same order.
    """

    kind: Kind
    thread_id: str
    checkpoint_ns: str
    coordinates: tuple[Coordinate, ...]
    store: bytes | None = None

    def in_store(self, store: bytes) -> Location:
        """This location inside the store whose identity is ``store``."""
        return Location(self.kind, self.thread_id, self.checkpoint_ns, self.coordinates, store)

    @classmethod
    def blob(
        cls,
        thread_id: str,
        checkpoint_ns: str,
        channel: str,
        version: object,
        store: bytes | None = None,
    ) -> Location:
        """A channel value: ``checkpoint_blobs`` (PostgreSQL); ``store``: see `in_store`."""
        return cls("blob", str(thread_id), checkpoint_ns, (channel, str(version)), store)

    @classmethod
    def write(  # noqa: PLR0913 - a write row is named by its seven key columns
        cls,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        idx: int,
        channel: str,
        store: bytes | None = None,
    ) -> Location:
        """A pending write: ``checkpoint_writes`` (PostgreSQL) or ``writes`` (SQLite)."""
        return cls(
            "write",
            str(thread_id),
            checkpoint_ns,
            (checkpoint_id, task_id, task_path, str(int(idx)), channel),
            store,
        )

    @classmethod
    def checkpoint(  # noqa: PLR0913 - the record's ids, its encoding, and its store
        cls,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        record: bytes,
        store: bytes | None = None,
    ) -> Location:
        """A checkpoint record, with ``record`` the canonical encoding of its plaintext parts."""
        return cls(
            "checkpoint", str(thread_id), checkpoint_ns, (checkpoint_id, parent_id, record), store
        )

    @classmethod
    def metadata(cls, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> Location:
        """A sealed-metadata envelope."""
        return cls("metadata", str(thread_id), checkpoint_ns, (checkpoint_id,))

    @classmethod
    def identity(cls, thread_id: str) -> Location:
        """A store identity, kept in the reserved thread ``thread_id``."""
        return cls("identity", thread_id, "", ())

    @classmethod
    def item(cls, namespace: Sequence[str], key: str) -> Location:
        """A long-term memory item: ``namespace`` and ``key`` of a ``BaseStore`` item."""
        return cls("item", "", "", (_namespace_bytes(namespace), str(key)))

    def encode(self) -> bytes:
        """The canonical bytes bound into the value's associated data."""
        if self.store is None:
            values = (self.thread_id, self.checkpoint_ns, *self.coordinates)
            return b"".join(
                (_MAGIC, bytes([_KIND_BYTES[self.kind], len(values)]), *map(_field, values))
            )
        # Same layout over (store, thread, ns, *coordinates); the prefix every
        # value of one thread and namespace shares is encoded once (sealed reads and writes
        # encode a location per value).
        return b"".join(
            (
                _MAGIC_IN_STORE,
                bytes([_KIND_BYTES[self.kind], 3 + len(self.coordinates)]),
                _shared_prefix(self.store, self.thread_id, self.checkpoint_ns),
                *map(_field, self.coordinates),
            )
        )

    def __repr__(self) -> str:
        # Ids only; the record bytes can be long and say nothing useful here.
        shown = [c if not isinstance(c, bytes) else f"<{len(c)} bytes>" for c in self.coordinates]
        return (
            f"Location({self.kind}, thread={self.thread_id!r}, ns={self.checkpoint_ns!r}, {shown})"
        )


def _namespace_bytes(namespace: Sequence[str]) -> bytes:
    parts = [struct.pack(">I", len(namespace))]
    for label in namespace:
        raw = str(label).encode("utf-8", "surrogatepass")
        parts += (struct.pack(">I", len(raw)), raw)
    return b"".join(parts)


def _field(value: Coordinate) -> bytes:
    if value is None:
        return _NONE
    if isinstance(value, str):
        # surrogatepass: a lone surrogate in an id must not make a row unwritable.
        raw, marker = value.encode("utf-8", "surrogatepass"), _STR
    else:
        raw, marker = bytes(value), _BYTES
    return _HEAD.pack(marker, len(raw)) + raw


@functools.lru_cache(maxsize=1024)
def _shared_prefix(store: bytes, thread_id: str, checkpoint_ns: str) -> bytes:
    return _field(store) + _field(thread_id) + _field(checkpoint_ns)
