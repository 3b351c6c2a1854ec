"""How a checkpoint record is encoded for its seal: `canonical` and `metadata_record`.

A checkpoint *record* is what the database keeps outside the values: the
ids, the parent link, ``channel_versions``, ``versions_seen`` and the
plaintext metadata. 0.3's savers sealed it, and `V03Reader` checks that
seal (secure_serde/stores/_v03_rows.py) from these bytes.

`canonical` encodes JSON values injectively and stably across the
databases' own JSON round trips: object keys are sorted, and numbers are
compared by value (PostgreSQL's ``jsonb`` may print ``1e300`` back as an
integer with 300 zeros).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any, Final

from secure_serde._errors import EncryptionError
from secure_serde.stores._v03_metadata import SEALED_METADATA_KEY

__all__ = ["canonical", "metadata_record"]

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
    as a string and its value, for an object. Pinned by
    tests/vectors/record_seal.json.
    """
    parts: list[bytes] = []
    _encode(value, parts)
    return b"".join(parts)


# Every checkpoint write and read encodes its record, and the same short
# strings (keys, channel names, versions) and small numbers recur in every
# one: their encodings are cached. Long strings are not, so the caches stay
# small and hold nothing but the ids and structure of recent records.
_PACK_LEN: Final = struct.Struct(">I").pack
_CACHED_TEXT: Final = 64


@lru_cache(maxsize=4096)
def _short_text(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    return b"S" + _PACK_LEN(len(raw)) + raw


def _text(value: str) -> bytes:
    if len(value) <= _CACHED_TEXT:
        return _short_text(value)
    raw = value.encode("utf-8", "surrogatepass")
    return b"S" + _PACK_LEN(len(raw)) + raw


@lru_cache(maxsize=1024, typed=True)
def _number(value: int | float) -> bytes:
    number = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    # jsonb has no negative zero; 1.0 and 1 are one jsonb number.
    text = "0" if number.is_zero() else str(number.normalize())
    raw = text.encode("ascii")
    return b"D" + _PACK_LEN(len(raw)) + raw


def _utf8_order(key: object) -> bytes:
    return str(key).encode("utf-8", "surrogatepass")


def _encode(value: Any, parts: list[bytes]) -> None:
    # The JSON types a database hands back are tested first, by identity or
    # concrete class: the abstract-class check below is slow, and this runs
    # for every item of every record.
    kind = type(value)
    if kind is str:
        parts.append(_text(value))
    elif kind is dict:
        _object(value, parts)
    elif isinstance(value, (list, tuple)):
        parts.append(b"L" + _PACK_LEN(len(value)))
        for item in value:
            _encode(item, parts)
    elif value is None or value is True or value is False:
        parts.append(b"N" if value is None else b"T" if value else b"F")
    elif isinstance(value, str):
        # A str subclass (a StrEnum) encodes as the text it holds, not its str().
        parts.append(_text(str.__str__(value)))
    elif isinstance(value, (int, float)):
        parts.append(_number(value))
    elif isinstance(value, Mapping):
        _object(value, parts)
    else:
        raise EncryptionError(f"a checkpoint record holds a {type(value).__name__}, not JSON")


def _object(value: Mapping[Any, Any], parts: list[bytes]) -> None:
    parts.append(b"O" + _PACK_LEN(len(value)))
    # For str keys, code point order is UTF-8 byte order (surrogatepass keeps
    # lone surrogates in place too), so the plain sort gives the same order.
    if all(type(k) is str for k in value):
        for key in sorted(value):
            parts.append(_text(key))
            _encode(value[key], parts)
        return
    for key in sorted(value, key=_utf8_order):
        parts.append(_text(str(key)))
        _encode(value[key], parts)
