"""The batch loop of rewrap, for one process and one range of thread ids.

Why a kill at any moment loses nothing, and a rerun finishes the job:

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
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from secure_serde.passes._plan import CURRENT, EMPTY, Planned, Skip, Unreadable
from secure_serde.passes._report import RowFailure, Tally
from secure_serde.stores import Cell, Store, Swap, ThreadRange

__all__ = ["MAX_ATTEMPTS", "CellPlanner", "rewrap_range"]

# A row rewritten by the application this many times in a row, between our
# read and our swap, is reported instead of chased forever.
MAX_ATTEMPTS: Final = 5

BatchDone = Callable[[Tally], None]


class CellPlanner(Protocol):
    """What the loop asks of a planner: `Planner` (0.3 layout) or `SealedPlanner` (_sealed.py)."""

    def plan(self, cell: Cell) -> Skip | Unreadable | Planned: ...


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
    for table in store.tables:
        for batch in store.iter_batches(table, batch_size, thread_range):
            tally.scanned += len(batch)
            _settle(store, planner, batch, tally, dry_run)
            if on_batch is not None:
                on_batch(tally)
    return tally


def _settle(  # noqa: C901 - one compare-and-swap round: each outcome of a row is one branch
    store: Store, planner: CellPlanner, cells: Sequence[Cell], tally: Tally, dry_run: bool
) -> None:
    pending: list[tuple[Swap, str]] = []
    for cell in cells:
        _classify(planner.plan(cell), cell, tally, pending, dry_run)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if not pending:
            return
        applied = store.compare_and_swap([swap for swap, _ in pending])
        lost = []
        for (swap, source), ok in zip(pending, applied, strict=True):
            if ok:
                tally.rewrapped += 1
                tally.sources[source] += 1
            else:
                lost.append(swap.cell)
        if not lost:
            return
        tally.conflicts += len(lost)
        pending = []
        if attempt == MAX_ATTEMPTS:
            for cell in lost:
                tally.fail(
                    RowFailure(cell.ref, "the row kept changing while being rewrapped; rerun")
                )
            return
        time.sleep(0.01 * attempt)
        for cell in lost:
            fresh = store.reload(cell.ref)
            if fresh is None:
                tally.vanished += 1
            else:
                _classify(planner.plan(fresh), fresh, tally, pending, dry_run)


def _classify(
    outcome: Skip | Unreadable | Planned,
    cell: Cell,
    tally: Tally,
    pending: list[tuple[Swap, str]],
    dry_run: bool,
) -> None:
    if outcome is CURRENT:
        tally.current += 1
    elif outcome is EMPTY:
        tally.empty += 1
    elif isinstance(outcome, Skip):
        tally.skipped[outcome.kind] += 1
    elif isinstance(outcome, Unreadable):
        tally.fail(RowFailure(cell.ref, outcome.reason, outcome.error))
    elif isinstance(outcome, Planned):
        if dry_run or outcome.swap is None:
            tally.rewrapped += 1
            tally.sources[outcome.source] += 1
        else:
            pending.append((outcome.swap, outcome.source))
