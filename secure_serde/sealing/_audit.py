"""`audit_sealed`: every row of a SealedSaver store checked, through the inner saver's public API.

Each checkpoint is opened as a read would open it: its record, every value
and every write, each at its own place; the history of every namespace must
reach a root. A row that fails is listed with its typed error class and the
pass goes on with the next. Cells are counted by whether the primary key
sealed them (told from their header, never decrypted twice), so rotation can
be checked. Nothing here writes.

**Tenant rows.** A store of ``SealedSaver(..., tenant_keys=...)`` keeps each
tenant's rows under inner thread ids ``sst1:<token>:<thread>``, where the
token is the tenant id's blind-index token under the store identity's index
key (secure_serde/sealing/_tenant_inner.py). With the tenant key store
(a routing saver, or ``tenant_keys=``), every tenant of the key store is
mapped to its prefix, and each row under a tenant's prefix is opened with
that tenant's keys and binding. A row whose tenant (or thread) was shredded
is not opened: it is counted as shredded, with a per-row entry, and is no
finding. A row under a tenant-shaped prefix that no tenant of the key store
has is a finding (`UnknownTenantError`), and so is one read without the
key store. Tenant cells are under thread keys, not the primary: they are
counted apart (``tenant_cells``), and rotate with ``TenantKeys.rewrap``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from secure_serde._errors import (
    ConfigurationError,
    HistoryError,
    SecureSerdeError,
    ShreddedError,
    UnknownTenantError,
    UnreadableRowError,
)
from secure_serde._report import Kept
from secure_serde.ciphers._headers import current_test
from secure_serde.sealing import _cell
from secure_serde.sealing._codec import RECORD_KEY, Sealer
from secure_serde.sealing._identity import IDENTITY_THREAD
from secure_serde.sealing._saver import SealedSaver
from secure_serde.sealing._tenant_inner import TenantInner, tenant_prefix, tenant_thread_prefix
from secure_serde.sealing._tenants import ShreddedScopes, TenantKeys
from secure_serde.sealing._walks import key_of

__all__ = ["AuditFinding", "SealedAuditReport", "ShreddedRow", "audit_sealed"]

SHREDDED: Final = "shredded"


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
class SealedAuditReport:
    """What a pass over a SealedSaver store found.

    ``findings`` lists the first 1,000 rows that do not open, ``finding_count``
    counts them all. ``shredded`` counts the checkpoints of shredded tenants and
    threads (the first 1,000 listed in ``shredded_rows``); they are not findings.
    ``tenant_checkpoints`` counts the checkpoints opened with a tenant's keys,
    ``tenant_cells`` their cells (under thread keys, not under the primary:
    ``TenantKeys.rewrap`` rotates those).
    """

    threads: int
    checkpoints: int
    values: int
    writes: int
    records: int
    under_primary: int
    not_under_primary: int
    findings: tuple[AuditFinding, ...] = field(default=())
    finding_count: int = 0
    shredded: int = 0
    shredded_rows: tuple[ShreddedRow, ...] = field(default=())
    tenant_checkpoints: int = 0
    tenant_cells: int = 0

    @property
    def clean(self) -> bool:
        """Every row opens (or was shredded), every history is complete, store cells current."""
        return not self.findings and self.finding_count == 0 and self.not_under_primary == 0


class _Tenants:
    """The tenants of a key store by their inner thread-id prefix, and their sealers."""

    def __init__(self, saver: SealedSaver, keys: TenantKeys | None) -> None:
        self._keys = keys
        self._routing: SealedSaver | None = None
        self._by_prefix: dict[str, str] = {}
        self._sealers: dict[str, tuple[TenantInner, Sealer]] = {}
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

    def sealer(self, tenant: str) -> tuple[TenantInner, Sealer]:
        hit = self._sealers.get(tenant)
        if hit is None:
            if self._routing is None:  # pragma: no cover - tenant_of refused it already
                raise ConfigurationError("no tenant key store")
            scoped = self._routing.for_tenant(tenant)
            adapter = scoped.inner
            if not isinstance(adapter, TenantInner):  # pragma: no cover - for_tenant's own
                raise ConfigurationError("a tenant's saver without its tenant adapter")
            hit = self._sealers[tenant] = (adapter, scoped._ready())
        return hit


def audit_sealed(  # noqa: C901 - one pass: each outcome of a row is one branch
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
    stops the pass with `UnreadableRowError`.

    ``tenant_keys``: the tenant key store of a store written by
    ``SealedSaver(..., tenant_keys=...)`` (taken from ``saver`` itself when it is
    such a saver): each tenant's rows are opened with its keys, and the rows of
    shredded tenants and threads are counted as shredded, not as findings.
    """
    if tenant_keys is not None and not isinstance(tenant_keys, TenantKeys):
        raise ConfigurationError(
            f"tenant_keys= takes a TenantKeys, not {type(tenant_keys).__name__}"
        )
    keys = tenant_keys if tenant_keys is not None else getattr(saver, "tenant_keys", None)
    tenants = _Tenants(saver, keys if isinstance(keys, TenantKeys) else None)
    sealer = saver._ready()
    is_current, _, _ = current_test(saver._encrypting.cipher)
    counts = {
        "values": 0,
        "writes": 0,
        "records": 0,
        "current": 0,
        "other": 0,
        "tenant": 0,
        "tenant_cells": 0,
    }
    findings: Kept[AuditFinding] = Kept()
    shredded: Kept[ShreddedRow] = Kept()
    seen: set[tuple[str, str, str]] = set()
    parents: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    threads: set[str] = set()

    def count(tag: str, ciphertext: bytes, kind: str, tenant: bool) -> None:
        counts[kind] += 1
        if tenant:
            counts["tenant_cells"] += 1
            return
        cipher_name = tag.rpartition("+")[2]
        counts["current" if is_current(cipher_name, ciphertext) else "other"] += 1

    for found in _every_row(saver, thread_ids, findings):
        thread, ns, checkpoint_id = key_of(found)
        threads.add(thread)
        seen.add((thread, ns, checkpoint_id))
        prefix = tenant_thread_prefix(thread)
        opener, row = sealer, found
        tenant: str | None = None
        try:
            if prefix is not None:
                tenant = tenants.tenant_of(prefix)
                if tenants.shredded.covers(tenant, thread[len(prefix) :]):
                    shredded.append(ShreddedRow(thread, ns, checkpoint_id, tenant))
                    continue
                adapter, opener = tenants.sealer(tenant)
                row = adapter.own(found)
            opened = opener.open(row)
        except ShreddedError as exc:
            # Shredded while the pass ran (the tombstones were read at its start).
            shredded.append(ShreddedRow(thread, ns, checkpoint_id, exc.tenant_id))
            continue
        except UnknownTenantError as exc:
            if prefix is not None and tenant is None and _opens(sealer, found):
                # An application thread that only looks like a tenant's: a store row.
                prefix, opener, row = None, sealer, found
                opened = sealer.open(found)
            else:
                findings.append(_finding(found, exc))
                continue
        except SecureSerdeError as exc:
            findings.append(_finding(found, exc))
            continue
        in_tenant = prefix is not None
        if in_tenant:
            counts["tenant"] += 1
        if opened.parent_id is not None and not opened.detached:
            parents[(thread, ns, checkpoint_id)] = (thread, ns, opened.parent_id)
        record = _cell.from_text(found.metadata.get(RECORD_KEY), _cell.RECORD)
        count(record.type_tag, record.ciphertext, "records", in_tenant)
        stored = found.checkpoint.get("channel_values") or {}
        for channel in opened.with_values:
            cell = _cell.unpack(stored[channel], _cell.VALUE)
            count(cell.type_tag, cell.ciphertext, "values", in_tenant)
        for _, _, raw in found.pending_writes or ():
            cell = _cell.unpack(raw, _cell.WRITE)
            count(cell.type_tag, cell.ciphertext, "writes", in_tenant)
        if progress is not None:
            progress(len(seen))
    for child, parent in parents.items():
        if parent not in seen:
            error = HistoryError(f"the parent {parent[2]!r} of this checkpoint is missing")
            findings.append(AuditFinding(*child, type(error).__name__, str(error)))
    return SealedAuditReport(
        threads=len(threads),
        checkpoints=len(seen),
        values=counts["values"],
        writes=counts["writes"],
        records=counts["records"],
        under_primary=counts["current"],
        not_under_primary=counts["other"],
        findings=tuple(findings.items),
        finding_count=findings.total,
        shredded=shredded.total,
        shredded_rows=tuple(shredded.items),
        tenant_checkpoints=counts["tenant"],
        tenant_cells=counts["tenant_cells"],
    )


def _opens(sealer: Sealer, found: CheckpointTuple) -> bool:
    try:
        sealer.open(found)
    except SecureSerdeError:
        return False
    return True


def _every_row(
    saver: SealedSaver, thread_ids: Iterable[str] | None, findings: Kept[AuditFinding]
) -> Iterator[CheckpointTuple]:
    """Every checkpoint of every thread but the identity's.

    Without ``thread_ids``: one unpaged ``list(None)``. ``before`` pages are ordered
    across threads by some savers (SQL) and per thread by others (InMemorySaver), so
    paging through the public API could skip rows; the stock SQL savers read the whole
    result before yielding anyway.
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
            findings.append(AuditFinding(thread, "", "", type(exc).__name__, str(exc)))
            continue
        for found in rows:
            configurable: dict[str, Any] = found.config.get("configurable") or {}
            if str(configurable.get("thread_id")) != IDENTITY_THREAD:
                yield found


def _finding(found: CheckpointTuple, exc: SecureSerdeError) -> AuditFinding:
    thread, ns, checkpoint_id = key_of(found)
    return AuditFinding(thread, ns, checkpoint_id, type(exc).__name__, str(exc))
