"""Bring stored metadata up to a sealed saver's policy: seal, bind, re-index.

Rewrap's cell pass re-encrypts the sealed entry under the primary key, but
it sees one ciphertext, not the metadata: it cannot seal keys stored in
plaintext, name the row in a 0.1.0 entry, or recompute blind-index tokens
under a promoted key. This pass does, row by row:

1. read the row as the saver reads it (`MetadataOpener.open`), so a row
   that fails a check is reported, never rewritten; reading plaintext or
   0.1.0 rows needs the saver's ``Migration(plaintext_metadata=True,
   unbound=True)``;
2. skip it if it is already current: a sealed entry that names its row and
   every index token under the primary index key, for exactly the indexed
   keys present;
3. otherwise seal it afresh with `MetadataSealer.seal` and write it with a
   compare-and-swap on the exact JSON read, so a row the application
   rewrote meanwhile is left alone (the next run settles it).

The pass is idempotent and can be killed at any point.

`reseal_postgres_metadata` and `reseal_sqlite_metadata` run it over each
database; only reading rows and writing them back differ. On SQLite the
checkpoint blob is the record's seal (its location covers the plaintext
metadata), so a row whose plaintext metadata changes has its blob moved to
the new location, bytes for bytes, never deserialized
(`SqliteRows.open_record`). SQLite's rewrap cell pass does not see the sealed
entry, so there this pass also re-seals an entry still under an older key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata
from langgraph.checkpoint.serde.base import SerializerProtocol

from secure_serde._binding import Location
from secure_serde._errors import ConfigurationError, DecryptionError
from secure_serde._langgraph import postgres_cursor
from secure_serde._serializer import EncryptedSerializer
from secure_serde.ciphers._headers import current_test
from secure_serde.savers._blind_index import INDEX_METADATA_KEY
from secure_serde.savers._bound import RECORD_KEY, Binder, metadata_record
from secure_serde.savers._metadata import (
    ROW_KEY,
    SEALED_METADATA_KEY,
    MetadataOpener,
    MetadataSealer,
    Row,
    _open_entry,
)
from secure_serde.stores import parse_envelope

__all__ = [
    "ResealReport",
    "plan_bound_reseal",
    "plan_reseal",
    "reseal_postgres_metadata",
    "reseal_sqlite_metadata",
]


@dataclass
class ResealReport:
    """What one pass did: rows scanned, rewritten, already current, raced, and refused."""

    scanned: int = 0
    rewritten: int = 0
    current: int = 0
    raced: int = 0
    failed: list[tuple[Row, str]] = field(default_factory=list)


def _is_current(
    sealer: MetadataSealer, stored: Mapping[str, Any], opened: Mapping[str, Any]
) -> bool:
    if SEALED_METADATA_KEY not in stored or sealer.exposed(stored):
        return False
    index = stored.get(INDEX_METADATA_KEY) or {}
    wanted = {k for k in sealer.indexed if k in opened}
    if set(index) != wanted:
        return False
    keys = sealer.index_keys
    return keys is None or all(str(t).startswith(keys.primary_id + ":") for t in index.values())


def plan_reseal(  # noqa: PLR0913 - the row, its policy and readers, and the entry test
    serde: SerializerProtocol,
    sealer: MetadataSealer,
    opener: MetadataOpener,
    stored: CheckpointMetadata,
    row: Row,
    entry_current: Callable[[tuple[str, bytes]], bool] | None = None,
) -> CheckpointMetadata | None:
    """The metadata to store for ``row`` now, or ``None`` if what is stored is current.

    ``entry_current``, if given, also tells whether the sealed entry's
    ciphertext is under the primary key (where no rewrap pass re-seals it).

    Raises:
        DecryptionError: the row fails a read check (see `MetadataOpener.open`).
    """
    opened = opener.open(serde, stored, row)
    if (
        _is_current(sealer, stored, opened)
        and _names_row(serde, stored)
        and (entry_current is None or _entry_current(entry_current, stored))
    ):
        return None
    config: RunnableConfig = {"configurable": {"thread_id": row[0], "checkpoint_ns": row[1]}}
    _, metadata = sealer.seal(serde, config, opened, row[2])
    return metadata


def _entry_current(test: Callable[[tuple[str, bytes]], bool], stored: Mapping[str, Any]) -> bool:
    parsed = parse_envelope(stored.get(SEALED_METADATA_KEY))
    return parsed is not None and test(parsed)


def _names_row(serde: SerializerProtocol, stored: Mapping[str, Any]) -> bool:
    # open() has checked a present row binding already; this only tells 0.1.0 entries apart.
    sealed = _open_entry(serde, stored)
    return sealed is not None and ROW_KEY in sealed


_SELECT = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata"
    " FROM checkpoints WHERE (thread_id, checkpoint_ns, checkpoint_id) > (%s, %s, %s)"
    " ORDER BY thread_id, checkpoint_ns, checkpoint_id LIMIT %s"
)
_UPDATE = (
    "UPDATE checkpoints SET metadata = %s WHERE thread_id = %s AND checkpoint_ns = %s"
    " AND checkpoint_id = %s AND metadata = %s"
)
# A bound store seals each record over its plaintext metadata: both change together.
_UPDATE_SEALED = (
    "UPDATE checkpoints SET metadata = %s, checkpoint = %s WHERE thread_id = %s"
    " AND checkpoint_ns = %s AND checkpoint_id = %s AND metadata = %s AND checkpoint = %s"
)


def _checked_sealer(saver: Any, batch_size: int) -> MetadataSealer:
    sealer: MetadataSealer | None = saver.metadata_sealer
    if sealer is None:
        raise ConfigurationError("resealing metadata needs a saver with seal_metadata=True")
    if batch_size < 1:
        raise ConfigurationError("batch_size must be positive")
    return sealer


def _record(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in checkpoint.items() if k != RECORD_KEY}


def _sealed_parent(r: Mapping[str, Any]) -> str | None:
    # As Binder.check_record: a pruned row (parent nulled) keeps its sealed parent.
    parent = r["parent_checkpoint_id"]
    if parent is None:
        seal = r["checkpoint"].get(RECORD_KEY)
        sealed = seal.get("parent") if isinstance(seal, Mapping) else None
        parent = sealed if isinstance(sealed, str) else None
    return parent if isinstance(parent, str) else None


def plan_bound_reseal(
    binder: Binder,
    sealer: MetadataSealer,
    opener: MetadataOpener,
    r: Mapping[str, Any],
) -> tuple[CheckpointMetadata, dict[str, Any]] | None:
    """`plan_reseal` on a bound store: the record's seal checked first, then re-made.

    Returns the metadata and checkpoint JSON to store, or ``None`` if current.
    A record stored without a seal (read under ``Migration(unbound=True)``)
    is left without one: this pass does not vouch for what nothing authenticated.

    Raises:
        DecryptionError: the record or the metadata fails a read check.
    """
    row: Row = (r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"])
    checkpoint: Mapping[str, Any] = r["checkpoint"]
    record = _record(checkpoint)
    seal = checkpoint.get(RECORD_KEY)
    binder.check_record(
        *row, r["parent_checkpoint_id"], [record, metadata_record(r["metadata"])], seal
    )
    at = binder.at(Location.metadata(*row))
    new = plan_reseal(at, sealer, opener, r["metadata"], row)
    if new is None:
        return None
    if seal is None:
        return new, dict(checkpoint)
    resealed = binder.seal_record(*row, _sealed_parent(r), [record, metadata_record(new)])
    return new, {**record, RECORD_KEY: resealed}


def _plan_row(
    saver: Any, sealer: MetadataSealer, opener: MetadataOpener, r: Mapping[str, Any]
) -> tuple[CheckpointMetadata, dict[str, Any] | None] | None:
    binder: Binder | None = saver._bound()
    if binder is not None:
        return plan_bound_reseal(binder, sealer, opener, r)
    row: Row = (r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"])
    new = plan_reseal(saver.serde, sealer, opener, r["metadata"], row)
    return None if new is None else (new, None)


def reseal_postgres_metadata(
    saver: Any, *, batch_size: int = 500, dry_run: bool = False
) -> ResealReport:
    """Run the pass over every checkpoint of a sealed PostgreSQL saver's database.

    ``saver`` is a secure_serde sync `PostgresSaver` with sealing on, whose
    serde reads the old and the new keys and whose migration admits the rows
    to bring up to date. On a bound store (a serde that binds values to
    rows) each record's seal is checked before, and re-made after, its
    metadata is rewritten.
    """
    from psycopg.types.json import Jsonb

    sealer = _checked_sealer(saver, batch_size)
    opener: MetadataOpener = saver._metadata_opener
    report = ResealReport()
    last: Sequence[str] = ("", "", "")
    while True:
        with postgres_cursor(saver) as cur:
            cur.execute(_SELECT, (*last, batch_size))
            rows: Iterable[Any] = cur.fetchall()
        rows = list(rows)
        if not rows:
            return report
        for r in rows:
            row: Row = (r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"])
            report.scanned += 1
            try:
                planned = _plan_row(saver, sealer, opener, r)
            except DecryptionError as exc:
                report.failed.append((row, type(exc).__name__))
                continue
            if planned is None:
                report.current += 1
                continue
            if dry_run:
                report.rewritten += 1
                continue
            new, checkpoint = planned
            with postgres_cursor(saver) as cur:
                if checkpoint is None:
                    cur.execute(_UPDATE, (Jsonb(new), *row, Jsonb(r["metadata"])))
                else:
                    params = (Jsonb(new), Jsonb(checkpoint), *row)
                    cur.execute(
                        _UPDATE_SEALED, (*params, Jsonb(r["metadata"]), Jsonb(r["checkpoint"]))
                    )
                if cur.rowcount == 1:
                    report.rewritten += 1
                else:
                    report.raced += 1
        last = (rows[-1]["thread_id"], rows[-1]["checkpoint_ns"], rows[-1]["checkpoint_id"])


# SQLite: the same pass. The metadata column holds JSON bytes, the blob the
# record's seal; both are compared as bytes (CAST) so a row rewritten
# meanwhile, whatever its storage class, is left alone.
_SQLITE_SELECT = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,"
    " metadata FROM checkpoints WHERE (thread_id, checkpoint_ns, checkpoint_id) > (?, ?, ?)"
    " ORDER BY thread_id, checkpoint_ns, checkpoint_id LIMIT ?"
)
_SQLITE_UPDATE = (
    "UPDATE checkpoints SET metadata = ?, type = ?, checkpoint = ? WHERE thread_id = ?"
    " AND checkpoint_ns = ? AND checkpoint_id = ? AND CAST(metadata AS BLOB) IS ?"
    " AND type IS ? AND CAST(checkpoint AS BLOB) IS ?"
)


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode("utf-8") if isinstance(value, str) else bytes(value)


def _entry_test(serde: EncryptedSerializer) -> Callable[[tuple[str, bytes]], bool]:
    """Whether a sealed entry is under the primary key, as rewrap decides it for a cell."""
    is_current, _, _ = current_test(serde.cipher)

    def test(parsed: tuple[str, bytes]) -> bool:
        _, plus, cipher_name = parsed[0].rpartition("+")
        return bool(plus) and is_current(cipher_name, parsed[1])

    return test


def _plan_sqlite_row(
    saver: Any,
    sealer: MetadataSealer,
    test: Callable[[tuple[str, bytes]], bool],
    r: Sequence[Any],
) -> tuple[bytes, str, bytes] | None:
    """The row's new ``(metadata, type, checkpoint)`` columns, or ``None`` if current."""
    rows = saver.rows
    thread_id, checkpoint_ns, checkpoint_id, parent_id, type_tag, blob, raw = r
    row: Row = (thread_id, checkpoint_ns, checkpoint_id)
    stored = rows.metadata_of(raw)
    # The record first, as the saver reads it: the blob authenticates its
    # row and plaintext metadata, then the metadata checks run.
    move = rows.open_record(row, parent_id, (type_tag, _as_bytes(blob)), stored)
    at = rows.binder.at(Location.metadata(*row))
    new = plan_reseal(at, sealer, rows.opener, stored, row, test)
    if new is None:
        return None
    # Re-encrypted under the primary even where its location stays the same.
    return rows.metadata_bytes(new), *move(new)


