"""Deciding, per stored cell, what rewrap does with it: the crypto half of rewrap.

A cell is opened with the cipher its type tag names and the plaintext is
sealed again by the primary cipher, bound to the same inner type tag, in
the same process step: like Vault's rewrap, the plaintext never reaches
the inner serializer, so no value is ever deserialized (and no pickle is
ever loaded) to rewrap it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from secure_serde import _format
from secure_serde._compress import UNBOUND_COMPRESSED, CompressedSerializer, compression_of
from secure_serde._errors import (
    ConfigurationError,
    DecryptionError,
    PickleRefusedError,
    PlaintextRefusedError,
    UnknownCipherError,
)
from secure_serde._primitives import Buffer
from secure_serde.ciphers._protocol import BoundCipher
from secure_serde.stores import Cell, Swap

__all__ = ["CURRENT", "EMPTY", "Planner", "Skip", "Unreadable"]

_PICKLE: Final = "pickle"
_PROBE_CONTEXT: Final = "secure_serde/rewrap-probe"
PLAINTEXT_SOURCE: Final = "plaintext"


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing to write: the cell is already under the primary, or holds no value."""

    kind: str


CURRENT: Final = Skip("current")
EMPTY: Final = Skip("empty")


@dataclass(frozen=True, slots=True)
class Unreadable:
    """The cell cannot be rewrapped; ``reason`` names ids and cipher names only."""

    reason: str


@dataclass(frozen=True, slots=True)
class Planned:
    """The cell is to be rewrapped: ``swap`` is ``None`` in a dry run."""

    swap: Swap | None
    source: str


def _has_pickle(type_tag: str) -> bool:
    return _PICKLE in type_tag.split("+")


def _source(cipher_name: str, data: Buffer) -> str:
    if cipher_name == _format.CIPHER_NAME and len(data) >= _format.HEADER_SIZE:
        return f"{cipher_name}/{_format.key_id_hex(bytes(data[1 : _format.HEADER_SIZE]))}"
    return cipher_name


class Planner:
    """Turns cells into swaps under the primary cipher; one per rewrap process.

    ``is_current`` comes from the primary cipher when it defines
    ``is_current(cipher_name, ciphertext) -> bool``; otherwise it is
    learnt from one probe encryption: for format v1 a row is current when
    its 5-byte header (version and key id) is the primary's. A cipher of
    another format without ``is_current`` has every row rewrapped on every
    run, which is safe but not idempotent.
    """

    def __init__(
        self,
        cipher: BoundCipher,
        decrypt_only: Iterable[BoundCipher] = (),
        *,
        allow_plaintext: bool = False,
        allow_legacy_pickle: bool = False,
        seal: bool = True,
        verify: bool = False,
        compress: CompressedSerializer | None = None,
    ) -> None:
        decryptors: dict[str, tuple[BoundCipher, bool]] = {}
        for candidate in (cipher, *decrypt_only):
            if not isinstance(candidate, BoundCipher):
                raise ConfigurationError(
                    f"{type(candidate).__name__} is not a secure_serde cipher (BoundCipher)"
                )
            for name in sorted(candidate.cipher_names):
                if name in decryptors and decryptors[name][0] is not candidate:
                    raise ConfigurationError(
                        f"two ciphers both read cipher name {name!r}; put their keys in one"
                        " KeyRotationCipher instead"
                    )
                decryptors[name] = (candidate, candidate.binds_context(name))
        self._cipher = cipher
        self._decryptors = decryptors
        self._allow_plaintext = allow_plaintext
        self._allow_legacy_pickle = allow_legacy_pickle
        self._seal = seal
        self._verify = verify
        self._compress = compress
        self._is_current, self.primary = self._current_test(cipher)

    @staticmethod
    def _current_test(cipher: BoundCipher) -> tuple[Callable[[str, Buffer], bool], str]:
        hook = getattr(cipher, "is_current", None)
        if callable(hook) and len(cipher.cipher_names) == 1:
            # No probe: for KMS a probe would cost a GenerateDataKey call and
            # the IAM permission for it, even in a dry run or an audit.
            (name,) = cipher.cipher_names
            return hook, name
        name, probe = cipher.encrypt_bound(b"", _PROBE_CONTEXT)
        if callable(hook):
            return hook, name
        if name == _format.CIPHER_NAME and len(probe) >= _format.HEADER_SIZE:
            header = bytes(probe[: _format.HEADER_SIZE])

            def same_header(cipher_name: str, data: Buffer) -> bool:
                return cipher_name == name and bytes(data[: _format.HEADER_SIZE]) == header

            return same_header, _source(name, probe)
        return (lambda cipher_name, data: False), name

    def plan(self, cell: Cell) -> Skip | Unreadable | Planned:
        type_tag, data = cell.type_tag, cell.data
        if data is None:
            return EMPTY
        if type_tag is None:
            return Unreadable("the row has a value but no type tag")
        inner, plus, cipher_name = type_tag.rpartition("+")
        if not plus:
            return self._plan_plaintext(cell, type_tag, data)
        entry = self._decryptors.get(cipher_name)
        if entry is None:
            return Unreadable(
                f"{UnknownCipherError.__name__}: no configured cipher reads {cipher_name!r}"
            )
        cipher, binds_tag = entry
        current = self._is_current(cipher_name, data)
        compress = self._compress is not None and self._compress.may_compress(inner, len(data))
        if current and not self._verify and not compress:
            return CURRENT
        if not binds_tag and not self._allow_legacy_pickle and _has_pickle(inner):
            # Re-sealing would authenticate a type tag nobody ever
            # authenticated: a relabelled `bytes+aes` row would become a
            # trusted pickle.
            return Unreadable(
                f"{PickleRefusedError.__name__}: a {type_tag!r} row's type tag is not"
                " authenticated (see --allow-legacy-pickle)"
            )
        if not binds_tag and compression_of(inner):
            return Unreadable(f"{DecryptionError.__name__}: {UNBOUND_COMPRESSED}")
        try:
            plaintext = cipher.decrypt_bound(cipher_name, data, inner)
        except DecryptionError as exc:
            return Unreadable(f"{type(exc).__name__}: {exc}")
        if compress:
            packed = self._compressed(inner, plaintext)
            if current and packed[0] == inner:
                return CURRENT
            inner, plaintext = packed
        elif current:
            return CURRENT
        return self._planned(cell, inner, plaintext, _source(cipher_name, data))

    def _plan_plaintext(self, cell: Cell, type_tag: str, data: bytes) -> Unreadable | Planned:
        if not self._allow_plaintext:
            return Unreadable(
                f"{PlaintextRefusedError.__name__}: unencrypted {type_tag!r} row"
                " (see --allow-plaintext)"
            )
        if _has_pickle(type_tag):
            return Unreadable(
                f"{PickleRefusedError.__name__}: unencrypted pickle rows are never rewrapped"
            )
        return self._planned(cell, *self._compressed(type_tag, data), PLAINTEXT_SOURCE)

    def _compressed(self, inner: str, plaintext: bytes) -> tuple[str, bytes]:
        if self._compress is None:
            return inner, plaintext
        return self._compress.compress_encoded(inner, plaintext)

    def _planned(self, cell: Cell, inner: str, plaintext: Buffer, source: str) -> Planned:
        if not self._seal:
            return Planned(None, source)
        name, sealed = self._cipher.encrypt_bound(plaintext, inner)
        return Planned(Swap(cell, f"{inner}+{name}", bytes(sealed)), source)
