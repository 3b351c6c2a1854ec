"""``copy_thread`` for the sealed savers: every row re-encrypted for the thread it is copied to.

A sealed saver binds each stored value to its row, thread id included
(``_bound``), so the rows of thread A copied byte for byte under thread B
fail to read there (`BindingError`): the property that stops one tenant's
value being planted into another's thread. A fork the application asks for
goes through `ThreadCopier` instead, which for each source row

* authenticates it at its own row, as a read would (blobs, writes, the
  checkpoint record, the sealed metadata entry with its row and blind-index
  checks), so a tampered source aborts the copy with the typed error;
* writes the same content bound to the target row: a value's inner bytes
  are decrypted and encrypted again under the same inner type tag, never
  deserialized (`ValueRebinder.move`, the function rewrap binds rows with);
  the record is sealed again for the target thread.

What is deliberately *not* re-encrypted: the blind-index tokens, which are
HMACs of a key's name and value only (``_blind_index``), so they hold for
any thread; the plaintext metadata keys, copied as stored. The one value
opened as data is the sealed metadata entry, because it names its row
(``ROW_KEY``) inside the ciphertext; it is decoded as every read decodes it,
the row is replaced, and it is sealed at the target's ``Location.metadata``.

Rows written unbound (a stock saver, secure_serde 0.1) are copied bound if
the saver's ``migration`` reads them, and refused (`UnboundValueError`)
otherwise, as reading them would be. The SQL that reads and writes the rows,
in one transaction per copy, is in ``_copy_thread_sql``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from secure_serde._binding import Location
from secure_serde._errors import ConfigurationError
from secure_serde.savers._bind_record import BlobInsert, BlobKey, PlannedCheckpoint, plan_checkpoint
from secure_serde.savers._bind_values import ValueRebinder
from secure_serde.savers._bound import RECORD_KEY, Binder, canonical, metadata_record
from secure_serde.savers._metadata import ROW_KEY, SEALED_METADATA_KEY, MetadataOpener, _open_entry
from secure_serde.savers._postgres_bound import seal_stored_record
from secure_serde.savers._sqlite_bound import SqliteRows
from secure_serde.stores import envelope

__all__ = ["ThreadCopier", "require_copy_binder"]

_EMPTY: Final = "empty"


def require_copy_binder(binder: Binder | None, source: str, target: str) -> Binder:
    """The saver's binder, once the arguments make sense for a copy.

    Raises:
        ConfigurationError: the serde does not bind values (nothing to
            re-encrypt for: use the stock saver's tools), or source and
            target are the same thread.
    """
    if binder is None:
        raise ConfigurationError(
            "copy_thread on a sealed saver needs an EncryptedSerializer whose cipher binds"
            " values to their rows (any cipher from secure_serde.ciphers)"
        )
    if str(source) == str(target):
        raise ConfigurationError("copy_thread needs a target thread other than the source")
    return binder


@dataclass(frozen=True)
class ThreadCopier:
    """Re-encrypts the rows of thread ``source`` for thread ``target``, one row at a time.

    ``opener`` is the saver's own metadata opener, so a copied row passes
    exactly the checks a read of it passes.
    """

    binder: Binder
    opener: MetadataOpener
    source: str
    target: str
    rebinder: ValueRebinder = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # The saver's own migration: a copy reads what a read of the source would.
        object.__setattr__(
            self, "rebinder", ValueRebinder(self.binder.serde, self.binder.migration)
        )

    def metadata(self, stored: Any, checkpoint_ns: str, checkpoint_id: str) -> Any:
        """The metadata JSON for the target row: as stored, its sealed entry re-sealed there.

        Raises:
            DecryptionError: a subclass, for any check a read of the row fails.
        """
        row = (self.source, checkpoint_ns, checkpoint_id)
        at_source = self.binder.at(Location.metadata(*row))
        # Every read check first (downgrade, the entry's row, each index token
        # against the value it claims): a row the saver would refuse is not copied.
        self.opener.open(at_source, stored, row)
        sealed = _open_entry(at_source, stored)
        if sealed is None:
            return stored
        # A 0.1.0 entry (no row, admitted above only under Migration.unbound)
        # gets one too: the copy is bound, like everything else written.
        sealed[ROW_KEY] = [self.target, checkpoint_ns, checkpoint_id]
        at_target = Location.metadata(self.target, checkpoint_ns, checkpoint_id)
        type_tag, data = self.binder.dump(sealed, at_target)
        return {**stored, SEALED_METADATA_KEY: envelope(type_tag, data)}

    def blob(
        self, checkpoint_ns: str, channel: str, version: str, type_tag: str, data: bytes | None
    ) -> tuple[str, bytes | None]:
        """A ``checkpoint_blobs`` value for the target thread (``empty`` rows hold none)."""
        if type_tag == _EMPTY or data is None:
            return type_tag, data
        moved = self.rebinder.move(
            type_tag,
            data,
            Location.blob(self.source, checkpoint_ns, channel, version),
            Location.blob(self.target, checkpoint_ns, channel, version),
        )
        return moved.type_tag, moved.data

    def write(  # noqa: PLR0913 - a write row is named by its key columns
        self,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        idx: int,
        channel: str,
        value: tuple[str, bytes],
    ) -> tuple[str, bytes]:
        """A pending write for the target thread."""
        ids = (checkpoint_ns, checkpoint_id, task_id, task_path, int(idx), channel)
        moved = self.rebinder.move(
            value[0], value[1], Location.write(self.source, *ids), Location.write(self.target, *ids)
        )
        return moved.type_tag, moved.data

    def postgres_record(
        self,
        row: Mapping[str, Any],
        metadata: Any,
        blobs: Mapping[BlobKey, tuple[str, bytes | None]],
        pending: dict[BlobKey, tuple[Any, BlobInsert]],
    ) -> PlannedCheckpoint:
        """A PostgreSQL ``checkpoint`` JSON for the target, its record sealed there.

        ``metadata`` is the target row's (from `metadata`), which the seal
        covers; ``blobs`` the target's blob rows (already moved), for a
        stock record whose inline values move into blobs as rewrap moves
        them (``_bind_record``); ``pending`` collects those inserts.

        Raises:
            BindingError: the record does not authenticate at its row.
            UnboundValueError: an unsealed record, outside ``Migration.unbound``.
        """
        stored: Mapping[str, Any] = row["checkpoint"]
        seal = stored.get(RECORD_KEY)
        checkpoint_ns, checkpoint_id = row["checkpoint_ns"], row["checkpoint_id"]
        parent_id = row["parent_checkpoint_id"]
        at_target = {**row, "thread_id": self.target, "metadata": metadata}
        if seal is None:
            # A stock record: sealed for the target as rewrap seals one in place
            # (it raises UnboundValueError outside Migration.unbound).
            planned = plan_checkpoint(self.binder, self.binder.migration, at_target, blobs, pending)
            if planned is None:  # only a sealed record plans to nothing
                raise ConfigurationError("an unsealed record planned no seal")
            return planned
        record = {k: v for k, v in stored.items() if k != RECORD_KEY}
        self.binder.check_record(
            self.source,
            checkpoint_ns,
            checkpoint_id,
            parent_id,
            [record, metadata_record(row["metadata"])],
            seal,
        )
        new_seal = seal_stored_record(
            self.binder, self.target, checkpoint_ns, checkpoint_id, parent_id, record, metadata
        )
        return PlannedCheckpoint(at_target, {**record, RECORD_KEY: new_seal}, (), 0)

    def sqlite_checkpoint(  # noqa: PLR0913 - a checkpoint row is its ids, parent, blob and metadata
        self,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        value: tuple[str, bytes],
        source_metadata: bytes | None,
        target_metadata: bytes | None,
    ) -> tuple[str, bytes]:
        """A SQLite checkpoint blob for the target: its record is its location, so it moves."""
        ids = (checkpoint_ns, checkpoint_id, parent_id)
        moved = self.rebinder.move(
            value[0],
            value[1],
            Location.checkpoint(self.source, *ids, _record_of(source_metadata)),
            Location.checkpoint(self.target, *ids, _record_of(target_metadata)),
        )
        return moved.type_tag, moved.data


def _record_of(stored: bytes | None) -> bytes:
    # As SqliteRows.load reads the column (NULL is {}).
    return canonical(metadata_record(SqliteRows.metadata_of(stored)))
