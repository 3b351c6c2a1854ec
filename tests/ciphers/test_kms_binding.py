"""KMS envelope v2: key commitment and the row binding, with the data-key cache intact.

The layout is rebuilt from the comment in ``_kms_format`` with bare `cryptography` calls; the
binding goes into the associated data only (never into the KMS encryption context), so 100
threads' worth of bound rows still cost one GenerateDataKey and one Decrypt per process.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hmac import HMAC
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from secure_serde import BindingError, DecryptionError, EncryptedSerializer, UnboundValueError
from secure_serde.ciphers import KmsEnvelopeCipher
from secure_serde.crypto import Location
from secure_serde.savers.sqlite import SqliteSaver
from tests.ciphers.kms_support import KmsCallCounter, new_cmk

ARN = "arn:aws:kms:us-east-1:123456789012:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
USER_CONTEXT = {"tenant": "acme"}
DATA_KEY = bytes(range(32))
WRAPPED = bytes((i * 7 + 3) % 256 for i in range(184))
NONCE = bytes(range(12))
LOCATION = Location.write("thread-1", "", "1f0-ckpt", "task-1", "", 0, "messages")


def _hand_blob(plaintext: bytes, type_tag: str, location: bytes) -> bytes:
    cmk = hashlib.sha256(b"secure_serde/kms/v1/cmk-id\x00" + ARN.encode()).digest()[:4]
    header = b"\x02" + cmk + struct.pack(">H", len(WRAPPED)) + WRAPPED
    commitment_key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"secure_serde/kms/v2/commitment"
    ).derive(DATA_KEY)
    mac = HMAC(commitment_key, hashes.SHA256())
    mac.update(header + NONCE)
    commitment = mac.finalize()[:16]
    context = {"purpose": "secure_serde/langgraph-checkpoint", **USER_CONTEXT}
    entries = sorted((k.encode(), v.encode()) for k, v in context.items())
    ec = struct.pack(">H", len(entries))
    for key, value in entries:
        ec += struct.pack(">H", len(key)) + key + struct.pack(">H", len(value)) + value
    tag = type_tag.encode()
    aad = (
        b"\x02"
        + cmk
        + commitment
        + b"\x03kms"
        + struct.pack(">H", len(ec))
        + ec
        + struct.pack(">H", len(tag))
        + tag
        + location
    )
    return header + NONCE + commitment + AESGCM(DATA_KEY).encrypt(NONCE, plaintext, aad)


@pytest.fixture
def cipher(kms_client: Any) -> KmsEnvelopeCipher:
    cipher = KmsEnvelopeCipher(ARN, client=kms_client, encryption_context=USER_CONTEXT)
    cipher._remember(DATA_KEY, WRAPPED)
    return cipher


@pytest.mark.parametrize("location", [b"", LOCATION.encode()], ids=["unbound", "bound"])
def test_v2_follows_the_documented_layout(cipher: KmsEnvelopeCipher, location: bytes) -> None:
    blob = cipher._seal_at_with_nonce(
        b"\x81\xa1a\xc3", "msgpack", location, data_key=DATA_KEY, wrapped_key=WRAPPED, nonce=NONCE
    )
    assert blob == _hand_blob(b"\x81\xa1a\xc3", "msgpack", location)
    assert len(blob) - 4 == 51 + len(WRAPPED)
    assert cipher.decrypt_at("kms", blob, "msgpack", location) == b"\x81\xa1a\xc3"


def test_a_bound_value_reads_only_at_its_location(cipher: KmsEnvelopeCipher) -> None:
    blob = _hand_blob(b"value", "msgpack", LOCATION.encode())
    elsewhere = Location.write("thread-2", "", "1f0-ckpt", "task-1", "", 0, "messages")
    with pytest.raises(BindingError):
        cipher.decrypt_at("kms", blob, "msgpack", elsewhere.encode())
    with pytest.raises(DecryptionError):
        cipher.decrypt_with_tag("kms", blob, "msgpack")


def test_commitment_is_checked_before_decryption(cipher: KmsEnvelopeCipher) -> None:
    blob = bytearray(_hand_blob(b"value", "msgpack", b""))
    commitment_at = 7 + len(WRAPPED) + 12
    blob[commitment_at] ^= 1
    with pytest.raises(DecryptionError, match="commitment"):
        cipher.decrypt_with_tag("kms", bytes(blob), "msgpack")


def test_v1_values_are_unbound(cipher: KmsEnvelopeCipher) -> None:
    v1 = cipher._seal_with_nonce(
        b"old", "msgpack", data_key=DATA_KEY, wrapped_key=WRAPPED, nonce=NONCE
    )
    assert cipher.decrypt_with_tag("kms", v1, "msgpack") == b"old"
    with pytest.raises(UnboundValueError):
        cipher.decrypt_at("kms", v1, "msgpack", LOCATION.encode())


def test_location_never_reaches_the_kms_encryption_context(kms_client: Any) -> None:
    cipher = KmsEnvelopeCipher(new_cmk(kms_client), client=kms_client)
    sent: list[dict[str, Any]] = []
    kms_client.meta.events.register(
        "provide-client-params.kms.*", lambda params, **_: sent.append(dict(params))
    )
    serde = EncryptedSerializer(cipher)
    data = serde.dumps_typed_at({"secret": 1}, LOCATION)
    other = EncryptedSerializer(KmsEnvelopeCipher(cipher.key_arn or "", client=kms_client))
    assert other.loads_typed_at(data, LOCATION) == {"secret": 1}
    contexts = [p["EncryptionContext"] for p in sent if "EncryptionContext" in p]
    assert len(contexts) == 2
    assert all(c == {"purpose": "secure_serde/langgraph-checkpoint"} for c in contexts)


def test_2000_bound_writes_and_reads_across_100_threads_cost_two_calls_each(
    kms_client: Any, tmp_path: Path
) -> None:
    """One GenerateDataKey to write everything, one Decrypt for a fresh process to read it."""
    arn = new_cmk(kms_client)
    counter = KmsCallCounter(kms_client)
    path = str(tmp_path / "kms.sqlite")
    writer = EncryptedSerializer(KmsEnvelopeCipher(arn, client=kms_client))
    configs: list[RunnableConfig] = []
    with SqliteSaver.from_conn_string(path, serde=writer) as saver:
        for n in range(2000):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"messages": [f"secret {n}"]}
            checkpoint["channel_versions"] = {"messages": n + 1}
            config: RunnableConfig = {
                "configurable": {"thread_id": f"thread-{n % 100}", "checkpoint_ns": ""}
            }
            configs.append(saver.put(config, checkpoint, {"step": n}, {"messages": n + 1}))
    assert counter.calls["GenerateDataKey"] == 1
    reader = EncryptedSerializer(KmsEnvelopeCipher(arn, client=kms_client))
    with SqliteSaver.from_conn_string(path, serde=reader) as saver:
        for n, config in enumerate(configs):
            found = saver.get_tuple(config)
            assert found is not None
            assert found.checkpoint["channel_values"]["messages"] == [f"secret {n}"]
    assert counter.calls["GenerateDataKey"] <= 2
    assert counter.calls["Decrypt"] <= 2
    assert counter.calls["Decrypt"] == 1
