"""Build the serializer from the environment: one configuration for applications and the CLI.

An application and every ``secure-serde`` subcommand (rewrap, audit,
inspect) build their ciphers here, so what the operator's tools read is
exactly what the application wrote::

    from secure_serde.config import serializer_from_env
    saver = PostgresSaver(pool, serde=serializer_from_env())

The variables, and 0.3's names for two of them (read until 0.5, with a
`DeprecationWarning`), are docs/cli.md's "Keys for rewrap, audit and inspect".
When the KMS key is set, it is the primary and the AES keyring only reads.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from langgraph.checkpoint.serde.base import SerializerProtocol

from secure_serde._errors import ConfigurationError
from secure_serde._lazy import lazy_attributes
from secure_serde.ciphers import (
    KEYRING_FILE_VAR,
    KeyRotationCipher,
    KmsEnvelopeCipher,
    TagAuthenticatingCipher,
    cmk_id,
)
from secure_serde.crypto import ENV_VAR
from secure_serde.serde import EncryptedSerializer, Migration

__all__ = [
    "KMS_CONTEXT_VAR",
    "KMS_DECRYPT_KEYS_VAR",
    "KMS_KEY_VAR",
    "PICKLE_PRESETS",
    "ConfiguredCiphers",
    "ciphers_from_env",
    "require_ciphers",
    "serializer_from_env",
]

KMS_KEY_VAR: Final = "SECURE_SERDE_KMS_KEY"
KMS_DECRYPT_KEYS_VAR: Final = "SECURE_SERDE_KMS_DECRYPT_KEYS"
KMS_CONTEXT_VAR: Final = "SECURE_SERDE_KMS_ENCRYPTION_CONTEXT"
# 0.3's names of the two variables, read until 0.5 (new name -> old name).
_OLD_VARS: Final = {
    KMS_KEY_VAR: "SECURE_SERDE_KMS_KEY_ID",
    KMS_DECRYPT_KEYS_VAR: "SECURE_SERDE_KMS_DECRYPT_KEY_IDS",
}
# The --pickle choices of inspect: presets of secure_serde.pickling.
PICKLE_PRESETS: Final = ("numpy", "pandas")


@dataclass(frozen=True)
class ConfiguredCiphers:
    """The ciphers of the environment: ``primary`` first, then the read-only ones."""

    primary: TagAuthenticatingCipher
    decrypt_only: tuple[TagAuthenticatingCipher, ...]
    keyring: KeyRotationCipher | None
    kms: KmsEnvelopeCipher | None

    def key_label(self, cipher_name: str, key_id: str | None) -> str | None:
        """What the configuration calls the key whose key id (hex) a header carries, if known.

        For the AES keyring that is the key's label; for KMS it is the KMS key
        (its ARN; KMS keys have no label). Never key material.
        """
        if key_id is None:
            return None
        if self.keyring is not None and cipher_name in self.keyring.cipher_names:
            return self.keyring.label_for(key_id)
        arn = None if self.kms is None else self.kms.key_arn
        if arn is not None and cmk_id(arn).hex() == key_id:
            return arn
        return None

    def describe(self) -> list[str]:
        """One line per configured source of keys: labels, key ids and KMS key ARNs only."""
        lines = []
        if self.keyring is not None:
            role = "primary" if self.primary is self.keyring else "read only"
            lines.append(f"AES keyring ({role}): {self.keyring!r}")
        if self.kms is not None:
            lines.append(f"KMS (primary): {self.kms!r}")
        return lines


def ciphers_from_env() -> ConfiguredCiphers | None:
    """The configured ciphers, or ``None`` when the environment names no key at all.

    Raises `ConfigurationError` for a configuration that is present but wrong.
    """
    keyring = None
    if os.environ.get(ENV_VAR) is not None or os.environ.get(KEYRING_FILE_VAR):
        keyring = KeyRotationCipher.from_env()
    kms = _kms_from_env()
    if kms is not None:
        return ConfiguredCiphers(kms, () if keyring is None else (keyring,), keyring, kms)
    if keyring is not None:
        return ConfiguredCiphers(keyring, (), keyring, None)
    return None


def require_ciphers() -> ConfiguredCiphers:
    configured = ciphers_from_env()
    if configured is None:
        raise ConfigurationError(
            f"no keys configured: set {ENV_VAR}, {KEYRING_FILE_VAR} or {KMS_KEY_VAR}"
        )
    return configured


def serializer_from_env(
    *,
    migration: Migration | None = None,
    pickle_presets: Sequence[str] = (),
) -> EncryptedSerializer:
    """An `EncryptedSerializer` over the configured ciphers, as the application would build it.

    ``pickle_presets`` (names from `PICKLE_PRESETS`) makes the inner
    serializer a `PickleFallbackSerializer` admitting those presets, for
    stores written with one.
    """
    resolved = Migration.resolve(migration)
    configured = require_ciphers()
    return EncryptedSerializer(
        configured.primary,
        _inner_serde(pickle_presets),
        migration=resolved,
        decrypt_only=configured.decrypt_only,
    )


def _inner_serde(presets: Sequence[str]) -> SerializerProtocol | None:
    if not presets:
        return None
    from secure_serde import pickling

    by_name = {"numpy": pickling.NUMPY, "pandas": pickling.PANDAS}
    unknown = sorted(set(presets) - set(by_name))
    if unknown:
        raise ConfigurationError(f"unknown pickle preset(s) {unknown}; known: {PICKLE_PRESETS}")
    return pickling.PickleFallbackSerializer(allowed=[by_name[name] for name in presets])


def _kms_from_env() -> KmsEnvelopeCipher | None:
    kms_key = _kms_var(KMS_KEY_VAR)
    if not kms_key:
        return None
    older = [k.strip() for k in (_kms_var(KMS_DECRYPT_KEYS_VAR) or "").split(",")]
    return KmsEnvelopeCipher(
        kms_key,
        decrypt_kms_keys=[k for k in older if k],
        encryption_context=_kms_context(),
    )


def _kms_var(name: str) -> str | None:
    """The variable ``name``, or its 0.3 name (with a `DeprecationWarning`); never both, differing.

    An empty variable counts as unset, as it always did. The error names the
    two variables, never their values.
    """
    old = _OLD_VARS[name]
    value, before = os.environ.get(name) or None, os.environ.get(old) or None
    if before is None:
        return value
    if value is not None and value != before:
        raise ConfigurationError(
            f"{name} and {old} (its 0.3 name) are both set, to different KMS keys: unset {old}"
        )
    warnings.warn(
        f"{old} is deprecated: set {name} instead (the old name is read until 0.5)",
        DeprecationWarning,
        stacklevel=4,
    )
    return before


# 0.3's names of the constants, until 0.5: each access warns and returns the new constant.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {},
    {
        "KMS_KEY_ID_VAR": ("KMS_KEY_VAR", "0.5"),
        "KMS_DECRYPT_KEY_IDS_VAR": ("KMS_DECRYPT_KEYS_VAR", "0.5"),
    },
)


def _kms_context() -> dict[str, str] | None:
    text = os.environ.get(KMS_CONTEXT_VAR)
    if not text:
        return None
    try:
        context: Any = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigurationError(f"{KMS_CONTEXT_VAR} is not valid JSON") from None
    if not isinstance(context, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in context.items()
    ):
        raise ConfigurationError(f"{KMS_CONTEXT_VAR} must be a JSON object of strings")
    return context
