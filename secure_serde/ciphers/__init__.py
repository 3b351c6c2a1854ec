"""Ciphers: each satisfies langgraph's ``CipherProtocol`` and secure_serde's `BoundCipher`."""

from secure_serde.ciphers._env import EnvKeyCipher
from secure_serde.ciphers._legacy import LEGACY_CIPHER_NAME, LegacyAesReader
from secure_serde.ciphers._protocol import BoundCipher

__all__ = ["LEGACY_CIPHER_NAME", "BoundCipher", "EnvKeyCipher", "LegacyAesReader"]
