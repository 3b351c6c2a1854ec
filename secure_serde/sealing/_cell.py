"""Sealed cells: the only place that lays out, and parses, what the inner saver stores.

`SealedSaver` hands its inner saver nothing but sealed cells. A channel
value or a pending write reaches the inner saver as a ``bytes`` value (which
every langgraph serializer stores as it is); a checkpoint record and the
store identity reach it as base64 text inside the metadata. A cell is::

    offset  size  field
    0       4     magic b"SSC1"
    4       1     kind: 1 channel value, 2 pending write, 3 checkpoint record,
                  4 store identity, 5 long-term memory item (SealedStore)
    5       2     n, the length of the type tag (big-endian, 1..1024)
    7       n     type tag, ASCII: the serializer's "{inner}+{cipher}"
    -- kind 2 only --
    7+n     2     m, the length of the write's task path (big-endian)
    9+n     m     task path, UTF-8
    9+n+m   4     the write's index, signed big-endian
    -- then --
    ...     rest  the ciphertext, in the cipher's own format

Nothing in a cell is trusted as it stands. The type tag is authenticated by
the cipher (it is in the associated data); the task path and index are
coordinates of the write's location, which the associated data also
covers, so a cell read with other values fails to authenticate. They are
carried here because langgraph's ``pending_writes`` tuples do not return
them.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from typing import Final

from secure_serde._errors import BindingError

__all__ = [
    "IDENTITY",
    "ITEM",
    "RECORD",
    "VALUE",
    "WRITE",
    "Cell",
    "from_text",
    "pack",
    "pack_write",
    "to_text",
    "unpack",
]

MAGIC: Final = b"SSC1"
VALUE: Final = 1
WRITE: Final = 2
RECORD: Final = 3
IDENTITY: Final = 4
ITEM: Final = 5
_MAX_TAG: Final = 1024
_MAX_TEXT: Final = 64 * 1024 * 1024
_HEAD: Final = struct.Struct(">4sBH")
_PATH: Final = struct.Struct(">H")
_IDX: Final = struct.Struct(">i")
_NAMES: Final = {
    VALUE: "channel value",
    WRITE: "pending write",
    RECORD: "record",
    IDENTITY: "identity",
    ITEM: "store item",
}


@dataclass(frozen=True)
class Cell:
    """A parsed cell; nothing in it is authenticated until its ciphertext opens."""

    kind: int
    type_tag: str
    ciphertext: bytes
    task_path: str = ""
    idx: int = 0


def pack(kind: int, type_tag: str, ciphertext: bytes) -> bytes:
    """A cell of ``kind`` (not a write: see `pack_write`)."""
    tag = type_tag.encode("ascii")
    if not 0 < len(tag) <= _MAX_TAG:
        raise ValueError("type tags are 1 to 1024 ASCII bytes")
    return _HEAD.pack(MAGIC, kind, len(tag)) + tag + ciphertext


def pack_write(type_tag: str, task_path: str, idx: int, ciphertext: bytes) -> bytes:
    """A pending write's cell, carrying the coordinates ``pending_writes`` drops."""
    path = task_path.encode("utf-8", "surrogatepass")
    if len(path) > 0xFFFF:
        raise ValueError("task paths are at most 65535 bytes")
    return pack(WRITE, type_tag, _PATH.pack(len(path)) + path + _IDX.pack(idx) + ciphertext)


def unpack(raw: object, kind: int) -> Cell:  # noqa: C901 - one check per field, in order
    """Parse a cell that must be of ``kind``; every length is checked before slicing.

    Raises:
        BindingError: not a sealed cell of that kind (plaintext, truncated,
            or a cell of another kind put in its place).
    """
    if type(raw) is not bytes:
        if not isinstance(raw, (bytearray, memoryview)):
            raise BindingError(
                f"a stored {_NAMES[kind]} is {type(raw).__name__}, not a sealed cell: this store"
                " is sealed, and nothing in it is read unsealed"
            )
        raw = bytes(raw)
    size = len(raw)
    if size < _HEAD.size:
        raise BindingError(f"a stored {_NAMES[kind]} is too short to be a sealed cell")
    magic, found, tag_len = _HEAD.unpack_from(raw)
    if magic != MAGIC:
        raise BindingError(
            f"a stored {_NAMES[kind]} is not a sealed cell: this store is sealed, and nothing"
            " in it is read unsealed"
        )
    if found != kind:
        name = _NAMES.get(found, f"kind {found}")
        raise BindingError(f"a {name} cell was found where a {_NAMES[kind]} belongs")
    offset = _HEAD.size
    if not 0 < tag_len <= _MAX_TAG or size < offset + tag_len:
        raise BindingError(f"a stored {_NAMES[kind]} cell is truncated")
    try:
        tag = raw[offset : offset + tag_len].decode("ascii")
    except UnicodeDecodeError:
        raise BindingError(f"a stored {_NAMES[kind]} cell has a malformed type tag") from None
    offset += tag_len
    if kind != WRITE:
        return Cell(kind, tag, raw[offset:])
    if size < offset + _PATH.size:
        raise BindingError("a stored pending write cell is truncated")
    (path_len,) = _PATH.unpack_from(raw, offset)
    offset += _PATH.size
    if size < offset + path_len + _IDX.size:
        raise BindingError("a stored pending write cell is truncated")
    try:
        path = raw[offset : offset + path_len].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise BindingError("a stored pending write cell has a malformed task path") from None
    offset += path_len
    (idx,) = _IDX.unpack_from(raw, offset)
    return Cell(kind, tag, raw[offset + _IDX.size :], path, idx)


def to_text(cell: bytes) -> str:
    """A cell as metadata text (stores keep metadata as JSON, which has no bytes)."""
    return base64.b64encode(cell).decode("ascii")


def from_text(text: object, kind: int) -> Cell:
    """Parse a cell kept as metadata text; malformed text is a typed refusal."""
    if not isinstance(text, str):
        raise BindingError(
            f"a stored {_NAMES[kind]} is {type(text).__name__}, not sealed text: this store is"
            " sealed, and nothing in it is read unsealed"
        )
    if len(text) > _MAX_TEXT:
        raise BindingError(f"a stored {_NAMES[kind]} is too long")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise BindingError(f"a stored {_NAMES[kind]} is not valid sealed text") from None
    return unpack(raw, kind)
