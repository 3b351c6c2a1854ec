"""Rows of the sealed SQLite savers: the stock schema, every value bound to its row.

The stock SQLite saver keeps a whole checkpoint (values, versions,
``versions_seen``) in one serialized blob, its metadata as plaintext JSON
beside it, and pending writes in ``writes``. Here:

* the checkpoint blob is written at ``Location.checkpoint(thread, ns, id,
  parent, canonical(metadata JSON))``, so the one AEAD tag that protects
  the checkpoint also authenticates its ids, its parent link and its
  plaintext metadata (the record);
* each write at ``Location.write(thread, ns, checkpoint id, task id, task
  path, idx, channel)``;
* the sealed-metadata envelope (on by default) at ``Location.metadata(thread,
  ns, checkpoint id)``, checked on read by `MetadataOpener` (downgrade,
  row, blind indexes) after the record, as in PostgreSQL.

The SQL is the stock saver's, statement for statement, so a database is
interchangeable with the stock one at the schema level (the rows are not:
a stock reader cannot name their locations).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.sqlite.utils import search_where

from secure_serde._binding import Location
from secure_serde._errors import (
    BindingError,
    ConfigurationError,
)
from secure_serde.savers._bound import Binder, canonical, metadata_record
from secure_serde.savers._index_sql import sqlite_search_where
from secure_serde.savers._metadata import MetadataOpener, MetadataSealer, refuse_reserved_key

__all__ = [
    "INSERT_CHECKPOINT_SQL",
    "SELECT_BY_ID_SQL",
    "SELECT_LATEST_SQL",
    "SELECT_LIST_SQL",
    "SqliteRows",
    "require_binder",
    "writes_sql",
]

# Literal statements (the stock ones), so no SQL is ever assembled from values.
SELECT_BY_ID_SQL: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,"
    " metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
SELECT_LATEST_SQL: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,"
    " metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
    " ORDER BY checkpoint_id DESC LIMIT 1"
)
# {where} is langgraph's own search_where() output: placeholders only, values bound.
SELECT_LIST_SQL: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,"
    " metadata FROM checkpoints {where} ORDER BY checkpoint_id DESC"
)
INSERT_CHECKPOINT_SQL: Final = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id,"
    " parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_WRITE_COLUMNS: Final = (
    "INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel,"
    " type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def writes_sql(writes: Sequence[tuple[str, Any]]) -> str:
    """The stock statement: special writes (errors, interrupts) replace, others are kept."""
    verb = (
        "INSERT OR REPLACE" if all(w[0] in WRITES_IDX_MAP for w in writes) else "INSERT OR IGNORE"
    )
    return f"{verb} {_WRITE_COLUMNS}"


def _metadata_record(stored: bytes | None) -> Any:
    if stored is None:
        return {}
    try:
        return json.loads(stored)
    except ValueError:
        record: Any = None
    if record is None:
        raise BindingError("checkpoint metadata is not JSON")
    return record


class SqliteRows:
    """Turns puts into rows and rows into tuples, bound; shared by the sync and async savers."""

    __slots__ = ("_binder", "_opener", "_sealer")

    def __init__(self, binder: Binder, sealer: MetadataSealer | None) -> None:
        self._binder = binder
        self._sealer = sealer
        self._opener = MetadataOpener(sealer, binder.migration)

    @property
    def binder(self) -> Binder:
        return self._binder

    @staticmethod
    def metadata_bytes(metadata: Any) -> bytes:
        """The ``metadata`` column for ``metadata``, encoded as the stock ``put`` encodes it."""
        return json.dumps(metadata, ensure_ascii=False).encode("utf-8", "ignore")

    def search_where(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
    ) -> tuple[str, list[Any]]:
        """The stock ``search_where``; with sealing, plaintext terms as it builds them
        and indexed ones matched on their blind-index tokens.

        Raises:
            ConfigurationError: the filter names a sealed key with no index.
        """
        if self._sealer is None:
            where, params = search_where(config, filter, before)
            return where, list(params)
        # SQLite paths nest: "parents.x" filters inside a plaintext key.
        plan = self._sealer.plan_filter(filter, nested_paths=True)
        return sqlite_search_where(config, plan, before)

    def checkpoint_row(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> tuple[tuple[Any, ...], RunnableConfig]:
        """The ``INSERT_CHECKPOINT_SQL`` parameters and the config ``put`` returns."""
        refuse_reserved_key(metadata)
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = configurable["checkpoint_ns"]
        parent_id = configurable.get("checkpoint_id")
        if self._sealer is not None:
            # An entry on every row, even with nothing to seal, so a deleted
            # one is noticed; the record below then covers the index tokens.
            at = Location.metadata(thread_id, checkpoint_ns, checkpoint["id"])
            config, metadata = self._sealer.seal(
                self._binder.at(at), config, metadata, checkpoint["id"]
            )
        stored_metadata = self.metadata_bytes(get_checkpoint_metadata(config, metadata))
        location = Location.checkpoint(
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            parent_id,
            canonical(metadata_record(json.loads(stored_metadata))),
        )
        type_tag, data = self._binder.dump(checkpoint, location)
        params = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            parent_id,
            type_tag,
            data,
            stored_metadata,
        )
        next_config: RunnableConfig = {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        return params, next_config

    def write_rows(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> list[tuple[Any, ...]]:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = str(configurable["checkpoint_ns"])
        checkpoint_id = str(configurable["checkpoint_id"])
        rows: list[tuple[Any, ...]] = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            location = Location.write(
                thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel
            )
            rows.append(
                (
                    thread_id,
                    checkpoint_ns,
                    checkpoint_id,
                    task_id,
                    task_path,
                    idx,
                    channel,
                    *self._binder.dump(value, location),
                )
            )
        return rows

    def load(self, row: Sequence[Any], writes: Iterable[Sequence[Any]]) -> CheckpointTuple:
        """A tuple from a ``SELECT_*`` row and its ``pending_writes_sql`` rows."""
        thread_id, checkpoint_ns, checkpoint_id, parent_id, type_tag, blob, stored_metadata = row
        metadata = _metadata_record(stored_metadata)
        location = Location.checkpoint(
            thread_id, checkpoint_ns, checkpoint_id, parent_id, canonical(metadata_record(metadata))
        )
        checkpoint = self._binder.load((type_tag, blob), location)
        if not isinstance(checkpoint, dict):
            raise BindingError("checkpoint blob does not hold a checkpoint")
        pending: list[PendingWrite] = []
        for task_id, channel, w_type, w_value, task_path, idx in sorted(
            writes, key=lambda w: writes_sort_key(w[4], w[0], w[5])
        ):
            at = Location.write(
                thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, int(idx), channel
            )
            pending.append((task_id, channel, self._binder.load((w_type, w_value), at)))
        # The record (above) first; then the metadata: downgrade, the entry's
        # row, the blind indexes, the entry opened at its own location.
        metadata = self._opener.open(
            self._binder.at(Location.metadata(thread_id, checkpoint_ns, checkpoint_id)),
            cast(CheckpointMetadata, metadata),
            (thread_id, checkpoint_ns, checkpoint_id),
        )
        ids = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        return CheckpointTuple(
            {"configurable": {**ids, "checkpoint_id": checkpoint_id}},
            cast(Checkpoint, checkpoint),
            metadata,
            {"configurable": {**ids, "checkpoint_id": parent_id}} if parent_id else None,
            pending,
        )


def require_binder(binder: Binder | None) -> Binder:
    if binder is None:
        raise ConfigurationError(
            "the sealed SQLite savers need an EncryptedSerializer whose cipher binds values"
            " to their rows (any cipher from secure_serde.ciphers)"
        )
    return binder
