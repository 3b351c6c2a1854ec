"""EncryptedSerializer: strict reads, hostile rows, composition, hygiene."""

from __future__ import annotations

import copy
import logging
import pickle
import zlib
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    ConfigurationError,
    DecryptionError,
    EncryptedSerializer,
    Migration,
    PickleRefusedError,
    PlaintextRefusedError,
    SecretPicklingError,
    SecureSerdeError,
    UnknownCipherError,
    UnknownKeyError,
)
from secure_serde.ciphers import EnvKeyCipher, Keyring
from secure_serde.crypto import Key
from tests.planted import PlantedPickle
from tests.serdes_support import env_serde

KEY = b"0123456789abcdef0123456789abcdef"
OTHER_KEY = b"fedcba9876543210fedcba9876543210"


@pytest.fixture(autouse=True)
def _reset_marker() -> None:
    PlantedPickle.reset()


SAMPLES: list[Any] = [
    None,
    b"bytes value",
    {"messages": [HumanMessage(content="hello", id="h1"), AIMessage(content="hi", id="a1")]},
    {"count": 3, "text": "plain words"},
]


@pytest.mark.parametrize("value", SAMPLES)
def test_round_trip_and_tag_shape(value: Any) -> None:
    serde = env_serde(KEY)
    tag, blob = serde.dumps_typed(value)
    plain_tag, plain = JsonPlusSerializer().dumps_typed(value)
    assert tag == f"{plain_tag}+aesgcm"
    assert plain not in blob or plain == b""
    assert serde.loads_typed((tag, blob)) == value


@pytest.mark.parametrize("value", SAMPLES)
def test_every_single_bit_flip_is_refused(value: Any) -> None:
    serde = env_serde(KEY)
    tag, blob = serde.dumps_typed(value)
    for i in range(len(blob) * 8):
        flipped = bytearray(blob)
        flipped[i // 8] ^= 1 << (i % 8)
        with pytest.raises(DecryptionError):
            serde.loads_typed((tag, bytes(flipped)))


@pytest.mark.parametrize("value", SAMPLES)
def test_every_truncation_is_refused(value: Any) -> None:
    serde = env_serde(KEY)
    tag, blob = serde.dumps_typed(value)
    for cut in range(len(blob)):
        with pytest.raises(DecryptionError):
            serde.loads_typed((tag, blob[:cut]))
    with pytest.raises(DecryptionError):
        serde.loads_typed((tag, blob + b"\x00"))


@pytest.mark.parametrize("new_inner", ["bytes", "pickle", "json", "null", "msgpack", "bytearray"])
def test_relabelled_rows_fail_to_authenticate(new_inner: str) -> None:
    inner = JsonPlusSerializer(pickle_fallback=True)
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY), inner)
    rows = [serde.dumps_typed({"a": 1}), serde.dumps_typed(pickle.dumps(PlantedPickle()))]
    for tag, blob in rows:
        if tag.startswith(new_inner + "+"):
            continue
        with pytest.raises(DecryptionError):
            serde.loads_typed((f"{new_inner}+aesgcm", blob))
    assert not PlantedPickle.ran


def test_planted_plaintext_pickle_never_runs() -> None:
    inner = JsonPlusSerializer(pickle_fallback=True)
    planted = ("pickle", pickle.dumps(PlantedPickle()))
    with pytest.raises(PlaintextRefusedError):
        EncryptedSerializer(EnvKeyCipher(key=KEY), inner).loads_typed(planted)
    with pytest.raises(PickleRefusedError):
        EncryptedSerializer(
            EnvKeyCipher(key=KEY), inner, migration=Migration(plaintext=True)
        ).loads_typed(planted)
    with pytest.raises(UnknownCipherError):
        EncryptedSerializer(
            EnvKeyCipher(key=KEY), inner, migration=Migration(plaintext=True)
        ).loads_typed(("pickle+zlib", zlib.compress(planted[1])))
    assert not PlantedPickle.ran
    # The control: the inner serializer alone would have run it.
    inner.loads_typed(planted)
    assert PlantedPickle.ran


