"""`audit_sealed`: every row of a SealedSaver store checked, through the inner saver's public API.

Each checkpoint is opened as a read would open it: its record, every value
and every write, each at its own place; the history of every namespace must
reach a root. A row that fails is listed with its typed error class and the
pass goes on with the next. Cells are counted by whether the primary key
sealed them (told from their header, never decrypted twice), so rotation can
be checked. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from secure_serde._errors import HistoryError, SecureSerdeError, UnreadableRowError
from secure_serde.ciphers._headers import current_test
from secure_serde.sealing import _cell
from secure_serde.sealing._codec import RECORD_KEY
from secure_serde.sealing._identity import IDENTITY_THREAD
from secure_serde.sealing._saver import SealedSaver
from secure_serde.sealing._walks import key_of

__all__ = ["AuditFinding", "SealedAuditReport", "audit_sealed"]


@dataclass(frozen=True)
class AuditFinding:
    """One row that does not open: where it is, and the class of the error (never a value)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    error: str
    message: str


@dataclass(frozen=True)
class SealedAuditReport:
    """What a pass over a SealedSaver store found."""

    threads: int
    checkpoints: int
    values: int
    writes: int
    records: int
    under_primary: int
    not_under_primary: int
    findings: tuple[AuditFinding, ...] = field(default=())

    @property
    def clean(self) -> bool:
        """Every row opens, every history is complete, every cell under the primary key."""
        return not self.findings and self.not_under_primary == 0


def audit_sealed(
    saver: SealedSaver,
    *,
    thread_ids: Iterable[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> SealedAuditReport:
    """Open every checkpoint of the store, as the application would, and count what is there.

    ``thread_ids``: the store's threads, listed one by one (the CLI reads them from the
    table). A thread whose rows the inner saver cannot even decode is then a finding, and
    the pass goes on; without them, one ``list(None)`` reads every thread, and such a row
    stops the pass with `UnreadableRowError`.
    """
    sealer = saver._ready()
    is_current, _, _ = current_test(saver._encrypting.cipher)
    counts = {"values": 0, "writes": 0, "records": 0, "current": 0, "other": 0}
    findings: list[AuditFinding] = []
    seen: set[tuple[str, str, str]] = set()
    parents: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    threads: set[str] = set()

    def count(tag: str, ciphertext: bytes, kind: str) -> None:
        counts[kind] += 1
        cipher_name = tag.rpartition("+")[2]
        counts["current" if is_current(cipher_name, ciphertext) else "other"] += 1

    for found in _every_row(saver, thread_ids, findings):
        thread, ns, checkpoint_id = key_of(found)
        threads.add(thread)
        seen.add((thread, ns, checkpoint_id))
        try:
            opened = sealer.open(found)
        except SecureSerdeError as exc:
            findings.append(_finding(found, exc))
            continue
        if opened.parent_id is not None and not opened.detached:
            parents[(thread, ns, checkpoint_id)] = (thread, ns, opened.parent_id)
        record = _cell.from_text(found.metadata.get(RECORD_KEY), _cell.RECORD)
        count(record.type_tag, record.ciphertext, "records")
        stored = found.checkpoint.get("channel_values") or {}
        for channel in opened.with_values:
            cell = _cell.unpack(stored[channel], _cell.VALUE)
            count(cell.type_tag, cell.ciphertext, "values")
        for _, _, raw in found.pending_writes or ():
            cell = _cell.unpack(raw, _cell.WRITE)
            count(cell.type_tag, cell.ciphertext, "writes")
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
        findings=tuple(findings),
    )


def _every_row(
    saver: SealedSaver, thread_ids: Iterable[str] | None, findings: list[AuditFinding]
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
