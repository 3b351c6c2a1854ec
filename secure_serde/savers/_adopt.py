"""`adopt`: the one explicit, logged step that takes an older store's rows into a `SealedSaver`.

A store written by secure_serde 0.3's sealed savers, or by a stock saver
(with secure_serde's serde or in plaintext), holds no store identity, so a
`SealedSaver` refuses it (`StoreIdentityError`). ``adopt`` copies every
thread of it into a new sealed store through langgraph's public API: each
thread's checkpoints are listed and put oldest first per namespace, each
with its pending writes, so the target seals and binds every value where it
lands.

Before anything is written, every source row is classified:

* its stored type tag, read raw through the source's stock saver class
  (nothing is decrypted): a tag with no cipher is **plaintext**, and a
  ``+aes`` tag (langgraph's built-in format, whose tag nothing
  authenticates) is **legacy**: it could have been relabelled;
* then the checkpoint is read through ``source`` as configured (0.3's
  savers refuse what is not bound to its row by default): a row that fails
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
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde.sealing import SealedSaver
from secure_serde.sealing._codec import new_versions_of

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


class _Raw:
    """A stored value as the source holds it: its type tag, never decrypted."""

    __slots__ = ("type_tag",)

    def __init__(self, type_tag: str) -> None:
        self.type_tag = type_tag


class _RawSerde:
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise ConfigurationError("adopt's raw reader never writes")

    def loads_typed(self, data: tuple[str, bytes]) -> _Raw:
        return _Raw(data[0])


def _tag_reason(value: Any) -> str | None:
    if not isinstance(value, _Raw):
        return PLAINTEXT  # kept inline by the stock saver (PostgreSQL's JSON): never encrypted
    if "+" not in value.type_tag:
        return PLAINTEXT
    if value.type_tag.endswith("+aes"):
        return LEGACY
    return None


def _raw_reader(source: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    """The source's stock langgraph saver class on the same connection, reading tags only."""
    stock = next(
        (
            c
            for c in type(source).__mro__
            if c.__module__.startswith("langgraph.checkpoint.") and c is not BaseCheckpointSaver
        ),
        None,
    )
    if stock is None or isinstance(source, SealedSaver):
        raise ConfigurationError(
            "adopt reads a langgraph stock saver or one of secure_serde 0.3's savers"
            f" (secure_serde.savers.V03SqliteSaver, ...), not {type(source).__name__}"
        )
    raw: BaseCheckpointSaver[Any] = object.__new__(stock)
    raw.__dict__.update(source.__dict__)  # the same connection and lock
    raw.serde = _RawSerde()
    return raw


def _config(t: CheckpointTuple, checkpoint_id: str | None = None) -> RunnableConfig:
    c = t.config["configurable"]
    config: dict[str, Any] = {"thread_id": c["thread_id"], "checkpoint_ns": c["checkpoint_ns"]}
    if checkpoint_id is not None:
        config["checkpoint_id"] = checkpoint_id
    return {"configurable": config}


def _parent_id(t: CheckpointTuple) -> str | None:
    if t.parent_config is None:
        return None
    parent = t.parent_config["configurable"].get("checkpoint_id")
    return None if parent is None else str(parent)


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

    def take(self, found: CheckpointTuple) -> tuple[CheckpointTuple, list[Any]] | None:
        """The checkpoint to copy and the writes to copy with it, or ``None`` (refused)."""
        c = found.config["configurable"]
        key = (str(c["thread_id"]), str(c["checkpoint_ns"]), str(c["checkpoint_id"]))

        def note(row: str, reason: str, copied: bool) -> None:
            self.unvouched.append(Unvouched(*key, row, reason, copied))

        parent = _parent_id(found)
        if parent is not None and (key[0], key[1], parent) in self.refused:
            self._refuse(key, note, PARENT_REFUSED)
            return None
        cell = found.checkpoint
        values: dict[str, Any] = (
            {"checkpoint": cell}
            if isinstance(cell, _Raw)
            else {f"value {k}": v for k, v in cell["channel_values"].items()}
        )
        value_reasons = {k: r for k, v in values.items() if (r := _tag_reason(v)) is not None}
        pending = list(found.pending_writes or ())
        write_reasons = {i: r for i, w in enumerate(pending) if (r := _tag_reason(w[2]))}
        config = _config(found, key[2])
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
            note(f"write {pending[i][0]} {pending[i][1]}", reason, copied=take and self.accept)
        if read is None or not take:
            self.refused.add(key)
            return None
        kept = [
            w
            for i, w in enumerate(read.pending_writes or ())
            if self.accept or i not in write_reasons
        ]
        return read, kept

    def _refuse(self, key: tuple[str, str, str], note: Any, reason: str) -> None:
        self.refused.add(key)
        note("checkpoint", reason, copied=False)


def adopt(
    source: BaseCheckpointSaver[Any],
    target: SealedSaver,
    *,
    lenient: BaseCheckpointSaver[Any] | None = None,
    dry_run: bool = False,
    accept_unvouched: bool = False,
) -> AdoptReport:
    """Copy every thread of ``source`` into ``target``; see the module docstring.

    Args:
        source: the older store's saver, configured to read strictly (0.3's
            savers and `EncryptedSerializer` do by default); sync API.
        target: a set-up `SealedSaver` on a new store.
        lenient: the same store read under a `Migration` (``unbound``,
            ``plaintext``...): what copies accepted rows, and what tells an
            unbound row from a misplaced one. Required with ``accept_unvouched``.
        dry_run: classify and report; write nothing.
        accept_unvouched: copy plaintext, legacy and unauthenticated rows too
            (each listed, and logged).
    """
    if not isinstance(target, SealedSaver):
        raise ConfigurationError("adopt copies into a SealedSaver; wrap the target saver first")
    if accept_unvouched and lenient is None:
        raise ConfigurationError(
            "accept_unvouched=True needs lenient=: a saver reading the source under a Migration"
        )
    rows = sorted(_raw_reader(source).list(None), key=_order)
    _log.warning(
        "secure_serde adopt: %s %d checkpoint(s) of an unsealed store into a sealed one",
        "dry run over" if dry_run else "taking in",
        len(rows),
    )
    run = _Run(source, lenient, accept_unvouched)
    threads: set[str] = set()
    checkpoints = writes = 0
    for found in rows:
        taken = run.take(found)
        if taken is None:
            continue
        read, kept = taken
        threads.add(str(found.config["configurable"]["thread_id"]))
        checkpoints += 1
        writes += len(kept)
        if not dry_run:
            _put(target, found, read, kept)
    report = AdoptReport(dry_run, len(threads), checkpoints, writes, tuple(run.unvouched))
    for line in report.lines():
        _log.warning("secure_serde adopt: %s", line.strip())
    return report


def _order(t: CheckpointTuple) -> tuple[str, str, str]:
    c = t.config["configurable"]
    return str(c["thread_id"]), str(c["checkpoint_ns"]), str(c["checkpoint_id"])


def _put(
    target: SealedSaver, found: CheckpointTuple, read: CheckpointTuple, kept: list[Any]
) -> None:
    checkpoint = read.checkpoint
    config = _config(found, _parent_id(found))
    written = target.put(config, checkpoint, read.metadata, new_versions_of(checkpoint))
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in kept:
        by_task.setdefault(task_id, []).append((channel, value))
    for task_id, batch in by_task.items():
        target.put_writes(written, batch, task_id)
