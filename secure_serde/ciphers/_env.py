"""`EnvKeyCipher`: one AES-256-GCM key from ``LANGGRAPH_AES_KEY`` or ``key=``."""

from __future__ import annotations

from secure_serde._scrub import scrubbed
from secure_serde.ciphers._aesgcm import AesGcmCipher
from secure_serde.ciphers._keyring import Keyring
from secure_serde.ciphers._legacy import LegacyAesReader
from secure_serde.crypto import ENV_VAR, MODE_EAX, Key, parse_key, read_env_key

__all__ = ["EnvKeyCipher"]


class EnvKeyCipher(AesGcmCipher):
    """AES-256-GCM under a single key, in ciphertext format v3.

    The key comes from ``key=`` (any form `parse_key` accepts) or else from
    ``LANGGRAPH_AES_KEY``, read once, here, so that a missing or malformed
    key fails at start-up. With ``legacy_mode`` set (EAX by default, as in
    langgraph), langgraph's built-in ``aes`` rows under the same key are also
    read: pass ``None`` once a store is rewrapped, so they are refused.
    """

    __slots__ = ()

    @scrubbed
    def __init__(
        self,
        key: str | bytes | None = None,
        *,
        legacy_mode: int | None = MODE_EAX,
        env_var: str = ENV_VAR,
    ) -> None:
        material = read_env_key(env_var) if key is None else parse_key(key)
        source = env_var if key is None else "key"
        super().__init__(
            Keyring((), Key.derive(material, label=source)),
            None if legacy_mode is None else LegacyAesReader(material, legacy_mode),
        )

    @property
    def key_id(self) -> str:
        """The key's key id, in hex."""
        return self._keyring.primary.key_id_hex

    def __repr__(self) -> str:
        legacy = "off" if self._legacy is None else self._legacy.mode_name
        return f"<EnvKeyCipher key_id={self.key_id} legacy={legacy}>"
