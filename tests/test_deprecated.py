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

from secure_serde import ConfigurationError, EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher, KmsEnvelopeCipher
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
