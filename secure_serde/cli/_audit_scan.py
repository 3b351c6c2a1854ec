"""The audit of a store: one pass over its cells and its JSON columns, into an `AuditReport`.

Each cell is sorted by what its type tag and header say (cipher name, key id, format version),
then, unless decryption is turned off, authenticated by rewrap's `Planner` in dry-run verify
mode: decrypted by the cipher its tag names, bound to its inner type tag, and never
deserialized, so no pickle is ever loaded and nothing is sealed again. A value whose type tag
nothing authenticates (plaintext, langgraph's built-in ``+aes``) is also given to the strict
decoder, as rewrap would before sealing it: one it refuses (a relabelled or planted row) is
reported as refused. Only counts, ids and error class names are kept; plaintext is dropped as
soon as it has been checked. Counting values bound to their row or not (`BindingCounts`):
docs/cli.md, "Counting bound and unbound rows".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, cast

from secure_serde import (
    BindingError,
    DecryptionError,
    EncryptedSerializer,
    Migration,
    UnboundValueError,
)
from secure_serde.ciphers import (
    LEGACY_CIPHER_NAME,
    SealingCipher,
    StoredHeader,
    is_sealing,
    read_header,
)
from secure_serde.config import ConfiguredCiphers
from secure_serde.crypto import format_v1
from secure_serde.passes import CURRENT, MAX_LISTED_FAILURES, Planner, RowFailure, Unreadable
from secure_serde.serde import UNCOMPRESSED, compression_of, is_refusal
from secure_serde.stores import (
    INDEX_METADATA_KEY,
    METADATA_TABLE,
    ROW_KEY,
    SEALED_METADATA_KEY,
    Cell,
    HistoryView,
    InlineChannel,
    MetadataKeys,
    RecordSeals,
    RowRef,
    Store,
    scan_json_columns,
)
from secure_serde.stores import V03_STRUCTURAL_METADATA_KEYS as STRUCTURAL_METADATA_KEYS

__all__ = [
    "LANGGRAPH_METADATA_KEYS",
    "STATE_METADATA_KEYS",
    "AuditReport",
    "BindingCounts",
    "CipherGroup",
    "audit_store",
]

# What LangGraph itself writes into checkpoint metadata (its CheckpointMetadata
# TypedDict, plus the keys its savers' SQL reads) and our sealed envelope.
# Anything else was copied from config["configurable"] or config["metadata"].
LANGGRAPH_METADATA_KEYS: Final = frozenset(
    {"source", "step", "parents", "run_id", "counters_since_delta_snapshot"}
    | STRUCTURAL_METADATA_KEYS
    | {SEALED_METADATA_KEY, INDEX_METADATA_KEY}
)
# Older langgraph versions stored every node's output under "writes": state in plaintext.
STATE_METADATA_KEYS: Final = frozenset({"writes"})
_NO_TYPE_TAG: Final = "NoTypeTag"
# Audit reads every kind of row to report on it: plaintext ones are strictly
# checked, legacy pickles only authenticated (never loaded).
_AUDIT_MIGRATION: Final = Migration(plaintext=True, legacy_pickle=True)
# Sealed-metadata entries secure_serde 0.1 wrote carry no binding to their row.
_UNBOUND_ENTRIES: Final = Migration(unbound=True)
# Type tags and cipher names are whatever the rows say: past this many distinct
# ones, the rest share one bucket, so a store of planted rows cannot grow memory.
MAX_DISTINCT: Final = 256
OTHER: Final = "(other)"
# The kinds of value counted as bound or not, by the table that holds them.
# PostgreSQL's record seals (checkpoints.checkpoint) are counted from the JSON
# column instead (`RecordSeals`): a seal is always bound.
BINDING_KINDS: Final = {
    "checkpoint_blobs": "blobs",
    "checkpoint_writes": "writes",
    "writes": "writes",
    "checkpoints": "checkpoints",
    METADATA_TABLE: "metadata_envelopes",
}


@dataclass
class BindingCounts:
    """Values of one kind bound to their row, not bound, and not checked.

    ``unchecked`` counts format v2 values not decrypted (``--no-decrypt``,
    or the keys cannot open them) and values with no readable type tag.
    """

    bound: int = 0
    unbound: int = 0
    unchecked: int = 0

    @property
    def total(self) -> int:
        return self.bound + self.unbound + self.unchecked


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
    plaintext: Counter[str] = field(default_factory=Counter)
    compression: Counter[str] = field(default_factory=Counter)
    plaintext_rows: list[RowRef] = field(default_factory=list)
    failures: list[RowFailure] = field(default_factory=list)
    failure_count: int = 0
    failure_kinds: Counter[str] = field(default_factory=Counter)
    refused: list[RowFailure] = field(default_factory=list)
    refused_count: int = 0
    refused_kinds: Counter[str] = field(default_factory=Counter)
    metadata: MetadataKeys = field(default_factory=lambda: MetadataKeys(0, 0, {}))
    inline: list[InlineChannel] | None = None
    binding: dict[str, BindingCounts] = field(default_factory=dict)
    # PostgreSQL only: checkpoints whose record carries a seal, and not.
    records: RecordSeals | None = None
    # With keys: the names inside the sealed-metadata entries, and in how many.
    sealed_keys: Counter[str] = field(default_factory=Counter)

    @property
    def plaintext_count(self) -> int:
        return sum(self.plaintext.values())

    @property
    def legacy_count(self) -> int:
        return sum(g.count for g in self.groups.values() if g.legacy)

    @property
    def stale_count(self) -> int:
        """Readable cells not under the primary key: what ``secure-serde rewrap`` would move."""
        return sum(g.readable - g.current for g in self.groups.values())

    def checkpoint_seals(self) -> BindingCounts:
        """Checkpoints whose record is sealed (bound), and not.

        PostgreSQL keeps the seal beside the record, so its presence is
        counted without a key; SQLite's sealed saver binds the record into
        the checkpoint value, which only decrypting tells.
        """
        if self.records is not None:
            return BindingCounts(self.records.sealed, self.records.unsealed)
        return self.binding.get("checkpoints", BindingCounts())

    def binding_summary(self) -> dict[str, BindingCounts | None]:
        """Per kind of value, bound/unbound/unchecked; ``None`` for a kind the store lacks."""
        summary: dict[str, BindingCounts | None] = {"checkpoints": self.checkpoint_seals()}
        for kind in ("blobs", "writes", "metadata_envelopes"):
            summary[kind] = self.binding.get(kind, BindingCounts())
        if self.kind != "postgres":
            summary["blobs"] = None
        return summary

    @property
    def binds(self) -> bool:
        """Whether the sealed savers write this store: some value or record is bound."""
        return any(c is not None and c.bound for c in self.binding_summary().values())

    @property
    def unbound_count(self) -> int:
        """Unsealed checkpoints and unbound values."""
        return sum(c.unbound for c in self.binding_summary().values() if c is not None)

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

    def findings(self) -> list[str]:
        """One line per kind of problem; empty for a clean store."""
        return [text for _, text in self.problems()]

    def problems(self) -> list[tuple[str, str]]:
        """`findings`, each with its kind (the CLI names the command that fixes each kind):
        ``plaintext``, ``undecryptable``, ``refused``, ``legacy``, ``inline``, ``metadata``."""
        counted = {
            "plaintext": (self.plaintext_count, "unencrypted serialized value(s)"),
            "undecryptable": (self.failure_count, "value(s) the configured keys cannot decrypt"),
            "refused": (
                self.refused_count,
                "value(s) whose type tag nothing authenticates hold what the strict decoder"
                " refuses (a type outside the allowlist, a pickle): planted or relabelled rows"
                " would run code when loaded permissively; rewrap will not seal them",
            ),
            "legacy": (
                self.legacy_count,
                "value(s) in langgraph's built-in format (type tag not authenticated):"
                " run secure-serde rewrap",
            ),
            "inline": (
                self.inline_count,
                "plaintext channel value(s) inline in the checkpoint JSON",
            ),
        }
        found = [(kind, f"{n:,} {text}") for kind, (n, text) in counted.items() if n]
        if flagged := self.flagged_metadata_keys():
            text = f"plaintext metadata key(s) not written by LangGraph: {sorted(flagged)}"
            found.append(("metadata", text))
        return found

    def add_failure(self, failure: RowFailure, kind: str) -> None:
        self.failure_count += 1
        self.failure_kinds[kind] += 1
        if len(self.failures) < MAX_LISTED_FAILURES:
            self.failures.append(failure)

    def add_refused(self, failure: RowFailure, kind: str) -> None:
        self.refused_count += 1
        self.refused_kinds[kind] += 1
        if len(self.refused) < MAX_LISTED_FAILURES:
            self.refused.append(failure)


class _Auditor:
    def __init__(
        self, report: AuditReport, ciphers: ConfiguredCiphers | None, planner: Planner | None
    ) -> None:
        self._report = report
        self._ciphers = ciphers
        self._planner = planner
        # Opens sealed-metadata entries to name their keys. Unbound (0.1) entries
        # are read too; nothing else is widened, and no pickle is ever loaded.
        self._serde = (
            None
            if ciphers is None
            else EncryptedSerializer(
                ciphers.primary, decrypt_only=ciphers.decrypt_only, migration=Migration.NONE
            )
        )
        self._by_header: dict[bytes, CipherGroup] = {}

    def add(self, cell: Cell) -> None:  # noqa: C901 - one branch per kind of stored cell
        report = self._report
        report.cells += 1
        report.tables[cell.ref.table] += 1
        type_tag, data = cell.type_tag, cell.data
        if data is None:
            report.empty += 1
            return
        if type_tag is None:
            self._count_binding(cell, None)
            report.add_failure(
                RowFailure(cell.ref, f"{_NO_TYPE_TAG}: the row has a value but no type tag"),
                _NO_TYPE_TAG,
            )
            return
        report.compression[compression_of(type_tag) or UNCOMPRESSED] += 1
        _, plus, cipher_name = type_tag.rpartition("+")
        if not plus:
            self._count_binding(cell, False)
            known = type_tag in report.plaintext or len(report.plaintext) < MAX_DISTINCT
            report.plaintext[type_tag if known else OTHER] += 1
            if len(report.plaintext_rows) < MAX_LISTED_FAILURES:
                report.plaintext_rows.append(cell.ref)
            if self._planner is not None:
                outcome = self._planner.plan(cell)
                if isinstance(outcome, Unreadable) and is_refusal(outcome.error):
                    self._refuse(cell, outcome)
            return
        group = self._group(cipher_name, data)
        group.count += 1
        group.tables[cell.ref.table] += 1
        header = StoredHeader(group.cipher, group.key_id, group.format_version)
        if self._planner is None:
            self._count_binding(cell, None if header.can_bind else _unbound_format(header))
            return
        outcome = self._planner.plan(cell)
        if isinstance(outcome, Unreadable):
            self._count_binding(cell, None if header.can_bind else _unbound_format(header))
            if is_refusal(outcome.error):
                group.refused += 1
                self._refuse(cell, outcome)
                return
            group.failed += 1
            report.add_failure(
                RowFailure(cell.ref, outcome.reason, outcome.error), outcome.error.__name__
            )
            return
        self._count_binding(cell, self._bound(cell) if header.can_bind else False)
        group.readable += 1
        if cell.ref.table == METADATA_TABLE:
            self._count_sealed_keys(cell)
        if outcome is CURRENT:
            group.current += 1

    def _count_binding(self, cell: Cell, bound: bool | None) -> None:
        """Count a value as bound (True), unbound (False) or unchecked (None)."""
        kind = BINDING_KINDS.get(cell.ref.table)
        if kind is None:
            return
        counts = self._report.binding.setdefault(kind, BindingCounts())
        if bound is None:
            counts.unchecked += 1
        elif bound:
            counts.bound += 1
        else:
            counts.unbound += 1

    def _bound(self, cell: Cell) -> bool | None:
        """Whether a readable format v2 value authenticates at its row's location.

        The planner has just opened it (at its location, or else unbound),
        so failing here at the location means it was written unbound.
        """
        location, type_tag, data = cell.location, cell.type_tag, cell.data
        if location is None or type_tag is None or data is None or self._planner is None:
            # A row that cannot name its place (an older schema) is read unbound.
            return False
        route = self._planner.read_rule.route(type_tag)
        cipher = route.cipher
        if cipher is None or not is_sealing(cipher):
            return False
        try:
            cast(SealingCipher, cipher).decrypt_at(
                route.cipher_name, data, route.inner, location.encode()
            )
        except (BindingError, UnboundValueError):
            return False
        except DecryptionError:
            return None
        return True

    def _count_sealed_keys(self, cell: Cell) -> None:
        """Count the key names of a readable sealed-metadata entry (never their values)."""
        serde, type_tag, data = self._serde, cell.type_tag, cell.data
        if serde is None or type_tag is None or data is None:
            return
        try:
            if cell.location is None:
                sealed = serde.loads_typed((type_tag, data))
            else:
                sealed = serde.loads_typed_at(
                    (type_tag, data), cell.location, migration=_UNBOUND_ENTRIES
                )
        except DecryptionError:
            return  # reported with the row's other refusals
        if not isinstance(sealed, dict):
            return
        counts = self._report.sealed_keys
        for key in sealed:
            if key != ROW_KEY and (key in counts or len(counts) < MAX_DISTINCT):
                counts[str(key)] += 1

    def _refuse(self, cell: Cell, outcome: Unreadable) -> None:
        self._report.add_refused(
            RowFailure(cell.ref, outcome.reason, outcome.error), outcome.error.__name__
        )

    def _group(self, cipher_name: str, data: bytes) -> CipherGroup:
        # A v1 blob long enough to parse is grouped by its 5 header bytes alone:
        # parse_header would only read the same bytes again, for every row.
        fast = cipher_name == format_v1.CIPHER_NAME and len(data) >= format_v1.OVERHEAD
        if fast:
            group = self._by_header.get(data[: format_v1.HEADER_SIZE])
            if group is not None:
                return group
        group = self._group_by_name(cipher_name, data)
        if fast and len(self._by_header) < MAX_DISTINCT:
            self._by_header[data[: format_v1.HEADER_SIZE]] = group
        return group

    def _group_by_name(self, cipher_name: str, data: bytes) -> CipherGroup:
        header = read_header(cipher_name, data)
        key_id, version = header.key_id, header.format_version
        groups = self._report.groups
        group = groups.get((cipher_name, key_id, version))
        if group is None and len(groups) >= MAX_DISTINCT:
            cipher_name, key_id, version = OTHER, None, None
            group = groups.get((cipher_name, key_id, version))
        if group is None:
            label = None if self._ciphers is None else self._ciphers.key_label(cipher_name, key_id)
            group = CipherGroup(cipher_name, key_id, version, label)
            groups[(cipher_name, key_id, version)] = group
        return group


def _unbound_format(header: StoredHeader) -> bool | None:
    """False (unbound) for a format known to carry no binding, ``None`` when unknown."""
    if header.format_version is not None or header.cipher == LEGACY_CIPHER_NAME:
        return False
    return None


def audit_store(
    store: Store,
    ciphers: ConfiguredCiphers | None,
    *,
    batch_size: int,
    allowed_metadata_keys: frozenset[str] = frozenset(),
    progress: Callable[[int, int], None] | None = None,
) -> AuditReport:
    """Audit every cell and JSON column of ``store``; ``ciphers=None`` skips decryption.

    ``progress(scanned, total)`` is called after every batch, when given.
    """
    planner = None
    if ciphers is not None:
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
    auditor = _Auditor(report, ciphers, planner)
    total = store.count_all() if progress is not None else 0
    scanned = 0
    for table in store.tables:
        for batch in store.iter_batches(table, batch_size):
            for cell in batch:
                auditor.add(cell)
            scanned += len(batch)
            if progress is not None:
                progress(scanned, max(total, scanned))
    with HistoryView(store) as view:
        scan = scan_json_columns(view)
    report.metadata = scan.metadata
    report.inline = scan.inline
    report.records = scan.records
    return report
