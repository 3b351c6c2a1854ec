"""The SQL `V03Reader` runs: literal statements, values always bound.

SQLite's are 0.3's own (langgraph-checkpoint-sqlite's statements);
PostgreSQL's are langgraph-checkpoint-postgres 3.2's ``SELECT_SQL`` and
``SELECT_PENDING_SENDS_SQL``. A WHERE clause is assembled from the literal
fragments below, each written once with ``{0}`` for the placeholder, so the
same text serves both databases (``?`` and ``%s``).
"""

from __future__ import annotations

from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import get_checkpoint_id

from secure_serde.stores._history import HistoryView, _both

__all__ = [
    "PG_COLUMNS",
    "PG_NAMES",
    "PG_SENDS",
    "SQLITE_COLUMNS",
    "SQLITE_WRITES",
    "Where",
    "get_where",
    "list_where",
    "sqlite_writes",
]

# The same clause for SQLite and for PostgreSQL, and its parameters.
Where = tuple[tuple[str, str], tuple[Any, ...]]

SQLITE_COLUMNS: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,"
    " metadata FROM checkpoints"
)
_OF_CHECKPOINT: Final = (
    " FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
SQLITE_WRITES: Final = "SELECT task_id, channel, type, value, {path}, idx" + _OF_CHECKPOINT
_HAS_PATH: Final = "SELECT count(*) FROM pragma_table_info('writes') WHERE name = 'task_path'"
# langgraph-checkpoint-postgres 3.2's SELECT_SQL and SELECT_PENDING_SENDS_SQL, verbatim
# (the channel is langgraph's TASKS).
PG_COLUMNS: Final = """
select
    thread_id,
    checkpoint,
    checkpoint_ns,
    checkpoint_id,
    parent_checkpoint_id,
    metadata,
    (
        select array_agg(array[bl.channel::bytea, bl.type::bytea, bl.blob])
        from jsonb_each_text(checkpoint -> 'channel_versions')
        inner join checkpoint_blobs bl
            on bl.thread_id = checkpoints.thread_id
            and bl.checkpoint_ns = checkpoints.checkpoint_ns
            and bl.channel = jsonb_each_text.key
            and bl.version = jsonb_each_text.value
    ) as channel_values,
    (
        select
        array_agg(array[cw.task_id::text::bytea, cw.channel::bytea, cw.type::bytea, cw.blob, convert_to(cw.task_path, 'UTF8'), cw.idx::text::bytea])
        from checkpoint_writes cw
        where cw.thread_id = checkpoints.thread_id
            and cw.checkpoint_ns = checkpoints.checkpoint_ns
            and cw.checkpoint_id = checkpoints.checkpoint_id
    ) as pending_writes
from checkpoints """  # noqa: E501 - kept as langgraph writes it
PG_NAMES: Final = (
    "thread_id",
    "checkpoint",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "metadata",
    "channel_values",
    "pending_writes",
)
PG_SENDS: Final = """
select
    checkpoint_id,
    array_agg(array[type::bytea, blob] order by task_path, task_id, idx) as sends
from checkpoint_writes
where thread_id = %s
    and checkpoint_id = any(%s)
    and channel = '__pregel_tasks'
group by checkpoint_id
"""
# Literal fragments: a WHERE clause is assembled from these, values always bound.
_BY_ID: Final = " WHERE thread_id = {0} AND checkpoint_ns = {0} AND checkpoint_id = {0}"
_LATEST: Final = (
    " WHERE thread_id = {0} AND checkpoint_ns = {0} ORDER BY checkpoint_id DESC LIMIT 1"
)
_THREAD: Final = "thread_id = {0}"
_NS: Final = "checkpoint_ns = {0}"
_ID: Final = "checkpoint_id = {0}"
_BEFORE: Final = "checkpoint_id < {0}"
_ORDER: Final = " ORDER BY checkpoint_id DESC"
_LIMIT: Final = " LIMIT {0}"


def get_where(config: RunnableConfig) -> Where:
    """``get_tuple``'s clause: the checkpoint named, or the thread's newest."""
    configurable = config["configurable"]
    thread_id = configurable["thread_id"]
    checkpoint_ns = configurable.get("checkpoint_ns", "")
    if checkpoint_id := get_checkpoint_id(config):
        return _both(_BY_ID), (thread_id, checkpoint_ns, checkpoint_id)
    return _both(_LATEST), (thread_id, checkpoint_ns)


def list_where(
    config: RunnableConfig | None, before: RunnableConfig | None, limit: int | None
) -> Where:
    """``list``'s clause, as langgraph's savers build it (newest first)."""
    terms: list[str] = []
    params: list[Any] = []
    if config is not None:
        terms.append(_THREAD)
        params.append(config["configurable"]["thread_id"])
        checkpoint_ns = config["configurable"].get("checkpoint_ns")
        if checkpoint_ns is not None:
            terms.append(_NS)
            params.append(checkpoint_ns)
        if checkpoint_id := get_checkpoint_id(config):
            terms.append(_ID)
            params.append(checkpoint_id)
    if before is not None:
        terms.append(_BEFORE)
        params.append(get_checkpoint_id(before))
    template = (" WHERE " + " AND ".join(terms) if terms else "") + _ORDER
    if limit is not None:
        template += _LIMIT
        params.append(int(limit))
    return _both(template), tuple(params)


def sqlite_writes(view: HistoryView, template: str) -> str:
    """``template`` reading ``{path}`` as the task path, ``''`` in a writes table from before
    langgraph added it (langgraph's own rule)."""
    return template.format(path="task_path" if view.query(_HAS_PATH, "", ())[0][0] else "''")
