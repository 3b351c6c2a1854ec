"""Ciphertext format v1: the only place that lays out, and parses, its bytes.

A v1 ciphertext (cipher name ``aesgcm`` in the type tag) is::

    offset  size  field
    0       1     format version, 0x01
    1       4     key id: HKDF-SHA256(key, info="secure_serde/v1/key-id")[:4]
    5       12    nonce, from os.urandom
    17      n     AES-256-GCM ciphertext of the inner serializer's bytes
    17+n    16    GCM tag

33 bytes are added to every blob. New values are written in format v3
(``_format_v3``: a per-key commitment and a binding to the value's row);
v1 and v2 (``_format_v2``) stay readable. Like a Tink prefix, the version and the
key id tell the reader which key to use without trial decryption; unlike
Tink's prefix they are authenticated, because the associated data, never
stored and rebuilt on every read, is::

    version(1) | key id(4) | len(cipher name)(1) | cipher name | inner type tag

Every field before the type tag has a fixed or prefixed length, so no two
different (header, cipher name, type tag) triples share an AAD. Binding the
inner type tag is what makes a row relabelled from ``msgpack+aesgcm`` to
``pickle+aesgcm`` fail to authenticate instead of being unpickled.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from secure_serde._errors import DecryptionError, UnknownKeyError
from secure_serde.crypto import _format_v2, _format_v3
from secure_serde.crypto._primitives import (
    GCM_NONCE_SIZE,
    GCM_TAG_SIZE,
    KEY_ID_SIZE,
    MAX_CIPHER_NAME,
    Buffer,
)

VERSION: Final = 1
CIPHER_NAME: Final = "aesgcm"
HEADER_SIZE: Final = 1 + KEY_ID_SIZE
PREFIX_SIZE: Final = HEADER_SIZE + GCM_NONCE_SIZE
OVERHEAD: Final = PREFIX_SIZE + GCM_TAG_SIZE

_VERSION_BYTE: Final = bytes([VERSION])
_VIEW_THRESHOLD: Final = 16 * 1024


@dataclass(frozen=True)
class HeaderV1:
    """The parsed, not yet authenticated, header of a v1 (or v2, or v3) ciphertext."""

    version: int
    key_id: bytes
    nonce: bytes
    sealed_size: int

    @property
    def key_id_hex(self) -> str:
        return key_id_hex(self.key_id)


def key_id_hex(key_id: bytes) -> str:
    """The printable form of a key id, used in errors, logs and the CLI."""
    return key_id.hex()


def key_name(key_id: str, label: str = "") -> str:
    """How messages name a key: by key id, and by label when one is configured."""
    return f"key id {key_id} (label {label!r})" if label else f"key id {key_id}"


def encode_header(key_id: bytes) -> bytes:
    """The 5 bytes that start every ciphertext written under ``key_id``."""
    if len(key_id) != KEY_ID_SIZE:
        raise ValueError("key ids are 4 bytes")
    return _VERSION_BYTE + key_id


def build_aad(header: bytes, cipher_name: bytes, context: bytes) -> bytes:
    """Associated data binding a header to its cipher name and inner type tag."""
    if len(cipher_name) > MAX_CIPHER_NAME:
        raise ValueError("cipher names are at most 255 bytes")
    return header + struct.pack("B", len(cipher_name)) + cipher_name + context


def split(blob: Buffer) -> tuple[bytes, bytes, Buffer]:
    """Split a v1 ciphertext into (header, nonce, ciphertext-and-tag).

    Checks the length and version before any slicing, so a truncated or
    foreign blob raises `DecryptionError` rather than reaching AES.
    """
    size = len(blob)
    if size < OVERHEAD:
        raise DecryptionError("ciphertext is truncated")
    if blob[0] != VERSION:
        raise DecryptionError(f"unsupported ciphertext format version {blob[0]}")
    if size < _VIEW_THRESHOLD and type(blob) is bytes:
        return blob[:HEADER_SIZE], blob[HEADER_SIZE:PREFIX_SIZE], blob[PREFIX_SIZE:]
    # Slicing copies; for a large blob that copy (a fresh allocation the
    # size of the checkpoint) costs more than AES itself, so hand AES a view.
    view = memoryview(blob)
    return bytes(view[:HEADER_SIZE]), bytes(view[HEADER_SIZE:PREFIX_SIZE]), view[PREFIX_SIZE:]


def parse_header(blob: Buffer) -> HeaderV1:
    """Parse a v1, v2 or v3 header for inspection; says nothing about authenticity.

    Every version of the ``aesgcm`` cipher starts with a version byte and a
    key id; the v2 layout is in ``_format_v2``, v3's in ``_format_v3``.
    """
    version = blob[0] if len(blob) > 0 else VERSION
    if version == _format_v3.VERSION:
        header, _, nonce, sealed = _format_v3.split(blob)
    elif version == _format_v2.VERSION:
        parts = _format_v2.split(blob)
        header, nonce, sealed = parts.header, parts.nonce, parts.sealed
    else:
        header, nonce, sealed = split(blob)
    return HeaderV1(version=header[0], key_id=header[1:], nonce=nonce, sealed_size=len(sealed))


def unknown_key(key_id: bytes) -> UnknownKeyError:
    hex_id = key_id_hex(key_id)
    return UnknownKeyError(f"no configured key has key id {hex_id}", key_id=hex_id)
