"""`EncryptedSerializer`: langgraph's ``SerializerProtocol``, authenticated and strict.

Type tags keep langgraph's ``"{inner}+{cipher}"`` shape. The cipher name is
split off the right-hand end, so inner serializers whose own tags contain
``+`` (``msgpack+zlib``) compose. How each tag is read is decided by the one
read rule (secure_serde/serde/_readrule.py, which lays it out).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable
from typing import Any, Final, cast

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde._errors import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    PlaintextRefusedError,
    SecureSerdeError,
    UnboundValueError,
    UnserializableValueError,
)
from secure_serde._ratelog import RateLimitedWarning
from secure_serde._scrub import scrubbed
from secure_serde.ciphers import (
    EnvKeyCipher,
    SealingCipher,
    TagAuthenticatingCipher,
    is_sealing,
    tag_ciphers,
)
from secure_serde.crypto import MODE_EAX, Location
from secure_serde.serde._compress import CompressedSerializer, inner_with_allowlist
from secure_serde.serde._langgraph import register_allowlist_wrapper
from secure_serde.serde._migration import Migration
from secure_serde.serde._readrule import Decode, ReadRule, Route
from secure_serde.serde._strict import StrictDecoder
from secure_serde.serde._trust import load_authenticated

_UNREADABLE: Final = object()
# Routes are cached per type tag; tags come from the store, so the cache is
# bounded (tags past it are routed on every read, which is only slower).
_MAX_CACHED_ROUTES: Final = 256
# Module constants: a global read instead of an enum attribute lookup per read.
_INNER: Final = Decode.INNER
_VOUCHED: Final = Decode.VOUCHED
_STRICT: Final = Decode.STRICT
_UNBOUND_LOG: Final = RateLimitedWarning(
    "secure_serde read %d value(s) with no binding to their row (latest type %r) because"
    " Migration(unbound=True); copy the store into a sealed one (`secure-serde adopt`) and turn"
    " it off"
)


class EncryptedSerializer:
    """Encrypts every value the inner serializer produces, and refuses what it did not.

    Args:
        cipher: encrypts new values. Any secure_serde cipher (`TagAuthenticatingCipher`;
            one with 0.3's method names works with a `DeprecationWarning` until 0.5).
        serde: the inner serializer; ``None`` means a fresh
            ``JsonPlusSerializer()`` for this instance.
        migration: what unauthenticated rows may still be read
            (`secure_serde.Migration`); ``None`` reads none. Such rows are
            decoded strictly (data types only, never an import by name);
            each plaintext read is logged (rate-limited).
        decrypt_only: further ciphers used only to read, picked by the
            cipher name in the type tag, while moving between cipher kinds.
    """

    __slots__ = ("_cipher", "_encrypt", "_plaintext_log", "_routes", "_rule", "_serde", "_strict")

    def __init__(
        self,
        cipher: TagAuthenticatingCipher,
        serde: SerializerProtocol | None = None,
        *,
        migration: Migration | None = None,
        decrypt_only: Iterable[TagAuthenticatingCipher] = (),
    ) -> None:
        cipher, *readers = tag_ciphers((cipher, *decrypt_only))
        self._rule = ReadRule((cipher, *readers), Migration.resolve(migration))
        self._cipher = cipher
        self._encrypt = cipher.encrypt_with_tag
        self._serde: SerializerProtocol = JsonPlusSerializer() if serde is None else serde
        self._strict = StrictDecoder.for_serde(self._serde)
        self._routes: dict[str, Route] = {}
        self._plaintext_log = RateLimitedWarning(
            "secure_serde read %d plaintext row(s) (latest type %r) because"
            " Migration.plaintext is on; they were decoded strictly. Rewrap the store"
            " and turn it off"
        )

    @property
    def cipher(self) -> TagAuthenticatingCipher:
        return self._cipher

    @property
    def serde(self) -> SerializerProtocol:
        return self._serde

    @property
    def migration(self) -> Migration:
        """The migration switches this serializer reads under."""
        return self._rule.migration

    @property
    def read_rule(self) -> ReadRule:
        """The rule deciding how each type tag is read (shared with rewrap and the sealer)."""
        return self._rule

    @property
    def strict_decoder(self) -> StrictDecoder:
        """How values whose type tag nothing authenticates are decoded."""
        return self._strict

    @property
    def decrypt_ciphers(self) -> tuple[TagAuthenticatingCipher, ...]:
        """Every cipher that reads, the encrypting one first."""
        return self._rule.ciphers

    @classmethod
    @scrubbed
    def from_pycryptodome_aes(
        cls,
        serde: SerializerProtocol | None = None,
        *,
        migration: Migration | None = None,
        compress: bool = False,
        **kwargs: Any,
    ) -> EncryptedSerializer:
        """Drop-in for langgraph's ``EncryptedSerializer.from_pycryptodome_aes``.

        Takes the key from ``key=`` or ``LANGGRAPH_AES_KEY`` as langgraph
        does, reads the rows langgraph's version wrote under that key and
        ``mode=`` (EAX when omitted), and writes secure_serde's own format
        with AES-256-GCM from ``cryptography``. Those legacy rows do not
        authenticate their type tag, so they are decoded strictly.
        ``compress=True`` compresses values before encrypting them
        (`CompressedSerializer`; read SECURITY.md on length leaks first).
        """
        key = kwargs.pop("key", None)
        mode = kwargs.pop("mode", None)
        if kwargs:
            raise ConfigurationError(
                f"unsupported argument(s) {', '.join(sorted(kwargs))}; accepted are key= and mode="
            )
        resolved = Migration.resolve(migration)
        cipher = EnvKeyCipher(key, legacy_mode=MODE_EAX if mode is None else mode)
        return cls(cipher, CompressedSerializer(serde) if compress else serde, migration=resolved)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_tag, data = _encoded(self._serde, obj)
        cipher_name, ciphertext = self._encrypt(data, type_tag)
        return f"{type_tag}+{cipher_name}", ciphertext

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, payload = data
        route = self._routes.get(type_tag)
        if route is None:
            route = self._route(type_tag, payload)
        cipher = route.cipher
        if cipher is None:
            self._plaintext_log.record(type_tag)
            return self._strict.loads_typed((type_tag, payload))
        if type(payload) is not bytes and not isinstance(payload, (bytearray, memoryview)):
            # A damaged store row (found by fuzzing): refuse it typed, not with a TypeError.
            raise DecryptionError(
                f"a stored {route.cipher_name!r} value is {type(payload).__name__}, not bytes"
            )
        return self._decode(route, cipher.decrypt_with_tag(route.cipher_name, payload, route.inner))

    def _route(self, type_tag: str, payload: object = None) -> Route:
        if not isinstance(type_tag, str):
            # A NULL or non-text type column of a damaged store row (found by fuzzing).
            raise DecryptionError(
                f"a stored value's type tag is {type(type_tag).__name__}, not str"
            )
        try:
            route = self._rule.route(type_tag)  # raises the typed refusal
        except PlaintextRefusedError:
            if not _is_sealed_cell(payload):
                raise
            # A stock saver given this serializer on a store SealedSaver wrote: the value
            # is a sealed cell, which the inner saver stored as plain bytes.
            raise PlaintextRefusedError(
                "this value was written by secure_serde.SealedSaver, whose store a stock saver"
                " cannot read: open the store with SealedSaver(inner_saver, serde=...) (README,"
                " 'Seal any saver')"
            ) from None
        if len(self._routes) < _MAX_CACHED_ROUTES:
            self._routes[type_tag] = route
        return route

    def _load_unbound(self, route: Route, plaintext: bytes) -> Any:
        """Unpickle a legacy row under ``Migration.legacy_pickle``: its tag is not authenticated.

        Such a row may have been relabelled, so the inner serializer may be
        handed bytes of another type; its error would be untyped and could
        quote the plaintext. Raised outside the handler so that no
        ``__context__`` keeps the original.
        """
        try:
            value = self._serde.loads_typed((route.inner, plaintext))
        except Exception:  # noqa: BLE001 - becomes one DecryptionError, raised outside the handler
            value = _UNREADABLE
        if value is _UNREADABLE:
            raise DecryptionError(
                f"a {route.cipher_name!r} row did not deserialize as {route.inner!r}; that format"
                " does not authenticate its type tag, so the row may have been relabelled"
            )
        return value

    # -- Sealing for a location (issue 10): the sealed savers' entry points. --

    @property
    def seals_locations(self) -> bool:
        """True when the encrypting cipher can seal values for their location (format v3)."""
        return is_sealing(self._cipher)

    @property
    def binds_locations(self) -> bool:
        """0.3's name of `seals_locations`, until 0.5 (warns)."""
        warnings.warn(
            "EncryptedSerializer.binds_locations is deprecated: use seals_locations (the old"
            " name goes in 0.5)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.seals_locations

    def dumps_typed_at(self, obj: Any, location: Location) -> tuple[str, bytes]:
        """`dumps_typed`, with the value sealed for ``location``: it opens only there."""
        cipher = self._cipher
        if not is_sealing(cipher):
            raise ConfigurationError(
                f"{type(cipher).__name__} cannot seal values for their location; use a cipher"
                " from secure_serde.ciphers"
            )
        type_tag, data = _encoded(self._serde, obj)
        cipher_name, ciphertext = cast(SealingCipher, cipher).encrypt_at(
            data, type_tag, location.encode()
        )
        return f"{type_tag}+{cipher_name}", ciphertext

    def loads_typed_at(
        self, data: tuple[str, bytes], location: Location, *, migration: Migration = Migration.NONE
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
        route = self._routes.get(type_tag)
        if route is None:
            route = self._route(type_tag)  # the read rule's typed refusals
        cipher = route.cipher
        if cipher is not None and is_sealing(cipher):
            plaintext = self._decrypt_at(route, payload, location, migration)
            if plaintext is not None:
                return self._decode(route, plaintext)
        _read_unbound(type_tag, location, migration)
        return self.loads_typed(data)

    def _decode(self, route: Route, plaintext: bytes) -> Any:
        """The inner value of a payload its cipher opened, as the read rule says."""
        decode = route.decode
        if decode is _INNER:
            return self._serde.loads_typed((route.inner, plaintext))
        if decode is _VOUCHED:
            # Tag and bytes are authenticated: inner layers may read embedded pickles.
            return load_authenticated(self._serde, (route.inner, plaintext))
        if decode is _STRICT:
            return self._strict.loads_typed((route.inner, plaintext))
        return self._load_unbound(route, plaintext)

    @staticmethod
    def _decrypt_at(
        route: Route, payload: bytes, location: Location, migration: Migration
    ) -> bytes | None:
        """The plaintext (``route.cipher`` seals), or ``None`` for a format with no binding."""
        cipher = cast(SealingCipher, route.cipher)
        cipher_name, inner = route.cipher_name, route.inner
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
        _read_unbound(f"{inner}+{cipher_name}", location, migration)
        return plaintext

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> Any:
        """Apply a compiled graph's msgpack allowlist to the inner serializer.

        Called by ``BaseCheckpointSaver.with_allowlist`` under
        ``LANGGRAPH_STRICT_MSGPACK``; returns a new serializer with the same
        ciphers, or ``self`` when nothing changes.
        """
        extra = tuple(extra_allowlist)
        # The graph's allowlist also admits its types in values nothing
        # authenticates, which the strict decoder reads.
        strict = self._strict.with_allowlist(extra)
        inner = inner_with_allowlist(self._serde, extra)
        if inner is self._serde and strict is self._strict:
            return self
        # A shallow copy keeps the subclass and shares the (immutable) ciphers
        # and rule; rebuilding the base class here would drop a subclass's
        # behaviour, which is exactly what langgraph's own rebuild does to its
        # wrappers. The route cache is per instance (routes do not depend on
        # the inner serializer, but a shared dict would be mutated by both).
        clone = copy.copy(self)
        clone._serde = inner
        clone._strict = strict
        clone._routes = {}
        return clone

    def __repr__(self) -> str:
        enabled = self._rule.migration.enabled()
        migration = f", migration={'+'.join(enabled)}" if enabled else ""
        return (
            f"EncryptedSerializer(cipher={self._cipher!r},"
            f" serde={type(self._serde).__name__}{migration})"
        )


def _is_sealed_cell(payload: object) -> bool:
    """Whether a refused plaintext payload is, or holds, SealedSaver cells (message only).

    The magic of secure_serde/sealing/_cell.py, duplicated: the serializer sits below it.
    A stock PostgresSaver stores each cell as a ``bytes`` row; a stock SqliteSaver stores
    the checkpoint as one msgpack value with the cells inside it. Only the refusal's wording
    depends on this; the row is refused either way.
    """
    return isinstance(payload, (bytes, bytearray)) and b"SSC1" in payload


register_allowlist_wrapper(EncryptedSerializer)


def _read_unbound(type_tag: str, location: Location, migration: Migration) -> None:
    if not migration.unbound:
        raise UnboundValueError(
            f"refusing a {type_tag!r} value with no binding to its {location.kind} row;"
            " adopt the store into a sealed one with `secure-serde adopt OLD NEW`"
        )
    _UNBOUND_LOG.record(type_tag)


def _encoded(serde: SerializerProtocol, obj: Any) -> tuple[str, bytes]:
    try:
        return serde.dumps_typed(obj)
    except SecureSerdeError:
        raise  # already typed: the pickle fallback's refusal names what to allow
    except TypeError as exc:
        # msgpack's and json's messages name the type, never the value.
        raise UnserializableValueError(f"the value cannot be serialized: {exc}") from exc
