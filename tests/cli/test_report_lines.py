"""The CLI's text of a pass report (`secure_serde.cli._pretty.report_lines`): failure lists are
capped at 20 rows in text, with a count of the rest, while --json lists every row the report kept
(up to 1,000, the rest counted)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from secure_serde import DecryptionError
from secure_serde._report import Tally
from secure_serde.cli._pretty import report_lines
from secure_serde.passes import MAX_LISTED_FAILURES, RowFailure, Unreadable, run_batches
from secure_serde.passes._rewrap import CellApplier
from secure_serde.stores import Cell, RowRef, Store, open_store
from tests.passes.rewrap_support import KEY_A, rotation_serde, run_turns, sqlite_graph


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[Store]:
    """A stock SQLite store of three threads, every value under key A."""
    path = tmp_path / "store.sqlite"
    with sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        for thread in ("t1", "t2", "t3"):
            run_turns(graph, thread, 2)
    with open_store(str(path)) as handle:
        yield handle


class FailAll:
    def plan(self, cell: Cell) -> Unreadable:
        return Unreadable.of(DecryptionError, f"refused by this test's planner ({cell.ref.table})")


def test_failures_are_capped_in_text_and_full_in_json(opened: Store) -> None:
    tally = Tally()
    for table in opened.tables:
        run_batches(
            opened.iter_batches(table, 7), FailAll(), CellApplier(opened), dry_run=True, tally=tally
        )
    report = tally.report("rewrap", dry_run=True, elapsed=0.0)
    assert report.failure_count == report.scanned > 20
    lines = report_lines(report)
    listed = [line for line in lines if "refused by this test's planner" in line]
    assert len(listed) == 20
    assert f"  ... and {report.failure_count - 20:,} more (--json lists them)" in lines
    document = json.loads(json.dumps(report.to_json()))
    assert len(document["failures"]) == report.failure_count
    assert document["failure_count"] == report.failure_count


def test_past_the_cap_the_report_counts_what_it_does_not_keep() -> None:
    tally = Tally()
    ref = RowRef("checkpoints", (("thread_id", "t"),))
    for _ in range(MAX_LISTED_FAILURES + 5):
        tally.fail(RowFailure(ref, "refused"))
    report = tally.report("rewrap", dry_run=False, elapsed=0.0)
    assert (report.failure_count, len(report.failures)) == (MAX_LISTED_FAILURES + 5, 1000)
    assert report_lines(report)[-1] == "  ... and 985 more (--json lists the first 1,000)"
