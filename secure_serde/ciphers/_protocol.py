"""What a secure_serde cipher offers on top of langgraph's `CipherProtocol`.

`TagAuthenticatingCipher` and `SealingCipher` were ``BoundCipher`` and
``LocatingCipher`` in 0.3, with ``encrypt_bound``/``decrypt_bound``/
``binds_context``; a third-party cipher with those 0.3 method names still
works through `tag_ciphers`, with a `DeprecationWarning`, until 0.5.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from secure_serde._errors import ConfigurationError
from secure_serde.crypto import Buffer

__all__ = ["SealingCipher", "TagAuthenticatingCipher", "is_sealing", "tag_ciphers"]


@runtime_checkable
class TagAuthenticatingCipher(Protocol):
    """A cipher that authenticates the inner type tag with each value (the authenticated type tag).

    ``encrypt``/``decrypt`` keep langgraph's `CipherProtocol` signatures, so
    every secure_serde cipher also works alone or inside langgraph's own
    ``EncryptedSerializer``; they authenticate an empty tag. `EncryptedSerializer`
    uses the ``*_with_tag`` pair, so that a stored value cannot be moved under
    another type tag.
    """

    @property
    def cipher_names(self) -> frozenset[str]:
        """Every cipher name this object can decrypt; the first in `encrypt`."""
        ...

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]: ...

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes: ...

    def encrypt_with_tag(self, plaintext: Buffer, tag: str) -> tuple[str, bytes]: ...

    def decrypt_with_tag(self, ciphername: str, ciphertext: Buffer, tag: str) -> bytes: ...

    def authenticates_tag(self, ciphername: str) -> bool:
        """False for formats whose ciphertext does not authenticate the type tag."""
        ...


@runtime_checkable
class SealingCipher(TagAuthenticatingCipher, Protocol):
    """A `TagAuthenticatingCipher` that also seals a value for its location (format v3, KMS v2).

    ``location`` is `secure_serde.crypto.Location.encode()`, or ``b""``
    for an unbound value. `decrypt_at` (open) raises `UnboundValueError` for a
    format that cannot carry a location (v1, langgraph's built-in rows) and
    `BindingError` when the value does not authenticate at ``location``.
    """

    def encrypt_at(self, plaintext: Buffer, tag: str, location: bytes) -> tuple[str, bytes]: ...

    def decrypt_at(
        self, ciphername: str, ciphertext: Buffer, tag: str, location: bytes
    ) -> bytes: ...


# isinstance() against a runtime-checkable protocol inspects every member on
# each call, and the serializer asks on every sealed read and write: the answer
# is kept per cipher class.
_SEALING_TYPES: dict[type, bool] = {}


def is_sealing(cipher: object) -> bool:
    """Whether ``cipher`` is a `SealingCipher` (it can seal values for their location)."""
    known = _SEALING_TYPES.get(type(cipher))
    if known is None:
        known = _SEALING_TYPES[type(cipher)] = isinstance(cipher, SealingCipher)
    return known


# -- 0.3's method names, until 0.5 ------------------------------------------------------------

_OLD_NAMES = {
    "encrypt_with_tag": "encrypt_bound",
    "decrypt_with_tag": "decrypt_bound",
    "authenticates_tag": "binds_context",
}


class _TagCipherOf03:
    """A `TagAuthenticatingCipher` over a cipher with 0.3's method names.

    Each method calls the 0.3 name when the cipher has it (a subclass of a
    secure_serde cipher may override only one), else the new one. Other
    attributes (``is_current``, ``primary_key_id``, ...) are the wrapped
    cipher's, so the passes see what they would have seen.
    """

    __slots__ = ("_authenticates", "_decrypt", "_encrypt", "wrapped")

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self._encrypt = _method(wrapped, "encrypt_with_tag")
        self._decrypt = _method(wrapped, "decrypt_with_tag")
        self._authenticates = _method(wrapped, "authenticates_tag")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    @property
    def complete(self) -> bool:
        """Whether the wrapped cipher has every method, under one spelling or the other."""
        return (
            all(callable(getattr(self.wrapped, name, None)) for name in ("encrypt", "decrypt"))
            and hasattr(self.wrapped, "cipher_names")
            and None not in (self._encrypt, self._decrypt, self._authenticates)
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"

    @property
    def cipher_names(self) -> frozenset[str]:
        return frozenset(self.wrapped.cipher_names)

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return self.wrapped.encrypt(plaintext)  # type: ignore[no-any-return]

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return self.wrapped.decrypt(ciphername, ciphertext)  # type: ignore[no-any-return]

    def encrypt_with_tag(self, plaintext: Buffer, tag: str) -> tuple[str, bytes]:
        return self._encrypt(plaintext, tag)  # type: ignore[no-any-return]

    def decrypt_with_tag(self, ciphername: str, ciphertext: Buffer, tag: str) -> bytes:
        return self._decrypt(ciphername, ciphertext, tag)  # type: ignore[no-any-return]

    def authenticates_tag(self, ciphername: str) -> bool:
        return bool(self._authenticates(ciphername))


class _SealingCipherOf03(_TagCipherOf03):
    """`_TagCipherOf03` for a 0.3 ``LocatingCipher`` (``encrypt_at``/``decrypt_at`` kept names)."""

    __slots__ = ()

    def encrypt_at(self, plaintext: Buffer, tag: str, location: bytes) -> tuple[str, bytes]:
        return self.wrapped.encrypt_at(plaintext, tag, location)  # type: ignore[no-any-return]

    def decrypt_at(self, ciphername: str, ciphertext: Buffer, tag: str, location: bytes) -> bytes:
        return self.wrapped.decrypt_at(ciphername, ciphertext, tag, location)  # type: ignore[no-any-return]


def _method(cipher: object, new: str) -> Any:
    """``cipher``'s 0.3 spelling of method ``new`` when it has one, else ``new`` (or None)."""
    old = getattr(cipher, _OLD_NAMES[new], None)
    return old if callable(old) else getattr(cipher, new, None)


def tag_ciphers(ciphers: Iterable[object]) -> tuple[TagAuthenticatingCipher, ...]:
    """``ciphers``, each a `TagAuthenticatingCipher`, in order.

    A cipher with 0.3's method names is wrapped, with one `DeprecationWarning`
    for the call; anything else raises `ConfigurationError`.
    """
    out: list[TagAuthenticatingCipher] = []
    old: dict[str, None] = {}
    for cipher in ciphers:
        if not isinstance(cipher, _TagCipherOf03) and any(
            callable(getattr(cipher, name, None)) for name in _OLD_NAMES.values()
        ):
            sealing = all(callable(getattr(cipher, m, None)) for m in ("encrypt_at", "decrypt_at"))
            adapted = (_SealingCipherOf03 if sealing else _TagCipherOf03)(cipher)
            if adapted.complete:
                out.append(adapted)
                old[type(cipher).__name__] = None
                continue
        elif isinstance(cipher, TagAuthenticatingCipher):
            out.append(cipher)
            continue
        raise ConfigurationError(
            f"{type(cipher).__name__} does not authenticate the type tag; use a cipher"
            " from secure_serde.ciphers (or implement TagAuthenticatingCipher)"
        )
    if old:
        warnings.warn(
            f"{', '.join(old)} implements 0.3's encrypt_bound/decrypt_bound/binds_context;"
            " rename them encrypt_with_tag/decrypt_with_tag/authenticates_tag"
            " (secure_serde.ciphers.TagAuthenticatingCipher): the old names work until 0.5",
            DeprecationWarning,
            stacklevel=3,
        )
    return tuple(out)
