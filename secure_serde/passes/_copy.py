"""``copy_thread`` between stores: one thread of a sealed store copied into another, whole or not.

`SealedSaver.copy_thread` copies a thread within one store, moving ciphertext.
Between two stores (other keys, another database, another kind of saver)
only the public API can carry a value: the source `SealedSaver` reads each
checkpoint (every value opened and checked where it was written, the history
checked to reach its root record) and the target `SealedSaver` puts it, so
the target seals every value for its new location.

The history is copied complete or refused: the whole thread is read before
anything is written, and a thread whose history does not open (a typed
error) is one failure, with nothing written. The target thread must be new:
a copy merged into an existing history would be neither. Checkpoints go
oldest first per namespace, each with its pending writes, on the pass engine
(secure_serde/_engine.py), as `adopt` copies.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from secure_serde._engine import Planned, run_batches
from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde._report import PassReport, Tally
from secure_serde._rows import CheckpointRow, RowFailure, RowRef
from secure_serde.sealing import SealedSaver, new_versions_of

__all__ = ["copy_thread"]

_BATCH: Final = 100


@dataclass(frozen=True)
class _Copy:
    found: CheckpointTuple


def _ids(found: CheckpointTuple) -> tuple[str, str, str]:
    configurable = found.config.get("configurable") or {}
    return (
        str(configurable.get("thread_id")),
        str(configurable.get("checkpoint_ns", "")),
        str(configurable.get("checkpoint_id")),
    )


class _Planner:
    def plan(self, found: CheckpointTuple) -> Planned:
        return Planned(_Copy(found))


class _Applier:
    def __init__(self, target: SealedSaver, thread_id: str) -> None:
        self._target = target
        self._thread_id = thread_id
        self.writes = 0

    def apply(self, changes: Sequence[object]) -> Sequence[bool]:
        for change in changes:
            if isinstance(change, _Copy):
                self._put(change.found)
        return [True] * len(changes)

    def reload(self, change: object) -> CheckpointTuple | None:
        return None  # a put is never lost to a concurrent write: nothing to read again

    def ref(self, unit: CheckpointTuple) -> RowRef:
        return CheckpointRow.at(*_ids(unit))

    def _put(self, found: CheckpointTuple) -> None:
        _, ns, _ = _ids(found)
        config: RunnableConfig = {
            "configurable": {"thread_id": self._thread_id, "checkpoint_ns": ns}
        }
        parent = (found.parent_config or {}).get("configurable") or {}
        if parent.get("checkpoint_id") is not None:
            config["configurable"]["checkpoint_id"] = parent["checkpoint_id"]
        checkpoint = found.checkpoint
        written = self._target.put(config, checkpoint, found.metadata, new_versions_of(checkpoint))
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in found.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, batch in by_task.items():
            self._target.put_writes(written, batch, task_id)
            self.writes += len(batch)


def copy_thread(
    source: SealedSaver,
    target: SealedSaver,
    thread_id: str,
    *,
    target_thread_id: str | None = None,
    dry_run: bool = False,
) -> PassReport:
    """Copy thread ``thread_id`` of ``source`` into ``target`` (as ``target_thread_id``); see above.

    Returns a `PassReport` named ``"copy_thread"``: ``changed`` counts the
    checkpoints copied (in a dry run: that would be), ``counts["writes"]``
    their pending writes; a thread whose history does not open is one
    failure, with its error class, and nothing is written.

    Raises:
        ConfigurationError: either saver is not a `SealedSaver`, or the
            target already holds the target thread.
    """
    if not isinstance(source, SealedSaver) or not isinstance(target, SealedSaver):
        raise ConfigurationError("copy_thread copies from a SealedSaver into a SealedSaver")
    started = time.monotonic()
    into = str(thread_id if target_thread_id is None else target_thread_id)
    if target.get_tuple({"configurable": {"thread_id": into}}) is not None:
        raise ConfigurationError(
            "copy_thread copies into a new thread: the target already holds this thread id"
        )
    tally = Tally()
    failed: type[SecureSerdeError] | None = None
    try:
        rows = list(source.list({"configurable": {"thread_id": str(thread_id)}}))
    except SecureSerdeError as exc:
        failed, rows = type(exc), []
    if failed is not None:
        where = CheckpointRow.at(str(thread_id), "", "", "thread")
        reason = f"{failed.__name__}: the thread's history does not open; nothing copied"
        tally.fail(RowFailure(where, reason, failed))
        return tally.report("copy_thread", dry_run=dry_run, elapsed=time.monotonic() - started)
    rows.sort(key=lambda found: (_ids(found)[1], _ids(found)[2]))
    applier = _Applier(target, into)
    batches = (rows[i : i + _BATCH] for i in range(0, len(rows), _BATCH))
    run_batches(batches, _Planner(), applier, dry_run=dry_run, tally=tally)
    writes = sum(len(found.pending_writes or ()) for found in rows)
    tally.counts["writes"] = writes if dry_run else applier.writes
    return tally.report("copy_thread", dry_run=dry_run, elapsed=time.monotonic() - started)
