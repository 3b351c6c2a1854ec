"""The 0.1/0.2 spellings that warned through 0.3 are gone in 0.4 (CHANGELOG.md): each is refused.

``backend=`` (AES-GCM always comes from ``cryptography``), the KMS cipher's ``key_id=``,
``decrypt_key_ids=`` and ``.key_id`` (now ``kms_key``), and the ``allow_*`` switches (now
`Migration`) no longer exist: passing one fails at once, never silently means something else.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

from secure_serde import ConfigurationError, EncryptedSerializer, Migration
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher, KmsEnvelopeCipher
from secure_serde.config import serializer_from_env
from tests.ciphers.kms_support import new_cmk

KEY = b"k" * 32


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "base64:" + "A" * 43 + "=")
    monkeypatch.delenv("SECURE_SERDE_KEYRING_FILE", raising=False)
    monkeypatch.delenv("SECURE_SERDE_KMS_KEY", raising=False)


def _with_backend(kms_client: Any) -> dict[str, Callable[[], object]]:
    """Each public constructor that took ``backend=`` in 0.2 and 0.3, called with one."""
    cmk = new_cmk(kms_client)
    old: dict[str, Any] = {"backend": "cryptography"}
    return {
        "EnvKeyCipher": lambda: EnvKeyCipher(KEY, **old),
        "KeyRotationCipher": lambda: KeyRotationCipher({"a": KEY}, "a", **old),
        "KeyRotationCipher.from_env": lambda: KeyRotationCipher.from_env(**old),
        "KmsEnvelopeCipher": lambda: KmsEnvelopeCipher(cmk, client=kms_client, **old),
    }


@pytest.mark.usefixtures("env_key")
def test_backend_is_refused_by_every_constructor(kms_client: Any) -> None:
    for name, build in _with_backend(kms_client).items():
        with pytest.raises(TypeError, match="backend") as info:
            build()
        assert name.rpartition(".")[0] or name in str(info.value), info.value
    # The drop-in takes langgraph's **kwargs, so it names what it accepts instead.
    with pytest.raises(ConfigurationError, match=r"unsupported argument\(s\) backend"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY, backend="cryptography")


def test_the_constructors_without_the_old_names_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        EnvKeyCipher(KEY)
        KeyRotationCipher({"a": KEY}, "a")
        EncryptedSerializer.from_pycryptodome_aes(key=KEY)
        EncryptedSerializer(EnvKeyCipher(KEY), migration=Migration(plaintext=True))


# -- KMS key: kms_key= and decrypt_kms_keys=, not key_id= ---------------------------------------


@pytest.mark.parametrize("old", ["key_id", "decrypt_key_ids"])
def test_kms_key_id_keywords_are_refused(kms_client: Any, old: str) -> None:
    arn = new_cmk(kms_client)
    value: Any = arn if old == "key_id" else [arn]
    with pytest.raises(TypeError, match=old):
        KmsEnvelopeCipher(arn, client=kms_client, **{old: value})


def test_kms_key_id_attribute_is_gone(kms_client: Any) -> None:
    arn = new_cmk(kms_client)
    cipher = KmsEnvelopeCipher(arn, client=kms_client)
    assert cipher.kms_key == arn
    assert not hasattr(cipher, "key_id")


def test_a_kms_cipher_without_a_kms_key_is_refused(kms_client: Any) -> None:
    with pytest.raises(ConfigurationError, match="kms_key must be"):
        KmsEnvelopeCipher(client=kms_client)


# -- migration: one Migration setting, no allow_* switches ------------------------------------


@pytest.mark.parametrize("alias", ["allow_plaintext", "allow_legacy_pickle"])
def test_serializer_allow_switches_are_refused(alias: str) -> None:
    options: dict[str, Any] = {alias: True}
    with pytest.raises(TypeError, match=alias):
        EncryptedSerializer(EnvKeyCipher(KEY), **options)
    with pytest.raises(ConfigurationError, match=rf"unsupported argument\(s\) {alias}"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY, **options)


@pytest.mark.usefixtures("env_key")
def test_serializer_from_env_allow_switch_is_refused() -> None:
    options: dict[str, Any] = {"allow_legacy_pickle": True}
    with pytest.raises(TypeError, match="allow_legacy_pickle"):
        serializer_from_env(**options)
    assert serializer_from_env(migration=Migration(legacy_pickle=True)).migration == Migration(
        legacy_pickle=True
    )


def test_rewrap_allow_switches_are_refused(tmp_path: Any) -> None:
    from secure_serde import rewrap

    options: dict[str, Any] = {"allow_plaintext": True}
    with pytest.raises(TypeError, match="allow_plaintext"):
        rewrap(tmp_path / "absent.sqlite", EnvKeyCipher(KEY), **options)


def test_migration_must_be_a_migration() -> None:
    bad: Any = {"plaintext": True}
    with pytest.raises(ConfigurationError, match=r"must be a secure_serde\.Migration, not dict"):
        EncryptedSerializer(EnvKeyCipher(KEY), migration=bad)
