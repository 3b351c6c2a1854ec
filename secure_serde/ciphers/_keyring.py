"""The AES-GCM recipe (formats v1, v2, v3) over a set of keys, shared by every key-holding cipher.

One key encrypts (the primary), in format v3 (``_format_v3``); v1 and v2
stay readable. Decryption reads the key id from the header and uses that key
alone, as Tink does, instead of trying each key as MultiFernet does; a
retired key is refused by key id and label.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from typing import Final

from secure_serde._errors import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    RetiredKeyError,
    UnboundValueError,
)
from secure_serde.crypto import (
    GCM_NONCE_SIZE,
    Buffer,
    InvalidTag,
    Key,
    SecretHolder,
    format_v1,
    format_v2,
    format_v3,
)

__all__ = ["MOVED", "Keyring", "fixed_nonce"]

# Contexts are inner type tags: a handful per serializer. The bound stops a
# stream of forged tags on the read path from growing the cache. Locations
# are per row, so they are appended to the cached part, never cached.
_AAD_CACHE_LIMIT: Final = 64
# Format v3's fixed slices (see _format_v3), as plain module constants.
_V3: Final = format_v3.VERSION
_V3_KEYED: Final = format_v3.KEYED_SIZE
_V3_PREFIX: Final = format_v3.PREFIX_SIZE
_V3_OVERHEAD: Final = format_v3.OVERHEAD
# Below this size a bytes blob is sliced (a copy); above, AES gets a view.
_VIEW_THRESHOLD: Final = 16 * 1024
_AUTH_FAILED: Final = "ciphertext failed authentication"
MOVED: Final = "value does not authenticate at this location: it was moved, copied or tampered with"


def fixed_nonce(nonce: bytes) -> bytes:
    """``nonce``, once checked: OpenSSL would also take 8 to 128 bytes (for the test seams)."""
    if len(nonce) != GCM_NONCE_SIZE:
        raise ValueError("GCM nonces are 12 bytes")
    return nonce


class _V3Key(SecretHolder):
    """One readable key's format v3 state, computed once: the hot path's only lookups.

    ``keyed`` (version, key id, commitment) starts every value under the key;
    for v3 the associated data before the location depends only on the key
    and the tag, so ``aads`` caches it per tag.
    """

    __slots__ = ("aads", "header", "keyed", "name", "open_raw", "seal")

    def __init__(self, key: Key, name: bytes) -> None:
        self.header = format_v3.encode_header(key.key_id)
        self.keyed = self.header + key.commitment.tag(format_v3.commitment_input(key.key_id))
        self.name = name
        self.seal = key.aead.seal
        self.open_raw = key.aead.open_raw
        self.aads: dict[str, bytes] = {}

    def aad(self, context: str) -> bytes:
        aad = self.aads.get(context)
        if aad is None:
            aad = self.keyed + format_v3.aad_suffix(self.name, context.encode("utf-8"))
            if len(self.aads) < _AAD_CACHE_LIMIT:
                self.aads[context] = aad
        return aad

    def __repr__(self) -> str:
        return f"<_V3Key {format_v1.key_id_hex(self.header[1:])}>"


class Keyring(SecretHolder):
    """Seal with the primary key, open with the key the header names."""

    __slots__ = (
        "_by_id",
        "_name",
        "_primary",
        "_retired",
        "_v3_by_keyed",
        "_v3_primary",
    )

    def __init__(
        self,
        keys: Iterable[Key],
        primary: Key,
        *,
        retired: Iterable[Key] = (),
        cipher_name: str = format_v1.CIPHER_NAME,
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
        # Format v3 state per readable key, by its 21 keyed bytes (version, key
        # id, commitment). Retired keys are left out, so a hit is a key that may
        # open values and whose commitment the value carries.
        states = [_V3Key(key, self._name) for key in self.readable()]
        self._v3_primary = states[0]
        self._v3_by_keyed = {state.keyed: state for state in states}

    @property
    def primary(self) -> Key:
        return self._primary

    def readable(self) -> tuple[Key, ...]:
        """Every key that may still open rows, the primary first (for blind indexes)."""
        rest = (k for i, k in self._by_id.items() if i not in self._retired)
        return (self._primary, *(k for k in rest if k is not self._primary))

    def seal(self, plaintext: Buffer, context: str, location: bytes = b"") -> bytes:
        # The hot path of every checkpoint write: kept flat on purpose.
        state = self._v3_primary
        nonce = os.urandom(GCM_NONCE_SIZE)
        aad = state.aads.get(context) or state.aad(context)
        return b"".join((state.keyed, nonce, state.seal(nonce, plaintext, aad + location)))

    # The three `_seal_*with_nonce` take a caller-chosen nonce, for the frozen test vectors
    # only: reusing a nonce under one key breaks GCM's confidentiality and authenticity.

    def _seal_v3_with_nonce(
        self, plaintext: Buffer, context: str, nonce: bytes, location: bytes = b""
    ) -> bytes:
        state = self._v3_primary
        aad = state.aad(context) + location
        return state.keyed + fixed_nonce(nonce) + state.seal(nonce, plaintext, aad)

    def _seal_with_nonce(
        self, plaintext: Buffer, context: str, nonce: bytes, location: bytes = b""
    ) -> bytes:
        """Format v2, no longer written but still read: its vectors pin both."""
        header = format_v2.encode_header(self._primary.key_id)
        committed = header + fixed_nonce(nonce)
        commitment = self._primary.commitment.tag(committed)
        suffix = format_v2.aad_suffix(self._name, context.encode("utf-8"))
        aad = header + commitment + suffix + location
        return committed + commitment + self._primary.aead.seal(nonce, plaintext, aad)

    def _seal_v1_with_nonce(self, plaintext: Buffer, context: str, nonce: bytes) -> bytes:
        header = format_v1.encode_header(self._primary.key_id)
        aad = format_v1.build_aad(header, self._name, context.encode("utf-8"))
        return header + fixed_nonce(nonce) + self._primary.aead.seal(nonce, plaintext, aad)

    def _key(self, key_id: bytes) -> Key:
        key = self._by_id.get(key_id)
        if key is None:
            raise format_v1.unknown_key(key_id)
        if key_id in self._retired:
            hex_id = format_v1.key_id_hex(key_id)
            raise RetiredKeyError(
                f"{format_v1.key_name(hex_id, key.label)} is retired", key_id=hex_id
            )
        return key

    def open(
        self, blob: Buffer, context: str, location: bytes = b"", *, require_binding: bool = False
    ) -> bytes:
        """Authenticate and decrypt a v1, v2 or v3 ciphertext.

        Raises `UnboundValueError` for v1 under ``require_binding`` (v1 cannot
        carry a location), `BindingError` for a v2/v3 blob that does not
        authenticate at a non-empty ``location``, else `DecryptionError`.
        """
        size = len(blob)
        if size >= _V3_OVERHEAD and blob[0] == _V3:
            # The hot path of every read: one length check, then fixed slices.
            # The lookup by version, key id and commitment together is the
            # commitment check, before any decryption (see _format_v3).
            if type(blob) is bytes and size < _VIEW_THRESHOLD:
                state = self._v3_by_keyed.get(blob[:_V3_KEYED])
                nonce = blob[_V3_KEYED:_V3_PREFIX]
                sealed: Buffer = blob[_V3_PREFIX:]
            else:
                view = memoryview(blob)
                state = self._v3_by_keyed.get(bytes(view[:_V3_KEYED]))
                nonce = bytes(view[_V3_KEYED:_V3_PREFIX])
                sealed = view[_V3_PREFIX:]
            if state is None:
                raise self._v3_refusal(blob)
            try:
                return state.open_raw(
                    nonce, sealed, (state.aads.get(context) or state.aad(context)) + location
                )
            except InvalidTag:
                pass  # raised below, outside the handler, with no chained context
            if location:
                raise BindingError(MOVED)
            raise DecryptionError(_AUTH_FAILED)
        if size > 0 and blob[0] == format_v2.VERSION:
            return self._open_v2(blob, context, location)
        if require_binding:
            raise UnboundValueError("a format v1 value carries no binding to its row")
        header, nonce, sealed = format_v1.split(blob)
        key = self._key(header[1:])
        aad = format_v1.build_aad(header, self._name, context.encode("utf-8"))
        return key.aead.open(nonce, sealed, aad)

    def _open_v2(self, blob: Buffer, context: str, location: bytes) -> bytes:
        parts = format_v2.split(blob)
        key = self._key(parts.key_id)
        # Checked before any decryption, in constant time: a blob made to
        # authenticate under two keys fails here under all but one of them.
        if not hmac.compare_digest(key.commitment.tag(parts.committed), parts.commitment):
            raise DecryptionError("key commitment does not match the key")
        # Not cached (v3 is): v2 is only read, and its AAD costs little next to the GCM pass.
        suffix = format_v2.aad_suffix(self._name, context.encode("utf-8"))
        aad = parts.header + parts.commitment + suffix + location
        try:
            return key.aead.open(parts.nonce, parts.sealed, aad)
        except DecryptionError:
            if not location:
                raise
        raise BindingError(MOVED)  # outside the handler: no chained context

    def _v3_refusal(self, blob: Buffer) -> DecryptionError:
        """Why a v3 blob's header names no readable key: unknown, retired, or a bad commitment."""
        header, _, _, _ = format_v3.split(blob)  # the length was checked: a view, no copy
        self._key(header[1:])  # raises UnknownKeyError or RetiredKeyError
        return DecryptionError("key commitment does not match the key")

    def __repr__(self) -> str:
        return (
            f"<Keyring primary={self._primary.key_id_hex} keys={len(self._by_id)}"
            f" retired={len(self._retired)}>"
        )
