"""The binding pass on PostgreSQL: three keyset passes, each write a compare-and-swap.

1. ``checkpoint_blobs``: each value is re-encrypted at ``Location.blob``
   (its key names the location). One transaction per page.
2. ``checkpoint_writes``: likewise at ``Location.write``.
3. ``checkpoints``: a record with a seal is checked and left alone; one
   without has its inline channel values moved into bound blob rows and is
   sealed as the sealed saver's ``put`` seals it. One transaction per page:
   the moved values' blob rows, then each record's compare-and-swap.

Values come first so that a checkpoint sealed by pass 3 never points at a
blob this run has not yet considered.

What each record becomes is planned in ``_bind_record``, without SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from langgraph.checkpoint.postgres.base import UPSERT_CHECKPOINT_BLOBS_SQL

from secure_serde._binding import Location
from secure_serde._errors import DecryptionError
from secure_serde._langgraph import postgres_cursor
from secure_serde.savers._bind_record import (
    BlobInsert,
    BlobKey,
    PlannedCheckpoint,
    plan_checkpoint,
)
from secure_serde.savers._bind_values import AlreadyBound, ValueRebinder
from secure_serde.savers._bound import RECORD_KEY, Binder

if TYPE_CHECKING:
    from psycopg import Cursor
    from psycopg.rows import DictRow

    from secure_serde.savers._bind_in_place import Tally
    from secure_serde.savers._v03_postgres import PostgresSaver

__all__ = ["BLOB_PASS", "WRITE_PASS", "bind_postgres_rows", "existing_blobs", "write_checkpoints"]

_EMPTY: Final = "empty"


class _ValuePass:
    """One table of values: its keyset page, its swap, and each row's location."""

    def __init__(
        self,
        table: str,
        key: tuple[str, ...],
        extra: tuple[str, ...],
        locate: Callable[[Mapping[str, Any]], Location],
        counter: str,
    ) -> None:
        columns = ", ".join((*key, *extra, "type", "blob"))
        order = ", ".join(key)
        marks = ", ".join("%s" for _ in key)
        match = " AND ".join(f"{c} = %s" for c in key)
        self.table = table
        self.key = key
        self.locate = locate
        self.counter = counter
        # Built once, at import, from the literal names below: nothing stored or
        # user-supplied reaches these statements (hence S608); values are bound.
        self.first_sql = f"SELECT {columns} FROM {table} ORDER BY {order} LIMIT %s"  # noqa: S608
        self.page_sql = (
            f"SELECT {columns} FROM {table} WHERE ({order}) > ({marks}) ORDER BY {order} LIMIT %s"  # noqa: S608
        )
        self.swap_sql = (
            f"UPDATE {table} SET type = %s, blob = %s WHERE {match} AND type = %s AND blob = %s"  # noqa: S608
            " RETURNING 1"
        )

    def ids(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row[c] for c in self.key)


BLOB_PASS: Final = _ValuePass(
    "checkpoint_blobs",
    ("thread_id", "checkpoint_ns", "channel", "version"),
    (),
    lambda r: Location.blob(r["thread_id"], r["checkpoint_ns"], r["channel"], r["version"]),
    "blobs_bound",
)
WRITE_PASS: Final = _ValuePass(
    "checkpoint_writes",
    ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
    ("task_path", "channel"),
    lambda r: Location.write(
        r["thread_id"],
        r["checkpoint_ns"],
        r["checkpoint_id"],
        r["task_id"],
        r["task_path"],
        int(r["idx"]),
        r["channel"],
    ),
    "writes_bound",
)

_CHECKPOINTS_FIRST: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata"
    " FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id LIMIT %s"
)
_CHECKPOINTS_PAGE: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata"
    " FROM checkpoints WHERE (thread_id, checkpoint_ns, checkpoint_id) > (%s, %s, %s)"
    " ORDER BY thread_id, checkpoint_ns, checkpoint_id LIMIT %s"
)
# The blob rows at the (thread, ns, channel, version) of a page's inline values.
_BLOBS_AT: Final = (
    "SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.blob"
    " FROM checkpoint_blobs b"
    " JOIN unnest(%s::text[], %s::text[], %s::text[], %s::text[])"
    " AS w(thread_id, checkpoint_ns, channel, version)"
    " ON b.thread_id = w.thread_id AND b.checkpoint_ns = w.checkpoint_ns"
    " AND b.channel = w.channel AND b.version = w.version"
)
_CHECKPOINT_SWAP: Final = (
    "UPDATE checkpoints SET checkpoint = %s WHERE thread_id = %s AND checkpoint_ns = %s"
    " AND checkpoint_id = %s AND checkpoint = %s AND metadata = %s"
    " AND parent_checkpoint_id IS NOT DISTINCT FROM %s RETURNING 1"
)


def _pages(
    saver: PostgresSaver, first: str, page: str, key: Sequence[str], batch_size: int
) -> Iterator[list[DictRow]]:
    last: tuple[Any, ...] | None = None
    while True:
        with postgres_cursor(saver) as cur:
            if last is None:
                cur.execute(first, (batch_size,))
            else:
                cur.execute(page, (*last, batch_size))
            rows = cur.fetchall()
        if not rows:
            return
        yield rows
        last = tuple(rows[-1][c] for c in key)


