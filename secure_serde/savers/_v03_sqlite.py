"""secure_serde 0.3's sealed SQLite savers, kept only as the reader of the stores 0.3 wrote.

0.4's entry points are `secure_serde.savers.sqlite` (`SealedSaver` around the
stock saver); `secure_serde.savers.adopt` copies a store
these wrote into one. Public as ``secure_serde.savers.V03SqliteSaver`` and
``V03AsyncSqliteSaver``.

Sealed SQLite savers: every value bound to its row, every checkpoint record authenticated.

`SqliteSaver` and `AsyncSqliteSaver` subclass langgraph's and keep its schema
and SQL. What differs is what the rows hold (see ``_sqlite_bound``):

* the checkpoint blob is encrypted *at its row*: its thread, namespace, id,
  parent link and plaintext metadata are bound into its associated data, so
  a checkpoint moved, re-parented, or given other metadata fails to
  authenticate (`BindingError`);
* each pending write is bound to its thread, namespace, checkpoint, task,
  index and channel;
* every metadata key outside `STRUCTURAL_METADATA_KEYS` and
  ``plaintext_metadata`` is sealed into one encrypted entry bound to its
  checkpoint (unless ``seal_metadata=False``), as in the PostgreSQL savers;
  ``indexed_metadata`` keys stay filterable through keyed blind indexes,
  matched with the stock ``json_extract`` filter
  (secure_serde/savers/_metadata.py, _index_sql.py).

They need an `EncryptedSerializer` (any cipher from `secure_serde.ciphers`).
Rows written by the stock saver (or secure_serde 0.1) are unbound, and read
only under ``migration=Migration(unbound=True)``, logged. Delta-channel
history is rebuilt by walking the parent chain through ``get_tuple``, so
every ancestor it replays is authenticated too.

Example::

    from secure_serde import EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher
    from secure_serde.savers._v03_sqlite import SqliteSaver

    serde = EncryptedSerializer(EnvKeyCipher())
    with SqliteSaver.from_conn_string("checkpoints.sqlite", serde=serde) as saver:
        graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, closing, contextmanager
from typing import Any

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver as _StockSqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as _StockAsyncSqliteSaver
from langgraph.checkpoint.sqlite.utils import pending_writes_sql

from secure_serde._langgraph import sqlite_has_task_path
from secure_serde._migration import Migration
from secure_serde.savers._bound import binder_for
from secure_serde.savers._metadata import (
    SEALED_METADATA_KEY,
    STRUCTURAL_METADATA_KEYS,
    MetadataSealer,
)
from secure_serde.savers._sqlite_bound import (
    INSERT_CHECKPOINT_SQL,
    SELECT_BY_ID_SQL,
    SELECT_LATEST_SQL,
    SELECT_LIST_SQL,
    SqliteRows,
    require_binder,
    writes_sql,
)

__all__ = [
    "SEALED_METADATA_KEY",
    "STRUCTURAL_METADATA_KEYS",
    "AsyncSqliteSaver",
    "SqliteSaver",
    "V03AsyncSqliteSaver",
    "V03SqliteSaver",
]

# The type of ``index_key=``: one key, or several with the writer first.
_IndexKey = str | bytes | Iterable[str | bytes] | None


class _SealedSqlite:
    """What both savers keep: the metadata policy, the migration setting, the rows helper."""

    serde: SerializerProtocol
    _sealer: MetadataSealer | None
    _migration: Migration
    _rows: SqliteRows | None = None

    def _sealed(
        self, sealer: MetadataSealer | None, migration: Migration, index_key: _IndexKey
    ) -> None:
        # The blind-index keys come from the serde, set by the stock __init__.
        self._sealer = None if sealer is None else sealer.with_keys(self.serde, index_key)
        self._migration = migration
        require_binder(binder_for(self.serde, migration))

    @property
    def metadata_sealer(self) -> MetadataSealer | None:
        """The metadata policy; ``None`` keeps every key in plaintext, like the stock saver."""
        return self._sealer

    @property
    def rows(self) -> SqliteRows:
        # Rebuilt when with_allowlist() swapped the serde on a shallow copy.
        rows = self._rows
        if rows is None or rows.binder.serde is not self.serde:
            binder = require_binder(binder_for(self.serde, self._migration))
            rows = self._rows = SqliteRows(binder, self._sealer)
        return rows


def _policy(
    seal_metadata: bool,
    plaintext_metadata: Iterable[str] | None,
    indexed_metadata: Iterable[str] | None,
) -> MetadataSealer | None:
    return MetadataSealer.from_options(
        seal_metadata=seal_metadata,
        plaintext_metadata=plaintext_metadata,
        indexed_metadata=indexed_metadata,
    )


def _select(config: RunnableConfig) -> tuple[str, tuple[Any, ...]]:
    thread_id = str(config["configurable"]["thread_id"])
    checkpoint_ns = config["configurable"].get("checkpoint_ns", "")
    if checkpoint_id := get_checkpoint_id(config):
        return SELECT_BY_ID_SQL, (thread_id, checkpoint_ns, checkpoint_id)
    return SELECT_LATEST_SQL, (thread_id, checkpoint_ns)


class SqliteSaver(_SealedSqlite, _StockSqliteSaver):
    """langgraph's ``SqliteSaver``, every value bound to its row and encrypted by the serde.

    Args:
        conn: a ``sqlite3.Connection``, as for the stock saver.
        serde: an `EncryptedSerializer`.
        seal_metadata: ``True`` (the default) seals every metadata key
            except `STRUCTURAL_METADATA_KEYS` and ``plaintext_metadata``
            into one encrypted entry bound to its checkpoint. ``False``
            stores metadata as the stock saver does, every key in plaintext
            (still authenticated by the checkpoint's binding).
        plaintext_metadata: more keys to keep in plaintext (filterable as
            the stock saver filters them). ``list(filter=...)`` on a sealed
            key without an index raises `ConfigurationError`.
        indexed_metadata: sealed keys that ``list(filter=...)`` can match
            by equality, through a keyed blind index (docs/postgres.md).
        index_key: the blind-index key(s), in any form a key is written
            (the first writes); default: derived from the serde's keyring
            (HKDF, never the data key). Needed with KMS ciphers.
        migration: `Migration`; ``unbound=True`` reads rows written without
            a binding (by the stock saver or secure_serde 0.1);
            ``plaintext_metadata=True`` reads rows whose metadata should be
            sealed but is in plaintext (written with ``seal_metadata=False``
            or before sealing was the default). Each such read is logged.
    """

    def __init__(  # noqa: PLR0913 - langgraph's constructor plus our keyword-only options
        self,
        conn: sqlite3.Connection,
        *,
        serde: SerializerProtocol | None = None,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: _IndexKey = None,
        migration: Migration | None = None,
    ) -> None:
        sealer = _policy(seal_metadata, plaintext_metadata, indexed_metadata)
        super().__init__(conn, serde=serde)
        self._sealed(sealer, Migration.resolve(migration), index_key)

    @classmethod
    @contextmanager
    def from_conn_string(  # noqa: PLR0913 - langgraph's constructor plus our keyword-only options
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: _IndexKey = None,
        migration: Migration | None = None,
    ) -> Iterator[SqliteSaver]:
        """A saver on a new connection (opened as the stock one opens it), closed on exit."""
        _policy(seal_metadata, plaintext_metadata, indexed_metadata)  # fail before connecting
        with closing(sqlite3.connect(conn_string, check_same_thread=False)) as conn:
            yield cls(
                conn,
                serde=serde,
                seal_metadata=seal_metadata,
                plaintext_metadata=plaintext_metadata,
                indexed_metadata=indexed_metadata,
                index_key=index_key,
                migration=migration,
            )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        sql, params = _select(config)
        with self.cursor(transaction=False) as cur:
            row = cur.execute(sql, params).fetchone()
            if row is None:
                return None
            writes = cur.execute(
                pending_writes_sql(sqlite_has_task_path(self)), (row[0], row[1], row[2])
            )
            return self.rows.load(row, writes.fetchall())

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        where, params = self.rows.search_where(config, filter, before)
        query = SELECT_LIST_SQL.format(where=where)
        if limit is not None:
            query += " LIMIT ?"
            params = [*params, limit]
        with self.cursor(transaction=False) as cur, closing(self.conn.cursor()) as wcur:
            for row in cur.execute(query, params):
                wcur.execute(
                    pending_writes_sql(sqlite_has_task_path(self)), (row[0], row[1], row[2])
                )
                yield self.rows.load(row, wcur.fetchall())

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        params, next_config = self.rows.checkpoint_row(config, checkpoint, metadata)
        with self.cursor() as cur:
            cur.execute(INSERT_CHECKPOINT_SQL, params)
        return next_config

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        rows = self.rows.write_rows(config, writes, task_id, task_path)
        with self.cursor() as cur:
            cur.executemany(writes_sql(writes), rows)

    # 0.3's savers are kept to read the stores 0.3 wrote: they copy no threads
    # (langgraph's NotImplementedError; adopt the store, then SealedSaver copies).
    copy_thread = BaseCheckpointSaver.copy_thread

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        # The generic walk goes through get_tuple, so each ancestor is authenticated.
        return BaseCheckpointSaver.get_delta_channel_history(self, config=config, channels=channels)


class AsyncSqliteSaver(_SealedSqlite, _StockAsyncSqliteSaver):
    """langgraph's ``AsyncSqliteSaver``, every value bound to its row (see `SqliteSaver`)."""

    def __init__(  # noqa: PLR0913 - langgraph's constructor plus our keyword-only options
        self,
        conn: aiosqlite.Connection,
        *,
        serde: SerializerProtocol | None = None,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: _IndexKey = None,
        migration: Migration | None = None,
    ) -> None:
        sealer = _policy(seal_metadata, plaintext_metadata, indexed_metadata)
        super().__init__(conn, serde=serde)
        self._sealed(sealer, Migration.resolve(migration), index_key)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # noqa: PLR0913 - langgraph's constructor plus our keyword-only options
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: _IndexKey = None,
        migration: Migration | None = None,
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """A saver on a new connection (opened as the stock one opens it), closed on exit."""
        _policy(seal_metadata, plaintext_metadata, indexed_metadata)  # fail before connecting
        async with aiosqlite.connect(conn_string) as conn:
            yield cls(
                conn,
                serde=serde,
                seal_metadata=seal_metadata,
                plaintext_metadata=plaintext_metadata,
                indexed_metadata=indexed_metadata,
                index_key=index_key,
                migration=migration,
            )

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        await self.setup()
        sql, params = _select(config)
        async with self.lock, self.conn.cursor() as cur:
            await cur.execute(sql, params)
            row = await cur.fetchone()
            if row is None:
                return None
            await cur.execute(
                pending_writes_sql(sqlite_has_task_path(self)), (row[0], row[1], row[2])
            )
            writes = await cur.fetchall()
        return self.rows.load(row, writes)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        where, params = self.rows.search_where(config, filter, before)
        await self.setup()
        query = SELECT_LIST_SQL.format(where=where)
        if limit is not None:
            query += " LIMIT ?"
            params = [*params, limit]
        async with self.lock, self.conn.execute(query, params) as cur:
            found = await cur.fetchall()
            loaded = []
            for row in found:
                async with self.conn.execute(
                    pending_writes_sql(sqlite_has_task_path(self)), (row[0], row[1], row[2])
                ) as wcur:
                    loaded.append((row, await wcur.fetchall()))
        for row, writes in loaded:
            yield self.rows.load(row, writes)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await self.setup()
        params, next_config = self.rows.checkpoint_row(config, checkpoint, metadata)
        async with self.lock, self.conn.execute(INSERT_CHECKPOINT_SQL, params):
            await self.conn.commit()
        return next_config

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        rows = self.rows.write_rows(config, writes, task_id, task_path)
        await self.setup()
        async with self.lock, self.conn.cursor() as cur:
            await cur.executemany(writes_sql(writes), rows)
            await self.conn.commit()

    # 0.3's savers are kept to read the stores 0.3 wrote: they copy no threads
    # (langgraph's NotImplementedError; adopt the store, then SealedSaver copies).
    acopy_thread = BaseCheckpointSaver.acopy_thread
    copy_thread = BaseCheckpointSaver.copy_thread

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        # The generic walk goes through aget_tuple, so each ancestor is authenticated.
        return await BaseCheckpointSaver.aget_delta_channel_history(
            self, config=config, channels=channels
        )


# The public names (secure_serde.savers): 0.3's savers, the readers of its stores.
V03SqliteSaver = SqliteSaver
V03AsyncSqliteSaver = AsyncSqliteSaver