@pytest.mark.parametrize("tag", ["msgpack", "bytes", "null", "json"])
def test_plaintext_rows_are_refused_by_default(tag: str) -> None:
    with pytest.raises(PlaintextRefusedError):
        env_serde(KEY).loads_typed((tag, b"\x80"))


def test_plaintext_reads_are_allowed_and_logged_rate_limited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    serde = env_serde(KEY, migration=Migration(plaintext=True))
    row = JsonPlusSerializer().dumps_typed({"legacy": True})
    with caplog.at_level(logging.WARNING, logger="secure_serde"):
        for _ in range(50):
            assert serde.loads_typed(row) == {"legacy": True}
    warnings = [r for r in caplog.records if "plaintext" in r.getMessage()]
    assert len(warnings) == 1
    assert "Migration.plaintext" in warnings[0].getMessage()


@pytest.mark.parametrize("cipher_name", ["aes256", "kms", "", "AESGCM", "aesgcm "])
def test_unknown_cipher_names_are_refused(cipher_name: str) -> None:
    serde = env_serde(KEY, migration=Migration(plaintext=True))
    _, blob = serde.dumps_typed({"a": 1})
    with pytest.raises(UnknownCipherError) as info:
        serde.loads_typed((f"msgpack+{cipher_name}", blob))
    assert info.value.cipher_name == cipher_name


def test_rows_under_another_key_name_the_key_id_only() -> None:
    other = EncryptedSerializer(EnvKeyCipher(key=OTHER_KEY))
    row = other.dumps_typed({"secret": "value"})
    with pytest.raises(UnknownKeyError) as info:
        env_serde(KEY).loads_typed(row)
    assert info.value.key_id == other.cipher.key_id  # type: ignore[attr-defined]
    assert info.value.key_id in str(info.value)
    for secret in (KEY, OTHER_KEY):
        assert secret.decode() not in str(info.value)


class _ZlibSerializer:
    """A compression wrapper whose tags already contain '+', like langgraph's upstream one."""

    def __init__(self) -> None:
        self.inner = JsonPlusSerializer()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        tag, data = self.inner.dumps_typed(obj)
        return f"{tag}+zlib", zlib.compress(data)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        tag, blob = data
        inner, _, codec = tag.rpartition("+")
        if codec != "zlib":
            raise ValueError(tag)
        return self.inner.loads_typed((inner, zlib.decompress(blob)))


def test_inner_tags_with_plus_compose() -> None:
    inner: SerializerProtocol = _ZlibSerializer()
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY), inner)
    value = {"messages": [HumanMessage(content="x" * 5000, id="1")]}
    tag, blob = serde.dumps_typed(value)
    assert tag == "msgpack+zlib+aesgcm"
    assert len(blob) < 1000
    assert serde.loads_typed((tag, blob)) == value
    with pytest.raises(DecryptionError):
        serde.loads_typed(("bytes+zlib+aesgcm", blob))


class _AltCipher(EnvKeyCipher):
    """The v1 recipe under another cipher name: stands in for a second cipher kind."""

    def __init__(self, key: bytes) -> None:
        super().__init__(key=key, legacy_mode=None)
        self._alt = Keyring((), Key.derive(key), cipher_name="altgcm")

    @property
    def cipher_names(self) -> frozenset[str]:
        return frozenset({"altgcm"})

    def encrypt_with_tag(self, plaintext: Any, tag: str) -> tuple[str, bytes]:
        return "altgcm", self._alt.seal(plaintext, tag)

    def decrypt_with_tag(self, ciphername: str, ciphertext: Any, tag: str) -> bytes:
        if ciphername != "altgcm":
            raise UnknownCipherError(ciphername, cipher_name=ciphername)
        return self._alt.open(ciphertext, tag)


