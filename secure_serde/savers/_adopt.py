"""`adopt`: the one explicit, logged step that takes an older store's rows into a `SealedSaver`.

A store written by secure_serde 0.3's sealed savers, or by a stock saver
(with secure_serde's serde or in plaintext), holds no store identity, so a
`SealedSaver` refuses it (`StoreIdentityError`). ``adopt`` copies every
thread of it into a new sealed store through langgraph's public API: each
thread's checkpoints are listed and put oldest first per namespace, each
with its pending writes, so the target seals and binds every value where it
lands.

The source is read by `secure_serde.stores.V03Reader` for a store 0.3's
sealed savers wrote (read only, checked as 0.3 checked it), or by a stock
langgraph saver for a stock store. Before anything is written, every
source row is classified:

* its stored type tag, read from the database by the stores layer
  (`secure_serde.stores.checkpoint_tags`; nothing is decrypted), so it
  works on any SQLite or PostgreSQL store: a tag with no cipher, or a value
  kept inline in PostgreSQL's checkpoint JSON, is **plaintext**, and a
  ``+aes`` tag (langgraph's built-in format, whose tag nothing
  authenticates) is **legacy**: it could have been relabelled;
* then the checkpoint is read through ``source`` as configured (the 0.3
  reader refuses what is not bound to its row by default): a row that fails
  there is **unauthenticated** if ``lenient`` (a reader of the same store
  under a `Migration`) reads it, and **misplaced** if even that refuses it.

Every such row is listed in the `AdoptReport`, and by default refused: a
refused write is left out, a refused checkpoint is not copied and neither
are its descendants (its history would not be complete). Copying
plaintext, legacy and unauthenticated rows takes ``accept_unvouched=True``
(and ``lenient``); misplaced rows are never copied. The run is logged.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde.sealing import SealedSaver
from secure_serde.sealing._codec import new_versions_of
from secure_serde.stores import (
    CheckpointTags,
    HistoryView,
    Store,
    V03Reader,
    checkpoint_tags,
    open_store,
)

__all__ = ["AdoptReport", "Unvouched", "adopt"]

_log = logging.getLogger("secure_serde.adopt")

PLAINTEXT: Final = "plaintext"
LEGACY: Final = "legacy"
UNAUTHENTICATED: Final = "unauthenticated"
MISPLACED: Final = "misplaced"
PARENT_REFUSED: Final = "parent refused"
_WHY: Final = {
    PLAINTEXT: "stored in plaintext: nothing authenticates it",
    LEGACY: "langgraph's +aes format: its type tag is not authenticated (could be relabelled)",
    UNAUTHENTICATED: "did not authenticate at its place (read only under a Migration switch)",
    MISPLACED: "did not authenticate at its place, even under the Migration switches",
    PARENT_REFUSED: "its parent checkpoint was refused, so its history would not be complete",
}


@dataclass(frozen=True)
class Unvouched:
    """One row ``adopt`` cannot vouch for, and whether it was (or would be) copied."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    row: str  # "checkpoint", "value <channel>", or "write <task id> <channel>"
    reason: str  # PLAINTEXT, LEGACY, UNAUTHENTICATED, MISPLACED or PARENT_REFUSED
    copied: bool

    def __str__(self) -> str:
        where = f"{self.thread_id!r} ns={self.checkpoint_ns!r} checkpoint {self.checkpoint_id}"
        action = "copied (accepted)" if self.copied else "refused"
        return f"{where}: {self.row}: {_WHY[self.reason]}; {action}"


@dataclass(frozen=True)
class AdoptReport:
    """What ``adopt`` copied (in a dry run: would copy), and every row it cannot vouch for."""

    dry_run: bool
    threads: int
    checkpoints: int
    writes: int
    unvouched: tuple[Unvouched, ...]

    @property
    def refused(self) -> tuple[Unvouched, ...]:
        return tuple(u for u in self.unvouched if not u.copied)

    def lines(self) -> list[str]:
        verb = "would copy" if self.dry_run else "copied"
        head = (
            f"adopt {verb} {self.checkpoints} checkpoint(s) and {self.writes} write(s)"
            f" of {self.threads} thread(s); {len(self.unvouched)} row(s) not vouched for"
            f" ({len(self.refused)} refused)"
        )
        return [head, *(f"  {u}" for u in self.unvouched)]


def _tag_reason(type_tag: str | None) -> str | None:
    if type_tag is None or "+" not in type_tag:
        return PLAINTEXT  # kept inline (PostgreSQL's JSON) or stored without a cipher
    if type_tag.endswith("+aes"):
        return LEGACY
    return None


def _stored(
    source: BaseCheckpointSaver[Any], store: str | os.PathLike[str] | Store | None
) -> list[CheckpointTags]:
    """The type tags of every checkpoint of the source's store, from the stores layer."""
    if isinstance(source, SealedSaver):
        raise ConfigurationError("adopt copies an unsealed store; its source is a SealedSaver")
    if store is None and isinstance(source, V03Reader):
        return checkpoint_tags(source.view)
    if store is None:
        store = _sqlite_file(source)
    if isinstance(store, Store):
        with HistoryView(store) as view:
            return checkpoint_tags(view)
    with open_store(store) as opened, HistoryView(opened) as view:
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