def reseal_sqlite_metadata(
    saver: Any, *, batch_size: int = 500, dry_run: bool = False
) -> ResealReport:
    """Run the pass over every checkpoint of a sealed SQLite saver's database.

    ``saver`` is a secure_serde sync `SqliteSaver` with sealing on, whose
    serde reads the old and the new keys and whose migration admits the
    rows to bring up to date (``Migration(plaintext_metadata=True)`` for
    rows written with ``seal_metadata=False``, ``unbound=True`` for rows
    the stock saver wrote; their blobs stay unbound). Each row's record is
    authenticated (its checkpoint blob opened at its row) before its
    metadata is rewritten, and the blob is moved to the location that
    covers the new metadata.
    """
    sealer = _checked_sealer(saver, batch_size)
    test = _entry_test(saver.rows.binder.serde)
    report = ResealReport()
    last: Sequence[str] = ("", "", "")
    while True:
        with saver.cursor(transaction=False) as cur:
            rows = cur.execute(_SQLITE_SELECT, (*last, batch_size)).fetchall()
        if not rows:
            return report
        for r in rows:
            row: Row = (r[0], r[1], r[2])
            report.scanned += 1
            try:
                planned = _plan_sqlite_row(saver, sealer, test, r)
            except DecryptionError as exc:
                report.failed.append((row, type(exc).__name__))
                continue
            if planned is None:
                report.current += 1
            elif dry_run:
                report.rewritten += 1
            else:
                with saver.cursor() as cur:
                    cur.execute(
                        _SQLITE_UPDATE, (*planned, *row, _as_bytes(r[6]), r[4], _as_bytes(r[5]))
                    )
                    swapped = cur.rowcount == 1
                if swapped:
                    report.rewritten += 1
                else:
                    report.raced += 1
        last = (rows[-1][0], rows[-1][1], rows[-1][2])
