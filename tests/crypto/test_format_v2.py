"""Format v2 is pinned by frozen vectors and re-derived independently of the library."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hmac import HMAC
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from secure_serde import BindingError, DecryptionError, UnboundValueError
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from secure_serde.crypto._binding import Location
from secure_serde.crypto._format import parse_header
from secure_serde.crypto._format_v2 import OVERHEAD, split
from secure_serde.crypto._keys import parse_key

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "vectors" / "format_v2.json").read_text()
)["vectors"]


def _hkdf(ikm: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(ikm)


def _hmac(key: bytes, data: bytes) -> bytes:
    mac = HMAC(key, hashes.SHA256())
    mac.update(data)
    return mac.finalize()


def _ids(vector: dict[str, Any]) -> str:
    return str(vector["comment"])


def _location(fields: dict[str, Any]) -> bytes:
    """The location encoding as _binding documents it, written out by hand."""
    values = [fields["thread_id"], fields["checkpoint_ns"], *fields["coordinates"]]
    kind = {"blob": 1, "write": 2, "checkpoint": 3, "metadata": 4}[fields["kind"]]
    out = b"SSLOC\x01" + bytes([kind, len(values)])
    for value in values:
        if value is None:
            out += b"\x00"
        elif isinstance(value, str):
            out += struct.pack(">BI", 1, len(value.encode())) + value.encode()
        else:
            raw = bytes.fromhex(value["bytes"])
            out += struct.pack(">BI", 2, len(raw)) + raw
    return out


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_frozen_vectors_are_reproduced(vector: dict[str, Any]) -> None:
    cipher = EnvKeyCipher(key=vector["key"])
    assert cipher.key_id == vector["key_id"]
    blob = cipher.keyring._seal_with_nonce(
        bytes.fromhex(vector["plaintext"]),
        vector["context"],
        bytes.fromhex(vector["nonce"]),
        bytes.fromhex(vector["location"]),
    )
    assert blob.hex() == vector["ciphertext"]


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_frozen_vectors_decrypt_only_at_their_location(
    vector: dict[str, Any],
) -> None:
    cipher = EnvKeyCipher(key=vector["key"])
    blob = bytes.fromhex(vector["ciphertext"])
    location = bytes.fromhex(vector["location"])
    assert cipher.decrypt_at("aesgcm", blob, vector["context"], location) == bytes.fromhex(
        vector["plaintext"]
    )
    elsewhere = Location.blob("another-thread", "", "messages", "1").encode()
    with pytest.raises(BindingError):
        cipher.decrypt_at("aesgcm", blob, vector["context"], elsewhere)
    if location:
        # A bound value read unbound (by a stock saver, say) fails too.
        with pytest.raises(DecryptionError):
            cipher.decrypt_with_tag("aesgcm", blob, vector["context"])


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_vectors_follow_the_documented_layout(vector: dict[str, Any]) -> None:
    """Rebuild each vector from the layout in _format_v2.py with bare `cryptography` calls."""
    material = parse_key(vector["key"])
    key_id = _hkdf(material, b"secure_serde/v1/key-id", 4)
    aead_key = _hkdf(material, b"secure_serde/v1/aes-256-gcm", 32)
    commitment_key = _hkdf(material, b"secure_serde/v2/commitment", 32)
    nonce = bytes.fromhex(vector["nonce"])
    header = b"\x02" + key_id
    commitment = _hmac(commitment_key, header + nonce)[:16]
    location = _location(vector["location_fields"]) if "location_fields" in vector else b""
    assert location.hex() == vector["location"]
    tag = vector["context"].encode()
    aad = header + commitment + b"\x06aesgcm" + struct.pack(">H", len(tag)) + tag + location
    sealed = AESGCM(aead_key).encrypt(nonce, bytes.fromhex(vector["plaintext"]), aad)
    assert (header + nonce + commitment + sealed).hex() == vector["ciphertext"]
    assert key_id.hex() == vector["key_id"]


def _v2(cipher: EnvKeyCipher | KeyRotationCipher, plaintext: bytes, context: str) -> bytes:
    """A v2 value: no longer written (v3 is), but every v2 row must stay readable."""
    return cipher.keyring._seal_with_nonce(plaintext, context, b"\x05" * 12)


def test_overhead_is_49_bytes_and_large_v2_values_read_back() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    for size in (0, 1, 100, 70_000):
        blob = _v2(cipher, b"x" * size, "")
        assert len(blob) == size + OVERHEAD == size + 49
        assert blob[0] == 2
        assert cipher.decrypt("aesgcm", blob) == b"x" * size
        assert cipher.decrypt("aesgcm", bytearray(blob)) == b"x" * size  # type: ignore[arg-type]


def test_parse_header_reads_v2() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    blob = _v2(cipher, b"payload", "")
    header = parse_header(blob)
    assert (header.version, header.key_id_hex) == (2, cipher.key_id)
    assert header.nonce == blob[5:17]
    assert header.sealed_size == len(b"payload") + 16


@pytest.mark.parametrize("size", range(OVERHEAD))
def test_split_refuses_every_short_length(size: int) -> None:
    with pytest.raises(DecryptionError, match="truncated"):
        split(b"\x02" * size)


def test_commitment_is_checked_before_decryption() -> None:
    """A blob whose commitment was changed is refused as such, not as a bad tag."""
    cipher = EnvKeyCipher(key=b"k" * 32)
    blob = _v2(cipher, b"secret", "msgpack")
    for at in range(17, 33):
        forged = bytearray(blob)
        forged[at] ^= 1
        with pytest.raises(DecryptionError, match="commitment"):
            cipher.decrypt_with_tag("aesgcm", bytes(forged), "msgpack")


def test_a_commitment_made_under_another_key_is_refused() -> None:
    """Same key id slot, other key: the commitment names the key, so it fails first."""
    one = KeyRotationCipher({"a": b"a" * 32, "b": b"b" * 32}, primary="a")
    two = KeyRotationCipher({"a": b"a" * 32, "b": b"b" * 32}, primary="b")
    blob = _v2(two, b"secret", "msgpack")
    a_id = bytes.fromhex(one.keyring.primary.key_id_hex)
    relabelled = blob[:1] + a_id + blob[5:]
    with pytest.raises(DecryptionError, match="commitment"):
        one.decrypt_with_tag("aesgcm", relabelled, "msgpack")


def test_v1_values_are_unbound_and_refused_where_a_binding_is_required() -> None:
    cipher = EnvKeyCipher(key=b"k" * 32)
    v1 = cipher.keyring._seal_v1_with_nonce(b"old", "msgpack", b"\x01" * 12)
    assert cipher.decrypt_with_tag("aesgcm", v1, "msgpack") == b"old"
    with pytest.raises(UnboundValueError):
        cipher.decrypt_at("aesgcm", v1, "msgpack", Location.metadata("t", "", "c").encode())


def test_location_encoding_is_injective_across_fields() -> None:
    encodings = {
        Location.blob("ab", "", "c", "1").encode(),
        Location.blob("a", "b", "c", "1").encode(),
        Location.blob("a", "", "bc", "1").encode(),
        Location.blob("a", "", "b", "c1").encode(),
        Location.metadata("a", "", "bc1").encode(),
        Location.checkpoint("a", "", "b", None, b"").encode(),
        Location.checkpoint("a", "", "b", "", b"").encode(),
        Location.write("a", "", "b", "c", "", 1, "x").encode(),
        Location.write("a", "", "b", "c", "", 2, "x").encode(),
        Location.write("a", "", "b", "c", "1", 1, "x").encode(),
    }
    assert len(encodings) == 10
    assert b"" not in encodings
