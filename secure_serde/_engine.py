"""The one batch loop every offline pass runs: plan each unit, apply a batch's changes, count.

Every pass (rewrap, adopt, copy_thread, reindex, audit) hands the engine
batches of units (cells, checkpoints, items) and a planner that decides, per
unit, to skip it (`Skip`, by kind), to fail it (`Unreadable`: a reason and an
error class, never content) or to change it (`Planned`). An applier writes a
batch's changes: compare-and-swap for cells (secure_serde/passes/_rewrap.py),
a saver's ``put`` for checkpoints. A dry run applies nothing and counts what
it would change; audit never plans a change. ``on_batch`` runs after every
batch. The loop is one generator (`batch_steps`): an applier that asks for
its I/O by yielding (a `SealedSaver` plan, answered by its sync or async
twin) runs in that plan with ``yield from``; `run_batches` runs it directly.

Why a kill at any moment loses nothing, and a rerun finishes the job:

* every unit is self-describing (a cell's type tag and header name its
  cipher and key; a checkpoint's tokens name their index key), so a reader
  holding the old and the new key reads any mix of done and not-yet-done;
* a unit changes only in one write (one ``UPDATE`` of tag and bytes inside
  a batch transaction, or one ``put`` of a whole checkpoint), so none is
  ever half-written;
* a change is applied only to the unit as it was read (a compare-and-swap
  on the exact bytes, or a checkpoint read again just before its put): a
  unit changed meanwhile is read again and planned afresh, one gone is
  counted as vanished;
* nothing is remembered between runs: a rerun scans everything again and
  skips the units already done.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeVar, cast

from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde._report import PassProgress, Tally
from secure_serde._rows import RowFailure, RowRef

__all__ = [
    "CURRENT",
    "EMPTY",
    "MAX_ATTEMPTS",
    "Applier",
    "Outcome",
    "Planned",
    "ReadOnly",
    "Skip",
    "Step",
    "UnitPlanner",
    "Unreadable",
    "batch_steps",
    "batches_of",
    "reporter",
    "run_batches",
]

# A unit rewritten by the application this many times in a row, between our
# read and our write, is reported instead of chased forever.
MAX_ATTEMPTS: Final = 5

T = TypeVar("T")
U = TypeVar("U")
U_contra = TypeVar("U_contra", contravariant=True)
# A generator whose yields are asks its runner answers (a SealedSaver plan); its value is T.
Step = Generator[Any, Any, T]
BatchDone = Callable[[Tally], None]


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing to write: ``kind`` says why (``current``, ``empty``, ``refused``...).

    ``failed`` are rows listed with the unit: the rows of a skipped
    checkpoint that made the pass skip it.
    """

    kind: str
    failed: tuple[RowFailure, ...] = ()


CURRENT: Final = Skip("current")
EMPTY: Final = Skip("empty")


@dataclass(frozen=True, slots=True)
class Unreadable:
    """The unit cannot be handled (audit: a finding).

    ``error`` is the typed outcome (the exception class a read of the unit
    raises); ``reason`` starts with its name and names ids, type tags and
    cipher names only, never content.
    """

    error: type[SecureSerdeError]
    reason: str

    @classmethod
    def of(cls, error: type[SecureSerdeError], text: str) -> Unreadable:
        return cls(error, f"{error.__name__}: {text}")


@dataclass(frozen=True, slots=True)
class Planned:
    """The unit is to be changed: ``change`` is what the applier writes (``None`` in a dry run).

    ``source`` is where the unit comes from, counted in ``changed_by``
    (rewrap: the cipher and key it was under); ``failed`` and ``accepted``
    are rows of the unit listed with it (adopt: writes left out, or
    unvouched rows copied anyway).
    """

    change: object | None
    source: str = ""
    failed: tuple[RowFailure, ...] = ()
    accepted: tuple[RowFailure, ...] = ()


Outcome = Skip | Unreadable | Planned


class UnitPlanner(Protocol[U_contra]):
    """What the loop asks of a planner: one outcome per unit."""

    def plan(self, unit: U_contra, /) -> Outcome: ...


class Applier(Protocol, Generic[U]):
    """Writes a batch's changes; what the loop asks of a store or a saver.

    ``apply`` applies every change, in one transaction where the store has
    them: ``False`` for a change lost to a concurrent write, whose unit is
    read again (``reload``: ``None`` if it is gone) and planned afresh.
    ``ref`` is where a unit lives, for a failure record. ``apply`` and
    ``reload`` answer, or return a `Step` that asks for their I/O by
    yielding (run by `batch_steps` inside a `SealedSaver` plan).
    """

    def apply(self, changes: Sequence[object]) -> Sequence[bool] | Step[Sequence[bool]]: ...

    def reload(self, change: object) -> U | Step[U | None] | None: ...

    def ref(self, unit: U) -> RowRef: ...


