"""`SealedSaver.reindex` and ``areindex``: the blind-index key's rotation, a planner on the engine.

Begin: a new random index key becomes current, the old ones stay in the identity for
reading, so writers that opened the store earlier keep working and a filter asks the
inner saver once per key. Move: every row not under the current key is re-put with
the same cells and a record and tokens under the current key; no value is decrypted.
A row whose tokens name a dropped key is re-tokenized too: its sealed metadata vouches
for the values. `Puts` reads each row again just before its put, so a row deleted or
re-put meanwhile is not overwritten with a stale copy. Drop: once a scan moves no row
(and refuses none), the older keys leave the identity.

Its I/O is yielded as a `SealedSaver` plan's asks (_saver_plans.py), so
``reindex`` and ``areindex`` (on an async-only inner saver too) run the same steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from langgraph.checkpoint.base import CheckpointTuple

from secure_serde._engine import (
    CURRENT,
    Planned,
    Skip,
    Step,
    Unreadable,
    batch_steps,
    batches_of,
    reporter,
)
from secure_serde._errors import (
    BlindIndexError,
    ConfigurationError,
    SecureSerdeError,
    StoreIdentityError,
)
from secure_serde._report import Detail, PassProgress, PassReport, Tally
from secure_serde._rows import CheckpointRow
from secure_serde.sealing._codec import Sealer
from secure_serde.sealing._identity import IDENTITY_THREAD, drop_put, open_identity, rotate_put
from secure_serde.sealing._record import new_versions_of
from secure_serde.sealing._saver_plans import IDENTITY, READY, Host, Plan
from secure_serde.sealing._walks import PutArgs, key_of, resealed

__all__ = ["BATCH", "Puts", "ReindexPlanner", "ReindexReport", "begin_reindex", "reindex_plan"]
__all__ += ["claim_reindex", "release_reindex", "thread_of"]

BATCH: Final = 100
REMAINING: Final = "remaining"

# Inner savers (by id) with a re-index running in this process: a second one is refused.
_REINDEXING: set[int] = set()
_REINDEXING_LOCK: Final = threading.Lock()

# Scans before a pass gives up on rows that keep arriving under an old key (writers that
# opened the store before the pass began).
MAX_ROUNDS: Final = 3


def claim_reindex(inner: object) -> None:
    with _REINDEXING_LOCK:
        if id(inner) in _REINDEXING:
            raise StoreIdentityError(
                "a re-index of this store is already running in this process: let it finish"
            )
        _REINDEXING.add(id(inner))


def release_reindex(inner: object) -> None:
    with _REINDEXING_LOCK:
        _REINDEXING.discard(id(inner))


# Deprecated alias (0.4.0): reindex returns the one report type of every pass.
ReindexReport = PassReport


def thread_of(found: CheckpointTuple) -> str:
    """The thread id a stored row names, the identity's included (`key_of` refuses that one)."""
    configurable: dict[str, Any] = found.config.get("configurable") or {}
    return str(configurable.get("thread_id"))


def _check_count(name: str, value: int | None, least: int) -> None:
    if value is not None and (type(value) is not int or value < least):
        raise ConfigurationError(f"reindex({name}=) takes a count of rows, {least} or more")


def concurrent() -> StoreIdentityError:
    return StoreIdentityError(
        "the store's index keys changed while this re-index ran: another re-index runs at the"
        " same time. Let it finish, then run reindex() again (it resumes; nothing is lost)"
    )


@dataclass(frozen=True)
class Move:
    found: CheckpointTuple
    put_args: PutArgs


class ReindexPlanner:
    """Per checkpoint: current, refused, left for a later call (``max_rows``), or moved."""

    def __init__(self, sealer: Sealer, *, dry_run: bool, rotating: bool, budget: int | None):
        self._sealer = sealer
        self._dry_run = dry_run
        # A dry run before the new key exists: every row with a token would move.
        self._rotating = rotating
        self._budget = budget
        self.planned = 0

    def plan(self, found: CheckpointTuple) -> Skip | Unreadable | Planned:
        if self._is_current(found):
            return CURRENT
        if self._budget is not None and self.planned >= self._budget:
            return Skip(REMAINING)
        try:
            opened = self._sealer.open(found, channels=(), retoken=True)
        except SecureSerdeError as exc:
            why = "the checkpoint's record does not open; left as it is"
            return Unreadable.of(type(exc), why)
        self.planned += 1
        if self._dry_run:
            return Planned(None)
        return Planned(Move(found, resealed(self._sealer, found, opened, detached=opened.detached)))

    def _is_current(self, found: CheckpointTuple) -> bool:
        try:
            generation = self._sealer.row_generation(found.metadata)
        except BlindIndexError:
            # A key the identity no longer holds (or a hostile token): re-tokenized from the
            # sealed metadata if the record opens, refused otherwise.
            return False
        current = generation is self._sealer.index_keys.current and not self._rotating
        return generation is None or current


