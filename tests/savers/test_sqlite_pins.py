"""Pins the langgraph-checkpoint-sqlite schema secure_serde depends on.

`SealedSaver` wraps the stock SQLite saver through its public API only, but the stores layer
(secure_serde/stores/_sqlite.py: the cells audit, rewrap and adopt read and rewrite) and
`V03Reader` (stores/_v03.py) read these tables and columns directly, which is why
pyproject.toml caps the package. A release that changes them fails here.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver as StockSaver


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
