"""`audit_store_items`: every item of a `SealedStore` opened, as the application reads it.

The items are listed from the inner store (its public ``search``, page by
page, every namespace), and each is then read through the `SealedStore`
itself (``get`` without refreshing its TTL), so every item is opened at its
own location: a tampered, moved, copied or plaintext item is a finding, with
its namespace, key and typed error class, and the pass goes on. Cells are
counted by whether the primary key sealed them (from their header), the
store identity's included, so rotation can be checked. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from langgraph.store.base import Item

from secure_serde._errors import SecureSerdeError
from secure_serde._report import Kept
from secure_serde.ciphers._headers import current_test
from secure_serde.sealing import _cell
from secure_serde.sealing._store import SealedStore
from secure_serde.sealing._store_codec import SEALED_FIELD
from secure_serde.sealing._store_identity import RESERVED_NAMESPACE

__all__ = ["StoreAuditReport", "StoreItemFinding", "audit_store_items"]

PAGE: Final = 500


@dataclass(frozen=True)
class StoreItemFinding:
    """One item that does not open: where it is, and the class of the error (never a value)."""

    namespace: tuple[str, ...]
    key: str
    error: str
    message: str


@dataclass(frozen=True)
class StoreAuditReport:
    """What a pass over a SealedStore's items found.

    ``items`` counts the application's items (the store identity is not
    one); ``under_primary`` and ``not_under_primary`` count cells, the
    identity's included.
    """

    items: int
    under_primary: int
    not_under_primary: int
    findings: tuple[StoreItemFinding, ...] = field(default=())  # the first 1,000
    finding_count: int = 0

    @property
    def clean(self) -> bool:
        """Every item opens at its location, and every cell is under the primary key."""
        return not self.findings and self.finding_count == 0 and self.not_under_primary == 0


def audit_store_items(store: SealedStore, *, page: int = PAGE) -> StoreAuditReport:
    """Open every item of ``store`` as the application would, and count what is there.

    Raises:
        StoreIdentityError: the store's identity does not open under these keys
            (nothing in it can be checked).
    """
    store._ready()  # the identity first: a store sealed under other keys stops here
    is_current, _, _ = current_test(store._serde.cipher)
    items = current = other = 0
    findings: Kept[StoreItemFinding] = Kept()
    for found in _every_item(store, page):
        namespace = tuple(found.namespace)
        if namespace != RESERVED_NAMESPACE:
            items += 1
            try:
                store.get(namespace, found.key, refresh_ttl=False)
            except SecureSerdeError as exc:
                findings.append(
                    StoreItemFinding(namespace, found.key, type(exc).__name__, str(exc))
                )
                continue
        kind = _cell.IDENTITY if namespace == RESERVED_NAMESPACE else _cell.ITEM
        value = found.value if isinstance(found.value, dict) else {}
        try:
            cell = _cell.from_text(value.get(SEALED_FIELD), kind)
        except SecureSerdeError as exc:
            findings.append(StoreItemFinding(namespace, found.key, type(exc).__name__, str(exc)))
            continue
        if is_current(cell.type_tag.rpartition("+")[2], cell.ciphertext):
            current += 1
        else:
            other += 1
    return StoreAuditReport(items, current, other, tuple(findings.items), findings.total)


def _every_item(store: SealedStore, page: int) -> Iterator[Item]:
    """Every item of the inner store, as stored, each once (paged by offset)."""
    seen: set[tuple[tuple[str, ...], str]] = set()
    offset = 0
    while True:
        batch = store.inner.search((), limit=page, offset=offset)
        for found in batch:
            where = (tuple(found.namespace), found.key)
            if where not in seen:
                seen.add(where)
                yield found
        if len(batch) < page:
            return
        offset += page
