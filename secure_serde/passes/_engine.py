"""The one batch loop every pass runs: plan each unit, apply a batch's changes, count.

A planner yields nothing itself: the pass hands the engine batches of units
(cells of a store, or checkpoints of a saver) and a planner that decides,
per unit, to skip it (`Skip`, by kind), to fail it (`Unreadable`: a reason
and an error class, never content) or to change it (`Planned`). The engine
applies a batch's changes through an `Applier`: compare-and-swap for cells
(`CellApplier`), the target saver's public API for checkpoint passes. In a
dry run it applies nothing and counts what it would change. It calls
``on_batch`` after every batch.

Why a kill at any moment loses nothing, and a rerun finishes the job
(rewrap; adopt and reindex rely on the same shape):

* every cell is self-describing: its type tag names the cipher and a v1
  header names the key, so a reader holding the old and the new key reads
  any mix of rewrapped and not-yet-rewrapped rows;
* a cell changes only through one ``UPDATE`` that sets the type tag and the
  bytes together, inside a batch transaction: the database applies all of a
  batch or none of it, so no row is ever half-written;
* that ``UPDATE`` is a compare-and-swap on the exact bytes read, so a row
  the application rewrote meanwhile is never overwritten with an older
  value; it is read again and settled afresh;
* nothing is remembered between runs: a rerun scans everything again and
  skips the rows already under the primary, reading only their headers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

from secure_serde._errors import SecureSerdeError
from secure_serde._report import Tally
from secure_serde._rows import RowFailure
from secure_serde.stores import Cell, RowRef, Store, Swap, ThreadRange

__all__ = [
    "CURRENT",
    "EMPTY",
    "MAX_ATTEMPTS",
    "Applier",
    "CellApplier",
    "CellPlanner",
    "Planned",
    "Skip",
    "Unreadable",
    "rewrap_range",
    "run_batches",
]

# A row rewritten by the application this many times in a row, between our
# read and our swap, is reported instead of chased forever.
MAX_ATTEMPTS: Final = 5

U = TypeVar("U")
U_contra = TypeVar("U_contra", contravariant=True)
BatchDone = Callable[[Tally], None]


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing to write: ``kind`` says why (``current``, ``empty``, ``refused``...).

    ``failed`` and ``accepted`` are rows listed with the unit: the rows of a
    skipped checkpoint that made the pass skip it, or that it takes anyway.
    """

    kind: str
    failed: tuple[RowFailure, ...] = ()


CURRENT: Final = Skip("current")
EMPTY: Final = Skip("empty")


@dataclass(frozen=True, slots=True)
class Unreadable:
    """The unit cannot be handled.

    ``error`` is the typed outcome (the exception class the serializer would
    raise for this row); ``reason`` starts with its name and names ids,
    type tags and cipher names only, never content.
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

    @property
    def swap(self) -> Swap | None:
        return self.change if isinstance(self.change, Swap) else None


Outcome = Skip | Unreadable | Planned


class UnitPlanner(Protocol[U_contra]):
    """What the loop asks of a planner: one outcome per unit."""

    def plan(self, unit: U_contra, /) -> Outcome: ...


class CellPlanner(UnitPlanner[Cell], Protocol):
    """A planner over cells: `Planner` (0.3 layout), `SealedPlanner`, `ItemsPlanner`."""


class Applier(Protocol, Generic[U]):
    """Writes a batch's changes; what the engine asks of a store or a target saver."""

    def apply(self, changes: Sequence[object]) -> Sequence[bool]:
        """Apply every change, in one transaction where the store has them.

        ``False`` for a change lost to a concurrent write: its unit is read
        again (`reload`) and planned afresh.
        """
        ...

    def reload(self, change: object) -> U | None:
        """The unit of a lost change as it is now; ``None`` if it is gone."""
        ...

    def ref(self, unit: U) -> RowRef:
        """Where the unit lives, for a failure record."""
        ...


class CellApplier:
    """Compare-and-swap of cells, a batch per transaction (`Store.compare_and_swap`)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def apply(self, changes: Sequence[object]) -> Sequence[bool]:
        swaps = [change for change in changes if isinstance(change, Swap)]
        return self._store.compare_and_swap(swaps)

    def reload(self, change: object) -> Cell | None:
        if not isinstance(change, Swap):
            return None
        return self._store.reload(change.cell.ref)

    def ref(self, unit: Cell) -> RowRef:
        return unit.ref


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
    tally = Tally() if tally is None else tally
    for batch in batches:
        tally.scanned += len(batch)
        _settle(applier, planner, batch, tally, dry_run)
        if on_batch is not None:
            on_batch(tally)
    return tally


def rewrap_range(  # noqa: PLR0913 - the range, its store and the options it runs with
    store: Store,
    planner: CellPlanner,
    thread_range: ThreadRange,
    *,
    batch_size: int,
    dry_run: bool,
    on_batch: BatchDone | None = None,
) -> Tally:
    """Rewrap every cell of ``store`` whose thread id is in ``thread_range``."""
    tally = Tally()
    applier = CellApplier(store)
    for table in store.tables:
        batches = store.iter_batches(table, batch_size, thread_range)
        run_batches(batches, planner, applier, dry_run=dry_run, tally=tally, on_batch=on_batch)
    return tally


def _settle(  # noqa: C901 - one compare-and-swap round: each outcome of a unit is one branch
    applier: Applier[U],
    planner: UnitPlanner[U],
    units: Sequence[U],
    tally: Tally,
    dry_run: bool,
) -> None:
    pending: list[tuple[object, str, U]] = []
    for unit in units:
        _classify(planner.plan(unit), unit, applier, tally, pending, dry_run)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if not pending:
            return
        applied = applier.apply([change for change, _, _ in pending])
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
                tally.fail(
                    RowFailure(
                        applier.ref(unit), "the row kept changing while being rewrapped; rerun"
                    )
                )
            return
        time.sleep(0.01 * attempt)
        for change, _ in lost:
            fresh = applier.reload(change)
            if fresh is None:
                tally.vanished += 1
            else:
                _classify(planner.plan(fresh), fresh, applier, tally, pending, dry_run)


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
