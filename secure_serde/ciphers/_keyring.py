"""The AES-GCM recipe (formats v1 and v2) over a set of keys, shared by every key-holding cipher.

One key encrypts (the primary), in format v2 (``_format_v2``); v1 stays
readable. Decryption reads the key id from the header and uses that key
alone, as Tink does, instead of trying each key as MultiFernet does; a
retired key is refused by key id and label.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from typing import Final

from secure_serde import _format, _format_v2
from secure_serde._errors import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    RetiredKeyError,
    UnboundValueError,
)
from secure_serde._keys import Key
from secure_serde._primitives import GCM_NONCE_SIZE, Buffer, SecretHolder

__all__ = ["Keyring"]

# Contexts are inner type tags: a handful per serializer. The bound stops a
# stream of forged tags on the read path from growing the cache. Locations
# are per row, so they are appended to the cached part, never cached.
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
        self._primary_header = _format_v2.encode_header(primary.key_id)
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
        """The v1 associated data under the primary key; v1 is written only for test vectors."""
        return _format.build_aad(
            _format.encode_header(self._primary.key_id), self._name, context.encode("utf-8")
        )

    def _suffix(self, context: str) -> bytes:
        suffix = self._aad_cache.get(context)
        if suffix is None:
            suffix = _format_v2.aad_suffix(self._name, context.encode("utf-8"))
            if len(self._aad_cache) < _AAD_CACHE_LIMIT:
                self._aad_cache[context] = suffix
        return suffix

    def seal(self, plaintext: Buffer, context: str, location: bytes = b"") -> bytes:
        """A v2 ciphertext under the primary key, bound to ``context`` and ``location``."""
        # The hot path of every checkpoint write: kept flat on purpose.
        committed = self._primary_header + os.urandom(GCM_NONCE_SIZE)
        commitment = self._primary.commitment.tag(committed)
        aad = (
            self._primary_header
            + commitment
            + (self._aad_cache.get(context) or self._suffix(context))
            + location
        )
        return committed + commitment + self._primary.aead.seal(committed[5:], plaintext, aad)

    def _seal_with_nonce(
        self, plaintext: Buffer, context: str, nonce: bytes, location: bytes = b""
    ) -> bytes:
        """`seal` with a caller-chosen nonce: for frozen test vectors only.

        Reusing a nonce under one key breaks GCM's confidentiality and
        authenticity, so nothing outside the tests may call this.
        """
        if len(nonce) != GCM_NONCE_SIZE:
            raise ValueError("GCM nonces are 12 bytes")
        committed = self._primary_header + nonce
        commitment = self._primary.commitment.tag(committed)
        aad = self._primary_header + commitment + self._suffix(context) + location
        return committed + commitment + self._primary.aead.seal(nonce, plaintext, aad)

    def _seal_v1_with_nonce(self, plaintext: Buffer, context: str, nonce: bytes) -> bytes:
        """A format v1 ciphertext with a caller-chosen nonce: for the frozen v1 vectors only."""
        if len(nonce) != GCM_NONCE_SIZE:
            raise ValueError("GCM nonces are 12 bytes")
        header = _format.encode_header(self._primary.key_id)
        return (
            header + nonce + self._primary.aead.seal(nonce, plaintext, self._primary_aad(context))
        )

    def _key(self, key_id: bytes) -> Key:
        key = self._by_id.get(key_id)
        if key is None:
            raise _format.unknown_key(key_id)
        if key_id in self._retired:
            hex_id = _format.key_id_hex(key_id)
            raise RetiredKeyError(
                f"{_format.key_name(hex_id, key.label)} is retired", key_id=hex_id
            )
        return key

    def open(
        self, blob: Buffer, context: str, location: bytes = b"", *, require_binding: bool = False
    ) -> bytes:
        """Authenticate and decrypt a v1 or v2 ciphertext.

        Raises:
            UnboundValueError: ``require_binding`` is set and the blob is v1,
                which cannot carry a location.
            BindingError: a v2 blob read at a non-empty ``location`` did not
                authenticate there (moved, copied or tampered).
            DecryptionError: anything else that fails (see `_format`).
        """
        if len(blob) > 0 and blob[0] == _format_v2.VERSION:
            return self._open_v2(blob, context, location)
        if require_binding:
            raise UnboundValueError("a format v1 value carries no binding to its row")
        header, nonce, sealed = _format.split(blob)
        key = self._key(header[1:])
        aad = _format.build_aad(header, self._name, context.encode("utf-8"))
        return key.aead.open(nonce, sealed, aad)

    def _open_v2(self, blob: Buffer, context: str, location: bytes) -> bytes:
        parts = _format_v2.split(blob)
        key = self._primary if parts.header == self._primary_header else self._key(parts.key_id)
        # Checked before any decryption, in constant time: a blob made to
        # authenticate under two keys fails here under all but one of them.
        if not hmac.compare_digest(key.commitment.tag(parts.committed), parts.commitment):
            raise DecryptionError("key commitment does not match the key")
        aad = (
            parts.header
            + parts.commitment
            + (self._aad_cache.get(context) or self._suffix(context))
            + location
        )
        if not location:
            return key.aead.open(parts.nonce, parts.sealed, aad)
        try:
            return key.aead.open(parts.nonce, parts.sealed, aad)
        except DecryptionError:
            pass  # raised below, outside the handler, with no chained context
        raise BindingError(
            "value does not authenticate at this location: it was moved, copied or tampered with"
        )

    def __repr__(self) -> str:
        return (
            f"<Keyring primary={self._primary.key_id_hex} keys={len(self._by_id)}"
            f" retired={len(self._retired)}>"
        )
