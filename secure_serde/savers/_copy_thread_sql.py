"""The rows ``copy_thread`` reads and writes, on PostgreSQL and SQLite, in one transaction.

Each copy reads every row of the source thread (all namespaces, every
checkpoint of the parent chain, every blob and pending write), has
`ThreadCopier` re-encrypt them all for the target, and only then inserts,
in the same transaction: a source row that fails authentication raises
before anything is written, and the transaction rolls back whatever else
fails. On PostgreSQL the transaction is ``REPEATABLE READ``, so the three
tables are read from one snapshot (outside pipeline mode, see `_can_snapshot`);
on SQLite ``BEGIN IMMEDIATE`` holds the write lock from the first read.

A target thread that has rows already is refused (`ConfigurationError`):
langgraph's spec says nothing of it, and splicing two histories under one
id (their checkpoints interleaved by id, their blobs colliding by version)
is not a copy. The inserts are plain ``INSERT``s for the same reason: a
writer that starts the target thread meanwhile makes the copy fail, not
merge.

Statements are literals with placeholders; no SQL is assembled from values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from secure_serde._errors import BindingError, ConfigurationError
from secure_serde._langgraph import async_postgres_cursor, postgres_cursor, sqlite_has_task_path
from secure_serde.savers._bind_record import BlobInsert, BlobKey
from secure_serde.savers._copy_thread import ThreadCopier
from secure_serde.savers._sqlite_bound import SqliteRows

__all__ = ["acopy_postgres", "acopy_sqlite", "copy_on_loop", "copy_postgres", "copy_sqlite"]

# --- PostgreSQL ------------------------------------------------------------------------------

_PG_SNAPSHOT: Final = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
_PG_TARGET_USED: Final = (
    "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = %s)"
    " OR EXISTS (SELECT 1 FROM checkpoint_blobs WHERE thread_id = %s)"
    " OR EXISTS (SELECT 1 FROM checkpoint_writes WHERE thread_id = %s) AS used"
)
_PG_CHECKPOINTS: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,"
    " metadata FROM checkpoints WHERE thread_id = %s ORDER BY checkpoint_ns, checkpoint_id"
)
_PG_BLOBS: Final = (
    "SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = %s"
)
_PG_WRITES: Final = (
    "SELECT checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob"
    " FROM checkpoint_writes WHERE thread_id = %s"
)
_PG_INSERT_CHECKPOINT: Final = (
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,"
    " type, checkpoint, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_PG_INSERT_BLOB: Final = (
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)"
    " VALUES (%s, %s, %s, %s, %s, %s)"
)
_PG_INSERT_WRITE: Final = (
    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,"
    " task_path, idx, channel, type, blob) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


@dataclass(frozen=True)
class _Planned:
    """The target's rows, every value re-encrypted: (statement, parameter rows) in order."""

    inserts: tuple[tuple[str, list[tuple[Any, ...]]], ...]


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _refuse_used(used: bool) -> None:
    if used:
        raise ConfigurationError(
            "copy_thread target thread already has checkpoints or writes; delete it first"
            " or copy to a new thread id"
        )


def _can_snapshot(cur: Any) -> bool:
    """Whether this transaction can be made ``REPEATABLE READ`` (one snapshot for the reads).

    Not in psycopg's pipeline mode (a saver opened with ``pipeline=True``),
    where the server refuses the ``SET`` after the pipelined ``BEGIN``. There
    the reads still see every row a copied checkpoint needs: checkpoints are
    read first, and a checkpoint is committed after its blobs; writes of a
    checkpoint read later are left out (`plan_postgres`).
    """
    # Imported here, as below: the SQLite savers import this module, and an
    # application on SQLite need not have the PostgreSQL driver installed.
    from psycopg import pq

    return bool(cur.connection.info.pipeline_status == pq.PipelineStatus.OFF)


