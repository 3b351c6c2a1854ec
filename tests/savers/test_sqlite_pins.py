"""Pins what the sealed SQLite savers take from langgraph-checkpoint-sqlite.

They keep its schema and SQL, call its public ``utils`` helpers, and read one private flag
(through secure_serde/_langgraph.py). A release that changes any of these fails here.
"""

from __future__ import annotations

import inspect
import sqlite3
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver as StockSaver
from langgraph.checkpoint.sqlite.utils import pending_writes_sql, search_where

from secure_serde._langgraph import sqlite_has_task_path


def test_private_task_path_flag(tmp_path: Path) -> None:
    saver = StockSaver(sqlite3.connect(tmp_path / "x.sqlite"))
    saver.setup()
    assert saver._has_task_path is True
    assert sqlite_has_task_path(saver) is True
    saver._has_task_path = False
    assert sqlite_has_task_path(saver) is False


def test_helpers_we_call() -> None:
    assert list(inspect.signature(search_where).parameters) == ["config", "filter", "before"]
    assert pending_writes_sql(True) == (
        "SELECT task_id, channel, type, value, task_path, idx FROM writes "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
    )


def test_schema_we_write(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.sqlite")
    StockSaver(conn).setup()
    columns = {
        table: [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        for table in ("checkpoints", "writes")
    }
    assert columns == {
        "checkpoints": [
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
            "parent_checkpoint_id",
            "type",
            "checkpoint",
            "metadata",
        ],
        "writes": [
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
            "task_id",
            "task_path",
            "idx",
            "channel",
            "type",
            "value",
        ],
    }
