"""`audit_store_items`: every item of a `SealedStore` opened, as the application reads it.

Items are listed from the inner store but read through the `SealedStore` (``get``
without refreshing its TTL), so each is opened at its own location: a tampered,
moved, copied or plaintext item is a finding. Read-only and counted as in _audit.py.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from langgraph.store.base import Item

from secure_serde._engine import ReadOnly, Skip, Unreadable, run_batches
from secure_serde._errors import SecureSerdeError
from secure_serde._report import PassReport, counted
from secure_serde._rows import RowRef
from secure_serde.ciphers import current_test
from secure_serde.sealing import _cell
from secure_serde.sealing._store import SealedStore
from secure_serde.sealing._store_codec import SEALED_FIELD
from secure_serde.sealing._store_identity import RESERVED_NAMESPACE

__all__ = ["Audited", "StoreAuditReport", "StoreItemFinding", "audit_store_items"]

PAGE: Final = 500
OPENS: Final = Skip("opens")


@dataclass(frozen=True)
class StoreItemFinding:
    """One item that does not open: where it is, and the class of the error (never a value)."""

    namespace: tuple[str, ...]
    key: str
    error: str
    message: str


@dataclass(frozen=True)
class Audited(PassReport):
    """An audit's `PassReport` (named ``"audit"``): its findings are the report's failures.

    ``clean``: nothing failed to open, and every cell is under the primary key.
    """

    under_primary = counted("under_primary")
    not_under_primary = counted("not_under_primary")

    @property
    def finding_count(self) -> int:
        return self.failure_count

    @property
    def clean(self) -> bool:
        return self.failure_count == 0 and self.not_under_primary == 0


@dataclass(frozen=True)
class StoreAuditReport(Audited):
    """What a pass over a SealedStore's items found.

    ``items`` counts the application's items (the store identity is not
    one); ``under_primary`` and ``not_under_primary`` count cells, the
    identity's included. ``findings`` lists the first 1,000 items that do not
    open, ``finding_count`` counts them all.
    """

    items = counted("items")

    @property
    def findings(self) -> tuple[StoreItemFinding, ...]:
        return tuple(
            StoreItemFinding(
                _namespace(str(f.ref.get("prefix"))),
                str(f.ref.get("key")),
                "" if f.error is None else f.error.__name__,
                f.reason,
            )
            for f in self.failures
        )


def audit_store_items(store: SealedStore, *, page: int = PAGE) -> StoreAuditReport:
    """Open every item of ``store`` as the application would, and count what is there.

    Raises:
        StoreIdentityError: the store's identity does not open under these keys
            (nothing in it can be checked).
    """
    started = time.monotonic()
    store._ready()  # the identity first: a store sealed under other keys stops here
    planner = _Planner(store)
    applier: ReadOnly[Item] = ReadOnly(_ref)
    tally = run_batches(_pages(store, page), planner, applier, dry_run=True)
    tally.counts.update(planner.counts)
    base = tally.report("audit", dry_run=False, elapsed=time.monotonic() - started)
    return StoreAuditReport(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})


class _Planner:
    def __init__(self, store: SealedStore) -> None:
        self._store = store
        self._is_current, _, _ = current_test(store._serde.cipher)
        self.counts: Counter[str] = Counter()

    def plan(self, found: Item) -> Skip | Unreadable:
        namespace = tuple(found.namespace)
        try:
            if namespace != RESERVED_NAMESPACE:
                self.counts["items"] += 1
                self._store.get(namespace, found.key, refresh_ttl=False)
            kind = _cell.IDENTITY if namespace == RESERVED_NAMESPACE else _cell.ITEM
            value = found.value if isinstance(found.value, dict) else {}
            cell = _cell.from_text(value.get(SEALED_FIELD), kind)
        except SecureSerdeError as exc:
            return Unreadable(type(exc), str(exc))
        current = self._is_current(cell.type_tag.rpartition("+")[2], cell.ciphertext)
        self.counts["under_primary" if current else "not_under_primary"] += 1
        return OPENS


def _ref(found: Item) -> RowRef:
    return RowRef("store", (("prefix", ".".join(found.namespace)), ("key", found.key)))


def _namespace(prefix: str) -> tuple[str, ...]:
    return tuple(prefix.split(".")) if prefix else ()


def _pages(store: SealedStore, page: int) -> Iterator[Sequence[Item]]:
    seen: set[tuple[tuple[str, ...], str]] = set()
    offset = 0
    while True:
        batch = store.inner.search((), limit=page, offset=offset)
        fresh = [found for found in batch if (tuple(found.namespace), found.key) not in seen]
        seen.update((tuple(found.namespace), found.key) for found in fresh)
        if fresh:
            yield fresh
        if len(batch) < page:
            return
        offset += page
