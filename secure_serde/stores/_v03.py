"""`V03Reader`: a read-only reader of the stores secure_serde 0.3's sealed savers wrote.

0.3's sealed ``SqliteSaver`` and ``PostgresSaver`` subclassed langgraph's
savers and overrode their private hooks. This reader gets the same
`CheckpointTuple`s from the same rows with SQL of its own, on a read-only
`HistoryView`, and refuses what they refused, with the same errors
(secure_serde/stores/_v03_rows.py says what a row must prove). It is a
`BaseCheckpointSaver` that only reads: ``get_tuple``, ``list`` (without
``filter``) and langgraph's own ``get_delta_channel_history`` walk over
``get_tuple`` (so each ancestor is authenticated); ``put``, ``put_writes``
and ``get_next_version`` raise `ConfigurationError`, so a graph cannot write
through it. `secure_serde.savers.adopt` copies a store it reads into a
`SealedSaver`.

Like 0.3's PostgreSQL saver, a checkpoint with ``v < 4`` and a parent gets
its parent's pending sends as its ``__pregel_tasks`` value (langgraph's
migration), read with the serde's plain ``loads_typed``: 0.3 wrote those
writes bound, so such a read fails as 0.3's did (`DecryptionError`, under
every `Migration` too).
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.serde.types import TASKS

from secure_serde._errors import BindingError, ConfigurationError, SecureSerdeError
from secure_serde.serde import EncryptedSerializer, Migration
from secure_serde.stores._base import Store, StoreError
from secure_serde.stores._history import HistoryView, _both
from secure_serde.stores._v03_metadata import V03Metadata
from secure_serde.stores._v03_rows import V03Rows

__all__ = ["V03Reader", "refuse_v03", "written_by_v03"]

# What a probe read may raise for a checkpoint that is not 0.3's (the store's own failures,
# `StoreError`, are raised on).
_PROBE_ERRORS: Final = (
    SecureSerdeError,
    ValueError,
    TypeError,
    NotImplementedError,
    RecursionError,
)


# -- The SQL the reader runs: literal statements, values always bound. SQLite's are 0.3's own
# (langgraph-checkpoint-sqlite's statements); PostgreSQL's are langgraph-checkpoint-postgres
# 3.2's. A WHERE clause is assembled from the literal fragments below, each written once with
# ``{0}`` for the placeholder, so the same text serves both databases (``?`` and ``%s``).
# The same clause for SQLite and for PostgreSQL, and its parameters.
_Where = tuple[tuple[str, str], tuple[Any, ...]]

_SQLITE_COLUMNS: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,"
    " metadata FROM checkpoints"
)
_SQLITE_WRITES: Final = (
    "SELECT task_id, channel, type, value, {path}, idx FROM writes"
    " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
# langgraph-checkpoint-postgres 3.2's SELECT_SQL and SELECT_PENDING_SENDS_SQL, verbatim
# (the channel is langgraph's TASKS).
_PG_COLUMNS: Final = """
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
_PG_NAMES: Final = (
    "thread_id",
    "checkpoint",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "metadata",
    "channel_values",
    "pending_writes",
)
_PG_SENDS: Final = """
select
    checkpoint_id,
    array_agg(array[type::bytea, blob] order by task_path, task_id, idx) as sends
from checkpoint_writes
where thread_id = %s
    and checkpoint_id = any(%s)
    and channel = '__pregel_tasks'
group by checkpoint_id
"""
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


