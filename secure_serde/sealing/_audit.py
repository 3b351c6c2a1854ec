"""`audit_sealed` and `audit_store_items`: every row of a SealedSaver store, or every item
of a SealedStore, opened as a read would open it.

Read-only: planners on the pass engine (secure_serde/_engine.py) that never plan a
change. Cells are counted by whether the primary key sealed them (told from their
header, never decrypted twice), so a rotation can be checked.

Items are listed from the inner store but read through the `SealedStore` (``get``
without refreshing its TTL), so each is opened at its own location: a tampered,
moved, copied or plaintext item is a finding.

A shredded tenant's (or thread's) rows are erased, not corrupt: counted, never a
finding. A row under a tenant-shaped prefix (_tenant_inner.py) that no tenant of the
key store has is a finding (`UnknownTenantError`): it was planted, or the key store is
another store's.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Self

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.store.base import Item

from secure_serde._engine import ReadOnly, Skip, Unreadable, batches_of, run_batches
from secure_serde._errors import (
    ConfigurationError,
    HistoryError,
    SecureSerdeError,
    ShreddedError,
    UnknownTenantError,
    UnreadableRowError,
)
from secure_serde._report import Kept, PassReport, Tally, counted
from secure_serde._rows import CheckpointRow, RowFailure, RowRef
from secure_serde.ciphers import current_test
from secure_serde.sealing import _cell
from secure_serde.sealing._codec import RECORD_KEY, Sealer
from secure_serde.sealing._identity import IDENTITY_THREAD
from secure_serde.sealing._reindex import thread_of
from secure_serde.sealing._saver import SealedSaver
from secure_serde.sealing._store import SealedStore
from secure_serde.sealing._store_codec import SEALED_FIELD
from secure_serde.sealing._store_identity import RESERVED_NAMESPACE
from secure_serde.sealing._tenant_inner import TenantSealer, tenant_prefix, tenant_thread_prefix
from secure_serde.sealing._tenants import ShreddedScopes, TenantKeys
from secure_serde.sealing._walks import key_of
from secure_serde.serde import EncryptedSerializer

__all__ = ["AuditFinding", "Audited", "SealedAuditReport", "ShreddedRow", "audit_sealed"]
__all__ += ["StoreAuditReport", "StoreItemFinding", "audit_store_items"]

SHREDDED: Final = "shredded"
OPENS: Final = Skip("opens")
BATCH: Final = 100
PAGE: Final = 500


@dataclass(frozen=True)
class AuditFinding:
    """One row that does not open: where it is, and the class of the error (never a value)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    error: str
    message: str


@dataclass(frozen=True)
class ShreddedRow:
    """One checkpoint whose tenant's (or thread's) key was shredded: erased, not corrupt.

    ``thread_id`` is the id the checkpoint store holds (``sst1:<token>:<thread>``).
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    tenant_id: str
    status: str = SHREDDED


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

    @classmethod
    def of(cls, tally: Tally, started: float, **extra: Any) -> Self:
        base = tally.report("audit", dry_run=False, elapsed=time.monotonic() - started)
        return cls(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, **extra)


@dataclass(frozen=True)
class SealedAuditReport(Audited):
    """What a pass over a SealedSaver store found.

    ``findings`` lists the first 1,000 rows that do not open (the report's
    ``failures``), ``finding_count`` counts them all. ``shredded`` counts the
    checkpoints of shredded tenants and threads (the first 1,000 listed in
    ``shredded_rows``); they are not findings. ``tenant_checkpoints`` counts
    the checkpoints opened with a tenant's keys, ``tenant_cells`` their cells
    (under thread keys, not under the primary: ``TenantKeys.rewrap`` rotates
    those). The other counts are the report's ``counts``.
    """

    shredded_rows: tuple[ShreddedRow, ...] = ()

    values = counted("values")
    records = counted("records")
    tenant_checkpoints = counted("tenant_checkpoints")
    tenant_cells = counted("tenant_cells")

    @property
    def checkpoints(self) -> int:
        return self.scanned

    @property
    def shredded(self) -> int:
        return self.skipped.get(SHREDDED, 0)

    @property
    def findings(self) -> tuple[AuditFinding, ...]:
        return tuple(
            AuditFinding(
                f.ref.thread_id,
                f.ref.checkpoint_ns,
                str(f.ref.checkpoint_id),
                "" if f.error is None else f.error.__name__,
                f.reason,
            )
            for f in self.failures
        )


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


class _Counting:
    """A read-only planner's counts: each cell by whether the primary key sealed it."""

    def __init__(self, serde: EncryptedSerializer) -> None:
        self._is_current, _, _ = current_test(serde.cipher)
        self.counts: Counter[str] = Counter()

    def count_cell(self, cell: _cell.Cell) -> None:
        current = self._is_current(cell.type_tag.rpartition("+")[2], cell.ciphertext)
        self.counts["under_primary" if current else "not_under_primary"] += 1


