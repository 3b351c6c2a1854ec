"""What a secure_serde cipher offers on top of langgraph's `CipherProtocol`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from secure_serde.crypto import Buffer

__all__ = ["BoundCipher", "LocatingCipher", "is_locating"]


@runtime_checkable
class BoundCipher(Protocol):
    """A cipher that binds a context, the inner type tag, into its ciphertexts.

    ``encrypt``/``decrypt`` keep langgraph's `CipherProtocol` signatures, so
    every secure_serde cipher also works alone or inside langgraph's own
    ``EncryptedSerializer``; they bind an empty context. `EncryptedSerializer`
    uses the ``*_bound`` pair, so that a stored value cannot be moved under
    another type tag.
    """

    @property
    def cipher_names(self) -> frozenset[str]:
        """Every cipher name this object can decrypt; the first in `encrypt`."""
        ...

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]: ...

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes: ...

    def encrypt_bound(self, plaintext: Buffer, context: str) -> tuple[str, bytes]: ...

    def decrypt_bound(self, ciphername: str, ciphertext: Buffer, context: str) -> bytes: ...

    def binds_context(self, ciphername: str) -> bool:
        """False for formats whose ciphertext does not authenticate the context."""
        ...


@runtime_checkable
class LocatingCipher(BoundCipher, Protocol):
    """A `BoundCipher` that also binds a value to its location (format v2, KMS v2).

    ``location`` is `secure_serde.crypto._binding.Location.encode()`, or ``b""``
    for an unbound value. `decrypt_at` raises `UnboundValueError` for a
    format that cannot carry a location (v1, langgraph's built-in rows) and
    `BindingError` when the value does not authenticate at ``location``.
    """

    def encrypt_at(self, plaintext: Buffer, context: str, location: bytes) -> tuple[str, bytes]: ...

    def decrypt_at(
        self, ciphername: str, ciphertext: Buffer, context: str, location: bytes
    ) -> bytes: ...


# isinstance() against a runtime-checkable protocol inspects every member on
# each call, and the serializer asks on every bound read and write: the answer
# is kept per cipher class.
_LOCATING_TYPES: dict[type, bool] = {}


def is_locating(cipher: object) -> bool:
    """Whether ``cipher`` is a `LocatingCipher` (it can bind values to their rows)."""
    known = _LOCATING_TYPES.get(type(cipher))
    if known is None:
        known = _LOCATING_TYPES[type(cipher)] = isinstance(cipher, LocatingCipher)
    return known
