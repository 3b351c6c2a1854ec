"""The cell half of the pass engine: compare-and-swap of cells, and a thread range rewrapped.

The loop itself, its outcomes and what it asks of a planner and an applier
are the core's (secure_serde/_engine.py: why a kill at any moment loses
nothing), so that sealing's passes (reindex, audit) run on it too; the cell
types it applies here are the stores layer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from secure_serde._engine import BatchDone, UnitPlanner, run_batches
from secure_serde._report import Tally
from secure_serde.stores import Cell, RowRef, Store, Swap, ThreadRange

__all__ = ["CellApplier", "CellPlanner", "rewrap_range"]


class CellPlanner(UnitPlanner[Cell], Protocol):
    """A planner over cells: `Planner` (a stock saver's store), `SealedPlanner`, `ItemsPlanner`."""

    primary: str  # the primary cipher's name (and key id), as the report names it


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


def rewrap_range(  # noqa: PLR0913 - the range, its store and the options it runs with
    store: Store,
    planner: CellPlanner,
    thread_range: ThreadRange,
    *,
    batch_size: int,
    dry_run: bool,
    on_batch: BatchDone | None = None,
) -> Tally:
    tally = Tally()
    applier = CellApplier(store)
    for table in store.tables:
        batches = store.iter_batches(table, batch_size, thread_range)
        run_batches(batches, planner, applier, dry_run=dry_run, tally=tally, on_batch=on_batch)
    return tally
