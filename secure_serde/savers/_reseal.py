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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata
from langgraph.checkpoint.serde.base import SerializerProtocol

from secure_serde._errors import ConfigurationError, DecryptionError
from secure_serde.savers._blind_index import INDEX_METADATA_KEY
from secure_serde.savers._metadata import (
    ROW_KEY,
    SEALED_METADATA_KEY,
    MetadataOpener,
    MetadataSealer,
    Row,
    _open_entry,
)

__all__ = ["ResealReport", "plan_reseal", "reseal_postgres_metadata"]


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


def plan_reseal(
    serde: SerializerProtocol,
    sealer: MetadataSealer,
    opener: MetadataOpener,
    stored: CheckpointMetadata,
    row: Row,
) -> CheckpointMetadata | None:
    """The metadata to store for ``row`` now, or ``None`` if what is stored is current.

    Raises:
        DecryptionError: the row fails a read check (see `MetadataOpener.open`).
    """
    opened = opener.open(serde, stored, row)
    if _is_current(sealer, stored, opened) and _names_row(serde, stored):
        return None
    config: RunnableConfig = {"configurable": {"thread_id": row[0], "checkpoint_ns": row[1]}}
    _, metadata = sealer.seal(serde, config, opened, row[2])
    return metadata


def _names_row(serde: SerializerProtocol, stored: Mapping[str, Any]) -> bool:
    # open() has checked a present row binding already; this only tells 0.1.0 entries apart.
    sealed = _open_entry(serde, stored)
    return sealed is not None and ROW_KEY in sealed


_SELECT = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, metadata FROM checkpoints"
    " WHERE (thread_id, checkpoint_ns, checkpoint_id) > (%s, %s, %s)"
    " ORDER BY thread_id, checkpoint_ns, checkpoint_id LIMIT %s"
)
_UPDATE = (
    "UPDATE checkpoints SET metadata = %s WHERE thread_id = %s AND checkpoint_ns = %s"
    " AND checkpoint_id = %s AND metadata = %s"
)


def reseal_postgres_metadata(
    saver: Any, *, batch_size: int = 500, dry_run: bool = False
) -> ResealReport:
    """Run the pass over every checkpoint of a sealed PostgreSQL saver's database.

    ``saver`` is a secure_serde sync `PostgresSaver` with sealing on, whose
    serde reads the old and the new keys and whose migration admits the rows
    to bring up to date.
    """
    from psycopg.types.json import Jsonb

    sealer: MetadataSealer | None = saver.metadata_sealer
    if sealer is None:
        raise ConfigurationError("resealing metadata needs a saver with seal_metadata=True")
    if batch_size < 1:
        raise ConfigurationError("batch_size must be positive")
    opener: MetadataOpener = saver._metadata_opener
    report = ResealReport()
    last: Sequence[str] = ("", "", "")
    while True:
        with saver._cursor() as cur:
            cur.execute(_SELECT, (*last, batch_size))
            rows: Iterable[Any] = cur.fetchall()
        rows = list(rows)
        if not rows:
            return report
        for r in rows:
            row: Row = (r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"])
            report.scanned += 1
            try:
                new = plan_reseal(saver.serde, sealer, opener, r["metadata"], row)
            except DecryptionError as exc:
                report.failed.append((row, type(exc).__name__))
                continue
            if new is None:
                report.current += 1
                continue
            if dry_run:
                report.rewritten += 1
                continue
            with saver._cursor() as cur:
                cur.execute(_UPDATE, (Jsonb(new), *row, Jsonb(r["metadata"])))
                if cur.rowcount == 1:
                    report.rewritten += 1
                else:
                    report.raced += 1
        last = (rows[-1]["thread_id"], rows[-1]["checkpoint_ns"], rows[-1]["checkpoint_id"])
