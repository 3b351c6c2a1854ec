"""`audit_sealed` on the pass engine: one `PassReport` named audit, read-only, progress per batch.

A real graph writes a SQLite file through `SealedSaver`; one root checkpoint is deleted with SQL,
which cuts its thread's history: a finding. The audit must write nothing at all.
"""

from __future__ import annotations

import operator
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph

from secure_serde import HistoryError, PassReport
from secure_serde.sealing import audit_sealed
from tests.serdes_support import env_serde, sealed_sqlite

KEY = b"audit-pass-test-key-0123456789ab"
THREADS = ("t1", "t2", "t3")


class State(TypedDict):
    notes: Annotated[list[str], operator.add]


def _raw(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with closing(sqlite3.connect(path)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}")) for t in tables}  # noqa: S608


def test_the_audit_is_a_read_only_pass_with_progress_after_every_batch(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with sealed_sqlite(path, env_serde(KEY)) as saver:
        graph = StateGraph(State)
        graph.add_node("note", lambda state: {"notes": [f"n{len(state['notes'])}"]})
        graph.add_edge(START, "note")
        app = graph.compile(checkpointer=saver)
        for thread in THREADS:
            config: RunnableConfig = {"configurable": {"thread_id": thread}}
            for turn in range(2):
                app.invoke({"notes": [f"{thread}-{turn}"]}, config)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "DELETE FROM checkpoints WHERE thread_id = 't2' AND parent_checkpoint_id IS NULL"
        )
    before = _raw(path)

    seen: list[int] = []
    with sealed_sqlite(path, env_serde(KEY)) as saver:
        report = audit_sealed(saver, thread_ids=THREADS, progress=seen.append)
    assert _raw(path) == before
    assert isinstance(report, PassReport)
    assert (report.name, report.dry_run, report.changed) == ("audit", False, 0)
    # One batch per thread, progress after each with the checkpoints read so far.
    per_thread = (report.checkpoints + 1) // len(THREADS)  # t2 lost its root
    assert seen == [per_thread, 2 * per_thread - 1, 3 * per_thread - 1]
    assert report.scanned == report.checkpoints == 3 * per_thread - 1
    assert report.skipped["opens"] == report.checkpoints
    # The cut history is a finding, and one of the report's failures, with its error class.
    assert report.failure_count == report.finding_count == 1
    (failure,) = report.failures
    assert failure.error is HistoryError
    assert failure.ref.thread_id == "t2"
    assert [(f.thread_id, f.error) for f in report.findings] == [("t2", "HistoryError")]
    assert not report.clean
    assert report.to_json()["failures"][0]["error"] == "HistoryError"
