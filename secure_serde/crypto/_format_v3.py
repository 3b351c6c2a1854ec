"""Ciphertext format v3: the only place that lays out, and parses, its bytes.

A v3 ciphertext (cipher name ``aesgcm``, as v1 and v2; the version byte tells
them apart) is::

    offset  size  field
    0       1     format version, 0x03
    1       4     key id: HKDF-SHA256(key, info="secure_serde/v1/key-id")[:4], as in v1
    5       16    key commitment: HMAC-SHA256(commitment key, 0x03 | key id)[:16]
    21      12    nonce, from os.urandom
    33      n     AES-256-GCM ciphertext of the inner serializer's bytes
    33+n    16    GCM tag

49 bytes are added to every blob, as in v2. What changes from v2 is what
the commitment covers, the version and the key id but not the nonce, and
so its place: right after the key id, so that the first 21 bytes are one
constant per key, which a reader finds its key by in one lookup. The
commitment key is the same as v2's, HKDF-SHA256(key,
info="secure_serde/v2/commitment"); the HMAC input is 5 bytes in v3 and 17
in v2, and starts with a different version byte, so no v3 commitment is
ever a v2 one.

* **Key commitment, per key.** The commitment depends only on the key, so
  a writer computes it once per key and a reader compares 16 stored bytes
  with the value it computed once per key, *before* decrypting, so a
  ciphertext that authenticates under two keys costs what it costs in v2
  (SECURITY.md, "Key commitment"). Every value under one key carries the same
  16 bytes, which links them only as the key id already does. The
  commitment is not secret (it is in every value under the key), so the
  reader finds the key by the 21 bytes of version, key id and commitment
  together, in a dict lookup: its variable time leaks nothing a stored
  value does not show.
* **A binding to the value's place**: the associated data is laid out
  exactly as v2's (see `_format_v2`). Everything before the location is
  fixed per (key, cipher name, type tag), so readers and writers cache it.

v2 values stay readable (`_format_v2`); v1 too (`_format`).
"""

from __future__ import annotations

from typing import Final

from secure_serde._errors import DecryptionError
from secure_serde.crypto._format_v2 import aad_suffix as aad_suffix
from secure_serde.crypto._primitives import GCM_NONCE_SIZE, GCM_TAG_SIZE, KEY_ID_SIZE, Buffer

VERSION: Final = 3
COMMITMENT_SIZE: Final = 16
HEADER_SIZE: Final = 1 + KEY_ID_SIZE
# Version, key id and commitment: the same 21 bytes in every value under one key.
KEYED_SIZE: Final = HEADER_SIZE + COMMITMENT_SIZE
NONCE_OFFSET: Final = KEYED_SIZE
PREFIX_SIZE: Final = NONCE_OFFSET + GCM_NONCE_SIZE
OVERHEAD: Final = PREFIX_SIZE + GCM_TAG_SIZE

_VERSION_BYTE: Final = bytes([VERSION])


def encode_header(key_id: bytes) -> bytes:
    """The 5 bytes that start every v3 ciphertext written under ``key_id``."""
    if len(key_id) != KEY_ID_SIZE:
        raise ValueError("key ids are 4 bytes")
    return _VERSION_BYTE + key_id


# What the per-key commitment HMAC covers: the version byte and the key id.
commitment_input: Final = encode_header


def split(blob: Buffer) -> tuple[bytes, bytes, bytes, Buffer]:
    """(header, commitment, nonce, ciphertext-and-tag), checking length and version first.

    The readers' hot path slices in place (`secure_serde.ciphers._keyring`);
    this is the general parser, for inspection and the slow path.
    """
    size = len(blob)
    if size < OVERHEAD:
        raise DecryptionError("ciphertext is truncated")
    if blob[0] != VERSION:
        raise DecryptionError(f"unsupported ciphertext format version {blob[0]}")
    view = memoryview(blob)
    return (
        bytes(view[:HEADER_SIZE]),
        bytes(view[HEADER_SIZE:KEYED_SIZE]),
        bytes(view[NONCE_OFFSET:PREFIX_SIZE]),
        view[PREFIX_SIZE:],
    )