class V03Reader(BaseCheckpointSaver[str]):
    """The checkpoints of a store 0.3's sealed savers wrote, read and checked as 0.3 read them.

    Args:
        store: a SQLite path or ``postgresql://`` URL (opened read only and
            closed by `close`), an open `Store`, or a `HistoryView` (used as
            it is, left open).
        serde: the `EncryptedSerializer` 0.3's saver had (any cipher of
            `secure_serde.ciphers`).
        seal_metadata, plaintext_metadata, indexed_metadata, index_key: the
            metadata policy 0.3's saver was built with (the same defaults):
            a key it sealed found in plaintext is refused, and blind-index
            tokens are checked under ``index_key`` (default: derived from the
            serde's keyring). ``seal_metadata=False`` opens sealed entries
            without checking them, as a viewer.
        migration: what unauthenticated content may still be read, as for
            0.3's savers (``unbound``, ``unsealed_metadata``,
            ``inline_values``); each such read is logged.

    Raises:
        ConfigurationError: the serde cannot bind values to rows, or the
            metadata options are inconsistent.
        StoreError: the store cannot be opened, or `SealedSaver` sealed it.
    """

    def __init__(  # noqa: PLR0913 - 0.3's saver options, keyword-only
        self,
        store: str | os.PathLike[str] | Store | HistoryView,
        *,
        serde: EncryptedSerializer,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: str | bytes | Iterable[str | bytes] | None = None,
        migration: Migration | None = None,
    ) -> None:
        if not isinstance(serde, EncryptedSerializer) or not serde.seals_locations:
            raise ConfigurationError(
                "reading a 0.3 sealed store needs an EncryptedSerializer whose cipher binds"
                " values to their rows (any cipher from secure_serde.ciphers)"
            )
        resolved = Migration.resolve(migration)
        metadata = V03Metadata(
            serde,
            resolved,
            seal_metadata=seal_metadata,
            plaintext_metadata=plaintext_metadata,
            indexed_metadata=indexed_metadata,
            index_key=index_key,
        )
        super().__init__(serde=serde)
        self._rows = V03Rows(serde, resolved, metadata)
        self._owned = not isinstance(store, HistoryView)
        self.view = store if isinstance(store, HistoryView) else _view(store)
        try:
            self._writes_sql = (
                ""
                if self.view.kind == "postgres"
                else _SQLITE_WRITES.format(path=self.view.task_path_column())
            )
        except BaseException:
            self.close()
            raise

    @property
    def migration(self) -> Migration:
        return self._rows.migration

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return next(self._rows_of(*_get_where(config)), None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if filter:
            raise ConfigurationError(
                "the 0.3 reader lists without filters; adopt the store"
                " (secure_serde.savers.adopt) and filter on the SealedSaver"
            )
        yield from self._rows_of(*_list_where(config, before, limit))

    def _rows_of(
        self, where: tuple[str, str], params: tuple[Any, ...]
    ) -> Iterator[CheckpointTuple]:
        view = self.view
        if view.kind == "postgres":
            found = [
                dict(zip(_PG_NAMES, r, strict=True))
                for r in view.query("", _PG_COLUMNS + where[1], params)
            ]
            self._old_checkpoint_sends(found)
            yield from map(self._rows.postgres, found)
            return
        for row in view.query(_SQLITE_COLUMNS + where[0], "", params):
            writes = view.query(self._writes_sql, "", (row[0], row[1], row[2]))
            yield self._rows.sqlite(row, writes)

    def _old_checkpoint_sends(self, values: Sequence[dict[str, Any]]) -> None:
        """langgraph's migration of checkpoints older than format 4, as 0.3 ran it."""
        to_migrate = [
            v for v in values if _version(v["checkpoint"]) < 4 and v["parent_checkpoint_id"]
        ]
        if not to_migrate:
            return
        by_parent: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for value in to_migrate:
            by_parent[value["parent_checkpoint_id"]].append(value)
        params = (values[0]["thread_id"], list(by_parent))
        for parent_id, sends in self.view.query("", _PG_SENDS, params):
            for value in by_parent[parent_id]:
                if value["channel_values"] is None:
                    value["channel_values"] = []
                if not sends:
                    continue
                loaded = [self.serde.loads_typed((bytes(t).decode(), b)) for t, b in sends]
                type_tag, blob = self.serde.dumps_typed(loaded)
                value["channel_values"].append((TASKS.encode(), type_tag.encode(), blob))
                versions = value["checkpoint"]["channel_versions"]
                versions[TASKS] = max(versions.values()) if versions else _first_version()

    def put(self, *args: Any, **kwargs: Any) -> RunnableConfig:
        raise _read_only()

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        raise _read_only()

    def get_next_version(self, *args: Any, **kwargs: Any) -> str:
        # Asked only on the way to a put: refuse there, with the same message.
        raise _read_only()

    def close(self) -> None:
        if self._owned:
            self.view.close()

    def __enter__(self) -> V03Reader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def written_by_v03(
    view: HistoryView,
    serde: EncryptedSerializer | None = None,
    migration: Migration = Migration.NONE,
) -> bool:
    """Whether secure_serde 0.3's savers wrote the store of ``view``.

    By the marks they left in plaintext (`HistoryView.v03_marks`); on SQLite,
    with a ``serde`` whose cipher binds, also by its newest checkpoint reading
    as 0.3 wrote it, bound, under ``migration`` (0.3's SQLite saver left no mark
    with ``seal_metadata=False``; inspect passes the switches it reads with).
    """
    if view.v03_marks():
        return True
    if serde is None or not serde.seals_locations or view.kind == "postgres":
        return False
    newest = view.newest_checkpoint()
    if newest is None:
        return False
    bound = replace(migration, unbound=False)
    reader = V03Reader(view, serde=serde, seal_metadata=False, migration=bound)
    keys = ("thread_id", "checkpoint_ns", "checkpoint_id")
    try:
        return reader.get_tuple({"configurable": dict(zip(keys, newest, strict=True))}) is not None
    except StoreError:
        raise
    except _PROBE_ERRORS:
        return False


def refuse_v03(store: Store, command: str, serde: EncryptedSerializer | None = None) -> None:
    """Refuse a store 0.3's savers wrote (`written_by_v03`), naming ``secure-serde adopt``.

    Raises:
        ConfigurationError: they wrote it; ``command`` does not read their layout.
    """
    with HistoryView(store) as view:
        written = written_by_v03(view, serde)
    if written:
        raise ConfigurationError(
            f"{store.display} was written by secure_serde 0.3's savers, whose layout only"
            f" adopt reads now: {command} does not apply to it. Copy it into a sealed store"
            f" with `secure-serde adopt OLD NEW` (docs/upgrading.md), then {command} that"
        )


def _view(location: str | os.PathLike[str] | Store) -> HistoryView:
    from secure_serde.stores._open import open_store

    if isinstance(location, Store):
        return HistoryView(location)
    with open_store(location) as store:
        return HistoryView(store)


def _version(checkpoint: Any) -> int:
    version = checkpoint.get("v") if isinstance(checkpoint, dict) else None
    if not isinstance(version, int):
        raise BindingError("checkpoint record has no format version")
    return version


def _first_version() -> str:
    # langgraph-checkpoint-postgres's get_next_version(None, None).
    return f"{1:032}.{random.random():016}"  # noqa: S311 - a version tag, not a secret


def _read_only() -> ConfigurationError:
    return ConfigurationError(
        "the 0.3 reader only reads; copy the store into a SealedSaver with"
        " secure_serde.savers.adopt (secure-serde adopt OLD NEW)"
    )


def _get_where(config: RunnableConfig) -> _Where:
    """``get_tuple``'s clause: the checkpoint named, or the thread's newest."""
    configurable = config["configurable"]
    thread_id = configurable["thread_id"]
    checkpoint_ns = configurable.get("checkpoint_ns", "")
    if checkpoint_id := get_checkpoint_id(config):
        return _both(_BY_ID), (thread_id, checkpoint_ns, checkpoint_id)
    return _both(_LATEST), (thread_id, checkpoint_ns)


def _list_where(
    config: RunnableConfig | None, before: RunnableConfig | None, limit: int | None
) -> _Where:
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
