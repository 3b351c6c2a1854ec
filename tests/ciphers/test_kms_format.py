"""KMS envelope format v1: frozen vectors, an independent reading of the layout, length checks.

The vectors are sealed through the cipher's private fixed-nonce hook under
a fixed data key and fixed wrapped-key bytes, so no KMS call is needed; the
test also rebuilds the associated data by hand from the layout documented
in ``secure_serde/ciphers/_kms_format.py`` and opens the vectors with
``cryptography``'s AESGCM directly, so the documentation, not only the
code, is pinned.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from secure_serde import DecryptionError, UnknownKeyError
from secure_serde.ciphers import KmsEnvelopeCipher
from secure_serde.ciphers import _kms_format as fmt
from tests.ciphers.kms_support import KmsCallCounter

ARN = "arn:aws:kms:us-east-1:123456789012:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
USER_CONTEXT = {"tenant": "acme", "env": "test"}
DATA_KEY = bytes(range(32))
# The size of the CiphertextBlob real AWS KMS returns for an AES_256 data key.
WRAPPED = bytes((i * 7 + 3) % 256 for i in range(184))

# version 01 | CMK id a45003bd | wrapped length 00b8 (184)
FROZEN_PREFIX = bytes.fromhex("01a45003bd00b8")
# (inner type tag, plaintext, nonce, everything after the wrapped key)
VECTORS: list[tuple[str, bytes, bytes, str]] = [
    (
        "msgpack",
        b"secure_serde kms vector",
        bytes(range(12)),
        "000102030405060708090a0b3467b56eb7809d68e833f3ee9182151ea3a0e25784142dd7de06446b80975b41"
        "fcbd66cb813cfc",
    ),
    (
        "",
        b"CipherProtocol alone: empty context",
        bytes(range(100, 112)),
        "6465666768696a6b6c6d6e6f0b72ae0e1c9b06ec5116308bb5094a9c2ead686fb14c961fd7a5d56898cccb3c"
        "f19134c4791159d2a6626177bfd14f018ea34c",
    ),
    ("bytes", b"", bytes(12), "0000000000000000000000002c9056d4800197c31bf5c516fa06324e"),
]


def _expected(tail_hex: str) -> bytes:
    return FROZEN_PREFIX + WRAPPED + bytes.fromhex(tail_hex)


def _hand_aad(arn: str, context: dict[str, str], type_tag: str) -> bytes:
    """The associated data, built from the module docstring alone."""
    cmk = hashlib.sha256(b"secure_serde/kms/v1/cmk-id\x00" + arn.encode()).digest()[:4]
    entries = sorted((k.encode(), v.encode()) for k, v in context.items())
    ec = struct.pack(">H", len(entries))
    for key, value in entries:
        ec += struct.pack(">H", len(key)) + key + struct.pack(">H", len(value)) + value
    return b"\x01" + cmk + b"\x03kms" + struct.pack(">H", len(ec)) + ec + type_tag.encode()


@pytest.fixture
def vector_cipher(kms_client: Any) -> tuple[KmsEnvelopeCipher, KmsCallCounter]:
    counter = KmsCallCounter(kms_client)
    return KmsEnvelopeCipher(ARN, client=kms_client, encryption_context=USER_CONTEXT), counter


@pytest.mark.parametrize(("type_tag", "plaintext", "nonce", "tail"), VECTORS)
def test_frozen_vectors(
    vector_cipher: tuple[KmsEnvelopeCipher, KmsCallCounter],
    type_tag: str,
    plaintext: bytes,
    nonce: bytes,
    tail: str,
) -> None:
    cipher, counter = vector_cipher
    blob = cipher._seal_with_nonce(
        plaintext, type_tag, data_key=DATA_KEY, wrapped_key=WRAPPED, nonce=nonce
    )
    assert blob == _expected(tail)
    assert len(blob) - len(plaintext) == 35 + len(WRAPPED) == 219
    # The cipher's real read path opens it, once the data key is cached.
    cipher._remember(DATA_KEY, WRAPPED)
    assert cipher.decrypt_with_tag("kms", blob, type_tag) == plaintext
    assert counter.total == 0


@pytest.mark.parametrize(("type_tag", "plaintext", "nonce", "tail"), VECTORS)
def test_vectors_follow_the_documented_layout(
    type_tag: str, plaintext: bytes, nonce: bytes, tail: str
) -> None:
    blob = _expected(tail)
    assert blob[0] == 1
    cmk = hashlib.sha256(b"secure_serde/kms/v1/cmk-id\x00" + ARN.encode()).digest()[:4]
    assert blob[1:5] == cmk
    (wrapped_len,) = struct.unpack(">H", blob[5:7])
    assert blob[7 : 7 + wrapped_len] == WRAPPED
    assert blob[7 + wrapped_len : 19 + wrapped_len] == nonce
    full_context = {"purpose": "secure_serde/langgraph-checkpoint", **USER_CONTEXT}
    aad = _hand_aad(ARN, full_context, type_tag)
    assert AESGCM(DATA_KEY).decrypt(nonce, blob[19 + wrapped_len :], aad) == plaintext


@pytest.mark.parametrize(
    "change",
    ["type tag", "encryption context", "cmk id", "version"],
)
def test_aad_binds_every_field(change: str) -> None:
    type_tag, plaintext, nonce, tail = VECTORS[0]
    blob = _expected(tail)
    sealed = blob[19 + len(WRAPPED) :]
    context = {"purpose": "secure_serde/langgraph-checkpoint", **USER_CONTEXT}
    if change == "type tag":
        aad = _hand_aad(ARN, context, "pickle")
    elif change == "encryption context":
        aad = _hand_aad(ARN, {**context, "tenant": "other"}, type_tag)
    elif change == "cmk id":
        aad = _hand_aad(ARN.replace("0f1e", "0f1f"), context, type_tag)
    else:
        aad = b"\x02" + _hand_aad(ARN, context, type_tag)[1:]
    assert AESGCM(DATA_KEY).decrypt(nonce, sealed, _hand_aad(ARN, context, type_tag)) == plaintext
    with pytest.raises(InvalidTag):
        AESGCM(DATA_KEY).decrypt(nonce, sealed, aad)


def test_cipher_refuses_a_vector_under_another_type_tag_or_context(
    vector_cipher: tuple[KmsEnvelopeCipher, KmsCallCounter], kms_client: Any
) -> None:
    cipher, counter = vector_cipher
    blob = _expected(VECTORS[0][3])
    cipher._remember(DATA_KEY, WRAPPED)
    with pytest.raises(DecryptionError):
        cipher.decrypt_with_tag("kms", blob, "pickle")
    other = KmsEnvelopeCipher(ARN, client=kms_client, encryption_context={"tenant": "acme"})
    other._remember(DATA_KEY, WRAPPED)
    with pytest.raises(DecryptionError):
        other.decrypt_with_tag("kms", blob, "msgpack")
    assert counter.total == 0


def test_every_truncation_is_refused_before_kms(
    vector_cipher: tuple[KmsEnvelopeCipher, KmsCallCounter],
) -> None:
    cipher, counter = vector_cipher
    blob = _expected(VECTORS[0][3])
    cipher._remember(DATA_KEY, WRAPPED)
    for cut in range(len(blob)):
        with pytest.raises(DecryptionError):
            cipher.decrypt_with_tag("kms", blob[:cut], "msgpack")
    assert counter.total == 0


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b"\x03" + b[1:], "version 3"),
        (lambda b: b[:5] + b"\x00\x00" + b[7:], "malformed"),
        (lambda b: b[:5] + struct.pack(">H", 4097) + b[7:] + bytes(4096), "malformed"),
        (lambda b: b[:5] + b"\xff\xff" + b[7:], "malformed"),
        (lambda b: b[:5] + struct.pack(">H", len(b)) + b[7:], "truncated"),
    ],
)
def test_bad_headers_are_refused(
    vector_cipher: tuple[KmsEnvelopeCipher, KmsCallCounter], mutate: Any, message: str
) -> None:
    cipher, counter = vector_cipher
    with pytest.raises(DecryptionError, match=message):
        cipher.decrypt_with_tag("kms", mutate(_expected(VECTORS[0][3])), "msgpack")
    assert counter.total == 0


def test_a_foreign_cmk_id_is_refused_by_name_without_a_kms_call(
    vector_cipher: tuple[KmsEnvelopeCipher, KmsCallCounter],
) -> None:
    cipher, counter = vector_cipher
    blob = bytearray(_expected(VECTORS[0][3]))
    blob[1:5] = b"\xde\xad\xbe\xef"
    with pytest.raises(UnknownKeyError, match="deadbeef") as info:
        cipher.decrypt_with_tag("kms", bytes(blob), "msgpack")
    assert info.value.key_id == "deadbeef"
    assert counter.total == 0


def test_parse_header_reads_the_fields() -> None:
    _, plaintext, nonce, tail = VECTORS[0]
    header = fmt.parse_header(memoryview(_expected(tail)))
    assert header.version == 1
    assert header.cmk_id == fmt.cmk_id(ARN) == bytes.fromhex("a45003bd")
    assert header.cmk_id_hex == "a45003bd"
    assert header.wrapped_key == WRAPPED
    assert header.nonce == nonce
    assert header.sealed_size == len(plaintext) + 16


def test_encryption_context_encoding_is_canonical() -> None:
    a = fmt.encode_encryption_context({"b": "2", "a": "1", "é": "x"})
    b = fmt.encode_encryption_context({"é": "x", "a": "1", "b": "2"})
    assert a == b
    assert a == b"\x00\x03" + b"\x00\x01a\x00\x011" + b"\x00\x01b\x00\x012" + (
        b"\x00\x02\xc3\xa9\x00\x01x"
    )
    # Moving a byte between key and value changes the encoding.
    assert fmt.encode_encryption_context({"ab": "c"}) != fmt.encode_encryption_context({"a": "bc"})
    with pytest.raises(ValueError, match="8192"):
        fmt.encode_encryption_context({"k": "v" * 9000})


def test_encode_header_checks_lengths() -> None:
    with pytest.raises(ValueError, match="4 bytes"):
        fmt.encode_header(b"abc", b"w")
    with pytest.raises(ValueError, match="4096"):
        fmt.encode_header(b"abcd", bytes(4097))
    with pytest.raises(ValueError, match="4096"):
        fmt.encode_header(b"abcd", b"")
    assert len(fmt.encode_header(b"abcd", bytes(4096))) == 7 + 4096
