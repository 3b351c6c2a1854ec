"""Rows written by langgraph's built-in EncryptedSerializer stay readable, and no more."""

from __future__ import annotations

from typing import Any

import pytest
from Crypto.Cipher import AES
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    ConfigurationError,
    DecryptionError,
    EncryptedSerializer,
    Migration,
    PickleRefusedError,
    UnknownCipherError,
)
from secure_serde.ciphers import EnvKeyCipher
from tests.planted import PlantedPickle

VALUES: list[Any] = [
    None,
    b"raw bytes",
    bytearray(b"ba"),
    {"messages": [HumanMessage(content="hi", id="1"), AIMessage(content="yo", id="2")]},
    {"n": 1, "f": 1.5, "s": "text", "nested": {"l": [1, 2, 3]}},
]


@pytest.mark.parametrize("value", VALUES)
def test_env_key_rows_written_by_the_builtin_are_read(env_key: str, value: Any) -> None:
    builtin = BuiltinSerializer.from_pycryptodome_aes()
    ours = EncryptedSerializer.from_pycryptodome_aes()
    tag, blob = builtin.dumps_typed(value)
    assert tag.endswith("+aes")
    assert ours.loads_typed((tag, blob)) == value
    # New rows are always v1, even when the store already holds legacy rows.
    assert ours.dumps_typed(value)[0].endswith("+aesgcm")


@pytest.mark.parametrize(("mode", "key"), [(AES.MODE_EAX, b"k" * 16), (AES.MODE_GCM, b"k" * 24)])
def test_rows_written_with_an_explicit_mode_and_key_are_read(mode: int, key: bytes) -> None:
    builtin = BuiltinSerializer.from_pycryptodome_aes(key=key, mode=mode)
    ours = EncryptedSerializer.from_pycryptodome_aes(key=key, mode=mode)
    row = builtin.dumps_typed({"mode": mode})
    assert ours.loads_typed(row) == {"mode": mode}


def test_gcm_rows_need_the_gcm_mode() -> None:
    row = BuiltinSerializer.from_pycryptodome_aes(key=b"k" * 16, mode=AES.MODE_GCM).dumps_typed(1)
    with pytest.raises(DecryptionError):
        EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16).loads_typed(row)


@pytest.mark.parametrize("mode", [AES.MODE_CCM, AES.MODE_OCB])
def test_modes_whose_rows_langgraph_itself_cannot_read_are_refused(mode: int) -> None:
    builtin = BuiltinSerializer.from_pycryptodome_aes(key=b"k" * 16, mode=mode)
    row = builtin.dumps_typed({"a": 1})
    with pytest.raises(ValueError, match=r"(?i)nonce"):
        builtin.loads_typed(row)
    with pytest.raises(ConfigurationError, match="EAX"):
        EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16, mode=mode)


def test_tampered_legacy_rows_raise_decryption_error(env_key: str) -> None:
    tag, blob = BuiltinSerializer.from_pycryptodome_aes().dumps_typed({"a": 1})
    ours = EncryptedSerializer.from_pycryptodome_aes()
    for i in range(len(blob)):
        flipped = bytearray(blob)
        flipped[i] ^= 0x01
        with pytest.raises(DecryptionError):
            ours.loads_typed((tag, bytes(flipped)))
    for cut in range(len(blob)):
        with pytest.raises(DecryptionError):
            ours.loads_typed((tag, blob[:cut]))


def test_legacy_rows_under_another_key_are_refused(env_key: str) -> None:
    row = BuiltinSerializer.from_pycryptodome_aes(key=b"x" * 32).dumps_typed("secret")
    with pytest.raises(DecryptionError):
        EncryptedSerializer.from_pycryptodome_aes().loads_typed(row)


def test_legacy_pickle_rows_are_refused_unless_opted_in() -> None:
    inner = JsonPlusSerializer(pickle_fallback=True)
    builtin = BuiltinSerializer.from_pycryptodome_aes(serde=inner, key=b"k" * 32)
    # A bytes row relabelled as pickle: the built-in format cannot notice.
    import pickle

    _, blob = builtin.dumps_typed(pickle.dumps(PlantedPickle()))
    relabelled = ("pickle+aes", blob)
    PlantedPickle.reset()
    with pytest.raises(PickleRefusedError):
        EncryptedSerializer.from_pycryptodome_aes(serde=inner, key=b"k" * 32).loads_typed(
            relabelled
        )
    assert not PlantedPickle.ran
    # The built-in runs it, which is the hole being closed.
    builtin.loads_typed(relabelled)
    assert PlantedPickle.ran
    PlantedPickle.reset()
    opted_in = EncryptedSerializer(
        EnvKeyCipher(key=b"k" * 32), inner, migration=Migration(legacy_pickle=True)
    )
    opted_in.loads_typed(relabelled)
    assert PlantedPickle.ran


def test_legacy_reading_can_be_turned_off(env_key: str) -> None:
    row = BuiltinSerializer.from_pycryptodome_aes().dumps_typed({"a": 1})
    strict = EncryptedSerializer(EnvKeyCipher(legacy_mode=None))
    with pytest.raises(UnknownCipherError) as info:
        strict.loads_typed(row)
    assert info.value.cipher_name == "aes"


def test_builtin_can_not_read_our_rows_and_says_so(env_key: str) -> None:
    """Not a feature, a fact for the migration guide: there is no way back."""
    row = EncryptedSerializer.from_pycryptodome_aes().dumps_typed({"a": 1})
    with pytest.raises(AssertionError):
        BuiltinSerializer.from_pycryptodome_aes().loads_typed(row)


def test_relabelled_legacy_rows_fail_as_decryption_errors_without_plaintext(env_key: str) -> None:
    """The built-in format cannot notice a relabel; the inner serializer's error must not leak."""
    tag, blob = BuiltinSerializer.from_pycryptodome_aes().dumps_typed({"ssn": "123-45-6789"})
    assert tag == "msgpack+aes"
    with pytest.raises(DecryptionError) as info:
        EncryptedSerializer.from_pycryptodome_aes().loads_typed(("json+aes", blob))
    assert info.value.__context__ is None
    assert "123-45-6789" not in str(info.value)
