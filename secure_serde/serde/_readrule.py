"""The one read rule: for every type tag, who authenticated it and how its payload is decoded.

A stored value is ``(type tag, bytes)`` and the tag has langgraph's
``"{inner}+{cipher}"`` shape. Everything that reads store bytes asks
`ReadRule.route` how: `EncryptedSerializer`, rewrap's planner (and so
``audit``), ``inspect`` (through the serializer) and the sealed savers'
metadata sealer. The rule:

===========================================  ============================  =====================
type tag                                     authenticated by              payload decoded by
===========================================  ============================  =====================
``inner+<cipher that binds the tag>`` (v1,   the cipher: bytes *and* tag   the inner serializer
KMS)                                                                       (vouched if it names
                                                                           pickle)
``inner+aes`` (langgraph built-in)           the cipher: bytes only        the strict decoder
``msgpack+zstd+aes`` (compressed, legacy)    bytes only                    refused: a relabel
``pickle+aes`` (tag names pickle)            bytes only                    refused; the inner
                                                                           serializer under
                                                                           ``Migration.legacy_pickle``
``inner`` (no cipher suffix)                 nothing                       refused; the strict
                                                                           decoder under
                                                                           ``Migration.plaintext``
plaintext naming pickle                      nothing                       always refused
``inner+<unknown cipher>``                   nothing                       refused
===========================================  ============================  =====================

Refusals are exceptions (`PlaintextRefusedError`, `PickleRefusedError`,
`UnknownCipherError`), decided from the tag alone, before any byte is
decrypted. The strict decoder (secure_serde/serde/_strict.py) builds data types
only and never imports a name the bytes chose: it is how a value nobody
authenticated is read, because permissive JsonPlus msgpack imports and
calls what the bytes name.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from secure_serde._errors import (
    ConfigurationError,
    PickleRefusedError,
    PlaintextRefusedError,
    SecureSerdeError,
    StrictDecodeError,
    UnknownCipherError,
)
from secure_serde.ciphers import TagAuthenticatingCipher, tag_ciphers
from secure_serde.serde._compress import UNBOUND_COMPRESSED, compression_of
from secure_serde.serde._migration import Migration

_PICKLE: Final = "pickle"
# Cipher names that mean "encrypted" when a serializer other than ours wrote a
# value: secure_serde's v1 and KMS formats and langgraph's built-in one.
ENCRYPTING_CIPHER_NAMES: Final = frozenset({"aesgcm", "kms", "aes"})


class Decode(enum.Enum):
    """How a routed payload is decoded once its cipher (if any) has opened it."""

    #: The inner serializer: the cipher authenticated the bytes and the tag.
    INNER = "inner"
    #: The inner serializer, told (secure_serde.serde._trust) that the tag was
    #: authenticated, so it may read embedded pickles.
    VOUCHED = "vouched"
    #: The strict decoder: nothing authenticated the tag.
    STRICT = "strict"
    #: The inner serializer on a tag nothing authenticated: a legacy pickle
    #: row, only under ``Migration.legacy_pickle``.
    UNAUTHENTICATED_PICKLE = "unauthenticated_pickle"


@dataclass(frozen=True, slots=True)
class Route:
    """How one type tag is read: ``cipher`` is ``None`` (``cipher_name`` empty) for plaintext."""

    type_tag: str
    inner: str
    cipher_name: str
    cipher: TagAuthenticatingCipher | None
    decode: Decode

    @property
    def authenticated(self) -> bool:
        """True when a cipher authenticated the type tag as well as the bytes."""
        return self.decode is Decode.INNER or self.decode is Decode.VOUCHED


def names_pickle(type_tag: str) -> bool:
    """True when a ``+``-separated component of the tag is ``pickle``."""
    return _PICKLE in type_tag.split("+")


def is_refusal(error: type[SecureSerdeError]) -> bool:
    """True for errors the rule or the strict decoder raises about *what* a value is.

    As opposed to errors about whether it decrypts (wrong key, tampering):
    a value refused this way was readable and authenticated no tag, and is
    what someone relabelling or planting rows would leave behind.
    """
    return issubclass(error, (StrictDecodeError, PickleRefusedError))


class ReadRule:
    """Routes type tags for one set of ciphers and one `Migration`.

    Args:
        ciphers: every cipher that reads, the encrypting one first. Two
            different ciphers may not read the same cipher name.
        migration: what unauthenticated rows may still be read.
    """

    __slots__ = ("_ciphers", "_migration")

    def __init__(
        self, ciphers: Iterable[TagAuthenticatingCipher], migration: Migration = Migration.NONE
    ) -> None:
        by_name: dict[str, tuple[TagAuthenticatingCipher, bool]] = {}
        for candidate in tag_ciphers(ciphers):
            for name in sorted(candidate.cipher_names):
                if name in by_name and by_name[name][0] is not candidate:
                    raise ConfigurationError(
                        f"two ciphers both read cipher name {name!r}; put their keys in one"
                        " KeyRotationCipher instead"
                    )
                by_name[name] = (candidate, candidate.authenticates_tag(name))
        self._ciphers = by_name
        self._migration = Migration.resolve(migration)

    @property
    def migration(self) -> Migration:
        return self._migration

    @property
    def ciphers(self) -> tuple[TagAuthenticatingCipher, ...]:
        """Every cipher that reads, in the order given, each once."""
        return tuple(dict.fromkeys(cipher for cipher, _ in self._ciphers.values()))

    def route(self, type_tag: str) -> Route:
        """How ``type_tag`` is read; raises the typed refusal when it may not be.

        Raises:
            PlaintextRefusedError: no cipher suffix, and ``Migration.plaintext`` is off.
            PickleRefusedError: a plaintext pickle, or a pickle whose tag no
                cipher authenticates (without ``Migration.legacy_pickle``).
            UnknownCipherError: the cipher suffix names no configured cipher.
        """
        inner, plus, cipher_name = type_tag.rpartition("+")
        if not plus:
            if not self._migration.plaintext:
                raise PlaintextRefusedError(
                    f"refusing an unencrypted {type_tag!r} row (Migration.plaintext is off;"
                    " Migration(plaintext=True), or --allow-plaintext, turns it on)"
                )
            if names_pickle(type_tag):
                raise PickleRefusedError(
                    "refusing an unencrypted pickle row, even with Migration.plaintext"
                )
            return Route(type_tag, type_tag, "", None, Decode.STRICT)
        entry = self._ciphers.get(cipher_name)
        if entry is None:
            raise UnknownCipherError(
                f"no configured cipher reads cipher name {cipher_name!r}", cipher_name=cipher_name
            )
        cipher, binds_tag = entry
        if binds_tag:
            # A substring test errs towards vouching, and keeps the context
            # variable off the hot path of plain rows.
            decode = Decode.VOUCHED if _PICKLE in inner else Decode.INNER
        elif names_pickle(inner) and not self._migration.legacy_pickle:
            raise PickleRefusedError(
                f"refusing to unpickle a {cipher_name!r} row: that format does not"
                " authenticate its type tag (see Migration.legacy_pickle, --allow-legacy-pickle)"
            )
        elif compression_of(inner):
            # langgraph's built-in format never held compressed values: relabelled.
            raise StrictDecodeError(
                f"refusing a compressed {cipher_name!r} row: {UNBOUND_COMPRESSED}", type_name=inner
            )
        elif names_pickle(inner):
            decode = Decode.UNAUTHENTICATED_PICKLE
        else:
            decode = Decode.STRICT
        return Route(type_tag, inner, cipher_name, cipher, decode)

    def authenticates(self, type_tag: str) -> bool:
        """True when a row tagged ``type_tag`` would be read with its tag authenticated."""
        try:
            return self.route(type_tag).authenticated
        except SecureSerdeError:
            return False


def seals(serde: Any, type_tag: str) -> bool:
    """True when ``type_tag``, written by ``serde``, is an encrypted value.

    For a secure_serde `EncryptedSerializer` its own rule decides (the tag
    must be authenticated); for any other serializer the cipher suffix must
    name a known encrypting format (``msgpack+pickle`` is an encoding, not
    a cipher).
    """
    rule = getattr(serde, "read_rule", None)
    if isinstance(rule, ReadRule):
        return rule.authenticates(type_tag)
    _, plus, cipher_name = type_tag.rpartition("+")
    return bool(plus) and cipher_name in ENCRYPTING_CIPHER_NAMES
