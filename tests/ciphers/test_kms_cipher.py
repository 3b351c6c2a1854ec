"""KmsEnvelopeCipher against moto's KMS over real HTTP: round trips, refusals, keys, secrets."""

from __future__ import annotations

import copy
import pickle
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted

from secure_serde import (
    ConfigurationError,
    DecryptionError,
    EncryptedSerializer,
    EncryptionError,
    KmsDecryptionError,
    KmsError,
    SecretPicklingError,
    UnknownCipherError,
    UnknownKeyError,
)
from secure_serde.ciphers import KmsEnvelopeCipher, TagAuthenticatingCipher
from secure_serde.ciphers import _kms_format as fmt
from tests.ciphers.kms_support import KmsCallCounter, new_cmk

STATE = {
    "messages": [HumanMessage(content="my ssn is 123-45-6789", id="1"), AIMessage(content="ok")],
    "n": 7,
}


def test_round_trip_through_the_serializer(kms_client: Any, cmk: str, counter: Any) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "acme"})
    assert isinstance(cipher, TagAuthenticatingCipher)
    serde = EncryptedSerializer(cipher)
    type_tag, blob = serde.dumps_typed(STATE)
    assert type_tag == "msgpack+kms"
    assert b"123-45-6789" not in blob
    assert serde.loads_typed((type_tag, blob)) == STATE
    header = fmt.parse_header(blob)
    assert header.cmk_id == fmt.cmk_id(cmk)
    # Own data keys decrypt from the cache: one GenerateDataKey, no Decrypt, no DescribeKey.
    assert counter.calls == {"GenerateDataKey": 1}


def test_added_size_measured_with_moto(kms_client: Any, cmk: str) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client)
    for size in (0, 1, 600, 100_000):
        name, blob = cipher.encrypt(b"x" * size)
        header = fmt.parse_header(blob)
        added = len(blob) - size
        assert header.version == 2
        assert added == 51 + len(header.wrapped_key)
        # moto wraps a 32-byte key into 96 bytes (real AWS: 184, so 235 added).
        assert added == 147
        assert cipher.decrypt(name, blob) == b"x" * size


def test_works_alone_as_a_langgraph_cipher(kms_client: Any, cmk: str) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client)
    serde = LangGraphEncrypted(cipher)
    type_tag, blob = serde.dumps_typed(STATE)
    assert type_tag == "msgpack+kms"
    assert serde.loads_typed((type_tag, blob)) == STATE
    name, raw = cipher.encrypt(b"alone")
    assert (name, cipher.decrypt(name, raw)) == ("kms", b"alone")
    # encrypt() binds the empty context, so a bound read under a type tag fails.
    with pytest.raises(DecryptionError):
        cipher.decrypt_with_tag("kms", raw, "msgpack")


def test_relabelled_and_tampered_rows_are_refused(kms_client: Any, cmk: str) -> None:
    serde = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
    _, blob = serde.dumps_typed(b"raw bytes")
    assert serde.loads_typed(("bytes+kms", blob)) == b"raw bytes"
    with pytest.raises(DecryptionError):
        serde.loads_typed(("pickle+kms", blob))
    tampered = bytearray(blob)
    tampered[-20] ^= 1
    with pytest.raises(DecryptionError):
        serde.loads_typed(("bytes+kms", bytes(tampered)))
    with pytest.raises(UnknownCipherError):
        serde.loads_typed(("bytes+aesgcm", blob))


def test_wrong_encryption_context_is_refused_by_kms(
    kms_client: Any, cmk: str, counter: KmsCallCounter
) -> None:
    writer = KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "acme"})
    type_tag, blob = EncryptedSerializer(writer).dumps_typed(STATE)
    reader = KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "evil"})
    with pytest.raises(KmsDecryptionError) as info:
        EncryptedSerializer(reader).loads_typed((type_tag, blob))
    err = info.value
    assert isinstance(err, DecryptionError)
    assert (err.operation, err.key_arn) == ("Decrypt", cmk)
    assert err.error_code == "InvalidCiphertextException"
    assert cmk in str(err)
    assert "encryption context" in str(err)
    # The same context in another cipher instance reads it (after one Decrypt).
    same = KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "acme"})
    assert EncryptedSerializer(same).loads_typed((type_tag, blob)) == STATE
    assert counter.calls == {"GenerateDataKey": 1, "Decrypt": 2}


def test_a_blob_under_a_cmk_not_allowed_is_refused_without_a_kms_call(
    kms_client: Any, counter: KmsCallCounter
) -> None:
    allowed, old, foreign = (new_cmk(kms_client) for _ in range(3))
    foreign_serde = EncryptedSerializer(KmsEnvelopeCipher(foreign, client=kms_client))
    row = foreign_serde.dumps_typed(STATE)
    # moto (the caller's "IAM") would unwrap it: the refusal is the cipher's own.
    assert (
        kms_client.decrypt(
            CiphertextBlob=fmt.parse_header(row[1]).wrapped_key,
            EncryptionContext={"purpose": "secure_serde/langgraph-checkpoint"},
        )["KeyId"]
        == foreign
    )
    reader = KmsEnvelopeCipher(allowed, client=kms_client, decrypt_kms_keys=[old])
    counter.reset()
    with pytest.raises(UnknownKeyError) as info:
        EncryptedSerializer(reader).loads_typed(row)
    assert info.value.key_id == fmt.cmk_id(foreign).hex()
    assert counter.total == 0


