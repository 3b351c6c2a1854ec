"""`EncryptedSerializer` properties that surviving mutants showed untested (docs/mutation.md).

The drop-in constructor must refuse plaintext by its own default and pass
every argument through; a pickle named anywhere in a composite inner tag of an
unauthenticated row is refused; the migration log names the type it read.
"""

from __future__ import annotations

import logging
import pickle

import pytest
from Crypto.Cipher import AES
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    ConfigurationError,
    DecryptionError,
    EncryptedSerializer,
    Migration,
    PickleRefusedError,
    PlaintextRefusedError,
    UnknownCipherError,
)
from secure_serde.ciphers import EnvKeyCipher
from tests.planted import PlantedPickle

KEY = b"s" * 32


def test_the_drop_in_refuses_plaintext_by_its_own_default(env_key: str) -> None:
    row = JsonPlusSerializer().dumps_typed({"planted": 1})
    with pytest.raises(PlaintextRefusedError):
        EncryptedSerializer.from_pycryptodome_aes().loads_typed(row)
    migrating = EncryptedSerializer.from_pycryptodome_aes(migration=Migration(plaintext=True))
    assert migrating.loads_typed(row) == {"planted": 1}


def test_the_drop_in_passes_its_serde_through() -> None:
    inner = JsonPlusSerializer()
    assert EncryptedSerializer.from_pycryptodome_aes(inner, key=KEY).serde is inner


def test_the_drop_in_passes_migration_legacy_pickle_through() -> None:
    inner = JsonPlusSerializer(pickle_fallback=True)
    row = BuiltinSerializer.from_pycryptodome_aes(serde=inner, key=KEY).dumps_typed(PlantedPickle())
    PlantedPickle.reset()
    try:
        with pytest.raises(PickleRefusedError):
            EncryptedSerializer.from_pycryptodome_aes(inner, key=KEY).loads_typed(row)
        assert not PlantedPickle.ran
        opted_in = EncryptedSerializer.from_pycryptodome_aes(
            inner, key=KEY, migration=Migration(legacy_pickle=True)
        )
        opted_in.loads_typed(row)
        assert PlantedPickle.ran
    finally:
        PlantedPickle.reset()


def test_the_drop_in_refuses_the_removed_backend() -> None:
    with pytest.raises(ConfigurationError, match="backend"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY, backend="rot13")


@pytest.mark.parametrize("inner_tag", ["msgpack+pickle", "pickle+zlib", "json+pickle+zlib"])
def test_a_pickle_anywhere_in_an_unauthenticated_inner_tag_is_refused(inner_tag: str) -> None:
    """A built-in row relabelled so that a layer named ``pickle`` would read it."""
    builtin = BuiltinSerializer.from_pycryptodome_aes(key=KEY)
    _, blob = builtin.dumps_typed(pickle.dumps(PlantedPickle()))
    with pytest.raises(PickleRefusedError):
        EncryptedSerializer(EnvKeyCipher(key=KEY)).loads_typed((f"{inner_tag}+aes", blob))


def test_the_plaintext_migration_log_names_the_type_read(caplog: pytest.LogCaptureFixture) -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY), migration=Migration(plaintext=True))
    with caplog.at_level(logging.WARNING, logger="secure_serde"):
        serde.loads_typed(JsonPlusSerializer().dumps_typed({"a": 1}))
    messages = [r.getMessage() for r in caplog.records if "plaintext" in r.getMessage()]
    assert len(messages) == 1
    assert "'msgpack'" in messages[0]


def test_a_cipher_without_the_legacy_reader_does_not_claim_its_name() -> None:
    """The serializer dispatches on these names; ``aes`` must stay free for another reader."""
    assert EnvKeyCipher(key=KEY, legacy_mode=None).cipher_names == frozenset({"aesgcm"})
    assert EnvKeyCipher(key=KEY).cipher_names == frozenset({"aesgcm", "aes"})


@pytest.mark.parametrize("legacy_mode", [None, AES.MODE_EAX], ids=["no-legacy", "legacy"])
def test_a_cipher_alone_refuses_a_name_it_does_not_read(legacy_mode: int | None) -> None:
    """Used without the serializer (CipherProtocol), an unknown name is not handed to a reader."""
    cipher = EnvKeyCipher(key=KEY, legacy_mode=legacy_mode)
    blob = BuiltinSerializer.from_pycryptodome_aes(key=KEY).dumps_typed({"a": 1})[1]
    with pytest.raises(UnknownCipherError) as raised:
        cipher.decrypt_with_tag("rot13", blob, "msgpack")
    assert raised.value.cipher_name == "rot13"


def test_an_opted_in_legacy_pickle_row_is_not_vouched_for() -> None:
    """``allow_legacy_pickle`` opens the row to the inner serializer, never as authenticated.

    Its failures stay a `DecryptionError` without the inner error (which could quote the
    plaintext) attached.
    """
    _, blob = BuiltinSerializer.from_pycryptodome_aes(key=KEY).dumps_typed(b"not a pickle")
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY), migration=Migration(legacy_pickle=True))
    with pytest.raises(DecryptionError) as raised:
        serde.loads_typed(("msgpack+pickle+aes", blob))
    assert raised.value.__context__ is None
