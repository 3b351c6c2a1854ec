"""Frozen vectors for the newer stored layouts: 0.3 records, index tokens, KMS v2, compression.

Each is pinned twice, as in tests/test_layout_vectors.py: the library reproduces the frozen
bytes, and the bytes are rebuilt from the documented layout with bare ``cryptography`` calls.
Those records and index tokens are secure_serde 0.3's, which only `V03Reader` reads now: they are
checked through its row and index checks (tests/stores/test_v03_reader.py checks more edits).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import zlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import BindingError, CompressedSerializer, EncryptedSerializer, Migration
from secure_serde.ciphers import EnvKeyCipher, KmsEnvelopeCipher
from secure_serde.crypto import Key, Location, parse_key
from secure_serde.stores import canonical
from secure_serde.stores._v03_index import V03IndexKeys
from secure_serde.stores._v03_metadata import V03Metadata
from secure_serde.stores._v03_rows import V03Rows
from tests.crypto.test_format_v2 import _hkdf, _hmac, _location
from tests.test_layout_vectors import _load

SEALS = _load("record_seal.json")
TOKENS = _load("blind_index.json")
KMS_V2 = _load("kms_v2.json")
PURPOSE = {"purpose": "secure_serde/langgraph-checkpoint"}


def _ids(vector: dict[str, Any]) -> str:
    return str(vector["comment"])


def _rows(vector: dict[str, Any]) -> V03Rows:
    reading = EncryptedSerializer(EnvKeyCipher(key=vector["key"]))
    metadata = V03Metadata(
        reading,
        Migration.NONE,
        seal_metadata=False,
        plaintext_metadata=None,
        indexed_metadata=None,
        index_key=None,
    )
    return V03Rows(reading, Migration.NONE, metadata)


def _check(vector: dict[str, Any], **changes: Any) -> None:
    fields = {
        "thread_id": vector["thread_id"],
        "checkpoint_ns": vector["checkpoint_ns"],
        "checkpoint_id": vector["checkpoint_id"],
        "parent_id": vector["parent_id"],
        "record": vector["record"],
        "seal": vector["seal"],
    }
    fields.update(changes)
    row = (fields["thread_id"], fields["checkpoint_ns"], fields["checkpoint_id"])
    _rows(vector)._check_record(row, fields["parent_id"], fields["record"], fields["seal"])


# --- 0.3's checkpoint records ------------------------------------------------------------


@pytest.mark.parametrize("vector", SEALS, ids=_ids)
def test_record_encoding_and_location_are_frozen(vector: dict[str, Any]) -> None:
    record_bytes = canonical(vector["record"])
    assert record_bytes.hex() == vector["canonical"]
    location = Location.checkpoint(
        vector["thread_id"],
        vector["checkpoint_ns"],
        vector["checkpoint_id"],
        vector["parent_id"],
        record_bytes,
    )
    assert location.encode().hex() == vector["location"]
    by_hand = _location(
        {
            "kind": "checkpoint",
            "thread_id": vector["thread_id"],
            "checkpoint_ns": vector["checkpoint_ns"],
            "coordinates": [
                vector["checkpoint_id"],
                vector["parent_id"],
                {"bytes": vector["canonical"]},
            ],
        }
    )
    assert by_hand.hex() == vector["location"]


@pytest.mark.parametrize("vector", SEALS, ids=_ids)
def test_record_seal_is_reproduced(vector: dict[str, Any]) -> None:
    cipher = EnvKeyCipher(key=vector["key"])
    assert cipher.key_id == vector["key_id"]
    blob = cipher.keyring._seal_with_nonce(
        b"", "null", bytes.fromhex(vector["nonce"]), bytes.fromhex(vector["location"])
    )
    assert base64.b64encode(blob).decode() == vector["seal"]["data"]


@pytest.mark.parametrize("vector", SEALS, ids=_ids)
def test_record_seal_follows_the_documented_layout(vector: dict[str, Any]) -> None:
    material = parse_key(vector["key"])
    header = b"\x02" + _hkdf(material, b"secure_serde/v1/key-id", 4)
    nonce = bytes.fromhex(vector["nonce"])
    commitment = _hmac(_hkdf(material, b"secure_serde/v2/commitment", 32), header + nonce)[:16]
    aad = header + commitment + b"\x06aesgcm" + struct.pack(">H", 4) + b"null"
    aad += bytes.fromhex(vector["location"])
    tag = AESGCM(_hkdf(material, b"secure_serde/v1/aes-256-gcm", 32)).encrypt(nonce, b"", aad)
    assert base64.b64encode(header + nonce + commitment + tag).decode() == vector["seal"]["data"]
    assert vector["seal"]["type"] == "null+aesgcm"


@pytest.mark.parametrize("vector", SEALS, ids=_ids)
def test_frozen_seal_authenticates_only_its_record(vector: dict[str, Any]) -> None:
    _check(vector)
    edited = {**vector["record"], "channel_versions": {"messages": "00000000000000000000.0.9"}}
    with pytest.raises(BindingError):
        _check(vector, record=edited)
    with pytest.raises(BindingError):
        _check(vector, parent_id="1ef-another-parent")
    with pytest.raises(BindingError):
        _check(vector, thread_id=vector["thread_id"] + "-other")
    with pytest.raises(BindingError):
        _check(vector, checkpoint_ns="elsewhere")


# --- blind-index tokens ------------------------------------------------------------------


@pytest.mark.parametrize("vector", TOKENS, ids=_ids)
def test_index_token_is_reproduced(vector: dict[str, Any]) -> None:
    key = Key.derive(vector["key"])
    assert key.key_id_hex == vector["key_id"]
    # verify recomputes the token from the key, name and value, and compares it whole.
    V03IndexKeys([key]).verify(vector["name"], vector["value"], vector["token"])


@pytest.mark.parametrize("vector", TOKENS, ids=_ids)
def test_index_token_follows_the_documented_layout(vector: dict[str, Any]) -> None:
    material = parse_key(vector["key"])
    index_key = _hkdf(material, b"secure_serde/v1/blind-index-hmac", 32)
    name = vector["name"].encode()
    value = json.dumps(
        vector["value"], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()
    if isinstance(vector["value"], float) and vector["value"].is_integer():
        value = str(int(vector["value"])).encode()
    mac = _hmac(
        index_key, b"secure_serde/blind-index/v1\x00" + struct.pack(">I", len(name)) + name + value
    )
    token = base64.urlsafe_b64encode(mac[:16]).rstrip(b"=").decode()
    assert f"{_hkdf(material, b'secure_serde/v1/key-id', 4).hex()}:{token}" == vector["token"]


# --- KMS envelope v2 ---------------------------------------------------------------------


def _ec(context: dict[str, str]) -> bytes:
    entries = sorted((k.encode(), v.encode()) for k, v in context.items())
    out = struct.pack(">H", len(entries))
    for key, value in entries:
        out += struct.pack(">H", len(key)) + key + struct.pack(">H", len(value)) + value
    return out


@pytest.mark.parametrize("vector", KMS_V2, ids=_ids)
def test_kms_v2_follows_the_documented_layout(vector: dict[str, Any]) -> None:
    cmk = hashlib.sha256(b"secure_serde/kms/v1/cmk-id\x00" + vector["key_arn"].encode()).digest()
    assert cmk[:4].hex() == vector["cmk_id"]
    wrapped = bytes.fromhex(vector["wrapped_key"])
    data_key = bytes.fromhex(vector["data_key"])
    nonce = bytes.fromhex(vector["nonce"])
    header = b"\x02" + cmk[:4] + struct.pack(">H", len(wrapped)) + wrapped
    commitment = _hmac(_hkdf(data_key, b"secure_serde/kms/v2/commitment", 32), header + nonce)[:16]
    ec = _ec({**PURPOSE, **vector["encryption_context"]})
    tag = vector["context"].encode()
    aad = b"\x02" + cmk[:4] + commitment + b"\x03kms" + struct.pack(">H", len(ec)) + ec
    aad += struct.pack(">H", len(tag)) + tag + bytes.fromhex(vector["location"])
    sealed = AESGCM(data_key).encrypt(nonce, bytes.fromhex(vector["plaintext"]), aad)
    assert (header + nonce + commitment + sealed).hex() == vector["ciphertext"]


@pytest.mark.parametrize("vector", KMS_V2, ids=_ids)
def test_kms_v2_is_reproduced_and_reads_only_at_its_location(
    vector: dict[str, Any], kms_client: Any
) -> None:
    cipher = KmsEnvelopeCipher(
        vector["key_arn"], client=kms_client, encryption_context=vector["encryption_context"]
    )
    data_key = bytes.fromhex(vector["data_key"])
    wrapped = bytes.fromhex(vector["wrapped_key"])
    location = bytes.fromhex(vector["location"])
    plaintext = bytes.fromhex(vector["plaintext"])
    blob = cipher._seal_at_with_nonce(
        plaintext,
        vector["context"],
        location,
        data_key=data_key,
        wrapped_key=wrapped,
        nonce=bytes.fromhex(vector["nonce"]),
    )
    assert blob.hex() == vector["ciphertext"]
    cipher._remember(data_key, wrapped)
    assert cipher.decrypt_at("kms", blob, vector["context"], location) == plaintext
    elsewhere = Location.blob("another-thread", "", "messages", "1").encode()
    with pytest.raises(BindingError):
        cipher.decrypt_at("kms", blob, vector["context"], elsewhere)


# --- compressed inner payloads -----------------------------------------------------------

COMPRESSED = _load("compressed.json")


def _decompress(algorithm: str, data: bytes) -> bytes:
    if algorithm == "zlib":
        return zlib.decompress(data)
    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        from backports import zstd  # type: ignore[no-redef, unused-ignore]
    result: bytes = zstd.decompress(data)
    return result


@pytest.mark.parametrize("vector", COMPRESSED, ids=_ids)
def test_compressed_vectors_read_back(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["data"])
    assert CompressedSerializer().loads_typed((vector["type_tag"], data)) == vector["value"]
    assert JsonPlusSerializer().dumps_typed(vector["value"]) == (
        vector["inner_tag"],
        bytes.fromhex(vector["inner"]),
    )


@pytest.mark.parametrize("vector", COMPRESSED, ids=_ids)
def test_compressed_vectors_follow_the_documented_layout(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["data"])
    if vector["type_tag"] == vector["inner_tag"]:
        assert data.hex() == vector["inner"]
        written = CompressedSerializer(algorithm=vector["algorithm"], min_size=64)
        assert written.dumps_typed(vector["value"]) == (vector["type_tag"], data)
        return
    assert vector["type_tag"] == f"{vector['inner_tag']}+{vector['algorithm']}"
    assert _decompress(vector["algorithm"], data).hex() == vector["inner"]
    tag, rewritten = CompressedSerializer(algorithm=vector["algorithm"], min_size=64).dumps_typed(
        vector["value"]
    )
    assert tag == vector["type_tag"]
    assert _decompress(vector["algorithm"], rewritten).hex() == vector["inner"]
