"""Arguments kept for one release after 0.2.0: each warns at the caller's line, or refuses.

``backend=`` is gone (AES-GCM always comes from ``cryptography``), the key
names were split into key id, label and KMS key (docs/keys.md, "Glossary"),
and the ``allow_*`` switches became `Migration`.
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


def _constructors(kms_client: Any) -> dict[str, Callable[[Any], object]]:
    """Each public constructor that took ``backend=`` in 0.2.0, called with one."""
    cmk = new_cmk(kms_client)
    return {
        "EnvKeyCipher": lambda b: EnvKeyCipher(KEY, backend=b),
        "KeyRotationCipher": lambda b: KeyRotationCipher({"a": KEY}, "a", backend=b),
        "KeyRotationCipher.from_env": lambda b: KeyRotationCipher.from_env(backend=b),
        "KmsEnvelopeCipher": lambda b: KmsEnvelopeCipher(cmk, client=kms_client, backend=b),
        "EncryptedSerializer.from_pycryptodome_aes": (
            lambda b: EncryptedSerializer.from_pycryptodome_aes(key=KEY, backend=b)
        ),
    }


@pytest.fixture
def constructors(
    kms_client: Any, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Callable[[Any], object]]:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "base64:" + "A" * 43 + "=")
    monkeypatch.delenv("SECURE_SERDE_KEYRING_FILE", raising=False)
    return _constructors(kms_client)


@pytest.mark.parametrize("backend", ["auto", "cryptography"])
def test_a_backend_that_still_exists_warns_and_is_ignored(
    constructors: dict[str, Callable[[Any], object]], backend: str
) -> None:
    for name, build in constructors.items():
        with pytest.warns(DeprecationWarning, match="backend= is deprecated") as caught:
            built = build(backend)
        assert built is not None
        # Named at this file's line, where the argument has to be removed.
        assert [w.filename for w in caught] == [__file__], name
        assert name in str(caught[0].message)


@pytest.mark.parametrize("backend", ["pycryptodome", "nope", 3])
def test_any_other_backend_is_refused(
    constructors: dict[str, Callable[[Any], object]], backend: object
) -> None:
    for name, build in constructors.items():
        with pytest.raises(ConfigurationError, match="not available") as info:
            build(backend)
        assert name in str(info.value)


def test_no_backend_argument_means_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        EnvKeyCipher(KEY)
        KeyRotationCipher({"a": KEY}, "a")
        EncryptedSerializer.from_pycryptodome_aes(key=KEY)


# -- KMS key: kms_key= and decrypt_kms_keys=, not key_id= -------------------------------------


def test_kms_key_id_keywords_are_deprecated_aliases(kms_client: Any) -> None:
    new, old = new_cmk(kms_client), new_cmk(kms_client)
    with pytest.warns(DeprecationWarning, match="is deprecated; use") as caught:
        cipher = KmsEnvelopeCipher(key_id=new, decrypt_key_ids=[old], client=kms_client)
    assert sorted(str(w.message) for w in caught) == [
        "KmsEnvelopeCipher: decrypt_key_ids= is deprecated; use decrypt_kms_keys=",
        "KmsEnvelopeCipher: key_id= is deprecated; use kms_key=",
    ]
    assert {w.filename for w in caught} == {__file__}
    assert cipher.kms_key == new
    assert cipher.decrypt_kms_keys == (old,)
    # The old names mean what they meant: a value under the old KMS key still reads.
    _, under_old = KmsEnvelopeCipher(old, client=kms_client).encrypt_bound(b"x", "ctx")
    assert cipher.decrypt_bound("kms", under_old, "ctx") == b"x"


def test_kms_key_id_attribute_is_a_deprecated_alias(kms_client: Any) -> None:
    arn = new_cmk(kms_client)
    cipher = KmsEnvelopeCipher(arn, client=kms_client)
    with pytest.warns(DeprecationWarning, match=r"\.key_id is deprecated; use \.kms_key"):
        assert cipher.key_id == arn


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"key_id": "alias/a", "kms_key": "alias/a"}, "pass kms_key= only"),
        (
            {"kms_key": "alias/a", "decrypt_key_ids": [], "decrypt_kms_keys": []},
            "pass decrypt_kms_keys= only",
        ),
        ({}, "kms_key must be"),
    ],
)
def test_old_and_new_kms_names_together_or_neither_are_refused(
    kms_client: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        KmsEnvelopeCipher(client=kms_client, **kwargs)


# -- migration: one Migration setting, the allow_* switches are aliases ------------------------


@pytest.mark.parametrize(
    ("alias", "field"),
    [("allow_plaintext", "plaintext"), ("allow_legacy_pickle", "legacy_pickle")],
)
def test_serializer_allow_switches_warn_once_and_map_onto_migration(alias: str, field: str) -> None:
    options: dict[str, Any] = {alias: True}
    builders: list[Callable[[], EncryptedSerializer]] = [
        lambda: EncryptedSerializer(EnvKeyCipher(KEY), **options),
        lambda: EncryptedSerializer.from_pycryptodome_aes(key=KEY, **options),
    ]
    for build in builders:
        with pytest.warns(DeprecationWarning, match=f"{alias}=True is deprecated") as caught:
            serde = build()
        assert len(caught) == 1
        assert caught[0].filename == __file__
        assert serde.migration == Migration(**{field: True})


def test_an_alias_widens_a_migration_it_is_passed_with() -> None:
    with pytest.warns(DeprecationWarning, match="allow_plaintext=True is deprecated"):
        serde = EncryptedSerializer(
            EnvKeyCipher(KEY), migration=Migration(unbound=True), allow_plaintext=True
        )
    assert serde.migration == Migration(plaintext=True, unbound=True)


def test_serializer_from_env_allow_switch_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "base64:" + "A" * 43 + "=")
    monkeypatch.delenv("SECURE_SERDE_KEYRING_FILE", raising=False)
    monkeypatch.delenv("SECURE_SERDE_KMS_KEY_ID", raising=False)
    with pytest.warns(DeprecationWarning, match="allow_legacy_pickle=True") as caught:
        serde = serializer_from_env(allow_legacy_pickle=True)
    assert len(caught) == 1
    assert serde.migration == Migration(legacy_pickle=True)


def test_migration_alone_and_false_aliases_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        serde = EncryptedSerializer(
            EnvKeyCipher(KEY), migration=Migration(plaintext=True), allow_plaintext=False
        )
    assert serde.migration == Migration(plaintext=True)


def test_saver_allow_inline_values_warns_once_at_the_with_line(postgres_url: str) -> None:
    from secure_serde.savers._v03_postgres import PostgresSaver

    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    with (
        pytest.warns(DeprecationWarning, match="allow_inline_values=True") as caught,
        PostgresSaver.from_conn_string(
            postgres_url, serde=serde, allow_inline_values=True
        ) as saver,
    ):
        assert saver._migration == Migration(inline_values=True)
    assert [w.filename for w in caught] == [__file__]