def test_a_header_naming_an_allowed_cmk_over_a_foreign_wrapped_key_is_refused(
    kms_client: Any, counter: KmsCallCounter
) -> None:
    allowed, foreign = new_cmk(kms_client), new_cmk(kms_client)
    _, blob = KmsEnvelopeCipher(foreign, client=kms_client).encrypt_with_tag(b"payload", "msgpack")
    forged = blob[:1] + fmt.cmk_id(allowed) + blob[5:]
    reader = KmsEnvelopeCipher(allowed, client=kms_client)
    counter.reset()
    # Decrypt is sent with KeyId=allowed; KMS refuses a blob wrapped under another key.
    with pytest.raises(KmsDecryptionError) as info:
        reader.decrypt_with_tag("kms", forged, "msgpack")
    assert info.value.key_arn == allowed
    assert counter.calls == {"Decrypt": 1}


def test_changing_cmk_keeps_old_values_readable(kms_client: Any, counter: KmsCallCounter) -> None:
    old, new = new_cmk(kms_client), new_cmk(kms_client)
    old_row = EncryptedSerializer(KmsEnvelopeCipher(old, client=kms_client)).dumps_typed(STATE)
    rotated = EncryptedSerializer(KmsEnvelopeCipher(new, client=kms_client, decrypt_kms_keys=[old]))
    new_row = rotated.dumps_typed(STATE)
    assert fmt.parse_header(new_row[1]).cmk_id == fmt.cmk_id(new)
    counter.reset()
    assert rotated.loads_typed(old_row) == STATE
    assert rotated.loads_typed(new_row) == STATE
    assert counter.calls == {"Decrypt": 1}
    # Once the old CMK is dropped from the configuration, its rows are refused by id.
    dropped = EncryptedSerializer(KmsEnvelopeCipher(new, client=kms_client))
    with pytest.raises(UnknownKeyError):
        dropped.loads_typed(old_row)
    assert dropped.loads_typed(new_row) == STATE


def test_aliases_are_resolved_once_on_first_use(kms_client: Any, counter: KmsCallCounter) -> None:
    old, new = new_cmk(kms_client), new_cmk(kms_client)
    alias = f"alias/secure-serde-{new[-12:]}"
    old_alias = f"alias/secure-serde-{old[-12:]}"
    kms_client.create_alias(AliasName=alias, TargetKeyId=new)
    kms_client.create_alias(AliasName=old_alias, TargetKeyId=old)
    old_row = KmsEnvelopeCipher(old, client=kms_client).encrypt(b"old")
    counter.reset()
    cipher = KmsEnvelopeCipher(alias, client=kms_client, decrypt_kms_keys=[old_alias])
    assert counter.total == 0  # nothing at construction
    assert cipher.key_arn is None
    assert "alias/" in repr(cipher)
    for i in range(5):
        name, blob = cipher.encrypt(b"v%d" % i)
        assert cipher.decrypt(name, blob) == b"v%d" % i
    assert cipher.decrypt(*old_row) == b"old"
    assert cipher.key_arn == new
    assert counter.calls == {"DescribeKey": 2, "GenerateDataKey": 1, "Decrypt": 1}


def test_an_unknown_alias_raises_a_typed_error_naming_it(kms_client: Any) -> None:
    cipher = KmsEnvelopeCipher("alias/does-not-exist", client=kms_client)
    with pytest.raises(KmsError) as info:
        cipher.encrypt(b"x")
    assert isinstance(info.value, EncryptionError)
    assert (info.value.operation, info.value.key_arn) == ("DescribeKey", "alias/does-not-exist")
    assert info.value.error_code == "NotFoundException"


