"""What every pass reports: one `PassReport`, its failure records, and progress snapshots.

A pass (rewrap, adopt, reindex) counts the units it scanned, changed and
skipped (by kind), lists the units it could not handle by where they are and
why (never what they hold), and names any count of its own in ``counts``.
In a dry run nothing is written and ``changed`` counts what would be.

The old report types (`RewrapReport`, ``AdoptReport``, ``ReindexReport``)
are this type; the attributes they documented are kept as properties.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Generic, TypeVar, cast

from secure_serde._rows import CheckpointRow, RowFailure, Unvouched

__all__ = [
    "MAX_LISTED_FAILURES",
    "Kept",
    "PassProgress",
    "PassReport",
    "RewrapProgress",
    "RewrapReport",
    "Tally",
    "counted",
]

# Failures are kept for the report; past this many only the count grows,
# so a store of unreadable rows cannot exhaust memory.
MAX_LISTED_FAILURES: Final = 1000

_T = TypeVar("_T")


class Kept(Generic[_T]):
    """Rows a report lists: the first `MAX_LISTED_FAILURES` kept, every one counted.

    A store full of bad rows must not fill memory with their descriptions.
    """

    __slots__ = ("items", "total")

    def __init__(self) -> None:
        self.items: list[_T] = []
        self.total = 0

    def append(self, item: _T) -> None:
        self.total += 1
        if len(self.items) < MAX_LISTED_FAILURES:
            self.items.append(item)


Detail = str | int | bool | tuple[str, ...] | None


@dataclass(frozen=True)
class PassProgress:
    """A snapshot handed to a pass's ``progress`` callback after every batch."""

    scanned: int
    total: int
    rewrapped: int
    failures: int
    elapsed: float

    @property
    def changed(self) -> int:
        return self.rewrapped

    @property
    def rate(self) -> float:
        """Units scanned per second so far."""
        return self.scanned / self.elapsed if self.elapsed > 0 else 0.0


@dataclass
class Tally:
    """Running counts of one process's share of a pass; frozen into a `PassReport`."""

    scanned: int = 0
    changed: int = 0
    conflicts: int = 0
    vanished: int = 0
    failure_count: int = 0
    failures: list[RowFailure] = field(default_factory=list)
    accepted: list[RowFailure] = field(default_factory=list)
    changed_by: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)

    def fail(self, failure: RowFailure) -> None:
        self.failure_count += 1
        _keep(self.failures, failure)

    def accept(self, row: RowFailure) -> None:
        self.counts["accepted"] += 1
        _keep(self.accepted, row)

    def merge(self, other: Tally) -> None:
        self.scanned += other.scanned
        self.changed += other.changed
        self.conflicts += other.conflicts
        self.vanished += other.vanished
        self.failure_count += other.failure_count
        _keep(self.failures, *other.failures)
        _keep(self.accepted, *other.accepted)
        self.changed_by.update(other.changed_by)
        self.skipped.update(other.skipped)
        self.counts.update(other.counts)

    def report(
        self,
        name: str,
        *,
        store: str = "",
        dry_run: bool,
        elapsed: float,
        details: Mapping[str, Detail] | None = None,
    ) -> PassReport:
        counts = dict(self.counts)
        if self.conflicts or name == "rewrap":
            counts["conflicts"] = self.conflicts
        if self.vanished or name == "rewrap":
            counts["vanished"] = self.vanished
        return PassReport(
            name=name,
            dry_run=dry_run,
            store=store,
            scanned=self.scanned,
            changed=self.changed,
            skipped=_frozen(self.skipped),
            counts=_frozen(counts),
            changed_by=_frozen(self.changed_by),
            failure_count=self.failure_count,
            failures=tuple(self.failures),
            accepted=tuple(self.accepted),
            details=MappingProxyType(dict(details or {})),
            elapsed=elapsed,
        )


def _keep(listed: list[RowFailure], *rows: RowFailure) -> None:
    listed.extend(rows[: max(MAX_LISTED_FAILURES - len(listed), 0)])


def _read(read: Callable[[PassReport], _T]) -> _T:
    """A read-only report attribute, computed from the report (typed as what it reads)."""
    return cast(_T, property(read))


def counted(name: str) -> int:
    """A report property: the report's count ``name`` (0 when the pass counted none)."""
    return _read(lambda report: report.counts.get(name, 0))


def _frozen(counts: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(sorted(counts.items())))


