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
from typing import Final

from langgraph.checkpoint.base import CheckpointTuple

from secure_serde._engine import Planned, batches_of, run_batches
from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde._report import PassReport, Tally
from secure_serde._rows import CheckpointRow, RowFailure
from secure_serde.passes._adopt import Copy, SaverApplier, checkpoint_config
from secure_serde.sealing import SealedSaver

__all__ = ["copy_thread"]

_BATCH: Final = 100


def _ids(found: CheckpointTuple) -> tuple[str, str, str]:
    configurable = found.config.get("configurable") or {}
    return (
        str(configurable.get("thread_id")),
        str(configurable.get("checkpoint_ns", "")),
        str(configurable.get("checkpoint_id")),
    )


class _Planner:
    def __init__(self, into: str) -> None:
        self._into = into

    def plan(self, found: CheckpointTuple) -> Planned:
        parent = (found.parent_config or {}).get("configurable") or {}
        config = checkpoint_config(self._into, _ids(found)[1], parent.get("checkpoint_id"))
        return Planned(Copy(config, found, found.pending_writes or ()))


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
    try:
        rows = list(source.list({"configurable": {"thread_id": str(thread_id)}}))
    except SecureSerdeError as exc:
        where = CheckpointRow.at(str(thread_id), "", "", "thread")
        reason = f"{type(exc).__name__}: the thread's history does not open; nothing copied"
        tally.fail(RowFailure(where, reason, type(exc)))
        return tally.report("copy_thread", dry_run=dry_run, elapsed=time.monotonic() - started)
    rows.sort(key=lambda found: (_ids(found)[1], _ids(found)[2]))
    applier: SaverApplier[CheckpointTuple] = SaverApplier(
        target, lambda t: CheckpointRow.at(*_ids(t))
    )
    run_batches(batches_of(rows, _BATCH), _Planner(into), applier, dry_run=dry_run, tally=tally)
    # Every put is applied or raises: the writes put are the writes read.
    tally.counts["writes"] = sum(len(found.pending_writes or ()) for found in rows)
    return tally.report("copy_thread", dry_run=dry_run, elapsed=time.monotonic() - started)