class _Tenants:
    def __init__(self, saver: SealedSaver, keys: TenantKeys | None) -> None:
        self._keys = keys
        self._routing: SealedSaver | None = None
        self._by_prefix: dict[str, str] = {}
        self._sealers: dict[str, TenantSealer] = {}
        self.shredded = ShreddedScopes(frozenset(), frozenset())
        if keys is None:
            return
        store: TenantKeys = keys
        routing = saver
        if getattr(saver, "tenant_keys", None) is not store:
            routing = SealedSaver(
                saver.inner,
                serde=saver._encrypting,
                indexed_metadata=saver._indexed,
                plaintext_metadata=saver._plaintext,
                tenant_keys=store,
            )
        self._routing = routing
        index = routing._ready().identity.index
        self._by_prefix = {tenant_prefix(index, t): t for t in store.tenant_ids()}
        self.shredded = store.shredded_scopes()

    def tenant_of(self, prefix: str) -> str:
        tenant = self._by_prefix.get(prefix)
        if tenant is None:
            what = (
                "the tenant key store holds no tenant"
                if self._keys is not None
                else "no tenant key store was given (--tenant-keys)"
            )
            raise UnknownTenantError(
                f"this checkpoint is stored under a tenant's thread id, and {what} for it:"
                " it was planted, or the key store is not this store's"
            )
        return tenant

    def sealer(self, tenant: str) -> TenantSealer:
        hit = self._sealers.get(tenant)
        if hit is None:
            if self._routing is None:  # pragma: no cover - tenant_of refused it already
                raise ConfigurationError("no tenant key store")
            scoped = self._routing.for_tenant(tenant)
            sealer = scoped._ready()
            if not isinstance(sealer, TenantSealer):  # pragma: no cover - for_tenant's own
                raise ConfigurationError("a tenant's saver without its tenant sealer")
            hit = self._sealers[tenant] = sealer
        return hit


def audit_sealed(
    saver: SealedSaver,
    *,
    thread_ids: Iterable[str] | None = None,
    progress: Callable[[int], None] | None = None,
    tenant_keys: TenantKeys | None = None,
) -> SealedAuditReport:
    """Open every checkpoint of the store, as the application would, and count what is there.

    ``thread_ids``: the store's threads, listed one by one (the CLI reads them from the
    table). A thread whose rows the inner saver cannot even decode is then a finding, and
    the pass goes on; without them, one ``list(None)`` reads every thread, and such a row
    stops the pass with `UnreadableRowError`. ``progress`` gets the count of checkpoints
    read so far after every batch (a thread, or `BATCH` of its checkpoints).
    ``tenant_keys``: the key store of a ``SealedSaver(..., tenant_keys=...)`` store
    (by default ``saver``'s own).
    """
    if tenant_keys is not None and not isinstance(tenant_keys, TenantKeys):
        raise ConfigurationError(
            f"tenant_keys= takes a TenantKeys, not {type(tenant_keys).__name__}"
        )
    started = time.monotonic()
    keys = tenant_keys if tenant_keys is not None else getattr(saver, "tenant_keys", None)
    planner = _Planner(saver, _Tenants(saver, keys if isinstance(keys, TenantKeys) else None))
    tally = Tally()
    on_batch = None if progress is None else (lambda done: progress(done.scanned))
    batches = _batches(saver, thread_ids, tally)
    # Read-only: run as a dry run, so nothing is ever applied.
    applier = ReadOnly(_checkpoint_ref)
    run_batches(batches, planner, applier, dry_run=True, tally=tally, on_batch=on_batch)
    for child, parent in planner.parents.items():
        if parent not in planner.seen:
            why = f"the parent {parent[2]!r} of this checkpoint is missing"
            tally.fail(RowFailure(CheckpointRow.at(*child), why, HistoryError))
    tally.counts.update(planner.counts)
    tally.counts["threads"] = len(planner.threads)
    return SealedAuditReport.of(tally, started, shredded_rows=tuple(planner.shredded.items))


