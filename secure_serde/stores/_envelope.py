"""Sealed-metadata envelopes: a cell kept as one entry of a JSON column.

This module is the one implementation of the layout: the sealed savers
build envelopes with `envelope`, and the savers, audit, inspect and rewrap
all read them through `parse_envelope`, so they agree on what is well
formed. The ``metadata`` JSON column of a sealed saver's checkpoint is::

    {<structural and user-chosen plaintext keys>,
     "__secure_serde_sealed__": {"type": <serde type tag>, "data": <base64>},
     "__secure_serde_index__": {<indexed key>: "<key id>:<mac>"}}

``data`` is the standard base64 (with padding) of the serializer's bytes
for the sealed keys, which include ``__secure_serde_row__``:
``[thread_id, checkpoint_ns, checkpoint_id]`` (`ROW_KEY`), so an entry
copied to another checkpoint is refused on read
(secure_serde/stores/_v03_metadata.py). ``__secure_serde_index__``
(`INDEX_METADATA_KEY`) holds the blind indexes of sealed keys
(secure_serde/stores/_v03_index.py). tests/vectors/metadata_envelope.json
freezes the layout.

The sealed PostgreSQL savers also keep each checkpoint record's seal in
``checkpoints.checkpoint`` under ``RECORD_KEY``, as ``{"type", "data",
"parent"}``: a cell of table ``RECORD_TABLE`` (`record_cell`), so rewrap
moves it to a new key like any value and audit authenticates it.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

from secure_serde.stores._base import Cell, RowRef

__all__ = [
    "INDEX_METADATA_KEY",
    "METADATA_TABLE",
    "RECORD_KEY",
    "RECORD_TABLE",
    "ROW_KEY",
    "SEALED_METADATA_KEY",
    "envelope",
    "envelope_cell",
    "envelope_json",
    "parse_envelope",
    "record_cell",
]

SEALED_METADATA_KEY: Final = "__secure_serde_sealed__"
INDEX_METADATA_KEY: Final = "__secure_serde_index__"
# Inside the sealed entry: the row it was sealed for.
ROW_KEY: Final = "__secure_serde_row__"
# The TableSpec/RowRef name of sealed-metadata cells: table and JSON column.
METADATA_TABLE: Final = "checkpoints.metadata"
# The checkpoint JSON key (PostgreSQL) that holds a record's seal, and
# the TableSpec/RowRef name of those cells.
RECORD_KEY: Final = "__secure_serde_record__"
RECORD_TABLE: Final = "checkpoints.checkpoint"
_TYPE: Final = "type"
_DATA: Final = "data"
_PARENT: Final = "parent"


def parse_envelope(envelope: Any) -> tuple[str, bytes] | None:
    """The ``(type tag, ciphertext)`` an envelope holds, or ``None`` if it is malformed."""
    if not isinstance(envelope, dict) or set(envelope) != {_TYPE, _DATA}:
        return None
    type_tag, encoded = envelope[_TYPE], envelope[_DATA]
    if not isinstance(type_tag, str) or not isinstance(encoded, str):
        return None
    try:
        return type_tag, base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None


def envelope(type_tag: str, data: bytes) -> dict[str, str]:
    """The envelope for ``(type_tag, data)``: the value of `SEALED_METADATA_KEY`."""
    return {_TYPE: type_tag, _DATA: base64.b64encode(data).decode("ascii")}


def envelope_json(type_tag: str, data: bytes) -> str:
    """The envelope for ``(type_tag, data)``, as JSON text, exactly as the savers write it."""
    return json.dumps(envelope(type_tag, data))


def envelope_cell(ref: RowRef, envelope: Any) -> Cell:
    """The cell an envelope holds; a malformed one has no type tag, so it reads as unreadable.

    So does one whose base64 is not the canonical encoding of its bytes
    (our savers never write such): the compare-and-swap matches the
    envelope rebuilt from the cell, which it would never equal.
    """
    parsed = parse_envelope(envelope)
    if parsed is None or json.loads(envelope_json(*parsed)) != envelope:
        return Cell(ref, None, b"")
    return Cell(ref, *parsed)


def record_cell(ref: RowRef, seal: Any) -> Cell:
    """The cell a checkpoint record's seal holds; malformed ones read as unreadable.

    The ``parent`` entry is not part of the cell: a swap rewrites ``type``
    and ``data`` in place and keeps it.
    """
    if not isinstance(seal, dict) or not set(seal) <= {_TYPE, _DATA, _PARENT}:
        return Cell(ref, None, b"")
    parsed = parse_envelope({k: v for k, v in seal.items() if k != _PARENT})
    if parsed is None or base64.b64encode(parsed[1]).decode("ascii") != seal[_DATA]:
        return Cell(ref, None, b"")
    return Cell(ref, *parsed)