class Puts:
    """Re-puts through the inner saver, each after reading its row again (asks of a plan)."""

    def apply(self, changes: Sequence[object]) -> Step[Sequence[bool]]:
        done = []
        for move in cast("Sequence[Move]", changes):
            fresh = yield from self.reload(move)
            same = fresh is not None and dict(fresh.metadata) == dict(move.found.metadata)
            if same:
                args = move.put_args
                yield ("call", "put", (*args, new_versions_of(args[1])), {})
            done.append(same)
        return done

    def reload(self, change: object) -> Step[CheckpointTuple | None]:
        thread, ns, checkpoint_id = key_of(cast(Move, change).found)
        ids = {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
        found: CheckpointTuple | None = yield ("read", {"configurable": ids})
        return found

    def ref(self, unit: CheckpointTuple) -> CheckpointRow:
        return CheckpointRow.at(*key_of(unit))


def begin_reindex(saver: Host, max_rows: int | None, batch_size: int = BATCH) -> None:
    if saver._tenant_keys is not None:
        raise ConfigurationError(
            "reindex() rotates the store's own index key; per-tenant index keys are"
            " rotated with the tenant's keys (docs/tenants.md)"
        )
    _check_count("max_rows", max_rows, 0)
    _check_count("batch_size", batch_size, 1)
    claim_reindex(saver.inner)


def reindex_plan(  # noqa: PLR0913 - the saver, then reindex's keyword options
    saver: Host,
    dry_run: bool,
    rotate: bool,
    max_rows: int | None,
    batch_size: int = BATCH,
    progress: Callable[[PassProgress], None] | None = None,
) -> Plan[PassReport]:
    """Begin (or resume), move every row in rounds of batches, then drop the older keys.

    A round that moves no row (and refuses none) ends the pass complete; rows
    still arriving under an older key after `MAX_ROUNDS` rounds leave it incomplete.
    """
    started = time.monotonic()
    yield READY
    found = yield IDENTITY
    identity = open_identity(found, saver._encrypting)
    begin = rotate and len(identity.index_keys.generations) == 1
    if begin and not dry_run:
        put_args, new_id = rotate_put(found, saver._encrypting)
        yield ("call", "put", (*put_args, {}), {})
        identity = open_identity((yield IDENTITY), saver._encrypting)
        if identity.index_keys.current.key_id != new_id:
            raise concurrent()
    sealer = saver._sealer = saver._sealer_for(identity)
    details: dict[str, Detail] = {
        "key_id": None if begin and dry_run else sealer.index_keys.current.key_id,
        "rotated": begin and not dry_run,
        "dropped": (),
        "complete": False,
    }
    planner = ReindexPlanner(sealer, dry_run=dry_run, rotating=begin and dry_run, budget=max_rows)
    tally, total = Tally(), 0
    for _ in range(MAX_ROUNDS):
        rows = yield from _listed(saver)
        tally.skipped.clear()  # current and remaining: as this scan found them
        total, moved = total + len(rows), tally.changed
        batches, on_batch = batches_of(rows, batch_size), reporter(progress, total, started)
        yield from batch_steps(
            batches, planner, Puts(), dry_run=dry_run, tally=tally, on_batch=on_batch
        )
        if dry_run or tally.failure_count or tally.skipped[REMAINING]:
            break
        if tally.changed == moved:
            details["dropped"] = yield from _drop_old(saver, sealer)
            details["complete"] = True
            break
    tally.counts[REMAINING] = tally.skipped.pop(REMAINING, 0)
    elapsed = time.monotonic() - started
    return tally.report("reindex", dry_run=dry_run, elapsed=elapsed, details=details)


def _listed(saver: Host) -> Plan[list[CheckpointTuple]]:
    try:
        rows: list[CheckpointTuple] = yield ("rows", None, {})
    except ValueError as exc:
        if isinstance(exc, SecureSerdeError):
            raise
        raise ConfigurationError(
            f"{type(saver.inner).__name__} cannot list every thread, so reindex() cannot find"
            " every checkpoint to move: the store keeps its index keys"
        ) from None
    return [row for row in rows if thread_of(row) != IDENTITY_THREAD]


def _drop_old(saver: Host, sealer: Sealer) -> Plan[tuple[str, ...]]:
    """Every row is under the current key: the older keys leave the identity."""
    old = tuple(g.key_id for g in sealer.index_keys.generations[1:])
    if old:
        found = yield IDENTITY
        held = open_identity(found, saver._encrypting).index_keys.generations
        if [g.key_id for g in held] != [g.key_id for g in sealer.index_keys.generations]:
            raise concurrent()
        yield ("call", "put", (*drop_put(found, saver._encrypting), {}), {})
        fresh = yield IDENTITY
        saver._sealer = saver._sealer_for(open_identity(fresh, saver._encrypting))
    return old
