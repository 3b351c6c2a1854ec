"""The pass engine (secure_serde/_engine.py) and its report, on real SQLite stores.

A dry run writes nothing and says "would"; a planner's failure is counted and listed by where
and why; progress is called after every batch. The CLI's capped text of a report:
tests/cli/test_report_lines.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

import pytest

from secure_serde import ConfigurationError, DecryptionError, PassReport
from secure_serde._engine import Step, batch_steps
from secure_serde.passes import (
    CURRENT,
    Planned,
    Skip,
    Unreadable,
    rewrap,
    run_batches,
)
from secure_serde.passes._rewrap import CellApplier
from secure_serde.stores import Cell, RowRef, Store, Swap, open_store
from tests.passes.rewrap_support import (
    KEY_A,
    KEY_B,
    cells,
    rotation_serde,
    run_turns,
    sqlite_graph,
)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A stock SQLite store of three threads, every value under key A."""
    path = tmp_path / "store.sqlite"
    with sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        for thread in ("t1", "t2", "t3"):
            run_turns(graph, thread, 2)
    return path


@pytest.fixture
def opened(store: Path) -> Iterator[Store]:
    with open_store(str(store)) as handle:
        yield handle


def snapshot(path: Path) -> dict[tuple[str, object], tuple[str | None, bytes | None]]:
    return {(c.ref.table, c.ref.key): (c.type_tag, c.data) for c in cells(path)}


class FailOne:
    """A real planner that refuses one chosen cell and leaves every other one current."""

    def __init__(self, refused: RowRef) -> None:
        self.refused = refused

    def plan(self, cell: Cell) -> Unreadable | Skip:
        if cell.ref == self.refused:
            return Unreadable.of(DecryptionError, "refused by this test's planner")
        return CURRENT


class RewriteAll:
    """Plans a swap of every cell to the same bytes under a new tag: a change on every row."""

    def plan(self, cell: Cell) -> Planned:
        return Planned(Swap(cell, "changed-by-test", cell.data or b""), "test")


def test_a_dry_run_writes_nothing_and_says_would(store: Path, opened: Store) -> None:
    before = snapshot(store)
    tally = run_batches(
        opened.iter_batches(opened.tables[0], 4),
        RewriteAll(),
        CellApplier(opened),
        dry_run=True,
    )
    report = tally.report("rewrap", dry_run=True, elapsed=0.0)
    assert report.changed == tally.scanned > 0
    assert snapshot(store) == before
    text = "\n".join(report.lines())
    assert "would rewrap" in text
    assert "rewrapped" not in text.replace("would rewrap", "")
    assert report.to_json()["dry_run"] is True


def test_the_same_pass_without_dry_run_writes(store: Path, opened: Store) -> None:
    """The counterpart of the dry run: the same planner does change the rows."""
    table = opened.tables[0]
    tally = run_batches(
        opened.iter_batches(table, 4), RewriteAll(), CellApplier(opened), dry_run=False
    )
    assert tally.changed == tally.scanned > 0
    changed = [c for c in cells(store) if c.type_tag == "changed-by-test"]
    assert len(changed) == tally.changed


def test_a_real_rewrap_dry_run_writes_nothing(store: Path) -> None:
    before = snapshot(store)
    report = rewrap(
        str(store),
        rotation_serde({"a": KEY_A, "b": KEY_B}, "b"),
        dry_run=True,
    )
    assert isinstance(report, PassReport)
    assert (report.name, report.dry_run, report.changed > 0) == ("rewrap", True, True)
    assert snapshot(store) == before
    assert any("would rewrap" in line for line in report.lines())


def test_a_planners_failure_is_counted_and_listed(opened: Store) -> None:
    table = opened.tables[0]
    first = next(iter(opened.iter_batches(table, 100)))[0]
    tally = run_batches(
        opened.iter_batches(table, 3), FailOne(first.ref), CellApplier(opened), dry_run=False
    )
    report = tally.report("rewrap", dry_run=False, elapsed=0.0)
    assert report.failure_count == 1
    (failure,) = report.failures
    assert (failure.ref, failure.error) == (first.ref, DecryptionError)
    assert "refused by this test's planner" in failure.reason
    assert report.skipped["current"] == report.scanned - 1
    assert not report.ok
    listed = report.to_json()["failures"]
    assert listed == [
        {
            "table": first.ref.table,
            "key": dict(first.ref.key),
            "error": "DecryptionError",
            "kind": None,
            "reason": failure.reason,
        }
    ]


def test_progress_is_called_after_every_batch(store: Path, opened: Store) -> None:
    table = opened.tables[0]
    rows = sum(len(batch) for batch in opened.iter_batches(table, 1000))
    seen: list[int] = []
    run_batches(
        opened.iter_batches(table, 2),
        RewriteAll(),
        CellApplier(opened),
        dry_run=True,
        on_batch=lambda tally: seen.append(tally.scanned),
    )
    assert len(seen) == -(-rows // 2)
    assert seen == sorted(seen)
    assert seen[-1] == rows
    # Through rewrap's own progress callback too: one snapshot per batch of every table.
    snapshots: list[int] = []
    report = rewrap(
        str(store),
        rotation_serde({"a": KEY_A, "b": KEY_B}, "b"),
        batch_size=5,
        progress=lambda p: snapshots.append(p.scanned),
    )
    per_table = [sum(len(b) for b in opened.iter_batches(t, 1000)) for t in opened.tables]
    batches = sum(-(-rows // 5) for rows in per_table)
    assert len(snapshots) == batches
    assert snapshots[-1] == report.scanned


class _Planner:
    def plan(self, unit: str, /) -> Planned:
        return Planned(change=f"new {unit}")


class _AskingApplier:
    """Applies through whoever runs the loop: each batch is one ask, answered from outside."""

    def __init__(self) -> None:
        self.written: list[object] = []

    def apply(self, changes: Sequence[object]) -> Step[Sequence[bool]]:
        answer = yield ("write", list(changes))
        self.written.extend(changes)
        return cast("Sequence[bool]", answer)

    def reload(self, change: object) -> str | None:
        return None

    def ref(self, unit: str) -> RowRef:
        return RowRef("units", (("id", unit),))


def test_run_batches_refuses_an_applier_that_asks_for_its_io() -> None:
    applier = _AskingApplier()
    with pytest.raises(ConfigurationError, match="asks for its I/O"):
        run_batches([["a", "b"]], _Planner(), applier, dry_run=False)
    assert applier.written == []  # refused before any change was taken as written


def test_batch_steps_asks_once_per_batch_and_counts_the_answers() -> None:
    applier = _AskingApplier()
    steps = batch_steps([["a", "b"], ["c"]], _Planner(), applier, dry_run=False)
    asks = []
    answer: object = None
    try:
        while True:
            ask = steps.send(answer)
            asks.append(ask)
            answer = [True] * len(ask[1])
    except StopIteration as done:
        tally = done.value
    assert asks == [("write", ["new a", "new b"]), ("write", ["new c"])]
    assert applier.written == ["new a", "new b", "new c"]
    assert (tally.scanned, tally.changed) == (3, 3)