class _Planner(_Counting):
    def __init__(self, saver: SealedSaver, tenants: _Tenants) -> None:
        super().__init__(saver._encrypting)
        self._tenants = tenants
        self._sealer = saver._ready()
        self.shredded: Kept[ShreddedRow] = Kept()
        self.seen: set[tuple[str, str, str]] = set()
        self.parents: dict[tuple[str, str, str], tuple[str, str, str]] = {}
        self.threads: set[str] = set()

    def plan(self, found: CheckpointTuple) -> Skip | Unreadable:
        thread, ns, _ = key = key_of(found)
        self.threads.add(thread)
        self.seen.add(key)
        prefix = tenant_thread_prefix(thread)
        opener, row = self._sealer, found
        tenant: str | None = None
        try:
            if prefix is not None:
                tenant = self._tenants.tenant_of(prefix)
                if self._tenants.shredded.covers(tenant, thread[len(prefix) :]):
                    return self._shred(key, tenant)
                opener = self._tenants.sealer(tenant)
                row = opener.own(found)
            opened = opener.open(row)
        except ShreddedError as exc:
            # Shredded while the pass ran (the tombstones were read at its start).
            return self._shred(key, exc.tenant_id)
        except UnknownTenantError as exc:
            if prefix is None or tenant is not None or not _opens(self._sealer, found):
                return Unreadable(type(exc), str(exc))
            # An application thread that only looks like a tenant's: a store row.
            prefix, opened = None, self._sealer.open(found)
        except SecureSerdeError as exc:
            return Unreadable(type(exc), str(exc))
        in_tenant = prefix is not None
        self.counts["tenant_checkpoints"] += in_tenant
        if opened.parent_id is not None and not opened.detached:
            self.parents[key] = (thread, ns, opened.parent_id)
        record = _cell.from_text(found.metadata.get(RECORD_KEY), _cell.RECORD)
        self._count(record, "records", in_tenant)
        stored = found.checkpoint.get("channel_values") or {}
        for channel in opened.with_values:
            self._count(_cell.unpack(stored[channel], _cell.VALUE), "values", in_tenant)
        for _, _, raw in found.pending_writes or ():
            self._count(_cell.unpack(raw, _cell.WRITE), "writes", in_tenant)
        return OPENS

    def _shred(self, key: tuple[str, str, str], tenant: str) -> Skip:
        self.shredded.append(ShreddedRow(*key, tenant))
        return Skip(SHREDDED)

    def _count(self, cell: _cell.Cell, kind: str, tenant: bool) -> None:
        self.counts[kind] += 1
        if tenant:
            self.counts["tenant_cells"] += 1
        else:
            self.count_cell(cell)


def _checkpoint_ref(found: CheckpointTuple) -> RowRef:
    return CheckpointRow.at(*key_of(found))


def _opens(sealer: Sealer, found: CheckpointTuple) -> bool:
    try:
        sealer.open(found)
    except SecureSerdeError:
        return False
    return True


def _batches(
    saver: SealedSaver, thread_ids: Iterable[str] | None, tally: Tally
) -> Iterator[Sequence[CheckpointTuple]]:
    """Without ``thread_ids``: one unpaged ``list(None)``.

    ``before`` pages are ordered across threads by some savers (SQL) and per thread by
    others (InMemorySaver), so paging could skip rows; the stock SQL savers read the
    whole result before yielding anyway.
    """
    if thread_ids is None:
        listings: Iterable[tuple[str | None, RunnableConfig | None]] = [(None, None)]
    else:
        listings = [(t, {"configurable": {"thread_id": t}}) for t in thread_ids]
    for thread, config in listings:
        if thread == IDENTITY_THREAD:
            continue
        try:
            rows = list(saver._rows(config))
        except UnreadableRowError as exc:
            if thread is None:
                raise
            where = CheckpointRow.at(thread, "", "", "thread")
            tally.fail(RowFailure(where, str(exc), type(exc)))
            continue
        rows = [found for found in rows if thread_of(found) != IDENTITY_THREAD]
        yield from batches_of(rows, BATCH)


def audit_store_items(store: SealedStore, *, page: int = PAGE) -> StoreAuditReport:
    """Open every item of ``store`` as the application would, and count what is there.

    Raises:
        StoreIdentityError: the store's identity does not open under these keys
            (nothing in it can be checked).
    """
    started = time.monotonic()
    store._ready()  # the identity first: a store sealed under other keys stops here
    planner = _ItemPlanner(store)
    tally = run_batches(_pages(store, page), planner, ReadOnly(_item_ref), dry_run=True)
    tally.counts.update(planner.counts)
    return StoreAuditReport.of(tally, started)


class _ItemPlanner(_Counting):
    def __init__(self, store: SealedStore) -> None:
        super().__init__(store._serde)
        self._store = store

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
        self.count_cell(cell)
        return OPENS


def _item_ref(found: Item) -> RowRef:
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