def plan_postgres(
    copier: ThreadCopier,
    checkpoints: Sequence[Mapping[str, Any]],
    blobs: Sequence[Mapping[str, Any]],
    writes: Sequence[Mapping[str, Any]],
) -> _Planned:
    """Every source row re-encrypted for the target (all the cipher work; no I/O but KMS)."""
    from psycopg.types.json import Jsonb

    target = copier.target
    moved: dict[BlobKey, tuple[str, bytes | None]] = {}
    for b in blobs:
        ns, channel, version = b["checkpoint_ns"], b["channel"], b["version"]
        moved[(target, ns, channel, version)] = copier.blob(
            ns, channel, version, b["type"], _bytes(b["blob"])
        )
    copied = {(c["checkpoint_ns"], c["checkpoint_id"]) for c in checkpoints}
    write_rows: list[tuple[Any, ...]] = []
    for w in writes:
        if (w["checkpoint_ns"], w["checkpoint_id"]) not in copied:
            continue  # its checkpoint was put after the checkpoints were read
        ids = (w["checkpoint_ns"], w["checkpoint_id"], w["task_id"], w["task_path"], w["idx"])
        value = (w["type"], bytes(w["blob"]))
        write_rows.append((target, *ids, w["channel"], *copier.write(*ids, w["channel"], value)))
    # Inline values of stock records move into blobs (shared by the records
    # that name the same version, as rewrap shares them).
    pending: dict[BlobKey, tuple[Any, BlobInsert]] = {}
    checkpoint_rows: list[tuple[Any, ...]] = []
    for row in checkpoints:
        ns, checkpoint_id = row["checkpoint_ns"], row["checkpoint_id"]
        metadata = copier.metadata(row["metadata"], ns, checkpoint_id)
        planned = copier.postgres_record(row, metadata, moved, pending)
        checkpoint_rows.append(
            (
                target,
                ns,
                checkpoint_id,
                row["parent_checkpoint_id"],
                row["type"],
                Jsonb(planned.checkpoint),
                Jsonb(metadata),
            )
        )
    blob_rows = [(*key, *value) for key, value in moved.items()]
    blob_rows += [
        (*k[:2], i.channel, i.version, i.type_tag, i.data) for k, (_, i) in pending.items()
    ]
    return _Planned(
        (
            (_PG_INSERT_BLOB, blob_rows),
            (_PG_INSERT_WRITE, write_rows),
            (_PG_INSERT_CHECKPOINT, checkpoint_rows),
        )
    )


def copy_postgres(saver: Any, copier: ThreadCopier) -> None:
    """Copy on a sync sealed PostgreSQL saver (its lock and connection)."""
    source, target = copier.source, copier.target
    with postgres_cursor(saver) as cur, cur.connection.transaction():
        if _can_snapshot(cur):
            cur.execute(_PG_SNAPSHOT)
        cur.execute(_PG_TARGET_USED, (target, target, target))
        found = cur.fetchone()
        _refuse_used(bool(found and found["used"]))
        read = []
        for sql in (_PG_CHECKPOINTS, _PG_BLOBS, _PG_WRITES):
            cur.execute(sql, (source,))
            read.append(cur.fetchall())
        planned = plan_postgres(copier, *read)
        for sql, rows in planned.inserts:
            if rows:
                cur.executemany(sql, rows)


async def acopy_postgres(saver: Any, copier: ThreadCopier) -> None:
    """Copy on an async sealed PostgreSQL saver; the cipher work runs off the event loop."""
    source, target = copier.source, copier.target
    async with async_postgres_cursor(saver) as cur, cur.connection.transaction():
        if _can_snapshot(cur):
            await cur.execute(_PG_SNAPSHOT)
        await cur.execute(_PG_TARGET_USED, (target, target, target))
        found = await cur.fetchone()
        _refuse_used(bool(found and found["used"]))
        read = []
        for sql in (_PG_CHECKPOINTS, _PG_BLOBS, _PG_WRITES):
            await cur.execute(sql, (source,))
            read.append(await cur.fetchall())
        planned = await asyncio.to_thread(plan_postgres, copier, *read)
        for sql, rows in planned.inserts:
            if rows:
                await cur.executemany(sql, rows)


# --- SQLite ----------------------------------------------------------------------------------

