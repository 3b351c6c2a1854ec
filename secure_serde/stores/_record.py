"""How a checkpoint record is encoded for its seal: `canonical` and `metadata_record`.

A checkpoint *record* is what the database keeps outside the values: the
ids, the parent link, ``channel_versions``, ``versions_seen`` and the
plaintext metadata. The sealed savers seal it (secure_serde/savers/_bound.py)
and tools locate it (`_locate`) from the same bytes, so the encoding lives
here, in the layer both stand on.

`canonical` encodes JSON values injectively and stably across the
databases' own JSON round trips: object keys are sorted, and numbers are
compared by value (PostgreSQL's ``jsonb`` may print ``1e300`` back as an
integer with 300 zeros).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from secure_serde._errors import EncryptionError
from secure_serde.stores._envelope import SEALED_METADATA_KEY

__all__ = ["canonical", "metadata_record"]

_SEALED_MARKER: Final = "<sealed envelope>"


def metadata_record(metadata: Any) -> Any:
    """The metadata as a record covers it: the sealed envelope by its presence only.

    The envelope authenticates itself, bound to its checkpoint; leaving its
    bytes out of the record lets rewrap re-seal it under a new key without
    invalidating the record, while removing or adding one still fails it.
    """
    if isinstance(metadata, Mapping) and SEALED_METADATA_KEY in metadata:
        return {**metadata, SEALED_METADATA_KEY: _SEALED_MARKER}
    return metadata


def canonical(value: Any) -> bytes:
    """An injective byte encoding of a JSON value, stable across JSON round trips."""
    parts: list[bytes] = []
    _encode(value, parts)
    return b"".join(parts)


def _text(value: str, parts: list[bytes]) -> None:
    raw = value.encode("utf-8", "surrogatepass")
    parts.append(b"S" + struct.pack(">I", len(raw)) + raw)


def _encode(value: Any, parts: list[bytes]) -> None:
    if value is None:
        parts.append(b"N")
    elif value is True:
        parts.append(b"T")
    elif value is False:
        parts.append(b"F")
    elif isinstance(value, str):
        _text(value, parts)
    elif isinstance(value, (int, float)):
        number = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
        # jsonb has no negative zero; 1.0 and 1 are one jsonb number.
        text = "0" if number.is_zero() else str(number.normalize())
        raw = text.encode("ascii")
        parts.append(b"D" + struct.pack(">I", len(raw)) + raw)
    elif isinstance(value, (list, tuple)):
        parts.append(b"L" + struct.pack(">I", len(value)))
        for item in value:
            _encode(item, parts)
    elif isinstance(value, Mapping):
        parts.append(b"O" + struct.pack(">I", len(value)))
        for key in sorted(value, key=lambda k: str(k).encode("utf-8", "surrogatepass")):
            _text(str(key), parts)
            _encode(value[key], parts)
    else:
        raise EncryptionError(f"a checkpoint record holds a {type(value).__name__}, not JSON")