def test_purpose_is_always_in_the_context(kms_client: Any, cmk: str) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "acme"})
    assert cipher.encryption_context == {
        "purpose": "secure_serde/langgraph-checkpoint",
        "tenant": "acme",
    }
    _, blob = cipher.encrypt(b"x")
    wrapped = fmt.parse_header(blob).wrapped_key
    # KMS itself holds the data key to exactly this context.
    kms_client.decrypt(
        CiphertextBlob=wrapped, KeyId=cmk, EncryptionContext=cipher.encryption_context
    )
    with pytest.raises(kms_client.exceptions.InvalidCiphertextException):
        kms_client.decrypt(CiphertextBlob=wrapped, KeyId=cmk, EncryptionContext={"tenant": "acme"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"encryption_context": {"purpose": "other"}}, "purpose"),
        ({"encryption_context": {"": "x"}}, "non-empty"),
        ({"encryption_context": {"k": 1}}, "str"),
        ({"max_messages": 2**32 + 1}, "2\\*\\*32"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_bytes": -1}, "max_bytes"),
        ({"max_age": 0}, "max_age"),
        ({"max_age": 900, "decrypt_ttl": 600}, "decrypt_ttl"),
        ({"decrypt_cache_size": 0}, "decrypt_entries"),
        ({"decrypt_kms_keys": "arn:aws:kms:us-east-1:123456789012:key/x"}, "collection"),
        ({"botocore_config": object()}, "botocore_config"),
    ],
)
def test_bad_configuration_fails_at_construction(
    kms_client: Any, cmk: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        KmsEnvelopeCipher(cmk, client=kms_client, **kwargs)


def test_max_messages_may_be_exactly_two_to_the_32(kms_client: Any, cmk: str) -> None:
    KmsEnvelopeCipher(cmk, client=kms_client, max_messages=2**32)


def test_no_region_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent-secure-serde-test")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ConfigurationError, match="KMS client"):
        KmsEnvelopeCipher("arn:aws:kms:us-east-1:123456789012:key/abc")


def test_secrets_stay_out_of_repr_pickles_and_errors(kms_client: Any, cmk: str) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "t-secret"})
    _, blob = cipher.encrypt_with_tag(b"payload", "msgpack")
    wrapped = fmt.parse_header(blob).wrapped_key
    data_key = kms_client.decrypt(
        CiphertextBlob=wrapped, KeyId=cmk, EncryptionContext=cipher.encryption_context
    )["Plaintext"]
    texts = [repr(cipher), str(cipher), repr(cipher.cache_info())]
    with pytest.raises(DecryptionError) as bad_tag:
        cipher.decrypt_with_tag("kms", blob, "pickle")
    texts.append(str(bad_tag.value))
    other = KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "x"})
    with pytest.raises(KmsDecryptionError) as bad_context:
        other.decrypt_with_tag("kms", blob, "msgpack")
    texts.append(str(bad_context.value))
    for text in texts:
        for secret in (data_key.hex(), data_key.hex().upper(), repr(data_key), "t-secret"):
            assert secret not in text
    assert cmk in repr(cipher)
    with pytest.raises(SecretPicklingError):
        pickle.dumps(cipher)
    assert copy.deepcopy(cipher) is cipher


def test_concurrent_writers_share_keys_within_limits(
    kms_client: Any, cmk: str, counter: KmsCallCounter
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_messages=50)
    results: list[tuple[str, bytes]] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def write(worker: int) -> None:
        start.wait()
        out = [cipher.encrypt_with_tag(b"w%d-%d" % (worker, i), "msgpack") for i in range(100)]
        with lock:
            results.extend(out)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    per_key: dict[bytes, int] = {}
    for _, blob in results:
        wrapped = fmt.parse_header(blob).wrapped_key
        per_key[wrapped] = per_key.get(wrapped, 0) + 1
    # 800 values, at most 50 per data key, and no key fetched twice over.
    assert len(results) == 800
    assert max(per_key.values()) <= 50
    assert len(per_key) == 16 == counter.calls["GenerateDataKey"]
    reader = KmsEnvelopeCipher(cmk, client=kms_client)
    assert sorted(reader.decrypt_with_tag(n, b, "msgpack") for n, b in results) == sorted(
        b"w%d-%d" % (w, i) for w in range(8) for i in range(100)
    )
    assert counter.calls["Decrypt"] == 16


def test_every_buffer_type_reads_on_the_cached_and_the_parsing_path(
    kms_client: Any, cmk: str
) -> None:
    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_messages=1)
    first = cipher.encrypt_with_tag(b"first", "msgpack")[1]
    second = cipher.encrypt_with_tag(b"second", "msgpack")[1]  # a second data key
    for blob, expected in ((first, b"first"), (second, b"second"), (first, b"first")):
        for buffer in (blob, bytearray(blob), memoryview(blob)):
            assert cipher.decrypt_with_tag("kms", buffer, "msgpack") == expected
        tampered = blob[:-1] + bytes([blob[-1] ^ 1])
        with pytest.raises(DecryptionError):
            cipher.decrypt_with_tag("kms", tampered, "msgpack")
        with pytest.raises(DecryptionError):
            cipher.decrypt_with_tag("kms", blob, "json")


def test_a_forked_child_starts_with_empty_caches(
    kms_client: Any, cmk: str, counter: KmsCallCounter
) -> None:
    """Limits hold per data key, not per process: a child never reuses the parent's key."""
    import os

    cipher = KmsEnvelopeCipher(cmk, client=kms_client, max_messages=4)
    cipher.warm()
    name, blob = cipher.encrypt(b"from the parent")
    assert cipher.cache_info().encryption_keys == 1
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            info = cipher.cache_info()
            os.write(write_end, f"{info.encryption_keys},{info.decryption_keys}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    reported = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    assert reported == "0,0"
    # The parent keeps its own key and reads its own value without KMS.
    counter.reset()
    assert cipher.decrypt(name, blob) == b"from the parent"
    assert counter.total == 0


def test_an_encryption_context_of_too_many_entries_is_a_configuration_error(
    kms_client: Any, cmk: str
) -> None:
    context = {f"k{i}": "v" for i in range(0x10000)}
    with pytest.raises(ConfigurationError, match="65535 entries"):
        KmsEnvelopeCipher(cmk, client=kms_client, encryption_context=context)