def _config(tags: CheckpointTags, checkpoint_id: str | None) -> RunnableConfig:
    config: dict[str, Any] = {"thread_id": tags.thread_id, "checkpoint_ns": tags.checkpoint_ns}
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


@dataclass
class _Run:
    source: BaseCheckpointSaver[Any]
    lenient: BaseCheckpointSaver[Any] | None
    accept: bool
    unvouched: list[Unvouched] = field(default_factory=list)
    refused: set[tuple[str, str, str]] = field(default_factory=set)

    def take(self, tags: CheckpointTags) -> tuple[CheckpointTuple, list[Any]] | None:
        """The checkpoint to copy and the writes to copy with it, or ``None`` (refused)."""
        key = (tags.thread_id, tags.checkpoint_ns, tags.checkpoint_id)

        def note(row: str, reason: str, copied: bool) -> None:
            self.unvouched.append(Unvouched(*key, row, reason, copied))

        if tags.parent_id is not None and (key[0], key[1], tags.parent_id) in self.refused:
            self._refuse(key, note, PARENT_REFUSED)
            return None
        value_reasons = {row: r for row, tag in tags.values if (r := _tag_reason(tag))}
        write_reasons = {i: r for i, w in enumerate(tags.writes) if (r := _tag_reason(w[2]))}
        config = _config(tags, key[2])
        read = _read(self.source, config)
        if read is None:
            read = _read(self.lenient, config)
            if read is None and self.lenient is not None:
                self._refuse(key, note, MISPLACED)
                return None
            if not value_reasons and not write_reasons:
                value_reasons["checkpoint"] = UNAUTHENTICATED
        take = read is not None and (not value_reasons or self.accept)
        for row, reason in value_reasons.items():
            note(row, reason, copied=take)
        for i, reason in write_reasons.items():
            task_id, channel, _ = tags.writes[i]
            note(f"write {task_id} {channel}", reason, copied=take and self.accept)
        if read is None or not take:
            self.refused.add(key)
            return None
        # Every saver returns a checkpoint's writes in writes_sort_key order, the
        # order of tags.writes, so positions match.
        kept = [
            w
            for i, w in enumerate(read.pending_writes or ())
            if self.accept or i not in write_reasons
        ]
        return read, kept

    def _refuse(self, key: tuple[str, str, str], note: Any, reason: str) -> None:
        self.refused.add(key)
        note("checkpoint", reason, copied=False)


def adopt(  # noqa: PLR0913 - the source, the target, and keyword-only switches
    source: BaseCheckpointSaver[Any],
    target: SealedSaver,
    *,
    lenient: BaseCheckpointSaver[Any] | None = None,
    dry_run: bool = False,
    accept_unvouched: bool = False,
    store: str | os.PathLike[str] | Store | None = None,
) -> AdoptReport:
    """Copy every thread of ``source`` into ``target``; see the module docstring.

    Args:
        source: the older store's reader, configured to read strictly: a
            `secure_serde.stores.V03Reader` for a store 0.3's sealed savers
            wrote, or a stock langgraph saver (with `EncryptedSerializer`,
            or none) for a stock store; sync API.
        target: a set-up `SealedSaver` on a new store.
        lenient: the same store read under a `Migration` (``unbound``,
            ``plaintext``...): what copies accepted rows, and what tells an
            unbound row from a misplaced one. Required with ``accept_unvouched``.
        dry_run: classify and report; write nothing.
        accept_unvouched: copy plaintext, legacy and unauthenticated rows too
            (each listed, and logged).
        store: where the source's rows are (a SQLite path, a
            ``postgresql://`` URL or a `Store`), read for their type tags;
            needed only for a stock PostgreSQL saver (a `V03Reader` and a
            stock SQLite saver know their database).

    Raises:
        ConfigurationError: the target is not a `SealedSaver`, the source
            is one, or its store cannot be told.
        StoreError: the store cannot be read.
    """
    if not isinstance(target, SealedSaver):
        raise ConfigurationError("adopt copies into a SealedSaver; wrap the target saver first")
    if accept_unvouched and lenient is None:
        raise ConfigurationError(
            "accept_unvouched=True needs lenient=: a saver reading the source under a Migration"
        )
    rows = _stored(source, store)
    _log.warning(
        "secure_serde adopt: %s %d checkpoint(s) of an unsealed store into a sealed one",
        "dry run over" if dry_run else "taking in",
        len(rows),
    )
    run = _Run(source, lenient, accept_unvouched)
    threads: set[str] = set()
    checkpoints = writes = 0
    for tags in rows:
        taken = run.take(tags)
        if taken is None:
            continue
        read, kept = taken
        threads.add(tags.thread_id)
        checkpoints += 1
        writes += len(kept)
        if not dry_run:
            _put(target, tags, read, kept)
    report = AdoptReport(dry_run, len(threads), checkpoints, writes, tuple(run.unvouched))
    for line in report.lines():
        _log.warning("secure_serde adopt: %s", line.strip())
    return report


def _put(target: SealedSaver, tags: CheckpointTags, read: CheckpointTuple, kept: list[Any]) -> None:
    checkpoint = read.checkpoint
    config = _config(tags, tags.parent_id)
    written = target.put(config, checkpoint, read.metadata, new_versions_of(checkpoint))
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in kept:
        by_task.setdefault(task_id, []).append((channel, value))
    for task_id, batch in by_task.items():
        target.put_writes(written, batch, task_id)