def _bind_values(  # noqa: PLR0913 - the pass, its table, and the run's two options
    saver: PostgresSaver,
    rebinder: ValueRebinder,
    tally: Tally,
    spec: _ValuePass,
    *,
    batch_size: int,
    dry_run: bool,
) -> None:
    for rows in _pages(saver, spec.first_sql, spec.page_sql, spec.key, batch_size):
        swaps: list[tuple[Any, ...]] = []
        for row in rows:
            if row["type"] == _EMPTY or row["blob"] is None:
                continue
            try:
                outcome = rebinder.rebind(row["type"], bytes(row["blob"]), spec.locate(row))
            except DecryptionError as exc:
                tally.refuse(spec.table, spec.ids(row), exc)
                continue
            if isinstance(outcome, AlreadyBound):
                tally.already_bound += 1
                continue
            swaps.append((outcome.type_tag, outcome.data, *spec.ids(row), row["type"], row["blob"]))
        if dry_run:
            setattr(tally, spec.counter, getattr(tally, spec.counter) + len(swaps))
            continue
        applied = _apply_swaps(saver, spec.swap_sql, swaps)
        setattr(tally, spec.counter, getattr(tally, spec.counter) + applied)
        tally.raced += len(swaps) - applied


def _applied(cur: Cursor[DictRow], sql: str, params: Sequence[tuple[Any, ...]]) -> list[bool]:
    """Run a ``RETURNING`` compare-and-swap for each of ``params``, pipelined; which applied."""
    cur.executemany(sql, params, returning=True)
    applied = [cur.fetchone() is not None]
    while cur.nextset():
        applied.append(cur.fetchone() is not None)
    return applied


def _apply_swaps(saver: PostgresSaver, sql: str, swaps: Sequence[tuple[Any, ...]]) -> int:
    if not swaps:
        return 0
    with postgres_cursor(saver) as cur, cur.connection.transaction():
        return sum(_applied(cur, sql, swaps))


def existing_blobs(
    cur: Cursor[DictRow], rows: Sequence[Mapping[str, Any]]
) -> dict[BlobKey, tuple[str, bytes | None]]:
    """The stored blob rows where the unsealed ``rows`` keep inline values, in one query."""
    keys: list[BlobKey] = []
    for row in rows:
        stored: Mapping[str, Any] = row["checkpoint"]
        if RECORD_KEY in stored:
            continue
        versions: Mapping[str, Any] = stored.get("channel_versions") or {}
        keys.extend(
            (row["thread_id"], row["checkpoint_ns"], ch, str(versions[ch]))
            for ch in stored.get("channel_values") or {}
            if ch in versions
        )
    if not keys:
        return {}
    cur.execute(_BLOBS_AT, tuple(list(column) for column in zip(*keys, strict=True)))
    return {
        (b["thread_id"], b["checkpoint_ns"], b["channel"], b["version"]): (
            b["type"],
            None if b["blob"] is None else bytes(b["blob"]),
        )
        for b in cur.fetchall()
    }


def write_checkpoints(saver: PostgresSaver, plans: Sequence[PlannedCheckpoint]) -> list[bool]:
    """Write a page's plans in one transaction; which records were swapped.

    The blob rows go first, ``ON CONFLICT DO NOTHING`` as the saver inserts
    them: a version names one value, so a row already there (a writer's, or
    an earlier run's) holds it. A blob inserted for a record whose swap then
    loses the race stays: it is what the sealed saver writes for that
    version, and the next pass finds it and drops the inline copy.
    """
    from psycopg.types.json import Jsonb

    if not plans:
        return []
    blobs = [
        (p.row["thread_id"], p.row["checkpoint_ns"], i.channel, i.version, i.type_tag, i.data)
        for p in plans
        for i in p.inserts
    ]
    swaps = [
        (
            Jsonb(p.checkpoint),
            p.row["thread_id"],
            p.row["checkpoint_ns"],
            p.row["checkpoint_id"],
            Jsonb(p.row["checkpoint"]),
            Jsonb(p.row["metadata"]),
            p.row["parent_checkpoint_id"],
        )
        for p in plans
    ]
    with postgres_cursor(saver) as cur, cur.connection.transaction():
        if blobs:
            cur.executemany(UPSERT_CHECKPOINT_BLOBS_SQL, blobs)
        return _applied(cur, _CHECKPOINT_SWAP, swaps)


def _bind_checkpoints(
    saver: PostgresSaver,
    rebinder: ValueRebinder,
    tally: Tally,
    *,
    batch_size: int,
    dry_run: bool,
) -> None:
    key = ("thread_id", "checkpoint_ns", "checkpoint_id")
    binder = Binder(rebinder.serde, rebinder.migration)
    for rows in _pages(saver, _CHECKPOINTS_FIRST, _CHECKPOINTS_PAGE, key, batch_size):
        with postgres_cursor(saver) as cur:
            existing = existing_blobs(cur, rows)
        pending: dict[BlobKey, tuple[Any, BlobInsert]] = {}
        plans: list[PlannedCheckpoint] = []
        for row in rows:
            try:
                planned = plan_checkpoint(binder, rebinder.migration, row, existing, pending)
            except DecryptionError as exc:
                tally.refuse("checkpoints", tuple(row[c] for c in key), exc)
                continue
            if planned is None:
                tally.already_bound += 1
            else:
                plans.append(planned)
        landed = [True] * len(plans) if dry_run else write_checkpoints(saver, plans)
        for plan, ok in zip(plans, landed, strict=True):
            if ok:
                tally.checkpoints_sealed += 1
                tally.inline_values_moved += plan.moved
            else:
                tally.raced += 1


def bind_postgres_rows(
    saver: PostgresSaver,
    rebinder: ValueRebinder,
    tally: Tally,
    *,
    batch_size: int,
    dry_run: bool,
) -> None:
    """Run the three passes over the saver's store, adding what they did to ``tally``."""
    for spec in (BLOB_PASS, WRITE_PASS):
        _bind_values(saver, rebinder, tally, spec, batch_size=batch_size, dry_run=dry_run)
    _bind_checkpoints(saver, rebinder, tally, batch_size=batch_size, dry_run=dry_run)
