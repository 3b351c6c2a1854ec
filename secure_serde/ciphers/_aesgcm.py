"""`AesGcmCipher` (0.3's ``V1Cipher``): what the ciphers writing the ``aesgcm`` formats share.

`EnvKeyCipher` and `KeyRotationCipher` differ only in where their keys come
from and in how they police langgraph's built-in rows, so the rest lives here.
"""

from __future__ import annotations

from typing import Final

from secure_serde._errors import UnboundValueError, UnknownCipherError
from secure_serde.ciphers._keyring import Keyring
from secure_serde.ciphers._legacy import LEGACY_CIPHER_NAME, LegacyAesReader
from secure_serde.crypto import Buffer, SecretHolder, format_v1

__all__ = ["AesGcmCipher"]

_V1: Final = format_v1.CIPHER_NAME


class AesGcmCipher(SecretHolder):
    """Writes v3 under the keyring's primary; reads v1-v3 by key id, and legacy rows if given."""

    __slots__ = ("_keyring", "_legacy", "_names")

    def __init__(self, keyring: Keyring, legacy: LegacyAesReader | None) -> None:
        self._keyring = keyring
        self._legacy = legacy
        self._names = frozenset([_V1] if legacy is None else [_V1, LEGACY_CIPHER_NAME])

    @property
    def cipher_names(self) -> frozenset[str]:
        return self._names

    @property
    def keyring(self) -> Keyring:
        return self._keyring

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return _V1, self._keyring.seal(plaintext, "")

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return self.decrypt_with_tag(ciphername, ciphertext, "")

    def encrypt_with_tag(self, plaintext: Buffer, tag: str) -> tuple[str, bytes]:
        return _V1, self._keyring.seal(plaintext, tag)

    def encrypt_at(self, plaintext: Buffer, tag: str, location: bytes) -> tuple[str, bytes]:
        return _V1, self._keyring.seal(plaintext, tag, location)

    def decrypt_at(self, ciphername: str, ciphertext: Buffer, tag: str, location: bytes) -> bytes:
        if ciphername == _V1:
            return self._keyring.open(ciphertext, tag, location, require_binding=True)
        if ciphername == LEGACY_CIPHER_NAME and self._legacy is not None:
            raise UnboundValueError("a langgraph built-in value is not sealed for its location")
        raise UnknownCipherError(
            f"{type(self).__name__} cannot decrypt cipher {ciphername!r}", cipher_name=ciphername
        )

    def decrypt_with_tag(self, ciphername: str, ciphertext: Buffer, tag: str) -> bytes:
        if ciphername == _V1:
            return self._keyring.open(ciphertext, tag)
        if ciphername == LEGACY_CIPHER_NAME and self._legacy is not None:
            return self._open_legacy(self._legacy, ciphertext)
        raise UnknownCipherError(
            f"{type(self).__name__} cannot decrypt cipher {ciphername!r}", cipher_name=ciphername
        )

    def _open_legacy(self, reader: LegacyAesReader, ciphertext: Buffer) -> bytes:
        """Hook for subclasses that refuse legacy rows under some conditions."""
        return reader.open(ciphertext)

    def authenticates_tag(self, ciphername: str) -> bool:
        return ciphername == _V1
