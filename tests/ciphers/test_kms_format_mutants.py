"""Boundaries of the KMS envelope layout that surviving mutants showed untested.

`_kms_format.split` is the one parser of store bytes before KMS is called; the
cipher's own tests reach it only through GCM, which refuses a wrongly split
blob as well. These call it alone, at every length boundary, and with a
wrapped key long enough to use the high byte of its length field.
"""

from __future__ import annotations

import struct

import pytest

from secure_serde import DecryptionError
from secure_serde.ciphers import _kms_format as fmt

CMK = b"\x01\x02\x03\x04"
NONCE = bytes(range(12))


def _blob(wrapped: bytes, sealed: bytes) -> bytes:
    return fmt.encode_header(CMK, wrapped) + NONCE + sealed


@pytest.mark.parametrize("wrapped_size", [1, 255, 256, 300, fmt.MAX_WRAPPED_KEY])
def test_split_returns_exactly_the_fields_written(wrapped_size: int) -> None:
    wrapped = bytes(i % 251 for i in range(wrapped_size))
    sealed = b"t" * 16  # an empty plaintext's GCM tag: the shortest valid blob
    header, nonce, rest = fmt.split(_blob(wrapped, sealed))
    assert header == fmt.encode_header(CMK, wrapped)
    assert header[fmt.WRAPPED_AT :] == wrapped
    assert (nonce, bytes(rest)) == (NONCE, sealed)


def test_the_shortest_blob_is_one_wrapped_byte_and_a_tag() -> None:
    shortest = _blob(b"w", b"t" * 16)
    assert len(shortest) == fmt.FIXED_OVERHEAD + 1
    fmt.split(shortest)
    for cut in range(len(shortest)):
        with pytest.raises(DecryptionError, match="truncated"):
            fmt.split(shortest[:cut])


@pytest.mark.parametrize("wrapped_size", [1, 96, 300])
def test_split_alone_refuses_every_truncation(wrapped_size: int) -> None:
    blob = _blob(bytes(wrapped_size), b"ciphertext" + b"t" * 16)
    fmt.split(blob)
    for cut in range(len(blob) - len(b"ciphertext")):
        with pytest.raises(DecryptionError):
            fmt.split(blob[:cut])


@pytest.mark.parametrize(
    ("declared", "message"), [(0, "malformed"), (fmt.MAX_WRAPPED_KEY + 1, "malformed")]
)
def test_split_refuses_wrapped_lengths_out_of_range(declared: int, message: str) -> None:
    body = bytes(max(declared, 1)) + NONCE + b"t" * 16
    blob = bytes([fmt.VERSION]) + CMK + struct.pack(">H", declared) + body
    with pytest.raises(DecryptionError, match=message):
        fmt.split(blob)


def test_encode_header_accepts_a_one_byte_wrapped_key() -> None:
    assert fmt.encode_header(CMK, b"w") == b"\x01" + CMK + b"\x00\x01w"


def test_the_encryption_context_limits_are_refused_as_value_errors() -> None:
    # Either limit may fire first; both must be a ValueError (the cipher turns it
    # into a ConfigurationError), never a struct.error from an overflowing count.
    with pytest.raises(ValueError, match="65535 entries"):
        fmt.encode_encryption_context({str(i): "" for i in range(0x10000)})
    # At the count limit itself, it is the size in bytes that refuses.
    with pytest.raises(ValueError, match=f"more than {fmt.MAX_ENCRYPTION_CONTEXT} B"):
        fmt.encode_encryption_context({str(i): "" for i in range(0xFFFF)})
