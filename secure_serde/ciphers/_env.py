"""`EnvKeyCipher`: one AES-256-GCM key from ``LANGGRAPH_AES_KEY`` or ``key=``."""

from __future__ import annotations

from typing import Final

from secure_serde import _format
from secure_serde._errors import UnknownCipherError
from secure_serde._keys import ENV_VAR, Key, parse_key, read_env_key
from secure_serde._primitives import MODE_EAX, Backend, Buffer, SecretHolder
from secure_serde.ciphers._keyring import Keyring
from secure_serde.ciphers._legacy import LEGACY_CIPHER_NAME, LegacyAesReader

__all__ = ["EnvKeyCipher"]

_V1: Final = _format.CIPHER_NAME


class EnvKeyCipher(SecretHolder):
    """AES-256-GCM under a single key, in ciphertext format v1.

    The key comes from ``key=`` (bytes, or text in a form `parse_key`
    accepts) or else from the ``LANGGRAPH_AES_KEY`` environment variable,
    read once, here, so that a missing or malformed key fails at start-up.

    With ``legacy_mode`` set (EAX by default, as in langgraph), rows that
    langgraph's built-in cipher wrote under the same key, cipher name
    ``aes``, are also decrypted. Pass ``legacy_mode=None`` once a store has
    been rewrapped, so that those unauthenticated-tag rows are refused.

    It satisfies langgraph's ``CipherProtocol`` and works on its own.
    """

    __slots__ = ("_keyring", "_legacy", "_names")

    def __init__(
        self,
        key: str | bytes | None = None,
        *,
        legacy_mode: int | None = MODE_EAX,
        backend: Backend = "auto",
        env_var: str = ENV_VAR,
    ) -> None:
        material = read_env_key(env_var) if key is None else parse_key(key)
        source = env_var if key is None else "key"
        self._keyring = Keyring((), Key.derive(material, label=source, backend=backend))
        self._legacy = None if legacy_mode is None else LegacyAesReader(material, legacy_mode)
        names = [_V1] if self._legacy is None else [_V1, LEGACY_CIPHER_NAME]
        self._names = frozenset(names)

    @property
    def cipher_names(self) -> frozenset[str]:
        return self._names

    @property
    def key_id(self) -> str:
        """The printable id of the key, as written in every header."""
        return self._keyring.primary.key_id_hex

    @property
    def keyring(self) -> Keyring:
        return self._keyring

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return _V1, self._keyring.seal(plaintext, "")

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return self.decrypt_bound(ciphername, ciphertext, "")

    def encrypt_bound(self, plaintext: Buffer, context: str) -> tuple[str, bytes]:
        return _V1, self._keyring.seal(plaintext, context)

    def decrypt_bound(self, ciphername: str, ciphertext: Buffer, context: str) -> bytes:
        if ciphername == _V1:
            return self._keyring.open(ciphertext, context)
        if ciphername == LEGACY_CIPHER_NAME and self._legacy is not None:
            return self._legacy.open(ciphertext)
        raise UnknownCipherError(
            f"EnvKeyCipher cannot decrypt cipher {ciphername!r}", cipher_name=ciphername
        )

    def binds_context(self, ciphername: str) -> bool:
        return ciphername == _V1

    def __repr__(self) -> str:
        legacy = "off" if self._legacy is None else f"mode {self._legacy.mode}"
        return f"<EnvKeyCipher key_id={self.key_id} legacy={legacy}>"