# Per pass: what it does to a unit (done, in a dry run) and what a unit is.
_VERBS: Final = {
    "rewrap": ("rewrapped", "would rewrap", "rows"),
    "adopt": ("copied", "would copy", "checkpoints"),
    "reindex": ("re-indexed", "would re-index", "checkpoints"),
    "copy_thread": ("copied", "would copy", "checkpoints"),
}
_OTHER: Final = ("changed", "would change", "units")


@dataclass(frozen=True)
class PassReport:
    """The outcome of one pass over a store.

    Attributes:
        name: the pass: ``"rewrap"``, ``"adopt"``, ``"reindex"`` or ``"copy_thread"``.
        dry_run: nothing was written; ``changed`` counts what would be.
        store: where the store is (no password), when the pass knows it.
        scanned: units read (cells for rewrap, checkpoints for adopt and reindex).
        changed: units written (or, in a dry run, that would be).
        skipped: units left alone, by kind: ``"current"`` (nothing to do),
            ``"empty"`` (no value), ``"tenant-keyed"`` and ``"shredded"``
            (rewrap: a tenant's rows), ``"refused"`` (adopt: not copied).
        counts: the pass's own counts: rewrap's ``conflicts`` (swaps retried
            after a concurrent write) and ``vanished`` (rows deleted meanwhile),
            adopt's ``threads`` and ``writes``, reindex's ``remaining``.
        changed_by: changed units per origin (rewrap: ``"aesgcm/<key id>"``,
            ``"aes"``, ``"plaintext"`` or another cipher name).
        failure_count: units the pass could not handle.
        failures: the first `MAX_LISTED_FAILURES` of them, by where and why.
        accepted: rows listed as a warning and changed anyway (adopt's
            unvouched rows under ``accept_unvouched``).
        details: facts of the run: rewrap's ``primary`` and ``workers``,
            reindex's ``key_id``, ``rotated``, ``dropped`` and ``complete``.
        elapsed: seconds.
    """

    name: str
    dry_run: bool
    store: str = ""
    scanned: int = 0
    changed: int = 0
    skipped: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    changed_by: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    failure_count: int = 0
    failures: tuple[RowFailure, ...] = ()
    accepted: tuple[RowFailure, ...] = ()
    details: Mapping[str, Detail] = field(default_factory=lambda: MappingProxyType({}))
    elapsed: float = 0.0

    ok = _read(lambda r: r.failure_count == 0)  # no unit failed (in a dry run: none would)
    rate = _read(lambda r: r.scanned / r.elapsed if r.elapsed > 0 else 0.0)
    # What the pass does to a unit (past tense, or "would ..." in a dry run), and what it scans.
    verb = _read(lambda r: _VERBS.get(r.name, _OTHER)[1 if r.dry_run else 0])
    unit = _read(lambda r: _VERBS.get(r.name, _OTHER)[2])

    def summary(self, named: Callable[[str], str] = str) -> list[str]:
        """The counts as text lines; ``named`` renders a key source (the CLI adds its label)."""
        lines = [f"store: {self.store}"] if self.store else []
        if self.primary:
            lines.append(f"primary: {named(self.primary)}")
        workers = f" with {self.workers} workers" if self.workers > 1 else ""
        left = [("already current", "current"), ("empty", "empty")]
        kept = "".join(f", {label} {self.skipped.get(kind, 0):,}" for label, kind in left)
        lines.append(
            f"scanned {self.scanned:,} {self.unit} in {self.elapsed:.2f} s"
            f" ({self.rate:,.0f} {self.unit}/s){workers}: {self.verb} {self.changed:,}"
            f"{kept if self.name == 'rewrap' else ''}, failed {self.failure_count:,}"
        )
        if self.conflicts or self.vanished:
            lines.append(
                f"concurrent changes: {self.conflicts:,} swap(s) retried after a concurrent"
                f" write, {self.vanished:,} row(s) deleted meanwhile"
            )
        lines += [f"  {self.verb} from {named(src)}: {n:,}" for src, n in self.changed_by.items()]
        shown = {"current", "empty"} if self.name == "rewrap" else set()
        lines += [f"  skipped ({k}): {n:,}" for k, n in self.skipped.items() if k not in shown]
        quiet = {"conflicts", "vanished"}
        lines += [f"  {k}: {n:,}" for k, n in self.counts.items() if k not in quiet]
        lines += [
            f"  {k.replace('_', ' ')}: {_detail(v)}"
            for k, v in self.details.items()
            if k not in ("primary", "workers")
        ]
        return lines

    accepted_heading = _read(lambda r: f"rows listed and {r.verb} (accepted):")
    failures_heading = _read(lambda r: f"rows that could not be {_VERBS.get(r.name, _OTHER)[0]}:")

    def lines(self) -> list[str]:
        """The report as text: `summary`, then every listed row (the CLI caps the lists)."""
        lines = self.summary()
        if self.accepted:
            lines += [self.accepted_heading, *(f"  {row}" for row in self.accepted)]
        if self.failures:
            lines += [self.failures_heading, *(f"  {row}" for row in self.failures)]
        return lines

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data: counts, details, and each listed row by where and why."""
        return {
            "pass": self.name,
            "store": self.store,
            "dry_run": self.dry_run,
            "scanned": self.scanned,
            "changed": self.changed,
            "skipped": dict(self.skipped),
            "counts": dict(self.counts),
            "changed_by": dict(self.changed_by),
            "failure_count": self.failure_count,
            "failures": [f.as_json() for f in self.failures],
            "accepted": [a.as_json() for a in self.accepted],
            "details": {k: list(v) if isinstance(v, tuple) else v for k, v in self.details.items()},
            "elapsed": self.elapsed,
            **self._named_json(),
        }

    def _named_json(self) -> dict[str, Any]:
        """The keys each pass's ``--json`` had before `PassReport`, kept for scripts."""
        if self.name == "rewrap":
            return {
                "rewrapped": self.changed,
                "current": self.current,
                "empty": self.empty,
                "conflicts": self.conflicts,
                "vanished": self.vanished,
                "sources": dict(self.changed_by),
                "primary": self.primary,
                "workers": self.workers,
            }
        if self.name == "adopt":
            return {
                "threads": self.threads,
                "checkpoints": self.checkpoints,
                "writes": self.writes,
                "unvouched": [dataclasses.asdict(u) for u in self.unvouched],
            }
        return {}

    # -- the attributes the old report types documented: rewrap's, adopt's, reindex's ---------

    rewrapped = rewritten = _read(lambda r: r.changed)
    current = _read(lambda r: r.skipped.get("current", 0))
    empty = _read(lambda r: r.skipped.get("empty", 0))
    # Rows of live tenants (their keys rotate with ``TenantKeys.rewrap``), of shredded ones.
    tenant_skipped = _read(lambda r: r.skipped.get("tenant-keyed", 0))
    shredded_skipped = _read(lambda r: r.skipped.get("shredded", 0))
    conflicts = counted("conflicts")
    vanished = counted("vanished")
    threads = counted("threads")
    writes = counted("writes")
    remaining = counted("remaining")
    sources = _read(lambda r: r.changed_by)
    primary = _read(lambda r: str(r.details.get("primary", "")))
    workers = _read(lambda r: int(cast(int, r.details.get("workers", 1))))
    key_id = _read(lambda r: None if r.details.get("key_id") is None else str(r.details["key_id"]))
    rotated = _read(lambda r: bool(r.details.get("rotated", False)))
    dropped = _read(lambda r: cast(tuple[str, ...], r.details.get("dropped", ())))
    complete = _read(lambda r: bool(r.details.get("complete", False)))

    @property
    def checkpoints(self) -> int:  # a property: the sealed audit's report overrides it
        return self.changed

    @property
    def unvouched(self) -> tuple[Unvouched, ...]:
        """Adopt: every row listed, refused or accepted, in the order the pass met them."""
        rows = [(f, False) for f in self.failures] + [(a, True) for a in self.accepted]
        found = [
            (row.ref.seq, Unvouched(*_ids(row.ref), row.kind, copied))
            for row, copied in rows
            if isinstance(row.ref, CheckpointRow)
        ]
        return tuple(u for _, u in sorted(found, key=lambda pair: pair[0]))

    @property
    def refused(self) -> tuple[Unvouched, ...]:
        """Adopt: the rows not copied."""
        return tuple(u for u in self.unvouched if not u.copied)

    @property
    def refused_rows(self) -> list[tuple[str, str, str]]:
        """Reindex: the checkpoints that did not open, as (thread, namespace, checkpoint id)."""
        return [
            (f.ref.thread_id, f.ref.checkpoint_ns, str(f.ref.checkpoint_id)) for f in self.failures
        ]


def _detail(value: Detail) -> str:
    if isinstance(value, tuple):
        return ", ".join(value) or "none"
    return "none" if value is None else str(value)


def _ids(ref: CheckpointRow) -> tuple[str, str, str, str]:
    return ref.thread_id, ref.checkpoint_ns, str(ref.checkpoint_id), ref.row


# Deprecated aliases, kept for one minor version (CHANGELOG 0.4.0).
RewrapReport = PassReport
RewrapProgress = PassProgress
