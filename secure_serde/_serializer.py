"""`EncryptedSerializer`: langgraph's ``SerializerProtocol``, authenticated and strict.

Type tags keep langgraph's ``"{inner}+{cipher}"`` shape. The cipher name is
split off the right-hand end, so inner serializers whose own tags contain
``+`` (``msgpack+zlib``) compose. On read, nothing reaches the inner
serializer before the cipher has authenticated it together with the inner
tag, except plaintext rows under the explicit ``allow_plaintext`` switch.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from typing import Any, Final, cast

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde._binding import Location
from secure_serde._errors import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    PickleRefusedError,
    PlaintextRefusedError,
    UnboundValueError,
    UnknownCipherError,
)
from secure_serde._keys import ENV_VAR
from secure_serde._langgraph import register_allowlist_wrapper
from secure_serde._migration import Migration
from secure_serde._primitives import MODE_EAX, Backend
from secure_serde._ratelog import RateLimitedWarning
from secure_serde._trust import load_authenticated
from secure_serde.ciphers._env import EnvKeyCipher
from secure_serde.ciphers._protocol import BoundCipher, LocatingCipher

__all__ = ["EncryptedSerializer"]

logger = logging.getLogger("secure_serde")

_PICKLE: Final = "pickle"
_UNREADABLE: Final = object()
_UNBOUND_LOG: Final = RateLimitedWarning(
    "secure_serde read %d value(s) with no binding to their row (latest type %r) because"
    " Migration(unbound=True); rewrap the store and turn it off"
)


# isinstance() against a runtime-checkable protocol inspects every member on
# each call (most of a millisecond): answer it once per cipher class.
_LOCATING_TYPES: dict[type, bool] = {}


def _locating(cipher: object) -> bool:
    known = _LOCATING_TYPES.get(type(cipher))
    if known is None:
        known = _LOCATING_TYPES[type(cipher)] = isinstance(cipher, LocatingCipher)
    return known


def _has_pickle(type_tag: str) -> bool:
    return _PICKLE in type_tag.split("+")


class EncryptedSerializer:
    """Encrypts every value the inner serializer produces, and refuses what it did not.

    Args:
        cipher: encrypts new values. Any secure_serde cipher (`BoundCipher`).
        serde: the inner serializer; ``None`` means a fresh
            ``JsonPlusSerializer()`` for this instance.
        allow_plaintext: read rows that carry no cipher suffix, for a
            migration from an unencrypted store. Each read is logged
            (rate-limited). Plaintext ``pickle`` rows are refused even then.
        decrypt_only: further ciphers used only to read, picked by the
            cipher name in the type tag, while moving between cipher kinds.
        allow_legacy_pickle: unpickle ``pickle+aes`` rows of langgraph's
            built-in format. Their type tag is not authenticated, so anyone
            able to write the store can turn a stored ``bytes`` value into a
            pickle; leave this off unless you must read such rows to rewrap.
    """

    __slots__ = (
        "_allow_legacy_pickle",
        "_allow_plaintext",
        "_cipher",
        "_decryptors",
        "_encrypt",
        "_plaintext_log",
        "_serde",
    )

    def __init__(
        self,
        cipher: BoundCipher,
        serde: SerializerProtocol | None = None,
        *,
        allow_plaintext: bool = False,
        decrypt_only: Iterable[BoundCipher] = (),
        allow_legacy_pickle: bool = False,
    ) -> None:
        decryptors: dict[str, tuple[BoundCipher, bool]] = {}
        for candidate in (cipher, *decrypt_only):
            if not isinstance(candidate, BoundCipher):
                raise ConfigurationError(
                    f"{type(candidate).__name__} does not bind the type tag; use a cipher"
                    " from secure_serde.ciphers (or implement BoundCipher)"
                )
            for name in sorted(candidate.cipher_names):
                if name in decryptors:
                    raise ConfigurationError(
                        f"two ciphers both read cipher name {name!r}; combine their keys"
                        " in one keyring instead"
                    )
                decryptors[name] = (candidate, candidate.binds_context(name))
        self._cipher = cipher
        self._encrypt = cipher.encrypt_bound
        self._serde: SerializerProtocol = JsonPlusSerializer() if serde is None else serde
        self._decryptors = decryptors
        self._allow_plaintext = allow_plaintext
        self._allow_legacy_pickle = allow_legacy_pickle
        self._plaintext_log = RateLimitedWarning(
            "secure_serde read %d plaintext row(s) (latest type %r) because"
            " allow_plaintext=True; rewrap the store and turn it off"
        )

    @property
    def cipher(self) -> BoundCipher:
        return self._cipher

    @property
    def serde(self) -> SerializerProtocol:
        return self._serde

    @property
    def decrypt_ciphers(self) -> tuple[BoundCipher, ...]:
        """Every cipher that reads, the encrypting one first."""
        return tuple(dict.fromkeys(cipher for cipher, _ in self._decryptors.values()))

    @classmethod
    def from_pycryptodome_aes(
        cls,
        serde: SerializerProtocol | None = None,
        *,
        allow_plaintext: bool = False,
        allow_legacy_pickle: bool = False,
        backend: Backend = "auto",
        **kwargs: Any,
    ) -> EncryptedSerializer:
        """Drop-in for langgraph's ``EncryptedSerializer.from_pycryptodome_aes``.

        Takes the key from ``key=`` or ``LANGGRAPH_AES_KEY`` as langgraph
        does, reads the rows langgraph's version wrote under that key and
        ``mode=`` (EAX when omitted), and writes format v1 with AES-256-GCM,
        through OpenSSL when ``cryptography`` is installed.
        """
        key = kwargs.pop("key", None)
        mode = kwargs.pop("mode", None)
        if kwargs:
            raise ConfigurationError(
                f"unsupported argument(s) {', '.join(sorted(kwargs))}; accepted are key= and mode="
            )
        cipher = EnvKeyCipher(
            key,
            legacy_mode=MODE_EAX if mode is None else mode,
            backend=backend,
            env_var=ENV_VAR,
        )
        return cls(
            cipher,
            serde,
            allow_plaintext=allow_plaintext,
            allow_legacy_pickle=allow_legacy_pickle,
        )

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_tag, data = self._serde.dumps_typed(obj)
        cipher_name, ciphertext = self._encrypt(data, type_tag)
        return f"{type_tag}+{cipher_name}", ciphertext

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, payload = data
        inner, plus, cipher_name = type_tag.rpartition("+")
        if not plus:
            return self._load_plaintext(type_tag, payload)
        entry = self._decryptors.get(cipher_name)
        if entry is None:
            raise UnknownCipherError(
                f"no configured cipher reads cipher name {cipher_name!r}",
                cipher_name=cipher_name,
            )
        cipher, binds_tag = entry
        if not binds_tag and not self._allow_legacy_pickle and _has_pickle(inner):
            raise PickleRefusedError(
                f"refusing to unpickle a {cipher_name!r} row: that format does not"
                " authenticate its type tag (see allow_legacy_pickle)"
            )
        plaintext = cipher.decrypt_bound(cipher_name, payload, inner)
        if binds_tag and _PICKLE in inner:
            # Tag and bytes are authenticated: inner layers may read embedded pickles.
            # Only tags naming pickle need the vouching (a substring test errs
            # towards vouching), which keeps it off the hot path of plain rows.
            return load_authenticated(self._serde, (inner, plaintext))
        if binds_tag:
            return self._serde.loads_typed((inner, plaintext))
        return self._load_unbound(cipher_name, inner, plaintext)

    def _load_unbound(self, cipher_name: str, inner: str, plaintext: bytes) -> Any:
        """Deserialize a row whose format does not authenticate its type tag.

        Such a row may have been relabelled, so the inner serializer may be
        handed bytes of another type; its error would be untyped and could
        quote the plaintext. Raised outside the handler so that no
        ``__context__`` keeps the original.
        """
        try:
            value = self._serde.loads_typed((inner, plaintext))
        except Exception:
            value = _UNREADABLE
        if value is _UNREADABLE:
            raise DecryptionError(
                f"a {cipher_name!r} row did not deserialize as {inner!r}; that format does not"
                " authenticate its type tag, so the row may have been relabelled"
            )
        return value

    def _load_plaintext(self, type_tag: str, payload: bytes) -> Any:
        if not self._allow_plaintext:
            raise PlaintextRefusedError(
                f"refusing an unencrypted {type_tag!r} row (allow_plaintext=False)"
            )
        if _has_pickle(type_tag):
            raise PickleRefusedError(
                "refusing an unencrypted pickle row, even with allow_plaintext"
            )
        self._plaintext_log.record(type_tag)
        return self._serde.loads_typed((type_tag, payload))

    # -- Binding to a row (issue 10). Additive: the sealed savers' entry points. --

    @property
    def binds_locations(self) -> bool:
        """True when the encrypting cipher can bind values to their row (format v2)."""
        return _locating(self._cipher)

    def dumps_typed_at(self, obj: Any, location: Location) -> tuple[str, bytes]:
        """`dumps_typed`, with the value bound to ``location``: it reads back only there."""
        cipher = self._cipher
        if not _locating(cipher):
            raise ConfigurationError(
                f"{type(cipher).__name__} cannot bind values to their row; use a cipher"
                " from secure_serde.ciphers"
            )
        type_tag, data = self._serde.dumps_typed(obj)
        cipher_name, ciphertext = cast(LocatingCipher, cipher).encrypt_at(
            data, type_tag, location.encode()
        )
        return f"{type_tag}+{cipher_name}", ciphertext

    def loads_typed_at(
        self,
        data: tuple[str, bytes],
        location: Location,
        *,
        migration: Migration = Migration.NONE,
    ) -> Any:
        """`loads_typed` for a value that must have been written at ``location``.

        Nothing is deserialized before the cipher has authenticated the
        value, its inner type tag and ``location`` together.

        Raises:
            BindingError: the value was written elsewhere (moved, copied,
                swapped) or tampered with.
            UnboundValueError: the value carries no binding (a stock saver or
                an older secure_serde wrote it) and ``migration.unbound`` is
                off. With it on, the value is read by the unbound rule of
                `loads_typed` (so its own switches still apply), and logged.
        """
        type_tag, payload = data
        inner, plus, cipher_name = type_tag.rpartition("+")
        entry = self._decryptors.get(cipher_name) if plus else None
        if plus and entry is None:
            raise UnknownCipherError(
                f"no configured cipher reads cipher name {cipher_name!r}",
                cipher_name=cipher_name,
            )
        cipher = entry[0] if entry is not None else None
        if cipher is not None and _locating(cipher):
            plaintext = self._decrypt_at(
                cast(LocatingCipher, cipher), cipher_name, payload, inner, location, migration
            )
            if plaintext is not None:
                if _PICKLE in inner:
                    return load_authenticated(self._serde, (inner, plaintext))
                return self._serde.loads_typed((inner, plaintext))
        if not migration.unbound:
            raise UnboundValueError(
                f"refusing a {type_tag!r} value with no binding to its {location.kind} row;"
                " read it under Migration(unbound=True) and rewrap the store"
            )
        _UNBOUND_LOG.record(type_tag)
        return self.loads_typed(data)

    @staticmethod
    def _decrypt_at(
        cipher: LocatingCipher,
        cipher_name: str,
        payload: bytes,
        inner: str,
        location: Location,
        migration: Migration,
    ) -> bytes | None:
        """The plaintext, or ``None`` for a value whose format carries no binding."""
        try:
            return cipher.decrypt_at(cipher_name, payload, inner, location.encode())
        except UnboundValueError:
            if not migration.unbound:
                raise
            return None
        except BindingError:
            pass
        # Not at this location. A v2 value written with no location (through
        # ``serde=`` on a stock saver) is read only under the migration
        # switch, and logged; otherwise the second attempt only names the error.
        try:
            plaintext = cipher.decrypt_at(cipher_name, payload, inner, b"")
        except DecryptionError:
            plaintext = None
        if plaintext is None:
            raise BindingError(
                f"a {inner}+{cipher_name} value does not authenticate at its {location.kind}"
                " row: it was moved, copied or tampered with"
            )
        if not migration.unbound:
            raise UnboundValueError(
                f"refusing a {inner}+{cipher_name} value with no binding to its"
                f" {location.kind} row; read it under Migration(unbound=True) and rewrap"
            )
        _UNBOUND_LOG.record(f"{inner}+{cipher_name}")
        return plaintext

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> Any:
        """Apply a compiled graph's msgpack allowlist to the inner serializer.

        Called by ``BaseCheckpointSaver.with_allowlist`` under
        ``LANGGRAPH_STRICT_MSGPACK``; returns a new serializer with the same
        ciphers, or ``self`` when nothing changes.
        """
        hook = getattr(self._serde, "with_msgpack_allowlist", None)
        if hook is None:
            logger.warning(
                "inner serializer %s does not support a msgpack allowlist; strict msgpack"
                " is not enforced by it",
                type(self._serde).__name__,
            )
            return self
        inner = hook(extra_allowlist)
        if inner is self._serde:
            return self
        # A shallow copy keeps the subclass and shares the (immutable) ciphers;
        # rebuilding the base class here would drop a subclass's behaviour,
        # which is exactly what langgraph's own rebuild does to its wrappers.
        clone = copy.copy(self)
        clone._serde = inner
        return clone

    def __repr__(self) -> str:
        return (
            f"EncryptedSerializer(cipher={self._cipher!r}, serde={type(self._serde).__name__},"
            f" allow_plaintext={self._allow_plaintext})"
        )


register_allowlist_wrapper(EncryptedSerializer)