def test_decrypt_only_ciphers_read_but_never_write() -> None:
    old_row = EncryptedSerializer(_AltCipher(OTHER_KEY)).dumps_typed({"old": 1})
    assert old_row[0] == "msgpack+altgcm"
    moving = EncryptedSerializer(EnvKeyCipher(key=KEY), decrypt_only=[_AltCipher(OTHER_KEY)])
    assert moving.loads_typed(old_row) == {"old": 1}
    new_row = moving.dumps_typed({"new": 2})
    assert new_row[0] == "msgpack+aesgcm"
    assert EncryptedSerializer(EnvKeyCipher(key=KEY)).loads_typed(new_row) == {"new": 2}
    with pytest.raises(UnknownCipherError):
        EncryptedSerializer(EnvKeyCipher(key=KEY)).loads_typed(old_row)
    # Two ciphers that both read `aesgcm` would make the choice ambiguous.
    with pytest.raises(ConfigurationError, match="both read cipher name"):
        EncryptedSerializer(EnvKeyCipher(key=KEY), decrypt_only=[EnvKeyCipher(key=OTHER_KEY)])


def test_plain_langgraph_ciphers_are_refused_with_a_hint() -> None:
    class _Cipher:
        def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
            return "rot", plaintext

        def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
            return ciphertext

    with pytest.raises(ConfigurationError, match=r"authenticate the type tag.*TagAuthenticating"):
        EncryptedSerializer(_Cipher())  # type: ignore[arg-type]


def test_default_inner_serializer_is_not_shared() -> None:
    assert env_serde(KEY).serde is not env_serde(KEY).serde
    assert isinstance(env_serde(KEY).serde, JsonPlusSerializer)


def test_unsupported_drop_in_arguments_fail_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="mac_len"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY, mac_len=8)


@pytest.mark.parametrize(
    "key", [b"short", b"k" * 33, "x" * 20, 12345, "base64:AAAA", "base64:!!!!" + "A" * 40]
)
def test_bad_keys_fail_at_construction(key: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        EncryptedSerializer.from_pycryptodome_aes(key=key)
    if isinstance(key, (str, bytes)) and len(key) > 4:
        assert str(key if isinstance(key, str) else key.decode()) not in str(info.value)


def test_missing_env_key_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="LANGGRAPH_AES_KEY"):
        EncryptedSerializer.from_pycryptodome_aes()


def test_bad_env_key_fails_without_echoing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "not-a-valid-length-key")
    with pytest.raises(ConfigurationError) as info:
        EncryptedSerializer.from_pycryptodome_aes()
    assert "not-a-valid-length-key" not in str(info.value)


def test_secrets_stay_out_of_repr_and_pickles() -> None:
    serde = env_serde(KEY)
    cipher = serde.cipher
    assert isinstance(cipher, EnvKeyCipher)
    texts = [repr(serde), str(serde), repr(cipher), repr(cipher.keyring)]
    for text in texts:
        assert KEY.decode() not in text
        assert KEY.hex() not in text
    for obj in (serde, cipher, cipher.keyring, cipher.keyring.primary):
        with pytest.raises(SecretPicklingError):
            pickle.dumps(obj)
    assert copy.deepcopy(cipher) is cipher


def test_every_error_shares_one_root() -> None:
    for error in (
        ConfigurationError,
        DecryptionError,
        PlaintextRefusedError,
        PickleRefusedError,
        UnknownCipherError,
        UnknownKeyError,
        SecretPicklingError,
    ):
        assert issubclass(error, SecureSerdeError)
    for refusal in (PlaintextRefusedError, PickleRefusedError, UnknownCipherError, UnknownKeyError):
        assert issubclass(refusal, DecryptionError)


def test_standalone_cipher_protocol() -> None:
    cipher = EnvKeyCipher(key=KEY)
    name, blob = cipher.encrypt(b"standalone")
    assert name == "aesgcm"
    assert cipher.decrypt(name, blob) == b"standalone"
    # The standalone path binds an empty context, so it cannot pose as a serializer row.
    with pytest.raises(DecryptionError):
        cipher.decrypt_with_tag(name, blob, "bytes")
