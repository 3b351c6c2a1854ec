"""Deciding, per stored cell, what rewrap does with it: the crypto half of rewrap.

A cell is opened with the cipher its type tag names and the plaintext is
sealed again by the primary cipher, bound to the same inner type tag, in
the same process step: like Vault's rewrap, an authenticated value never
reaches the inner serializer, so no value is ever deserialized (and no
pickle is ever loaded) to rewrap it.

Which tags may be read, and how, is the one read rule's decision
(secure_serde/serde/_readrule.py). Sealing a value authenticates its type tag
from then on, so a value whose tag nothing authenticated (a plaintext row,
a legacy ``+aes`` row) is sealed only after the strict decoder has accepted
it: a planted or relabelled row that would import and call a name is
refused and listed by table and key, never by content.

Every value here is an unbound value (format v1, langgraph's rows, what
``serde=`` writes on a stock saver) and stays one: the stock savers reading
it cannot name a location. A store 0.3's savers wrote is refused before
this runs (`secure_serde.stores.refuse_v03`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from secure_serde._engine import CURRENT, EMPTY, Planned, Skip, Unreadable
from secure_serde._errors import DecryptionError
from secure_serde.ciphers import TagAuthenticatingCipher, current_test
from secure_serde.crypto import Buffer, format_v1
from secure_serde.serde import (
    CompressedSerializer,
    Decode,
    Migration,
    ReadRule,
    Route,
    StrictDecoder,
)
from secure_serde.stores import Cell, Swap

__all__ = ["CURRENT", "EMPTY", "Planner", "Skip", "Unreadable", "primary_test"]

PLAINTEXT_SOURCE: Final = "plaintext"


def _source(cipher_name: str, data: Buffer) -> str:
    if cipher_name == format_v1.CIPHER_NAME and len(data) >= format_v1.HEADER_SIZE:
        return f"{cipher_name}/{format_v1.key_id_hex(bytes(data[1 : format_v1.HEADER_SIZE]))}"
    return cipher_name


def primary_test(cipher: TagAuthenticatingCipher) -> tuple[Callable[[str, Buffer], bool], str]:
    """Whether a cell is under ``cipher``'s primary key, and the primary as a report names it."""
    test, name, probe = current_test(cipher)
    return test, (name if probe is None else _source(name, probe))


class Planner:
    """Turns cells into swaps under the primary cipher; one per rewrap process.

    ``is_current`` comes from the primary cipher when it defines
    ``is_current(cipher_name, ciphertext) -> bool``; otherwise it is
    learnt from one probe encryption: for format v1 a row is current when
    its 5-byte header (version and key id) is the primary's. A cipher of
    another format without ``is_current`` has every row rewrapped on every
    run, which is safe but not idempotent.
    """

    def __init__(  # noqa: PLR0913 - keyword-only options, each with a safe default
        self,
        cipher: TagAuthenticatingCipher,
        decrypt_only: Iterable[TagAuthenticatingCipher] = (),
        *,
        migration: Migration | None = None,
        strict: StrictDecoder | None = None,
        seal: bool = True,
        verify: bool = False,
        compress: CompressedSerializer | None = None,
    ) -> None:
        self._rule = ReadRule((cipher, *decrypt_only), Migration.resolve(migration))
        self._strict = StrictDecoder() if strict is None else strict
        self._cipher = cipher
        self._seal = seal
        self._verify = verify
        self._compress = compress
        self._is_current, self.primary = primary_test(cipher)

    def plan(self, cell: Cell) -> Skip | Unreadable | Planned:
        type_tag, data = cell.type_tag, cell.data
        if data is None:
            return EMPTY
        if type_tag is None:
            return Unreadable.of(DecryptionError, "the row has a value but no type tag")
        try:
            route = self._rule.route(type_tag)
        except DecryptionError as exc:
            # The rule's refusals name the tag and the switch, nothing stored.
            return Unreadable.of(type(exc), str(exc))
        cipher = route.cipher
        if cipher is None:
            return self._checked(cell, route, data, PLAINTEXT_SOURCE, current=False)
        current = self._is_current(route.cipher_name, data)
        compress = self._compress is not None and self._compress.may_compress(
            route.inner, len(data)
        )
        if current and not self._verify and not compress:
            return CURRENT
        try:
            plaintext = cipher.decrypt_with_tag(route.cipher_name, data, route.inner)
        except DecryptionError as exc:
            return Unreadable.of(type(exc), str(exc))
        if current and not compress:
            return CURRENT
        return self._checked(
            cell, route, plaintext, _source(route.cipher_name, data), current=current
        )

    def _checked(
        self, cell: Cell, route: Route, plaintext: Buffer, source: str, *, current: bool
    ) -> Skip | Unreadable | Planned:
        """Plan the seal, after the strict decoder accepted a value nothing authenticated."""
        if route.decode is Decode.STRICT:
            refused = self._strict_refusal(route.inner, bytes(plaintext))
            if refused is not None:
                return refused
        inner, packed = self._compressed(route.inner, plaintext)
        if current and inner == route.inner:
            # Under the primary already, and compressing would not change it.
            return CURRENT
        if not self._seal:
            return Planned(None, source)
        name, sealed = self._cipher.encrypt_with_tag(packed, inner)
        return Planned(Swap(cell, f"{inner}+{name}", bytes(sealed)), source)

    def _strict_refusal(self, inner: str, plaintext: bytes) -> Unreadable | None:
        try:
            self._strict.loads_typed((inner, plaintext))
        except DecryptionError as exc:
            # The refusal's own message may quote names the bytes chose: keep it out.
            return Unreadable.of(
                type(exc),
                f"the strict decoder refused a {inner!r} value whose type tag nothing"
                " authenticates (planted or relabelled?); not sealed",
            )
        return None

    def _compressed(self, inner: str, plaintext: Buffer) -> tuple[str, Buffer]:
        if self._compress is None:
            return inner, plaintext
        return self._compress.compress_encoded(inner, bytes(plaintext))
