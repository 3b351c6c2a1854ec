"""Ciphers: each satisfies langgraph's ``CipherProtocol`` and secure_serde's `BoundCipher`."""

from secure_serde.ciphers._env import EnvKeyCipher
from secure_serde.ciphers._keyring import Keyring
from secure_serde.ciphers._kms import KmsCacheInfo, KmsEnvelopeCipher
from secure_serde.ciphers._legacy import LEGACY_CIPHER_NAME, LegacyAesReader
from secure_serde.ciphers._protocol import BoundCipher
from secure_serde.ciphers._rotation import KEYRING_FILE_VAR, KeyRotationCipher

__all__ = [
    "KEYRING_FILE_VAR",
    "LEGACY_CIPHER_NAME",
    "BoundCipher",
    "EnvKeyCipher",
    "KeyRotationCipher",
    "Keyring",
    "KmsCacheInfo",
    "KmsEnvelopeCipher",
    "LegacyAesReader",
]
