"""KeyRotationCipher: key choice by id, retirement, construction errors, env and keyring file."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer

from secure_serde import (
    ConfigurationError,
    DecryptionError,
    EncryptedSerializer,
    RetiredKeyError,
    SecretPicklingError,
    UnknownCipherError,
    UnknownKeyError,
)
from secure_serde.ciphers import KEYRING_FILE_VAR, EnvKeyCipher, KeyRotationCipher

KEY_A = "rotation-unit-key-A-0123456789ab"
KEY_B = "rotation-unit-key-B-0123456789ab"
KEY_C = b"\x01" * 32
VALUE = {"messages": ["hello"], "n": 3}


def _ser(cipher: KeyRotationCipher) -> EncryptedSerializer:
    return EncryptedSerializer(cipher)


def test_encrypts_under_the_primary_and_decrypts_by_the_header_id() -> None:
    old = _ser(KeyRotationCipher({"a": KEY_A}, "a"))
    new = _ser(KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b"))
    row_a = old.dumps_typed(VALUE)
    row_b = new.dumps_typed(VALUE)
    assert row_a[1][1:5] != row_b[1][1:5]
    assert row_b[1][1:5].hex() == new.cipher.primary_key_id  # type: ignore[attr-defined]
    assert new.loads_typed(row_a) == VALUE
    assert new.loads_typed(row_b) == VALUE
    with pytest.raises(UnknownKeyError):
        old.loads_typed(row_b)


def test_the_key_is_chosen_by_id_never_by_trying_keys() -> None:
    both = KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b")
    a_only = KeyRotationCipher({"a": KEY_A}, "a")
    _, blob = a_only.encrypt_with_tag(b"payload", "msgpack")
    assert both.decrypt_with_tag("aesgcm", blob, "msgpack") == b"payload"
    # Claim B's id in the header: trial decryption would still find A and succeed.
    relabelled = blob[:1] + bytes.fromhex(both.primary_key_id) + blob[5:]
    with pytest.raises(DecryptionError) as info:
        both.decrypt_with_tag("aesgcm", relabelled, "msgpack")
    assert not isinstance(info.value, UnknownKeyError)


def test_unknown_and_retired_keys_are_named_by_key_id_and_label_never_the_key() -> None:
    a = KeyRotationCipher({"a": KEY_A}, "a")
    c = KeyRotationCipher({"c": KEY_C}, "c")
    _, under_c = c.encrypt_with_tag(b"x", "")
    with pytest.raises(UnknownKeyError) as unknown:
        a.decrypt_with_tag("aesgcm", under_c, "")
    assert unknown.value.key_id == c.primary_key_id
    assert c.primary_key_id in str(unknown.value)

    retiring = KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b", retired=["a"])
    _, under_a = a.encrypt_with_tag(b"x", "")
    with pytest.raises(RetiredKeyError) as retired:
        retiring.decrypt_with_tag("aesgcm", under_a, "")
    assert retired.value.key_id == a.primary_key_id
    assert str(retired.value) == f"key id {a.primary_key_id} (label 'a') is retired"
    for exc in (unknown.value, retired.value):
        for secret in (KEY_A, KEY_B, KEY_C.hex()):
            assert secret not in str(exc)
            assert secret not in repr(exc)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keys": {}, "primary": "a"}, "empty"),
        ({"keys": {"a": "short"}, "primary": "a"}, "key 'a'"),
        ({"keys": {"a": b"x" * 20}, "primary": "a"}, "16, 24 or 32 bytes"),
        ({"keys": {"a": KEY_A}, "primary": "b"}, "primary 'b' is not in keys"),
        ({"keys": {"a": KEY_A, "b": KEY_B}, "primary": "a", "retired": ["a"]}, "cannot be retired"),
        ({"keys": {"a": KEY_A}, "primary": "a", "retired": ["z"]}, "not in keys"),
        ({"keys": {"a": KEY_A}, "primary": "a", "retired": "a"}, "collection of labels"),
        ({"keys": {"a": KEY_A, "b": KEY_A}, "primary": "a"}, "share key id"),
        ({"keys": {"": KEY_A}, "primary": ""}, "non-empty"),
        ({"keys": {"a": KEY_A}, "primary": "a", "legacy_key": "z"}, "legacy_key 'z'"),
    ],
)
def test_bad_configurations_fail_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        KeyRotationCipher(**kwargs)
    assert KEY_A not in str(info.value)


def test_env_key_id_is_stable_across_cipher_kinds() -> None:
    env = EnvKeyCipher(KEY_A)
    ring = KeyRotationCipher({"anything": KEY_A}, "anything")
    assert env.key_id == ring.primary_key_id
    row = EncryptedSerializer(env).dumps_typed(VALUE)
    assert _ser(KeyRotationCipher({"x": KEY_B, "y": KEY_A}, "x")).loads_typed(row) == VALUE


def test_legacy_rows_follow_the_legacy_key_and_its_retirement() -> None:
    legacy_row = BuiltinSerializer.from_pycryptodome_aes(key=KEY_A.encode()).dumps_typed(VALUE)
    reading = _ser(KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b", legacy_key="a"))
    assert reading.loads_typed(legacy_row) == VALUE
    with pytest.raises(UnknownCipherError):
        _ser(KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b")).loads_typed(legacy_row)
    retired = KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b", legacy_key="a", retired=["a"])
    with pytest.raises(RetiredKeyError, match="legacy 'aes' rows"):
        _ser(retired).loads_typed(legacy_row)


def test_secrets_stay_out_of_repr_and_pickles() -> None:
    cipher = KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b", legacy_key="a")
    text = repr(cipher) + repr(cipher.keyring)
    assert "'b'" in text
    for secret in (KEY_A, KEY_B):
        assert secret not in text
    with pytest.raises(SecretPicklingError):
        pickle.dumps(cipher)
    assert copy.deepcopy(cipher) is cipher


# ---------------------------------------------------------------------------------------------
# from_env: LANGGRAPH_AES_KEY and SECURE_SERDE_KEYRING_FILE


@pytest.fixture
def keyring_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    monkeypatch.delenv(KEYRING_FILE_VAR, raising=False)

    def write(content: Any, *, raw: bool = False) -> Path:
        path = tmp_path / "keyring.json"
        path.write_text(content if raw else json.dumps(content))
        path.chmod(0o600)  # keyring files must be private (see test_secrets_keyfiles.py)
        monkeypatch.setenv(KEYRING_FILE_VAR, str(path))
        return path

    return write


def test_env_key_alone_is_the_drop_in(monkeypatch: pytest.MonkeyPatch, keyring_file: Any) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    cipher = KeyRotationCipher.from_env()
    drop_in = EncryptedSerializer.from_pycryptodome_aes()
    assert cipher.primary_key_id == drop_in.cipher.key_id  # type: ignore[attr-defined]
    assert cipher.label_for(cipher.primary_key_id) == "env"
    ours = _ser(cipher)
    assert ours.loads_typed(drop_in.dumps_typed(VALUE)) == VALUE
    assert drop_in.loads_typed(ours.dumps_typed(VALUE)) == VALUE
    # Like the drop-in, it reads langgraph's own rows under that key.
    legacy = BuiltinSerializer.from_pycryptodome_aes().dumps_typed(VALUE)
    assert ours.loads_typed(legacy) == VALUE


def test_staged_configuration_from_env_and_file(
    monkeypatch: pytest.MonkeyPatch, keyring_file: Any
) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    stage1 = _ser(KeyRotationCipher.from_env())
    keyring_file({"keys": {"b": KEY_B}})
    stage2 = _ser(KeyRotationCipher.from_env())
    keyring_file({"primary": "b", "keys": {"b": KEY_B}})
    stage3 = _ser(KeyRotationCipher.from_env())
    keyring_file({"primary": "b", "keys": {"b": KEY_B}, "retired": ["env"]})
    stage5 = _ser(KeyRotationCipher.from_env())
    monkeypatch.delenv("LANGGRAPH_AES_KEY")
    keyring_file({"primary": "b", "keys": {"b": KEY_B}})
    stage6 = _ser(KeyRotationCipher.from_env())

    under_a, under_b = stage1.dumps_typed(VALUE), stage3.dumps_typed(VALUE)
    assert stage2.dumps_typed(VALUE)[1][1:5] == under_a[1][1:5]  # B is decrypt-only
    for reader in (stage2, stage3):
        assert reader.loads_typed(under_a) == reader.loads_typed(under_b) == VALUE
    with pytest.raises(RetiredKeyError, match="env"):
        stage5.loads_typed(under_a)
    with pytest.raises(UnknownKeyError):
        stage6.loads_typed(under_a)
    assert stage5.loads_typed(under_b) == stage6.loads_typed(under_b) == VALUE


def test_file_only_keyring_with_legacy_settings(keyring_file: Any) -> None:
    keyring_file(
        {
            "primary": "new",
            "keys": {"new": KEY_B, "old": KEY_A},
            "legacy_key": "old",
            "legacy_mode": "gcm",
        }
    )
    from Crypto.Cipher import AES

    row = BuiltinSerializer.from_pycryptodome_aes(key=KEY_A.encode(), mode=AES.MODE_GCM)
    assert _ser(KeyRotationCipher.from_env()).loads_typed(row.dumps_typed(VALUE)) == VALUE


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"keys": {"b": "', "not valid JSON"),
        ('{"keys": {"b": "' + KEY_B + '",}, "primary": "b"}', "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ({"keys": {"b": KEY_B}, "primary": "b", "extra": 1}, "unknown fields"),
        ({"keys": {"b": 5}, "primary": "b"}, "map labels to key strings"),
        ({"keys": {"b": KEY_B}, "primary": 3}, "'primary'"),
        ({"keys": {"b": KEY_B}, "primary": "b", "retired": "b"}, "'retired'"),
        ({"keys": {"b": KEY_B}, "primary": "b", "legacy_key": 1}, "'legacy_key'"),
        ({"keys": {"b": KEY_B}, "primary": "b", "legacy_mode": "ctr"}, "'legacy_mode'"),
        ({"keys": {"b": KEY_B}}, "no primary key"),
        ({"keys": {"b": "not a key"}, "primary": "b"}, "key 'b'"),
    ],
)
def test_bad_keyring_files_are_named_never_quoted(
    keyring_file: Any, content: Any, message: str
) -> None:
    keyring_file(content, raw=isinstance(content, str))
    with pytest.raises(ConfigurationError, match=message) as info:
        KeyRotationCipher.from_env()
    assert KEY_B not in str(info.value)
    # Nor anywhere in the chain: a JSONDecodeError kept as __context__ holds the file.
    error: BaseException | None = info.value
    while error is not None:
        for held in (error.args, getattr(error, "doc", None), getattr(error, "object", None)):
            assert KEY_B not in repr(held)
        error = error.__cause__ or error.__context__


def test_env_id_is_reserved(monkeypatch: pytest.MonkeyPatch, keyring_file: Any) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    keyring_file({"keys": {"env": KEY_B}})
    with pytest.raises(ConfigurationError, match="reserved"):
        KeyRotationCipher.from_env()


def test_missing_keyring_file_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, keyring_file: Any
) -> None:
    monkeypatch.setenv(KEYRING_FILE_VAR, str(tmp_path / "nope.json"))
    with pytest.raises(ConfigurationError, match="cannot read keyring file"):
        KeyRotationCipher.from_env()


def test_retired_ids_given_as_an_iterator_are_still_retired() -> None:
    """An iterator must not be used up by validation and then retire nothing."""
    from secure_serde.ciphers import Keyring
    from secure_serde.crypto import Key

    old, new = Key.derive(b"o" * 32, label="old"), Key.derive(b"n" * 32, label="new")
    blob = Keyring([old], old)._seal_with_nonce(b"secret", "bytes", b"\x00" * 12)
    with pytest.raises(RetiredKeyError):
        Keyring([new], new, retired=(k for k in [old])).open(blob, "bytes")
    # An iterator where the signature says Collection: the misuse this test is about.
    cipher = KeyRotationCipher(
        {"old": b"o" * 32, "new": b"n" * 32},
        primary="new",
        retired=iter(["old"]),  # type: ignore[arg-type]
    )
    with pytest.raises(RetiredKeyError):
        cipher.decrypt_with_tag("aesgcm", blob, "bytes")
