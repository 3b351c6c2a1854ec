"""The audit of a store: one pass over its cells and its JSON columns, into an `AuditReport`.

The cells go through the engine's loop (secure_serde/_engine.py) with a read-only planner and
applier, as every other pass: nothing can be written.

Each cell is sorted by what its type tag and header say (cipher name, key id, format version),
then, unless decryption is turned off, authenticated by rewrap's `Planner` in dry-run verify
mode (secure_serde/passes/_plan.py: nothing is deserialized, nor sealed again); a value it
refuses (a relabelled or planted row) is reported as refused. Only counts, ids and error class
names are kept; plaintext is dropped as soon as it has been checked. A store secure_serde 0.3's
savers wrote is refused (`secure_serde.stores.refuse_v03`): only ``secure-serde adopt`` reads it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from secure_serde._engine import CURRENT, Outcome, ReadOnly, Skip, Unreadable, run_batches
from secure_serde._report import MAX_LISTED_FAILURES, Tally
from secure_serde._rows import RowFailure
from secure_serde.ciphers import LEGACY_CIPHER_NAME, TagAuthenticatingCipher, read_header
from secure_serde.crypto import format_v1
from secure_serde.passes._plan import Planner
from secure_serde.serde import (
    UNCOMPRESSED,
    EncryptedSerializer,
    Migration,
    compression_of,
    is_refusal,
)
from secure_serde.stores import V03_STRUCTURAL_METADATA_KEYS as STRUCTURAL_METADATA_KEYS
from secure_serde.stores import (
    Cell,
    HistoryView,
    InlineChannel,
    MetadataKeys,
    RowRef,
    Store,
    refuse_v03,
    scan_json_columns,
)

__all__ = [
    "LANGGRAPH_METADATA_KEYS",
    "STATE_METADATA_KEYS",
    "AuditCiphers",
    "AuditReport",
    "CipherGroup",
    "Listed",
    "audit_store",
]

# What LangGraph itself writes into checkpoint metadata (its CheckpointMetadata
# TypedDict, plus the keys its savers' SQL reads). Anything else was copied from
# config["configurable"] or config["metadata"].
LANGGRAPH_METADATA_KEYS: Final = frozenset(
    {"source", "step", "parents", "run_id", "counters_since_delta_snapshot"}
    | STRUCTURAL_METADATA_KEYS
)
# Older langgraph versions stored every node's output under "writes": state in plaintext.
STATE_METADATA_KEYS: Final = frozenset({"writes"})
_NO_TYPE_TAG: Final = "NoTypeTag"
# Audit reads every kind of row to report on it: plaintext ones are strictly
# checked, legacy pickles only authenticated (never loaded).
_AUDIT_MIGRATION: Final = Migration(plaintext=True, legacy_pickle=True)
# Type tags and cipher names are whatever the rows say: past this many distinct
# ones, the rest share one bucket, so a store of planted rows cannot grow memory.
MAX_DISTINCT: Final = 256
OTHER: Final = "(other)"


class AuditCiphers(Protocol):
    """The keys audit opens rows with: `secure_serde.config.ConfiguredCiphers`."""

    @property
    def primary(self) -> TagAuthenticatingCipher: ...
    @property
    def decrypt_only(self) -> tuple[TagAuthenticatingCipher, ...]: ...
    def key_label(self, cipher_name: str, key_id: str | None) -> str | None: ...
    def describe(self) -> list[str]: ...


@dataclass
class CipherGroup:
    """Cells sharing a cipher name, key id and format version.

    ``current`` counts cells under the primary key, ``readable`` those that
    authenticated (current included), ``failed`` those that did not,
    ``refused`` those that decrypted but whose unauthenticated type tag the
    strict decoder refuses; all four stay 0 when decryption is off.
    """

    cipher: str
    key_id: str | None
    format_version: int | None
    key_label: str | None = None
    count: int = 0
    current: int = 0
    readable: int = 0
    failed: int = 0
    refused: int = 0
    tables: Counter[str] = field(default_factory=Counter)

    @property
    def legacy(self) -> bool:
        """langgraph's built-in format: no key id, no version, type tag not authenticated."""
        return self.cipher == LEGACY_CIPHER_NAME


@dataclass
class Listed:
    """Rows of one kind of problem: each counted, by kind (an error class, a type tag), and the
    first `MAX_LISTED_FAILURES` kept."""

    count: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    rows: list[RowRef | RowFailure] = field(default_factory=list)

    def add(self, row: RowRef | RowFailure, kind: str) -> None:
        self.count += 1
        self.kinds[kind] += 1
        if len(self.rows) < MAX_LISTED_FAILURES:
            self.rows.append(row)


@dataclass
class AuditReport:
    """Everything audit found; ids, names and counts only, never a value or a key."""

    store: str
    kind: str
    decrypted: bool
    keys: list[str]
    allowed_metadata_keys: frozenset[str]
    cells: int = 0
    empty: int = 0
    tables: Counter[str] = field(default_factory=Counter)
    groups: dict[tuple[str, str | None, int | None], CipherGroup] = field(default_factory=dict)
    compression: Counter[str] = field(default_factory=Counter)
    plaintext: Listed = field(default_factory=Listed)  # by type tag
    undecryptable: Listed = field(default_factory=Listed)  # by error class, as refused
    refused: Listed = field(default_factory=Listed)
    metadata: MetadataKeys = field(default_factory=lambda: MetadataKeys(0, 0, {}))
    inline: list[InlineChannel] | None = None

    @property
    def stale_count(self) -> int:
        """Readable cells not under the primary key: what ``secure-serde rewrap`` would move."""
        return sum(g.readable - g.current for g in self.groups.values())

    @property
    def inline_count(self) -> int:
        return sum(c.checkpoints for c in self.inline or ())

    def flagged_metadata_keys(self) -> dict[str, int]:
        """Metadata keys neither LangGraph's own nor allowed by ``--allow-metadata-key``."""
        return {
            key: count
            for key, count in self.metadata.counts.items()
            if key not in LANGGRAPH_METADATA_KEYS and key not in self.allowed_metadata_keys
        }


