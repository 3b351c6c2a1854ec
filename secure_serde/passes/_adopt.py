"""Adoption as a planner: which checkpoints of an older store ``adopt`` copies, and how.

The units are a store's checkpoints as the stores layer lists them
(`secure_serde.stores.CheckpointTags`; nothing is decrypted), oldest first per
namespace. `AdoptPlanner.plan` classifies each one and `SaverApplier` copies
what it takes (secure_serde/savers/_adopt.py has the rules and the why of
both). Rows it cannot vouch for are listed:
refused ones as failures, accepted ones (``accept_unvouched``) as accepted
rows, each with its reason as ``kind`` (`Unvouched.reason`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from secure_serde._engine import Planned, Skip
from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde._report import Tally
from secure_serde._rows import (
    LEGACY,
    MISPLACED,
    PARENT_REFUSED,
    PLAINTEXT,
    UNAUTHENTICATED,
    WHY,
    CheckpointRow,
    RowFailure,
    RowRef,
)
from secure_serde.sealing import SealedSaver, new_versions_of
from secure_serde.stores import (
    CheckpointTags,
    HistoryView,
    Store,
    V03Reader,
    checkpoint_tags,
    open_store,
)

__all__ = ["AdoptPlanner", "Copy", "SaverApplier", "checkpoint_config", "stored_checkpoints"]

Key = tuple[str, str, str]
U = TypeVar("U")


@dataclass(frozen=True)
class Copy:
    """One checkpoint to put: the config it goes under (its parent's), what was read, its writes."""

    config: RunnableConfig
    read: CheckpointTuple
    writes: Sequence[tuple[str, str, Any]]


def _tag_reason(type_tag: str | None) -> str | None:
    if type_tag is None or "+" not in type_tag:
        return PLAINTEXT  # kept inline (PostgreSQL's JSON) or stored without a cipher
    if type_tag.endswith("+aes"):
        return LEGACY
    return None


def stored_checkpoints(
    source: BaseCheckpointSaver[Any], store: str | os.PathLike[str] | Store | None
) -> list[CheckpointTags]:
    """The type tags of every checkpoint of the source's store, from the stores layer."""
    if isinstance(source, SealedSaver):
        raise ConfigurationError("adopt copies an unsealed store; its source is a SealedSaver")
    if store is None and isinstance(source, V03Reader):
        return checkpoint_tags(source.view)
    if store is None:
        store = _sqlite_file(source)
    # A Store passed in stays open: only one opened here is closed.
    kept = nullcontext(store) if isinstance(store, Store) else open_store(store)
    with kept as opened, HistoryView(opened) as view:
        return checkpoint_tags(view)


def _sqlite_file(source: BaseCheckpointSaver[Any]) -> str:
    conn = getattr(source, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        for _, name, path in conn.execute("PRAGMA database_list"):
            if name == "main" and path:
                return str(path)
    raise ConfigurationError(
        f"adopt reads the rows of {type(source).__name__}'s database to classify them:"
        " pass store= (its SQLite path or postgresql:// URL), or read a 0.3 store with"
        " secure_serde.stores.V03Reader"
    )


def checkpoint_config(thread_id: str, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    config: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        config["checkpoint_id"] = checkpoint_id
    return {"configurable": config}


def _read(saver: BaseCheckpointSaver[Any] | None, config: RunnableConfig) -> CheckpointTuple | None:
    if saver is None:
        return None
    try:
        return saver.get_tuple(config)
    except SecureSerdeError:
        return None


class AdoptPlanner:
    """Classifies each checkpoint: copy it (with which writes), or refuse it and say why.

    A refused checkpoint's descendants are refused too (their history would
    not be complete), so units must come oldest first per namespace, as
    `checkpoint_tags` lists them. Counts the threads and writes it copies.
    """

    def __init__(
        self,
        source: BaseCheckpointSaver[Any],
        lenient: BaseCheckpointSaver[Any] | None,
        *,
        accept: bool,
    ) -> None:
        self._source = source
        self._lenient = lenient
        self._accept = accept
        self._refused: set[Key] = set()
        self._seq = 0
        self.threads: set[str] = set()
        self.writes = 0

    def ref(self, tags: CheckpointTags) -> CheckpointRow:
        return CheckpointRow.at(tags.thread_id, tags.checkpoint_ns, tags.checkpoint_id)

    def _row(self, key: Key, row: str, reason: str) -> RowFailure:
        self._seq += 1
        return RowFailure(CheckpointRow.at(*key, row, self._seq), WHY[reason], kind=reason)

    def _refuse(self, key: Key, rows: list[RowFailure]) -> Skip:
        self._refused.add(key)
        return Skip("refused", tuple(rows))

    def plan(self, tags: CheckpointTags) -> Skip | Planned:
        key = (tags.thread_id, tags.checkpoint_ns, tags.checkpoint_id)
        if tags.parent_id is not None and (key[0], key[1], tags.parent_id) in self._refused:
            return self._refuse(key, [self._row(key, "checkpoint", PARENT_REFUSED)])
        value_reasons = {row: r for row, tag in tags.values if (r := _tag_reason(tag))}
        write_reasons = {i: r for i, w in enumerate(tags.writes) if (r := _tag_reason(w[2]))}
        config = checkpoint_config(*key)
        read = _read(self._source, config)
        if read is None:
            read = _read(self._lenient, config)
            if read is None and self._lenient is not None:
                return self._refuse(key, [self._row(key, "checkpoint", MISPLACED)])
            if not value_reasons and not write_reasons:
                value_reasons["checkpoint"] = UNAUTHENTICATED
        take = read is not None and (not value_reasons or self._accept)
        values = [self._row(key, row, reason) for row, reason in value_reasons.items()]
        writes = [
            self._row(key, f"write {tags.writes[i][0]} {tags.writes[i][1]}", reason)
            for i, reason in write_reasons.items()
        ]
        if read is None or not take:
            return self._refuse(key, values + writes)
        # Every saver returns a checkpoint's writes in writes_sort_key order, the
        # order of tags.writes, so positions match.
        kept = [
            w
            for i, w in enumerate(read.pending_writes or ())
            if self._accept or i not in write_reasons
        ]
        self.threads.add(tags.thread_id)
        self.writes += len(kept)
        accepted = values + (writes if self._accept else [])
        failed = () if self._accept else tuple(writes)
        parent = checkpoint_config(key[0], key[1], tags.parent_id)
        return Planned(Copy(parent, read, kept), failed=failed, accepted=tuple(accepted))

    def count_into(self, tally: Tally) -> None:
        tally.counts["threads"] = len(self.threads)
        tally.counts["writes"] = self.writes


class SaverApplier(Generic[U]):
    """Puts each `Copy` through the target saver's public API: a put is never lost to a write."""

    def __init__(self, target: SealedSaver, ref: Callable[[U], RowRef]) -> None:
        self._target = target
        self.ref = ref

    def apply(self, changes: Sequence[object]) -> Sequence[bool]:
        for copy in changes:
            if not isinstance(copy, Copy):
                continue
            checkpoint, target = copy.read.checkpoint, self._target
            written = target.put(
                copy.config, checkpoint, copy.read.metadata, new_versions_of(checkpoint)
            )
            by_task: dict[str, list[tuple[str, Any]]] = {}
            for task_id, channel, value in copy.writes:
                by_task.setdefault(task_id, []).append((channel, value))
            for task_id, batch in by_task.items():
                target.put_writes(written, batch, task_id)
        return [True] * len(changes)

    def reload(self, change: object) -> U | None:
        return None  # nothing to read again
