"""Bind an existing store's rows in place: `bind_postgres`, `bind_sqlite` and their `BindReport`.

A store the stock saver (or secure_serde 0.1) wrote holds values bound to
nothing: the sealed savers read it only under ``Migration(unbound=True)``.
Rewrap cannot help on its own, since it keeps each value as bound as it finds
it. This pass knows where every row lives, so it seals each unbound value
again *at its row* and seals each checkpoint record, writing what the sealed
saver's ``put`` would have written:

* each unbound blob and pending write is re-encrypted at its `Location`
  (``_bind_values``; nothing is deserialized);
* PostgreSQL: the ``None``/``str``/``int``/``float``/``bool`` channel values
  the stock saver keeps inline in the checkpoint JSON move to bound
  ``checkpoint_blobs`` rows, and each record gets the seal the sealed
  saver's ``put`` computes (``seal_stored_record``);
* SQLite: the checkpoint blob, which holds the whole checkpoint, is
  re-encrypted at its record's location, which covers the ids, the parent
  link and the plaintext metadata.

Every write is a compare-and-swap on the exact bytes read, so a row the
application changed meanwhile is left alone (counted as ``raced``; a rerun
settles it). A row that does not authenticate (tampered with, moved from
another row, refused by the strict decoder) is counted, listed by its ids
and the typed error, and never rewritten. Rows already bound are left
untouched, so a second pass writes nothing.

Metadata is not changed here: a record's seal covers its plaintext metadata
as stored. Sealing plaintext metadata keys is the resealer's job
(``reseal_postgres_metadata``), run after this pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from secure_serde._errors import ConfigurationError, DecryptionError
from secure_serde._migration import Migration
from secure_serde._serializer import EncryptedSerializer
from secure_serde.savers._bind_values import ValueRebinder

if TYPE_CHECKING:
    from secure_serde.savers._v03_postgres import PostgresSaver
    from secure_serde.savers._v03_sqlite import SqliteSaver

__all__ = ["BIND_MIGRATION", "BindReport", "Tally", "bind_postgres", "bind_sqlite"]

# What a stock or 0.1 store holds that the pass must read to bind it: values
# with no binding, and (PostgreSQL) primitives inline in the checkpoint JSON.
BIND_MIGRATION: Final = Migration(unbound=True, inline_values=True)
MAX_LISTED_REFUSALS: Final = 100
DEFAULT_BIND_BATCH: Final = 500


@dataclass(frozen=True)
class BindReport:
    """What one binding pass did (or, with ``dry_run``, would do).

    Attributes:
        checkpoints_sealed: checkpoint records sealed (PostgreSQL), or
            checkpoint blobs bound to their record (SQLite).
        blobs_bound: ``checkpoint_blobs`` values re-encrypted at their row.
        writes_bound: pending writes re-encrypted at their row.
        inline_values_moved: channel values moved from the checkpoint JSON
            into bound blob rows (PostgreSQL).
        already_bound: values and records that authenticate at their row
            already, left untouched.
        refused: rows that do not authenticate, left as they are.
        raced: rows another writer changed between read and write, left to
            that writer (run the pass again to bind them).
        refusals: the first refused rows, by table, ids and typed error;
            never their content.
        dry_run: nothing was written.
    """

    checkpoints_sealed: int = 0
    blobs_bound: int = 0
    writes_bound: int = 0
    inline_values_moved: int = 0
    already_bound: int = 0
    refused: int = 0
    raced: int = 0
    refusals: tuple[str, ...] = ()
    dry_run: bool = False

    @property
    def changed(self) -> int:
        """Rows written (or, in a dry run, to write)."""
        return self.checkpoints_sealed + self.blobs_bound + self.writes_bound

    @property
    def ok(self) -> bool:
        """True when no row was refused."""
        return self.refused == 0


@dataclass
class Tally:
    """The counts of a pass in progress (the report is frozen once it ends)."""

    checkpoints_sealed: int = 0
    blobs_bound: int = 0
    writes_bound: int = 0
    inline_values_moved: int = 0
    already_bound: int = 0
    refused: int = 0
    raced: int = 0
    refusals: list[str] = field(default_factory=list)

    def refuse(self, table: str, ids: tuple[Any, ...], exc: DecryptionError) -> None:
        self.refused += 1
        if len(self.refusals) < MAX_LISTED_REFUSALS:
            # Our error messages name ids, tags and ciphers, never content.
            self.refusals.append(f"{table} {ids!r}: {type(exc).__name__}: {exc}")

    def report(self, *, dry_run: bool) -> BindReport:
        return BindReport(
            checkpoints_sealed=self.checkpoints_sealed,
            blobs_bound=self.blobs_bound,
            writes_bound=self.writes_bound,
            inline_values_moved=self.inline_values_moved,
            already_bound=self.already_bound,
            refused=self.refused,
            raced=self.raced,
            refusals=tuple(self.refusals),
            dry_run=dry_run,
        )


def _rebinder(serde: Any, migration: Migration) -> ValueRebinder:
    if not isinstance(serde, EncryptedSerializer):
        raise ConfigurationError(
            f"binding rows in place needs a saver with an EncryptedSerializer, not"
            f" {type(serde).__name__}"
        )
    if not isinstance(migration, Migration):
        raise ConfigurationError(
            f"migration must be a secure_serde.Migration, not {type(migration).__name__}"
        )
    return ValueRebinder(serde, migration)


def _check_saver(saver: object, expected: type) -> None:
    # The sync sealed saver: its SQL and its connection are what the pass drives.
    if not isinstance(saver, expected):
        raise ConfigurationError(
            f"the binding pass takes a {expected.__module__}.{expected.__name__},"
            f" not {type(saver).__name__}"
        )


def _check_batch(batch_size: int) -> None:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ConfigurationError(f"batch_size must be a positive integer, got {batch_size!r}")


def bind_postgres(
    saver: PostgresSaver,
    *,
    migration: Migration = BIND_MIGRATION,
    batch_size: int = DEFAULT_BIND_BATCH,
    dry_run: bool = False,
) -> BindReport:
    """Bind every unbound row of a PostgreSQL checkpoint store to where it lives.

    ``saver`` is a secure_serde sync `PostgresSaver` on the store, whose
    serde reads every key the rows are under (its cipher writes). Rows are
    read under ``migration`` (default: unbound values and inline channel
    values; add ``plaintext=True`` for a store that was never encrypted),
    and sealed under the serde's primary key. Idempotent, and safe to kill
    and rerun: each checkpoint and each page of values is one transaction of
    compare-and-swap updates.
    """
    from secure_serde.savers._bind_postgres import bind_postgres_rows
    from secure_serde.savers._v03_postgres import PostgresSaver

    _check_saver(saver, PostgresSaver)
    _check_batch(batch_size)
    rebinder = _rebinder(saver.serde, migration)
    tally = Tally()
    bind_postgres_rows(saver, rebinder, tally, batch_size=batch_size, dry_run=dry_run)
    return tally.report(dry_run=dry_run)


def bind_sqlite(
    saver: SqliteSaver,
    *,
    migration: Migration = BIND_MIGRATION,
    batch_size: int = DEFAULT_BIND_BATCH,
    dry_run: bool = False,
) -> BindReport:
    """Bind every unbound row of a SQLite checkpoint store to where it lives.

    ``saver`` is a secure_serde sync `SqliteSaver` on the store; see
    `bind_postgres` for the serde and ``migration``. Each page is one
    transaction of compare-and-swap updates.
    """
    from secure_serde.savers._bind_sqlite import bind_sqlite_rows
    from secure_serde.savers._v03_sqlite import SqliteSaver

    _check_saver(saver, SqliteSaver)
    _check_batch(batch_size)
    rebinder = _rebinder(saver.serde, migration)
    tally = Tally()
    bind_sqlite_rows(saver, rebinder, tally, batch_size=batch_size, dry_run=dry_run)
    return tally.report(dry_run=dry_run)