_SQ_BEGIN: Final = "BEGIN IMMEDIATE"
_SQ_TARGET_USED: Final = (
    "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ?)"
    " OR EXISTS (SELECT 1 FROM writes WHERE thread_id = ?)"
)
_SQ_CHECKPOINTS: Final = (
    "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"
    " FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id"
)
_SQ_INSERT_CHECKPOINT: Final = (
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,"
    " type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# Databases created before langgraph added task_path have no such column.
_SQ_WRITES: Final = {
    True: (
        "SELECT checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value"
        " FROM writes WHERE thread_id = ?",
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,"
        " channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    ),
    False: (
        "SELECT checkpoint_ns, checkpoint_id, task_id, '', idx, channel, type, value"
        " FROM writes WHERE thread_id = ?",
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,"
        " channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    ),
}


def plan_sqlite(
    copier: ThreadCopier,
    checkpoints: Sequence[Sequence[Any]],
    writes: Sequence[Sequence[Any]],
    insert_write: str,
) -> _Planned:
    """Every source row re-encrypted for the target (all the cipher work; no I/O but KMS)."""
    target = copier.target
    with_path = "task_path" in insert_write
    write_rows: list[tuple[Any, ...]] = []
    for ns, checkpoint_id, task_id, task_path, idx, channel, type_tag, value in writes:
        if value is None:
            raise BindingError("write row holds no value")
        moved = copier.write(
            ns, checkpoint_id, task_id, task_path, idx, channel, (type_tag, bytes(value))
        )
        path = (task_path,) if with_path else ()
        write_rows.append((target, ns, checkpoint_id, task_id, *path, idx, channel, *moved))
    checkpoint_rows: list[tuple[Any, ...]] = []
    for ns, checkpoint_id, parent_id, type_tag, blob, stored in checkpoints:
        if blob is None:
            raise BindingError("checkpoint row holds no checkpoint")
        metadata = SqliteRows.metadata_of(stored)
        copied = copier.metadata(metadata, ns, checkpoint_id)
        # Unchanged metadata (no sealed entry) keeps its exact stored bytes.
        new_stored = stored if copied is metadata else SqliteRows.metadata_bytes(copied)
        moved = copier.sqlite_checkpoint(
            ns, checkpoint_id, parent_id, (type_tag, bytes(blob)), stored, new_stored
        )
        checkpoint_rows.append((target, ns, checkpoint_id, parent_id, *moved, new_stored))
    return _Planned(((insert_write, write_rows), (_SQ_INSERT_CHECKPOINT, checkpoint_rows)))


def copy_sqlite(saver: Any, copier: ThreadCopier) -> None:
    """Copy on a sync sealed SQLite saver (its lock and connection)."""
    source, target = copier.source, copier.target
    with saver.lock:
        saver.setup()
        select_writes, insert_write = _SQ_WRITES[sqlite_has_task_path(saver)]
        conn = saver.conn
        cur = conn.cursor()
        try:
            cur.execute(_SQ_BEGIN)
            _refuse_used(bool(cur.execute(_SQ_TARGET_USED, (target, target)).fetchone()[0]))
            checkpoints = cur.execute(_SQ_CHECKPOINTS, (source,)).fetchall()
            writes = cur.execute(select_writes, (source,)).fetchall()
            planned = plan_sqlite(copier, checkpoints, writes, insert_write)
            for sql, rows in planned.inserts:
                cur.executemany(sql, rows)
        except BaseException:
            conn.rollback()
            raise
        else:
            conn.commit()
        finally:
            cur.close()


async def acopy_sqlite(saver: Any, copier: ThreadCopier) -> None:
    """Copy on an async sealed SQLite saver; the cipher work runs off the event loop."""
    source, target = copier.source, copier.target
    await saver.setup()
    select_writes, insert_write = _SQ_WRITES[sqlite_has_task_path(saver)]
    conn = saver.conn
    async with saver.lock:
        async with conn.execute(_SQ_BEGIN):
            pass
        try:
            async with conn.execute(_SQ_TARGET_USED, (target, target)) as cur:
                found = await cur.fetchone()
            _refuse_used(bool(found and found[0]))
            async with conn.execute(_SQ_CHECKPOINTS, (source,)) as cur:
                checkpoints = await cur.fetchall()
            async with conn.execute(select_writes, (source,)) as cur:
                writes = await cur.fetchall()
            planned = await asyncio.to_thread(
                plan_sqlite, copier, list(checkpoints), list(writes), insert_write
            )
            for sql, rows in planned.inserts:
                cur = await conn.executemany(sql, rows)
                await cur.close()
        except BaseException:
            await conn.rollback()
            raise
        await conn.commit()


def copy_on_loop(loop: asyncio.AbstractEventLoop, copy: Coroutine[Any, Any, None]) -> None:
    """An async saver's ``copy_thread``: ``acopy_thread`` run on its loop, as the stock
    async savers run their other sync methods (from another thread only: blocking the
    loop's own thread on it would deadlock)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        copy.close()
        raise asyncio.InvalidStateError(
            "copy_thread on an async saver blocks: call it from another thread, or await"
            " acopy_thread on the saver's event loop"
        )
    asyncio.run_coroutine_threadsafe(copy, loop).result()
