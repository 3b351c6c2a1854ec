"""Re-encrypt one stored value bound to its row, without deserializing it.

The binding pass (``_bind_in_place``) knows each row's `Location`, which
rewrap's cell pass keeps as it finds it. For each value this module answers
one question: is it already bound here (leave it), unbound (seal it again
*at this location*), or neither (refuse it)?

``move`` answers the same for a value copied to another row (``copy_thread``):
authenticated where it is, sealed where it goes.

The new bytes are what the sealed saver's ``dumps_typed_at`` writes for the
same value: the inner serializer's bytes, which the value already holds, and
the primary cipher's ``encrypt_at`` with the inner type tag and the encoded
location. Nothing is deserialized, so a value the application's serializer
could read before reads the same after. A value whose type tag nothing
authenticated (a plaintext row, under ``Migration.plaintext``) is sealed only
once the strict decoder has accepted it, as rewrap does, because sealing it
authenticates the tag from then on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, cast

from secure_serde._binding import Location
from secure_serde._errors import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    UnboundValueError,
)
from secure_serde._migration import Migration
from secure_serde._readrule import Decode, ReadRule, Route
from secure_serde._serializer import EncryptedSerializer
from secure_serde.ciphers._protocol import LocatingCipher, is_locating

__all__ = ["ALREADY_BOUND", "AlreadyBound", "Rebound", "ValueRebinder"]


@dataclass(frozen=True, slots=True)
class AlreadyBound:
    """The value authenticates at its row already: nothing to write."""


ALREADY_BOUND: Final = AlreadyBound()


@dataclass(frozen=True, slots=True)
class Rebound:
    """The value sealed again at its row: the new type tag and bytes for a swap."""

    type_tag: str
    data: bytes


@dataclass(frozen=True)
class ValueRebinder:
    """Opens stored values as the migration read path does, and seals them at their row."""

    serde: EncryptedSerializer
    migration: Migration
    rule: ReadRule = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.serde, EncryptedSerializer) or not self.serde.binds_locations:
            raise ConfigurationError(
                "binding rows in place needs an EncryptedSerializer whose cipher binds values"
                " to their rows (any cipher from secure_serde.ciphers)"
            )
        # The serializer's ciphers under the pass's own switches: the serde an
        # application reads with may have migration off, the pass may not.
        object.__setattr__(self, "rule", ReadRule(self.serde.decrypt_ciphers, self.migration))

    def rebind(self, type_tag: str, data: bytes, location: Location) -> AlreadyBound | Rebound:
        """What to do with the value ``(type_tag, data)`` stored at ``location``.

        Raises:
            DecryptionError: a subclass naming why the value cannot be bound
                (tampered, moved from another row, refused by the read rule
                or the strict decoder, or unbound outside ``Migration.unbound``).
                The row is then left as it is.
        """
        route = self.rule.route(type_tag)
        plaintext, bound = self._open(route, data, location, location.encode())
        if bound:
            return ALREADY_BOUND
        self._admit_unbound(route, plaintext, type_tag, location)
        return self._seal(route, plaintext, location)

    def move(self, type_tag: str, data: bytes, source: Location, target: Location) -> Rebound:
        """The value stored at ``source``, sealed at ``target`` (``copy_thread``).

        The same inner bytes under the same inner type tag: authenticated at
        the row it was read from, never deserialized, and bound to the row
        it is copied to. An unbound value is admitted as `rebind` admits it.

        Raises:
            DecryptionError: as `rebind`, for the value at ``source``.
        """
        route = self.rule.route(type_tag)
        plaintext, bound = self._open(route, data, source, source.encode())
        if not bound:
            self._admit_unbound(route, plaintext, type_tag, source)
        return self._seal(route, plaintext, target)

    def _admit_unbound(self, route: Route, plaintext: bytes, type_tag: str, at: Location) -> None:
        """Refuse an unbound value unless migration reads it, and the strict decoder accepts it."""
        if not self.migration.unbound:
            raise UnboundValueError(
                f"a {type_tag!r} value has no binding to its {at.kind} row, and"
                " Migration.unbound is off"
            )
        if route.decode is Decode.STRICT:
            try:
                self.serde.strict_decoder.loads_typed((route.inner, plaintext))
            except DecryptionError as exc:
                # Its own message may quote names the bytes chose: keep them out.
                raise type(exc)(
                    f"the strict decoder refused a {route.inner!r} value whose type tag"
                    " nothing authenticates (planted or relabelled?); not sealed"
                ) from None

    def _seal(self, route: Route, plaintext: bytes, at: Location) -> Rebound:
        # Under the primary cipher, as the sealed saver's dumps_typed_at writes it.
        cipher = cast(LocatingCipher, self.serde.cipher)
        name, sealed = cipher.encrypt_at(plaintext, route.inner, at.encode())
        return Rebound(f"{route.inner}+{name}", bytes(sealed))

    @staticmethod
    def _open(route: Route, data: bytes, location: Location, encoded: bytes) -> tuple[bytes, bool]:
        """The plaintext, and whether it was bound to ``location``."""
        cipher = route.cipher
        if cipher is None:
            return data, False
        name, inner = route.cipher_name, route.inner
        if not is_locating(cipher):
            return bytes(cipher.decrypt_bound(name, data, inner)), False
        locating = cast(LocatingCipher, cipher)
        try:
            return bytes(locating.decrypt_at(name, data, inner, encoded)), True
        except UnboundValueError:
            # A format with no binding at all (v1, langgraph's own rows).
            return bytes(cipher.decrypt_bound(name, data, inner)), False
        except BindingError:
            pass  # not bound here; maybe written with no location (through serde=)
        try:
            return bytes(locating.decrypt_at(name, data, inner, b"")), False
        except DecryptionError:
            pass  # raised below, outside the handler
        raise BindingError(
            f"a {inner}+{name} value authenticates neither at its {location.kind} row nor"
            " unbound: tampered with, or moved, copied or swapped from another row"
        )
