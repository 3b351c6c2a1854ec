"""The binding pass on SQLite: two keyset passes, each page one transaction of swaps.

The stock SQLite saver keeps a whole checkpoint (values included) in one
serialized blob, so binding a checkpoint is re-encrypting that blob at
``Location.checkpoint(thread, ns, id, parent, canonical(metadata record))``,
exactly where the sealed saver's ``put`` writes it; no value is inline.
Pending writes are bound at ``Location.write``, as ``put_writes`` binds them.

The swap matches the row's type, bytes, parent link and metadata as read,
since the location covers the last two: a row the application rewrote
meanwhile keeps what it wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any, Final

from secure_serde._binding import Location
from secure_serde._errors import BindingError, DecryptionError
from secure_serde.savers._bind_values import AlreadyBound, ValueRebinder
from secure_serde.savers._bound import canonical, metadata_record

if TYPE_CHECKING:
    import sqlite3

    from secure_serde.savers._bind_in_place import Tally
    from secure_serde.savers._v03_sqlite import SqliteSaver

__all__ = ["CHECKPOINT_PASS", "SqlitePass", "bind_sqlite_rows", "plan_page", "swap_page"]


def checkpoint_location(row: Mapping[str, Any]) -> Location:
    """Where the sealed SQLite saver binds a checkpoint blob: its record, metadata included."""
    stored = row["metadata"]
    try:
        metadata = {} if stored is None else json.loads(stored)
    except ValueError:
        raise BindingError("checkpoint metadata is not JSON") from None
    return Location.checkpoint(
        row["thread_id"],
        row["checkpoint_ns"],
        row["checkpoint_id"],
        row["parent_checkpoint_id"],
        canonical(metadata_record(metadata)),
    )


def write_location(row: Mapping[str, Any]) -> Location:
    return Location.write(
        row["thread_id"],
        row["checkpoint_ns"],
        row["checkpoint_id"],
        row["task_id"],
        row["task_path"],
        int(row["idx"]),
        row["channel"],
    )


class SqlitePass:
    """One table: its keyset page, its compare-and-swap, and each row's location."""

    def __init__(  # noqa: PLR0913 - a table is its key, extras, value columns and location
        self,
        table: str,
        key: tuple[str, ...],
        extra: tuple[str, ...],
        value: str,
        locate: Callable[[Mapping[str, Any]], Location],
        counter: str,
    ) -> None:
        self.table = table
        self.key = key
        self.extra = extra
        self.value = value
        self.locate = locate
        self.counter = counter
        columns = ", ".join((*key, *extra, "type", value))
        order = ", ".join(key)
        marks = ", ".join("?" for _ in key)
        # Every column read is matched on swap: the location covers the extras.
        match = " AND ".join(f"{c} IS ?" for c in (*key, *extra, "type", value))
        # Built once, at import, from the literal names below: nothing stored or
        # user-supplied reaches these statements (hence S608); values are bound.
        self.first_sql = f"SELECT {columns} FROM {table} ORDER BY {order} LIMIT ?"  # noqa: S608
        self.page_sql = (
            f"SELECT {columns} FROM {table} WHERE ({order}) > ({marks}) ORDER BY {order} LIMIT ?"  # noqa: S608
        )
        self.swap_sql = f"UPDATE {table} SET type = ?, {value} = ? WHERE {match}"  # noqa: S608
        self.columns = (*key, *extra, "type", value)

    def ids(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row[c] for c in self.key)


CHECKPOINT_PASS: Final = SqlitePass(
    "checkpoints",
    ("thread_id", "checkpoint_ns", "checkpoint_id"),
    ("parent_checkpoint_id", "metadata"),
    "checkpoint",
    checkpoint_location,
    "checkpoints_sealed",
)


def _write_pass(has_task_path: bool) -> SqlitePass:
    # Before langgraph-checkpoint-sqlite added task_path, the saver binds ''.
    extra = ("task_path", "channel") if has_task_path else ("channel",)
    locate: Callable[[Mapping[str, Any]], Location] = (
        write_location if has_task_path else (lambda r: write_location({**r, "task_path": ""}))
    )
    return SqlitePass(
        "writes",
        ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
        extra,
        "value",
        locate,
        "writes_bound",
    )


def _pages(
    conn: sqlite3.Connection, spec: SqlitePass, batch_size: int
) -> Iterator[list[dict[str, Any]]]:
    last: tuple[Any, ...] | None = None
    while True:
        with closing(conn.cursor()) as cur:
            if last is None:
                cur.execute(spec.first_sql, (batch_size,))
            else:
                cur.execute(spec.page_sql, (*last, batch_size))
            rows = [dict(zip(spec.columns, r, strict=True)) for r in cur.fetchall()]
        if not rows:
            return
        yield rows
        last = spec.ids(rows[-1])


def plan_page(
    rebinder: ValueRebinder, tally: Tally, spec: SqlitePass, rows: Sequence[Mapping[str, Any]]
) -> list[tuple[Any, ...]]:
    """The swaps for one page (parameters of ``spec.swap_sql``); refusals go to ``tally``."""
    swaps: list[tuple[Any, ...]] = []
    for row in rows:
        data = row[spec.value]
        if data is None:
            continue
        try:
            outcome = rebinder.rebind(str(row["type"]), bytes(data), spec.locate(row))
        except DecryptionError as exc:
            tally.refuse(spec.table, spec.ids(row), exc)
            continue
        if isinstance(outcome, AlreadyBound):
            tally.already_bound += 1
            continue
        swaps.append((outcome.type_tag, outcome.data, *(row[c] for c in spec.columns)))
    return swaps


def swap_page(conn: sqlite3.Connection, spec: SqlitePass, swaps: Sequence[tuple[Any, ...]]) -> int:
    """Apply one page's swaps in one transaction; how many rows still held what was read."""
    if not swaps:
        return 0
    applied = 0
    with conn:  # one transaction, committed on success, rolled back on error
        for params in swaps:
            applied += conn.execute(spec.swap_sql, params).rowcount
    return applied


def _writes_have_task_path(conn: sqlite3.Connection) -> bool:
    with closing(conn.execute("PRAGMA table_info(writes)")) as cur:
        return any(r[1] == "task_path" for r in cur.fetchall())


def bind_sqlite_rows(
    saver: SqliteSaver,
    rebinder: ValueRebinder,
    tally: Tally,
    *,
    batch_size: int,
    dry_run: bool,
) -> None:
    """Run both passes over the saver's database, adding what they did to ``tally``."""
    saver.setup()
    with saver.lock:
        conn = saver.conn
        for spec in (CHECKPOINT_PASS, _write_pass(_writes_have_task_path(conn))):
            for rows in _pages(conn, spec, batch_size):
                swaps = plan_page(rebinder, tally, spec, rows)
                done = len(swaps) if dry_run else swap_page(conn, spec, swaps)
                setattr(tally, spec.counter, getattr(tally, spec.counter) + done)
                tally.raced += len(swaps) - done
