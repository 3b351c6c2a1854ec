"""Format v3 is pinned by frozen vectors and re-derived independently of the library."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from secure_serde import (
    BindingError,
    DecryptionError,
    RetiredKeyError,
    UnknownKeyError,
)
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher, read_header
from secure_serde.crypto._binding import Location
from secure_serde.crypto._format import parse_header
from secure_serde.crypto._format_v3 import OVERHEAD, split
from secure_serde.crypto._keys import parse_key
from tests.crypto.test_format_v2 import _hkdf, _hmac, _location

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "vectors" / "format_v3.json").read_text()
)["vectors"]


def _ids(vector: dict[str, Any]) -> str:
    return str(vector["comment"])


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_frozen_vectors_are_reproduced(vector: dict[str, Any]) -> None:
    cipher = EnvKeyCipher(key=vector["key"])
    assert cipher.key_id == vector["key_id"]
    blob = cipher.keyring._seal_v3_with_nonce(
        bytes.fromhex(vector["plaintext"]),
        vector["context"],
        bytes.fromhex(vector["nonce"]),
        bytes.fromhex(vector["location"]),
    )
    assert blob.hex() == vector["ciphertext"]


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_vectors_follow_the_documented_layout(vector: dict[str, Any]) -> None:
    """Rebuild each vector from the layout in _format_v3.py with bare `cryptography` calls."""
    material = parse_key(vector["key"])
    key_id = _hkdf(material, b"secure_serde/v1/key-id", 4)
    aead_key = _hkdf(material, b"secure_serde/v1/aes-256-gcm", 32)
    commitment_key = _hkdf(material, b"secure_serde/v2/commitment", 32)
    nonce = bytes.fromhex(vector["nonce"])
    header = b"\x03" + key_id
    commitment = _hmac(commitment_key, header)[:16]
    assert commitment.hex() == vector["commitment"]
    location = _location(vector["location_fields"]) if "location_fields" in vector else b""
    assert location.hex() == vector["location"]
    tag = vector["context"].encode()
    aad = header + commitment + b"\x06aesgcm" + struct.pack(">H", len(tag)) + tag + location
    sealed = AESGCM(aead_key).encrypt(nonce, bytes.fromhex(vector["plaintext"]), aad)
    assert (header + commitment + nonce + sealed).hex() == vector["ciphertext"]
    assert key_id.hex() == vector["key_id"]


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_frozen_vectors_decrypt_only_at_their_location(vector: dict[str, Any]) -> None:
    cipher = EnvKeyCipher(key=vector["key"])
    blob = bytes.fromhex(vector["ciphertext"])
    location = bytes.fromhex(vector["location"])
    plaintext = bytes.fromhex(vector["plaintext"])
    for stored in (blob, bytearray(blob), memoryview(blob)):
        assert cipher.decrypt_at("aesgcm", stored, vector["context"], location) == plaintext
    elsewhere = Location.blob("another-thread", "", "messages", "1").encode()
    with pytest.raises(BindingError):
        cipher.decrypt_at("aesgcm", blob, vector["context"], elsewhere)
    with pytest.raises(DecryptionError):
        cipher.decrypt_at("aesgcm", blob, vector["context"] + "x", location)
    if location:
        # A bound value read unbound (by a stock saver, say) fails too.
        with pytest.raises(DecryptionError):
            cipher.decrypt_with_tag("aesgcm", blob, vector["context"])
    else:
        assert cipher.decrypt_with_tag("aesgcm", blob, vector["context"]) == plaintext


def test_the_commitment_is_one_per_key_and_differs_between_keys() -> None:
    by_key: dict[str, set[str]] = {}
    for vector in VECTORS:
        by_key.setdefault(vector["key_id"], set()).add(vector["commitment"])
        assert bytes.fromhex(vector["ciphertext"])[5:21].hex() == vector["commitment"]
    assert all(len(commitments) == 1 for commitments in by_key.values())
    assert len({c for commitments in by_key.values() for c in commitments}) == len(by_key) > 1


def test_new_values_are_v3_with_49_bytes_and_a_fresh_nonce() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    nonces = set()
    for size in (0, 1, 100, 16 * 1024, 70_000):
        _, blob = cipher.encrypt(b"x" * size)
        assert len(blob) == size + OVERHEAD == size + 49
        assert blob[0] == 3
        assert blob[1:5].hex() == cipher.key_id
        nonces.add(blob[21:33])
        # Small values are sliced, large ones read through a view: both read back.
        for stored in (blob, bytearray(blob), memoryview(blob)):
            assert cipher.decrypt("aesgcm", stored) == b"x" * size  # type: ignore[arg-type]
    assert len(nonces) == 5


def test_parse_header_and_read_header_read_v3() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    _, blob = cipher.encrypt(b"payload")
    header = parse_header(blob)
    assert (header.version, header.key_id_hex) == (3, cipher.key_id)
    assert header.nonce == blob[21:33]
    assert header.sealed_size == len(b"payload") + 16
    stored = read_header("aesgcm", blob)
    assert (stored.key_id, stored.format_version) == (cipher.key_id, 3)


@pytest.mark.parametrize("size", range(OVERHEAD))
def test_every_short_length_is_refused_as_truncated(size: int) -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    _, blob = cipher.encrypt(b"")
    with pytest.raises(DecryptionError, match="truncated"):
        split(b"\x03" * size)
    with pytest.raises(DecryptionError):
        cipher.decrypt("aesgcm", blob[:size])


def test_split_refuses_another_version() -> None:
    with pytest.raises(DecryptionError, match="version 2"):
        split(b"\x02" * OVERHEAD)


def test_a_changed_commitment_is_refused_before_decryption() -> None:
    """Every commitment byte is checked, and the refusal names the commitment, not the tag."""
    cipher = EnvKeyCipher(key=b"k" * 32)
    _, blob = cipher.encrypt_with_tag(b"secret", "msgpack")
    for at in range(5, 21):
        forged = bytearray(blob)
        forged[at] ^= 1
        for stored in (bytes(forged), forged):
            with pytest.raises(DecryptionError, match="commitment"):
                cipher.decrypt_with_tag("aesgcm", stored, "msgpack")


def test_every_other_byte_is_authenticated() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    _, blob = cipher.encrypt_with_tag(b"secret", "msgpack")
    location = Location.metadata("t", "", "c").encode()
    _, bound = cipher.encrypt_at(b"secret", "msgpack", location)
    for at in range(21, len(blob)):
        forged = bytearray(blob)
        forged[at] ^= 1
        with pytest.raises(DecryptionError, match="authentication"):
            cipher.decrypt_with_tag("aesgcm", bytes(forged), "msgpack")
        forged = bytearray(bound)
        forged[at] ^= 1
        with pytest.raises(BindingError):
            cipher.decrypt_at("aesgcm", bytes(forged), "msgpack", location)


def test_a_value_under_another_keys_id_fails_its_commitment() -> None:
    """Same key id slot, other key: the commitment names the key, so it fails first."""
    one = KeyRotationCipher({"a": b"a" * 32, "b": b"b" * 32}, primary="a")
    two = KeyRotationCipher({"a": b"a" * 32, "b": b"b" * 32}, primary="b")
    _, blob = two.encrypt_with_tag(b"secret", "msgpack")
    assert one.decrypt_with_tag("aesgcm", blob, "msgpack") == b"secret"
    a_id = bytes.fromhex(one.keyring.primary.key_id_hex)
    relabelled = blob[:1] + a_id + blob[5:]
    with pytest.raises(DecryptionError, match="commitment"):
        one.decrypt_with_tag("aesgcm", relabelled, "msgpack")


def test_unknown_and_retired_keys_are_refused_by_name() -> None:
    old = KeyRotationCipher({"old": b"o" * 32}, primary="old")
    _, blob = old.encrypt_with_tag(b"secret", "msgpack")
    with pytest.raises(UnknownKeyError):
        EnvKeyCipher(key=b"n" * 32).decrypt_with_tag("aesgcm", blob, "msgpack")
    retiring = KeyRotationCipher(
        {"old": b"o" * 32, "new": b"n" * 32}, primary="new", retired=["old"]
    )
    with pytest.raises(RetiredKeyError):
        retiring.decrypt_with_tag("aesgcm", blob, "msgpack")
    rotated = KeyRotationCipher({"old": b"o" * 32, "new": b"n" * 32}, primary="new")
    assert rotated.decrypt_with_tag("aesgcm", blob, "msgpack") == b"secret"


def test_v1_and_v2_values_stay_readable_beside_v3() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    v1 = cipher.keyring._seal_v1_with_nonce(b"one", "msgpack", b"\x01" * 12)
    v2 = cipher.keyring._seal_with_nonce(b"two", "msgpack", b"\x02" * 12)
    _, v3 = cipher.encrypt_with_tag(b"three", "msgpack")
    assert [v1[0], v2[0], v3[0]] == [1, 2, 3]
    assert cipher.decrypt_with_tag("aesgcm", v1, "msgpack") == b"one"
    assert cipher.decrypt_with_tag("aesgcm", v2, "msgpack") == b"two"
    assert cipher.decrypt_with_tag("aesgcm", v3, "msgpack") == b"three"
