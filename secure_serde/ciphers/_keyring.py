"""The v1 AES-GCM recipe over a set of keys, shared by every key-holding cipher.

One key encrypts (the primary). Decryption reads the key id from the
header and uses that key alone, as Tink does, instead of trying each key as
MultiFernet does; a retired id is refused by name.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Final

from secure_serde import _format
from secure_serde._errors import ConfigurationError, RetiredKeyError
from secure_serde._keys import Key
from secure_serde._primitives import GCM_NONCE_SIZE, Buffer, SecretHolder

__all__ = ["Keyring"]

# Contexts are inner type tags: a handful per serializer. The bound stops a
# stream of forged tags on the read path from growing the cache.
_AAD_CACHE_LIMIT: Final = 64


class Keyring(SecretHolder):
    """Seal with the primary key, open with the key the header names."""

    __slots__ = ("_aad_cache", "_by_id", "_name", "_primary", "_primary_header", "_retired")

    def __init__(
        self,
        keys: Iterable[Key],
        primary: Key,
        *,
        retired: Iterable[Key] = (),
        cipher_name: str = _format.CIPHER_NAME,
    ) -> None:
        # Read each iterable once: a generator passed as ``retired`` must not
        # be used up by the loop below and then mark nothing as retired.
        keys, retired = tuple(keys), tuple(retired)
        by_id: dict[bytes, Key] = {}
        for key in (primary, *keys, *retired):
            other = by_id.get(key.key_id)
            if other is not None and other is not key:
                raise ConfigurationError(
                    f"keys {other.label or '?'!r} and {key.label or '?'!r} share key id"
                    f" {key.key_id_hex}: they are the same key, or need regenerating"
                )
            by_id[key.key_id] = key
        self._retired: frozenset[bytes] = frozenset(k.key_id for k in retired)
        if primary.key_id in self._retired:
            raise ConfigurationError(f"the primary key {primary.key_id_hex} is retired")
        self._by_id: Mapping[bytes, Key] = by_id
        self._primary = primary
        self._name = cipher_name.encode("ascii")
        self._primary_header = _format.encode_header(primary.key_id)
        self._aad_cache: dict[str, bytes] = {}

    @property
    def primary(self) -> Key:
        return self._primary

    def key_for(self, key_id: bytes) -> Key | None:
        return self._by_id.get(key_id)

    def readable(self) -> tuple[Key, ...]:
        """Every key that may still open rows, the primary first (for blind indexes)."""
        rest = (k for i, k in self._by_id.items() if i not in self._retired)
        return (self._primary, *(k for k in rest if k is not self._primary))

    def is_retired(self, key_id: bytes) -> bool:
        return key_id in self._retired

    def _primary_aad(self, context: str) -> bytes:
        aad = self._aad_cache.get(context)
        if aad is None:
            aad = _format.build_aad(self._primary_header, self._name, context.encode("utf-8"))
            if len(self._aad_cache) < _AAD_CACHE_LIMIT:
                self._aad_cache[context] = aad
        return aad

    def seal(self, plaintext: Buffer, context: str) -> bytes:
        # The hot path of every checkpoint write: kept flat on purpose.
        nonce = os.urandom(GCM_NONCE_SIZE)
        aad = self._aad_cache.get(context) or self._primary_aad(context)
        return self._primary_header + nonce + self._primary.aead.seal(nonce, plaintext, aad)

    def _seal_with_nonce(self, plaintext: Buffer, context: str, nonce: bytes) -> bytes:
        """`seal` with a caller-chosen nonce: for frozen test vectors only.

        Reusing a nonce under one key breaks GCM's confidentiality and
        authenticity, so nothing outside the tests may call this.
        """
        if len(nonce) != GCM_NONCE_SIZE:
            raise ValueError("GCM nonces are 12 bytes")
        sealed = self._primary.aead.seal(nonce, plaintext, self._primary_aad(context))
        return self._primary_header + nonce + sealed

    def open(self, blob: Buffer, context: str) -> bytes:
        header, nonce, sealed = _format.split(blob)
        if header == self._primary_header:
            aad = self._aad_cache.get(context) or self._primary_aad(context)
            return self._primary.aead.open(nonce, sealed, aad)
        key_id = header[1:]
        key = self._by_id.get(key_id)
        if key is None:
            raise _format.unknown_key(key_id)
        if key_id in self._retired:
            hex_id = _format.key_id_hex(key_id)
            label = f" ({key.label})" if key.label else ""
            raise RetiredKeyError(f"key {hex_id}{label} is retired", key_id=hex_id)
        aad = _format.build_aad(header, self._name, context.encode("utf-8"))
        return key.aead.open(nonce, sealed, aad)

    def __repr__(self) -> str:
        return (
            f"<Keyring primary={self._primary.key_id_hex} keys={len(self._by_id)}"
            f" retired={len(self._retired)}>"
        )
