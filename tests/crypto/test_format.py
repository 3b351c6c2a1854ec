"""Format v1 is pinned by frozen vectors and re-derived independently of the library."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from secure_serde import DecryptionError
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.crypto._format import (
    HEADER_SIZE,
    OVERHEAD,
    PREFIX_SIZE,
    build_aad,
    parse_header,
    split,
)
from secure_serde.crypto._keys import parse_key

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "vectors" / "format_v1.json").read_text()
)["vectors"]


def _hkdf(ikm: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(ikm)


def _ids(vector: dict[str, Any]) -> str:
    return f"{vector['comment']}/{vector['context'] or 'empty'}"


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_frozen_vectors_are_reproduced(vector: dict[str, Any]) -> None:
    cipher = EnvKeyCipher(key=vector["key"])
    assert cipher.key_id == vector["key_id"]
    blob = cipher.keyring._seal_v1_with_nonce(
        bytes.fromhex(vector["plaintext"]), vector["context"], bytes.fromhex(vector["nonce"])
    )
    assert blob.hex() == vector["ciphertext"]


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_frozen_vectors_decrypt(vector: dict[str, Any]) -> None:
    cipher = EnvKeyCipher(key=vector["key"])
    blob = bytes.fromhex(vector["ciphertext"])
    assert cipher.decrypt_with_tag("aesgcm", blob, vector["context"]) == bytes.fromhex(
        vector["plaintext"]
    )


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_vectors_follow_the_documented_layout(vector: dict[str, Any]) -> None:
    """Rebuild each vector from the layout in _format.py with bare `cryptography` calls."""
    material = parse_key(vector["key"])
    key_id = _hkdf(material, b"secure_serde/v1/key-id", 4)
    aead_key = _hkdf(material, b"secure_serde/v1/aes-256-gcm", 32)
    nonce = bytes.fromhex(vector["nonce"])
    header = b"\x01" + key_id
    aad = header + struct.pack("B", 6) + b"aesgcm" + vector["context"].encode()
    sealed = AESGCM(aead_key).encrypt(nonce, bytes.fromhex(vector["plaintext"]), aad)
    assert (header + nonce + sealed).hex() == vector["ciphertext"]
    assert key_id.hex() == vector["key_id"]


def test_v1_overhead_is_33_bytes() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    for size in (0, 1, 100, 70_000):
        blob = cipher.keyring._seal_v1_with_nonce(b"x" * size, "", b"\x00" * 12)
        assert len(blob) == size + OVERHEAD == size + 33


def test_parse_header_reports_v1_fields() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    blob = cipher.keyring._seal_v1_with_nonce(b"payload", "", b"\x07" * 12)
    header = parse_header(blob)
    assert header.version == 1
    assert header.key_id_hex == cipher.key_id
    assert header.nonce == blob[HEADER_SIZE:PREFIX_SIZE]
    assert header.sealed_size == len(b"payload") + 16


@pytest.mark.parametrize("size", range(OVERHEAD))
def test_split_refuses_every_short_length(size: int) -> None:
    with pytest.raises(DecryptionError, match="truncated"):
        split(b"\x01" * size)


@pytest.mark.parametrize("version", [0, 3, 0xFF])
def test_split_refuses_unknown_versions(version: int) -> None:
    with pytest.raises(DecryptionError, match="version"):
        split(bytes([version]) + b"\x00" * (OVERHEAD + 4))


def test_aad_encoding_is_injective_across_fields() -> None:
    header = b"\x01abcd"
    # Same concatenated bytes, split differently between cipher name and tag.
    assert build_aad(header, b"aesgcm", b"msgpack") != build_aad(header, b"aesgcmm", b"sgpack")
    assert build_aad(header, b"", b"x") != build_aad(header, b"x", b"")


def test_nonces_are_fresh_per_encryption() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    nonces = {parse_header(cipher.encrypt(b"same")[1]).nonce for _ in range(1000)}
    assert len(nonces) == 1000
