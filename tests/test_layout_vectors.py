"""Frozen vectors for every stored layout besides format v1 (tests/crypto/test_format.py).

Each layout is pinned twice: the library reads (and where it writes, writes) the frozen bytes,
and the bytes are rebuilt from the documented layout with bare ``cryptography``/``hashlib``
calls, so a change on either side fails here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from langgraph.types import Send

from secure_serde import EncryptedSerializer, PickleFallbackSerializer
from secure_serde.ciphers import EnvKeyCipher, KmsEnvelopeCipher
from secure_serde.ciphers import _kms_format as kms_format
from secure_serde.serde import langgraph_internals
from secure_serde.stores import SEALED_METADATA_KEY, parse_envelope
from tests.ciphers.kms_support import new_cmk

VECTORS = Path(__file__).parent / "vectors"


def _load(name: str) -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = json.loads((VECTORS / name).read_text())["vectors"]
    assert vectors
    return vectors


KMS = _load("kms_v1.json")
PICKLE = _load("pickle_fallback.json")
ENVELOPES = _load("metadata_envelope.json")


# --- KMS envelope format v1 --------------------------------------------------------------


def _independent_ec(context: dict[str, str]) -> bytes:
    entries = sorted((k.encode(), v.encode()) for k, v in context.items())
    out = struct.pack(">H", len(entries))
    for key, value in entries:
        out += struct.pack(">H", len(key)) + key + struct.pack(">H", len(value)) + value
    return out


@pytest.mark.parametrize("vector", KMS, ids=lambda v: v["comment"])
def test_kms_vectors_follow_the_documented_layout(vector: dict[str, Any]) -> None:
    arn = vector["key_arn"]
    cmk = hashlib.sha256(b"secure_serde/kms/v1/cmk-id\x00" + arn.encode()).digest()[:4]
    wrapped = bytes.fromhex(vector["wrapped_key"])
    nonce = bytes.fromhex(vector["nonce"])
    ec = _independent_ec(vector["encryption_context"])
    aad = b"\x01" + cmk + b"\x03kms" + struct.pack(">H", len(ec)) + ec + vector["context"].encode()
    sealed = AESGCM(bytes.fromhex(vector["data_key"])).encrypt(
        nonce, bytes.fromhex(vector["plaintext"]), aad
    )
    blob = b"\x01" + cmk + struct.pack(">H", len(wrapped)) + wrapped + nonce + sealed
    assert blob.hex() == vector["ciphertext"]
    assert cmk.hex() == vector["cmk_id"]


@pytest.mark.parametrize("vector", KMS, ids=lambda v: v["comment"])
def test_kms_vectors_parse_and_open_with_the_library_layout(vector: dict[str, Any]) -> None:
    blob = bytes.fromhex(vector["ciphertext"])
    header = kms_format.parse_header(blob)
    assert header.cmk_id == kms_format.cmk_id(vector["key_arn"])
    assert header.wrapped_key.hex() == vector["wrapped_key"]
    assert header.nonce.hex() == vector["nonce"]
    ec = kms_format.encode_encryption_context(vector["encryption_context"])
    assert ec == _independent_ec(vector["encryption_context"])
    aad = kms_format.build_aad(header.cmk_id, ec, vector["context"].encode())
    _, nonce, sealed = kms_format.split(blob)
    opened = AESGCM(bytes.fromhex(vector["data_key"])).decrypt(nonce, bytes(sealed), aad)
    assert opened.hex() == vector["plaintext"]


def test_a_blob_in_the_frozen_layout_decrypts_through_kms(
    kms_client: Any, monkeypatch: pytest.MonkeyPatch, kms_endpoint: str
) -> None:
    """The layout with a real wrapped key: KMS unwraps the vector's data key, the cipher reads."""
    vector = KMS[1]
    arn = new_cmk(kms_client)
    cipher = KmsEnvelopeCipher(
        arn, encryption_context=vector["encryption_context"], client=kms_client
    )
    # The cipher adds its purpose entry to the caller's; KMS and the AAD both see the whole.
    context = cipher.encryption_context
    assert context.items() > vector["encryption_context"].items()
    data_key = bytes.fromhex(vector["data_key"])
    wrapped = kms_client.encrypt(KeyId=arn, Plaintext=data_key, EncryptionContext=context)[
        "CiphertextBlob"
    ]
    cmk = kms_format.cmk_id(arn)
    nonce = bytes.fromhex(vector["nonce"])
    ec = _independent_ec(context)
    aad = b"\x01" + cmk + b"\x03kms" + struct.pack(">H", len(ec)) + ec + vector["context"].encode()
    plaintext = bytes.fromhex(vector["plaintext"])
    blob = b"\x01" + cmk + struct.pack(">H", len(wrapped)) + wrapped + nonce
    blob += AESGCM(data_key).encrypt(nonce, plaintext, aad)
    assert cipher.decrypt_with_tag("kms", blob, vector["context"]) == plaintext


