"""`HistoryView`: a read-only connection to a store, for the tools that read it as history.

`Store` sees a store as cells of serialized values, which is what rewrap and
audit's cell scan need. ``secure-serde inspect`` instead reads checkpoints
through LangGraph's own savers, and audit reads the plaintext JSON columns
beside the cells (secure_serde/stores/_columns.py). Both go through this
view, so that every connection a tool opens on a store is opened here:

* SQLite is opened with ``mode=ro`` (the file is never created or written);
* PostgreSQL in autocommit mode on a session whose transactions are all
  read only (``default_transaction_read_only``), with the row factory and
  the prepare threshold LangGraph's ``PostgresSaver`` expects, so a saver
  can be built on `HistoryView.connection`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Final

from secure_serde.stores._base import Store, StoreError
from secure_serde.stores._v03_metadata import INDEX_METADATA_KEY, RECORD_KEY, SEALED_METADATA_KEY

__all__ = ["CheckpointId", "HistoryView"]

# (thread_id, checkpoint_ns, checkpoint_id)
CheckpointId = tuple[str, str, str]


def _both(template: str) -> tuple[str, str]:
    """A statement written once with ``{0}`` for the placeholder: SQLite's, then PostgreSQL's."""
    return template.format("?"), template.format("%s")


_IDS: Final = _both(
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = {0} AND checkpoint_ns = {0}"
    " ORDER BY checkpoint_id DESC LIMIT {0}"
)
_NAMESPACES: Final = _both(
    "SELECT checkpoint_ns, count(*) FROM checkpoints WHERE thread_id = {0}"
    " GROUP BY checkpoint_ns ORDER BY checkpoint_ns"
)
_SQLITE_NEWEST: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints"
    " ORDER BY checkpoint_id DESC LIMIT 1"
)
_SQLITE_HAS_CHECKPOINTS: Final = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
)
_SQLITE_HAS_TASK_PATH: Final = (
    "SELECT count(*) FROM pragma_table_info('writes') WHERE name = 'task_path'"
)
_PG_HAS_CHECKPOINTS: Final = "SELECT to_regclass('checkpoints') IS NOT NULL"
_PG_HAS_HISTORY: Final = """
SELECT count(*) FROM pg_attribute
WHERE attrelid = to_regclass('checkpoints') AND attname = 'checkpoint_id' AND NOT attisdropped
"""
_SQLITE_V03_MARKS: Final = (
    "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE CASE WHEN json_valid(CAST(metadata AS TEXT))"
    " THEN json_type(CAST(metadata AS TEXT), ?) IS NOT NULL"
    " OR json_type(CAST(metadata AS TEXT), ?) IS NOT NULL END)"
)
_PG_V03_MARKS: Final = (
    "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE metadata ? %s OR metadata ? %s"
    " OR checkpoint ? %s)"
)


class HistoryView:
    """A read-only connection to ``store``'s database, and the queries tools run on it.

    Args:
        store: an open `Store` (`open_store` checked that it is one); only
            its kind, location and display name are used.

    Raises:
        StoreError: the database cannot be opened.
    """

    def __init__(self, store: Store) -> None:
        self.kind: Final = store.kind
        self.display: Final = store.display
        self.tables: Final = store.tables
        self.connection: Any
        # The driver's base exception class (what a saver on `connection` raises).
        self.driver_error: type[Exception] = sqlite3.Error
        if store.kind == "postgres":
            import psycopg

            from secure_serde.stores._postgres import connect

            self.connection = connect(
                store.location, self.display, read_only=True, prepare_threshold=0
            )
            self.driver_error = psycopg.Error
        else:
            uri = f"{Path(store.location).resolve().as_uri()}?mode=ro"
            try:
                # check_same_thread=False: LangGraph's SqliteSaver may be called
                # from a worker thread (its async wrappers do).
                self.connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open {self.display}: {exc}") from None
        self.has_checkpoints: Final = self._has_checkpoints()

    def query(self, sqlite_sql: str, postgres_sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Rows (as tuples) of the statement for this database, ``params`` bound."""
        sql = postgres_sql if self.kind == "postgres" else sqlite_sql
        try:
            cursor = self.connection.execute(sql, params)
            return [tuple(row) for row in cursor]
        except self.driver_error as exc:
            raise StoreError(f"reading {self.display} failed: {_first_line(exc)}") from None

    def _has_checkpoints(self) -> bool:
        if self.kind == "postgres":
            return self.query("", _PG_HAS_CHECKPOINTS, ())[0][0] is True
        return bool(self.query(_SQLITE_HAS_CHECKPOINTS, "", ("checkpoints",))[0][0])

    def has_history(self) -> bool:
        """False for the shallow PostgreSQL saver's schema, which keeps one checkpoint a thread."""
        if self.kind != "postgres":
            return True
        return bool(self.query("", _PG_HAS_HISTORY, ())[0][0])

    def task_path_column(self) -> str:
        """SQLite's ``writes.task_path``, or ``''`` in a table from before langgraph added it
        (langgraph's own rule)."""
        return "task_path" if self.query(_SQLITE_HAS_TASK_PATH, "", ())[0][0] else "''"

    def namespaces(self, thread_id: str) -> list[tuple[str, int]]:
        """Every checkpoint namespace of a thread (``""`` is the root graph) and its size."""
        rows = self.query(*_NAMESPACES, (thread_id,))
        return [(str(ns), int(n)) for ns, n in rows]

    def checkpoint_ids(self, thread_id: str, checkpoint_ns: str, limit: int | None) -> list[str]:
        """Ids newest first, the order of ``list()`` and ``get_state_history()``."""
        # SQLite reads LIMIT -1 as no limit, PostgreSQL reads LIMIT NULL so.
        bound: int | None = limit if limit is not None else (-1 if self.kind == "sqlite" else None)
        rows = self.query(*_IDS, (thread_id, checkpoint_ns, bound))
        return [str(r[0]) for r in rows]

    def newest_checkpoint(self) -> CheckpointId | None:
        """The newest checkpoint of the whole store (ids are time-ordered), if any."""
        if not self.has_checkpoints:
            return None
        rows = self.query(_SQLITE_NEWEST, _SQLITE_NEWEST, ())
        if not rows:
            return None
        thread_id, checkpoint_ns, checkpoint_id = rows[0]
        return str(thread_id), str(checkpoint_ns), str(checkpoint_id)

    def v03_marks(self) -> bool:
        """Whether any checkpoint carries a mark 0.3's savers left in plaintext.

        Every checkpoint they wrote on PostgreSQL does (its record), and on
        SQLite every one written with the default ``seal_metadata=True``; a SQLite
        checkpoint written without it is told only with a key (stores/_v03.py).
        """
        if not self.has_checkpoints:
            return False
        if self.kind == "postgres":
            params: tuple[str, ...] = (SEALED_METADATA_KEY, INDEX_METADATA_KEY, RECORD_KEY)
        else:
            params = (f"$.{SEALED_METADATA_KEY}", f"$.{INDEX_METADATA_KEY}")
        return bool(self.query(_SQLITE_V03_MARKS, _PG_V03_MARKS, params)[0][0])

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> HistoryView:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _first_line(exc: BaseException) -> str:
    # Driver messages may quote SQL on later lines; the first names the failure.
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