class ReadOnly(Generic[U]):
    """The applier of a pass that never writes (audit, run as a dry run): only ``ref`` is asked."""

    def __init__(self, ref: Callable[[U], RowRef]) -> None:
        self.ref = ref

    def apply(self, changes: Sequence[object]) -> Sequence[bool]:
        return [False] * len(changes)  # nothing is written: each change is dropped

    def reload(self, change: object) -> U | None:
        return None


def run_batches(  # noqa: PLR0913 - the units, who plans and who applies, and how
    batches: Iterable[Sequence[U]],
    planner: UnitPlanner[U],
    applier: Applier[U],
    *,
    dry_run: bool,
    tally: Tally | None = None,
    on_batch: BatchDone | None = None,
) -> Tally:
    """Plan and apply every batch of units; the counts, in ``tally`` if one is given."""
    steps = batch_steps(batches, planner, applier, dry_run=dry_run, tally=tally, on_batch=on_batch)
    try:
        next(steps)
    except StopIteration as done:
        return cast(Tally, done.value)
    steps.close()
    raise ConfigurationError("this applier asks for its I/O: run batch_steps in a plan")


def batch_steps(  # noqa: PLR0913 - the units, who plans and who applies, and how
    batches: Iterable[Sequence[U]],
    planner: UnitPlanner[U],
    applier: Applier[U],
    *,
    dry_run: bool,
    tally: Tally | None = None,
    on_batch: BatchDone | None = None,
) -> Step[Tally]:
    """`run_batches` as a step: an applier's steps are asked of whoever runs it."""
    tally = Tally() if tally is None else tally
    for batch in batches:
        tally.scanned += len(batch)
        yield from _settle(applier, planner, batch, tally, dry_run)
        if on_batch is not None:
            on_batch(tally)
    return tally


def batches_of(units: Sequence[U], size: int) -> Iterable[Sequence[U]]:
    """``units`` cut into batches of ``size``."""
    return (units[i : i + size] for i in range(0, len(units), size))


def reporter(
    progress: Callable[[PassProgress], None] | None, total: int, started: float
) -> BatchDone | None:
    """An ``on_batch`` that hands ``progress`` a `PassProgress` after every batch."""
    if progress is None:
        return None

    def on_batch(tally: Tally) -> None:
        elapsed = time.monotonic() - started
        progress(PassProgress(tally.scanned, total, tally.changed, tally.failure_count, elapsed))

    return on_batch


def _settle(  # noqa: C901 - one round of writes: each outcome of a unit is one branch
    applier: Applier[U],
    planner: UnitPlanner[U],
    units: Sequence[U],
    tally: Tally,
    dry_run: bool,
) -> Step[None]:
    pending: list[tuple[object, str, U]] = []
    for unit in units:
        _classify(planner.plan(unit), unit, applier, tally, pending, dry_run)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if not pending:
            return
        applied = yield from _answer(applier.apply([change for change, _, _ in pending]))
        lost = []
        for (change, source, unit), ok in zip(pending, applied, strict=True):
            if ok:
                tally.changed += 1
                if source:
                    tally.changed_by[source] += 1
            else:
                lost.append((change, unit))
        if not lost:
            return
        tally.conflicts += len(lost)
        pending = []
        if attempt == MAX_ATTEMPTS:
            for _, unit in lost:
                why = "the row kept changing while the pass ran; rerun"
                tally.fail(RowFailure(applier.ref(unit), why))
            return
        time.sleep(0.01 * attempt)
        for change, _ in lost:
            fresh = yield from _answer(applier.reload(change))
            if fresh is None:
                tally.vanished += 1
            else:
                _classify(planner.plan(fresh), fresh, applier, tally, pending, dry_run)


def _answer(answer: T | Step[T]) -> Step[T]:
    if isinstance(answer, Generator):
        return cast("T", (yield from answer))
    return answer


def _classify(  # noqa: PLR0913 - one unit's outcome, and where it is counted
    outcome: Outcome,
    unit: U,
    applier: Applier[U],
    tally: Tally,
    pending: list[tuple[object, str, U]],
    dry_run: bool,
) -> None:
    if isinstance(outcome, Unreadable):
        tally.fail(RowFailure(applier.ref(unit), outcome.reason, outcome.error))
        return
    for failure in outcome.failed:
        tally.fail(failure)
    if isinstance(outcome, Skip):
        tally.skipped[outcome.kind] += 1
        return
    for row in outcome.accepted:
        tally.accept(row)
    if dry_run or outcome.change is None:
        tally.changed += 1
        if outcome.source:
            tally.changed_by[outcome.source] += 1
    else:
        pending.append((outcome.change, outcome.source, unit))