# What the engine counts for every cell: the findings are the report's, listed by the auditor.
_AUDITED: Final = Skip("audited")


class _Auditor:
    """A read-only planner: each cell is sorted into the report, never planned for a change."""

    def __init__(
        self, report: AuditReport, ciphers: AuditCiphers | None, planner: Planner | None
    ) -> None:
        self._report = report
        self._ciphers = ciphers
        self._planner = planner
        self._by_header: dict[bytes, CipherGroup] = {}

    def plan(self, cell: Cell) -> Outcome:
        self._sort(cell)
        return _AUDITED

    def _sort(self, cell: Cell) -> None:
        report = self._report
        report.cells += 1
        report.tables[cell.ref.table] += 1
        type_tag, data = cell.type_tag, cell.data
        if data is None:
            report.empty += 1
            return
        if type_tag is None:
            failure = RowFailure(cell.ref, f"{_NO_TYPE_TAG}: the row has a value but no type tag")
            report.undecryptable.add(failure, _NO_TYPE_TAG)
            return
        report.compression[compression_of(type_tag) or UNCOMPRESSED] += 1
        _, plus, cipher_name = type_tag.rpartition("+")
        if not plus:
            tags = report.plaintext.kinds
            known = type_tag in tags or len(tags) < MAX_DISTINCT
            report.plaintext.add(cell.ref, type_tag if known else OTHER)
            if self._planner is not None:
                outcome = self._planner.plan(cell)
                if isinstance(outcome, Unreadable) and is_refusal(outcome.error):
                    _add(report.refused, cell, outcome)
            return
        group = self._group(cipher_name, data)
        group.count += 1
        group.tables[cell.ref.table] += 1
        if self._planner is None:
            return
        outcome = self._planner.plan(cell)
        if isinstance(outcome, Unreadable):
            refused = is_refusal(outcome.error)
            group.refused += refused
            group.failed += not refused
            _add(report.refused if refused else report.undecryptable, cell, outcome)
            return
        group.readable += 1
        if outcome is CURRENT:
            group.current += 1

    def _group(self, cipher_name: str, data: bytes) -> CipherGroup:
        # A v1 blob long enough to parse is grouped by its 5 header bytes alone:
        # parse_header would only read the same bytes again, for every row.
        fast = cipher_name == format_v1.CIPHER_NAME and len(data) >= format_v1.OVERHEAD
        head = data[: format_v1.HEADER_SIZE]
        group = self._by_header.get(head) if fast else None
        if group is None:
            header = read_header(cipher_name, data)
            key = (cipher_name, header.key_id, header.format_version)
            groups = self._report.groups
            if key not in groups and len(groups) >= MAX_DISTINCT:
                key = (OTHER, None, None)
            group = groups.get(key)
            if group is None:
                label = None if self._ciphers is None else self._ciphers.key_label(*key[:2])
                group = groups[key] = CipherGroup(*key, key_label=label)
            if fast and len(self._by_header) < MAX_DISTINCT:
                self._by_header[head] = group
        return group


def _ref(cell: Cell) -> RowRef:
    return cell.ref


def _add(listed: Listed, cell: Cell, outcome: Unreadable) -> None:
    listed.add(RowFailure(cell.ref, outcome.reason, outcome.error), outcome.error.__name__)


def audit_store(
    store: Store,
    ciphers: AuditCiphers | None,
    *,
    batch_size: int,
    allowed_metadata_keys: frozenset[str] = frozenset(),
    progress: Callable[[int, int], None] | None = None,
) -> AuditReport:
    """Audit every cell and JSON column of ``store``; ``ciphers=None`` skips decryption.

    ``progress(scanned, total)`` is called after every batch, when given. Raises
    `secure_serde.ConfigurationError` for a store 0.3's savers wrote (`refuse_v03`).
    """
    planner = None
    serde = None
    if ciphers is not None:
        serde = EncryptedSerializer(ciphers.primary, decrypt_only=ciphers.decrypt_only)
        planner = Planner(
            ciphers.primary,
            ciphers.decrypt_only,
            # Authenticate legacy pickle rows too: they are only decrypted here, never loaded.
            migration=_AUDIT_MIGRATION,
            seal=False,
            verify=True,
        )
    report = AuditReport(
        store=store.display,
        kind=store.kind,
        decrypted=planner is not None,
        keys=[] if ciphers is None else ciphers.describe(),
        allowed_metadata_keys=allowed_metadata_keys,
    )
    refuse_v03(store, "audit", serde)
    auditor = _Auditor(report, ciphers, planner)
    total = store.count_all() if progress is not None else 0

    def on_batch(tally: Tally) -> None:
        if progress is not None:
            progress(tally.scanned, max(total, tally.scanned))

    batches = (batch for table in store.tables for batch in store.iter_batches(table, batch_size))
    run_batches(batches, auditor, ReadOnly(_ref), dry_run=True, on_batch=on_batch)
    with HistoryView(store) as view:
        scan = scan_json_columns(view)
    report.metadata = scan.metadata
    report.inline = scan.inline
    return report
