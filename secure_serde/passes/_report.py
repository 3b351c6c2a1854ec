"""What a rewrap run reports: counts, the rows that failed (by id only), progress snapshots."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from secure_serde._errors import SecureSerdeError
from secure_serde.stores import RowRef

__all__ = ["MAX_LISTED_FAILURES", "RewrapProgress", "RewrapReport", "RowFailure", "Tally"]

# Failures are kept for the report; past this many only the count grows,
# so a store of unreadable rows cannot exhaust memory.
MAX_LISTED_FAILURES: Final = 1000


@dataclass(frozen=True)
class RowFailure:
    """A row that could not be rewrapped: where it is and why, never what it holds.

    ``error`` is the exception class that kept it (``None`` when the row
    kept changing under concurrent writes); ``reason`` says the same in words.
    """

    ref: RowRef
    reason: str
    error: type[SecureSerdeError] | None = None

    def __str__(self) -> str:
        return f"{self.ref}: {self.reason}"


@dataclass(frozen=True)
class RewrapProgress:
    """A snapshot handed to the ``progress`` callback after every batch."""

    scanned: int
    total: int
    rewrapped: int
    failures: int
    elapsed: float

    @property
    def rate(self) -> float:
        """Rows scanned per second so far."""
        return self.scanned / self.elapsed if self.elapsed > 0 else 0.0


@dataclass
class Tally:
    """Running counts of one process's share of a run; merged into a `RewrapReport`."""

    scanned: int = 0
    rewrapped: int = 0
    current: int = 0
    empty: int = 0
    conflicts: int = 0
    vanished: int = 0
    failure_count: int = 0
    failures: list[RowFailure] = field(default_factory=list)
    sources: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)

    def fail(self, failure: RowFailure) -> None:
        self.failure_count += 1
        if len(self.failures) < MAX_LISTED_FAILURES:
            self.failures.append(failure)

    def merge(self, other: Tally) -> None:
        self.scanned += other.scanned
        self.rewrapped += other.rewrapped
        self.current += other.current
        self.empty += other.empty
        self.conflicts += other.conflicts
        self.vanished += other.vanished
        self.failure_count += other.failure_count
        room = MAX_LISTED_FAILURES - len(self.failures)
        self.failures.extend(other.failures[: max(room, 0)])
        self.sources.update(other.sources)
        self.skipped.update(other.skipped)


@dataclass(frozen=True)
class RewrapReport:
    """The outcome of `secure_serde.rewrap`.

    Attributes:
        store: where the store is (no password).
        dry_run: nothing was written; ``rewrapped`` counts rows that would be.
        scanned: cells read.
        rewrapped: cells re-encrypted under the primary (or that would be).
        current: cells already under the primary, left alone.
        empty: rows holding no value (PostgreSQL ``"empty"`` blobs).
        conflicts: swaps lost to a concurrent write; such rows are re-read
            and settled again, so this counts retries, not losses.
        vanished: rows deleted concurrently before they could be rewrapped.
        failure_count: rows that could not be rewrapped.
        failures: the first `MAX_LISTED_FAILURES` of them, by id and reason.
        sources: rewrapped cells per origin: ``"aesgcm/<key id>"``,
            ``"aes"`` (langgraph built-in), ``"plaintext"``, or another
            cipher name.
        primary: the cipher name (and key id, for format v1) rows now use.
        elapsed: seconds.
        skipped: rows left alone that are not the store keys' business, by kind:
            ``"tenant-keyed"`` (a tenant's rows, under its thread keys, which
            ``TenantKeys.rewrap`` rotates) and ``"shredded"`` (rows of a shredded
            tenant or thread). Neither is a failure.
    """

    store: str
    dry_run: bool
    scanned: int
    rewrapped: int
    current: int
    empty: int
    conflicts: int
    vanished: int
    failure_count: int
    failures: tuple[RowFailure, ...]
    sources: Mapping[str, int]
    primary: str
    elapsed: float
    workers: int = 1
    skipped: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def tenant_skipped(self) -> int:
        """Rows of live tenants, skipped (their keys rotate with ``TenantKeys.rewrap``)."""
        return self.skipped.get("tenant-keyed", 0)

    @property
    def shredded_skipped(self) -> int:
        """Rows of shredded tenants or threads, skipped."""
        return self.skipped.get("shredded", 0)

    @property
    def ok(self) -> bool:
        """True when every row is (or, in a dry run, can be) under the primary."""
        return self.failure_count == 0

    @property
    def rate(self) -> float:
        return self.scanned / self.elapsed if self.elapsed > 0 else 0.0

    @classmethod
    def from_tally(  # noqa: PLR0913 - one counter per field of the report
        cls,
        tally: Tally,
        *,
        store: str,
        dry_run: bool,
        primary: str,
        elapsed: float,
        workers: int,
    ) -> RewrapReport:
        return cls(
            store=store,
            dry_run=dry_run,
            scanned=tally.scanned,
            rewrapped=tally.rewrapped,
            current=tally.current,
            empty=tally.empty,
            conflicts=tally.conflicts,
            vanished=tally.vanished,
            failure_count=tally.failure_count,
            failures=tuple(tally.failures),
            sources=MappingProxyType(dict(sorted(tally.sources.items()))),
            primary=primary,
            elapsed=elapsed,
            workers=workers,
            skipped=MappingProxyType(dict(sorted(tally.skipped.items()))),
        )