# --- the pickle fallback: ext codes 80 and 81 ----------------------------------------------

VALUES: dict[str, Callable[[], Any]] = {
    "dict_with_fraction": lambda: {"ratio": Fraction(1, 3)},
    "send_with_fraction": lambda: Send("node", {"ratio": Fraction(2, 7)}),
    "delta_snapshot_with_fraction": lambda: langgraph_internals.DeltaSnapshot(
        [Fraction(5, 2), "text"]
    ),
    "list_with_fraction": lambda: [1, "two", Fraction(-3, 4)],
}


def _fallback() -> PickleFallbackSerializer:
    return PickleFallbackSerializer(allowed=[Fraction], allow_unauthenticated=True)


@pytest.mark.parametrize("vector", PICKLE, ids=lambda v: v["value"])
def test_pickle_fallback_writes_the_frozen_bytes(vector: dict[str, Any]) -> None:
    assert _fallback().dumps_typed(VALUES[vector["value"]]()) == (
        vector["type_tag"],
        bytes.fromhex(vector["data"]),
    )


@pytest.mark.parametrize("vector", PICKLE, ids=lambda v: v["value"])
def test_pickle_fallback_reads_the_frozen_bytes(vector: dict[str, Any]) -> None:
    value = _fallback().loads_typed((vector["type_tag"], bytes.fromhex(vector["data"])))
    expected = VALUES[vector["value"]]()
    assert value == expected
    assert type(value) is type(expected)


def _ext_codes(data: bytes) -> list[int]:
    """Every ext code in ``data``, outermost first, read with plain msgpack (no JsonPlus)."""
    seen: list[int] = []

    def hook(code: int, payload: bytes) -> Any:
        seen.append(code)
        if code == 80:
            assert payload[:2] == b"\x80\x05"  # one pickle, protocol 5
            return None
        if code == 81:
            return ormsgpack.unpackb(payload[1:], ext_hook=hook)  # JsonPlus code, then payload
        return ormsgpack.unpackb(payload, ext_hook=hook)

    ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    return seen


def test_pickle_fallback_ext_codes_follow_the_documented_layout() -> None:
    codes = {v["value"]: _ext_codes(bytes.fromhex(v["data"])) for v in PICKLE}
    assert codes == {
        "dict_with_fraction": [80],
        "send_with_fraction": [81, 80],
        "delta_snapshot_with_fraction": [7, 80],
        "list_with_fraction": [80],
    }
    send = next(bytes.fromhex(v["data"]) for v in PICKLE if v["value"] == "send_with_fraction")
    # ext 81's first payload byte is JsonPlus's own code for Send: positional args (1).
    ext = ormsgpack.unpackb(send, ext_hook=lambda code, payload: (code, payload[0]))
    assert ext == (81, 1)


# --- the sealed-metadata envelope -----------------------------------------------------------


def _hkdf(ikm: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(ikm)


@pytest.mark.parametrize("vector", ENVELOPES, ids=lambda v: v["comment"])
def test_metadata_envelope_follows_the_documented_layout(vector: dict[str, Any]) -> None:
    column = json.loads(vector["metadata_column"])
    envelope = column[SEALED_METADATA_KEY]
    assert set(envelope) == {"type", "data"}
    assert envelope["type"] == "msgpack+aesgcm"
    blob = base64.b64decode(envelope["data"], validate=True)
    material = vector["key"].encode()
    key_id = _hkdf(material, b"secure_serde/v1/key-id")[:4]
    nonce = bytes.fromhex(vector["nonce"])
    assert blob[:17] == b"\x01" + key_id + nonce
    aad = b"\x01" + key_id + b"\x06aesgcm" + b"msgpack"
    opened = AESGCM(_hkdf(material, b"secure_serde/v1/aes-256-gcm")).decrypt(nonce, blob[17:], aad)
    assert ormsgpack.unpackb(opened) == vector["sealed"]


@pytest.mark.parametrize("vector", ENVELOPES, ids=lambda v: v["comment"])
def test_metadata_envelope_opens_with_the_library(vector: dict[str, Any]) -> None:
    column = json.loads(vector["metadata_column"])
    parsed = parse_envelope(column[SEALED_METADATA_KEY])
    assert parsed is not None
    serde = EncryptedSerializer(EnvKeyCipher(key=vector["key"]))
    assert serde.loads_typed(parsed) == vector["sealed"]
