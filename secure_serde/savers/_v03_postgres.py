"""secure_serde 0.3's sealed PostgreSQL savers, kept only as the reader of the stores 0.3 wrote.

0.4's entry points are `secure_serde.savers.postgres` (`SealedSaver` around the
stock saver); `secure_serde.savers.adopt` copies a store
these wrote into one. Public as ``secure_serde.savers.V03PostgresSaver`` and
``V03AsyncPostgresSaver``.

Drop-in PostgreSQL savers that leave no state value in plaintext JSON.

`PostgresSaver` and `AsyncPostgresSaver` subclass langgraph's. The schema,
the SQL and the rows are the stock ones, with two differences:

* every channel value, ``None``/``str``/``int``/``float``/``bool`` included,
  goes through the serde into ``checkpoint_blobs``; the ``checkpoint`` JSONB
  keeps only structure (ids, versions, ``versions_seen``) and the ``true``
  markers the stock saver writes for ``DeltaChannel`` snapshots;
* every metadata key outside `STRUCTURAL_METADATA_KEYS` and
  ``plaintext_metadata`` is sealed into one encrypted entry (unless
  ``seal_metadata=False``), so values copied from ``config["configurable"]``
  (an API key, say) are not stored in the clear; ``indexed_metadata`` keys
  stay filterable through blind indexes (secure_serde/savers/_metadata.py).

The stock saver, given the same serde, reads everything these write (it
already reads primitives stored as blobs). These read what it wrote too, but
its inline values are plaintext nothing authenticates, so only under the
logged ``Migration(inline_values=True)`` switch; with it, one thread
can be written by both, in any order. Threads, channel names, checkpoint and
task ids, blob lengths and the plaintext metadata keys stay readable in the
database; see SECURITY.md.

Example::

    from secure_serde import EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher
    from secure_serde.savers._v03_postgres import PostgresSaver

    serde = EncryptedSerializer(EnvKeyCipher())
    with PostgresSaver.from_conn_string(DSN, serde=serde) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.postgres import Conn
from langgraph.checkpoint.postgres import PostgresSaver as _StockPostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as _StockAsyncPostgresSaver
from langgraph.checkpoint.postgres.aio import Conn as AsyncConn
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncPipeline, Pipeline
from psycopg.rows import DictRow

from secure_serde._langgraph import async_postgres_cursor, postgres_cursor, postgres_hook
from secure_serde._migration import Migration
from secure_serde.ciphers._v1cipher import V1Cipher
from secure_serde.savers._connect import Dsn, aconnect, connect
from secure_serde.savers._metadata import (
    SEALED_METADATA_KEY,
    STRUCTURAL_METADATA_KEYS,
    MetadataSealer,
)
from secure_serde.savers._postgres_base import SealedPostgresBase
from secure_serde.savers._postgres_bound import CHAIN_SQL, verify_chain

__all__ = [
    "SEALED_METADATA_KEY",
    "STRUCTURAL_METADATA_KEYS",
    "AsyncPostgresSaver",
    "PostgresSaver",
    "V03AsyncPostgresSaver",
    "V03PostgresSaver",
]


class PostgresSaver(SealedPostgresBase, _StockPostgresSaver):
    """langgraph's ``PostgresSaver``, with every channel value encrypted by the serde.

    Args:
        conn: a psycopg ``Connection`` (``autocommit=True``,
            ``row_factory=dict_row``) or a ``ConnectionPool`` of them, as for
            the stock saver.
        pipe: a pipeline on ``conn``, as for the stock saver.
        serde: the serializer; pass an `EncryptedSerializer`.
        seal_metadata: ``True`` (the default) seals every metadata key
            except `STRUCTURAL_METADATA_KEYS` and ``plaintext_metadata``
            into one encrypted entry bound to its checkpoint; it needs an
            encrypting serde. ``False`` stores metadata as the stock saver
            (and secure_serde 0.1.0 by default) does, every key in plaintext.
        plaintext_metadata: more keys to keep in plaintext (0.1.0 meaning;
            only the default changed: ``None`` now seals too).
            ``list(filter=...)`` on a sealed key without an index raises
            `ConfigurationError`.
        indexed_metadata: sealed keys that ``list(filter=...)`` can match
            by equality, through a keyed blind index (docs/postgres.md).
        index_key: the blind-index key(s), in any form a key is written
            (the first writes); default: derived from the serde's keyring
            (HKDF, never the data key). Needed with KMS ciphers.
        migration: what unauthenticated content may still be read
            (`secure_serde.Migration`). ``inline_values``: state values found
            in the plaintext checkpoint JSON, which only a stock saver
            writes (threads it started); off, they raise
            `PlaintextRefusedError`, and even on, anything but a JSON
            primitive raises `StrictDecodeError`. ``plaintext_metadata``:
            sealed keys found in plaintext, or rows with no sealed entry
            (written before sealing); off, they raise
            `MetadataDowngradeError`. ``unbound``: values, records and sealed
            metadata entries written without a binding to their row (by the
            stock saver or secure_serde 0.1); off, they raise
            `UnboundValueError` (`MetadataMovedError` for a metadata entry
            that names no row). Each read under a switch is logged
            (rate-limited).
    """

    def __init__(  # noqa: PLR0913 - langgraph's constructor plus our keyword-only options
        self,
        conn: Conn,
        pipe: Pipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: str | bytes | Iterable[str | bytes] | None = None,
        migration: Migration | None = None,
    ) -> None:
        sealer = MetadataSealer.from_options(
            seal_metadata=seal_metadata,
            plaintext_metadata=plaintext_metadata,
            indexed_metadata=indexed_metadata,
        )
        resolved = Migration.resolve(migration)
        super().__init__(conn, pipe, serde)
        self._configure(sealer, resolved, index_key)

    @classmethod
    @contextmanager
    def from_conn_string(  # noqa: PLR0913 - langgraph's constructor plus our keyword-only options
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: str | bytes | Iterable[str | bytes] | None = None,
        migration: Migration | None = None,
    ) -> Iterator[PostgresSaver]:
        """A saver on a new connection, closed on exit; unlike the stock one, takes ``serde``.

        The connection is opened as the stock ``from_conn_string`` opens it
        (``autocommit=True, prepare_threshold=0, row_factory=dict_row``).
        """
        dsn = Dsn(conn_string)  # no frame below holds the password as text
        del conn_string
        MetadataSealer.from_options(  # fail before connecting
            seal_metadata=seal_metadata,
            plaintext_metadata=plaintext_metadata,
            indexed_metadata=indexed_metadata,
        )
        migration = Migration.resolve(migration)
        with connect(dsn) as conn:
            if pipeline:
                with conn.pipeline() as pipe:
                    yield cls(
                        conn,
                        pipe,
                        serde,
                        seal_metadata=seal_metadata,
                        plaintext_metadata=plaintext_metadata,
                        indexed_metadata=indexed_metadata,
                        index_key=index_key,
                        migration=migration,
                    )
            else:
                yield cls(
                    conn,
                    None,
                    serde,
                    seal_metadata=seal_metadata,
                    plaintext_metadata=plaintext_metadata,
                    indexed_metadata=indexed_metadata,
                    index_key=index_key,
                    migration=migration,
                )

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        args, stored = self._prepare_put(config, checkpoint, metadata, new_versions)
        next_config = super().put(*args)
        self._stored_primitives.record(*stored)
        return next_config

    # 0.3's savers are kept to read the stores 0.3 wrote: they copy no threads
    # (langgraph's NotImplementedError; adopt the store, then SealedSaver copies).
    copy_thread = BaseCheckpointSaver.copy_thread

    @postgres_hook
    def _load_checkpoint_tuple(self, value: DictRow) -> CheckpointTuple:
        binder = self._bound()
        if binder is not None:
            return self._load_bound(binder, value)
        self._check_row(value)
        return self._unseal(super()._load_checkpoint_tuple(value))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        token, read = self._delta_at(config)
        try:
            history = super().get_delta_channel_history(config=config, channels=channels)
        finally:
            self._delta_done(token)
        binder = self._bound()
        if binder is not None and read.chains:
            with postgres_cursor(self) as cur:
                cur.execute(CHAIN_SQL, read.chain_params())
                verify_chain(binder, read, cur.fetchall())
        return history


class AsyncPostgresSaver(SealedPostgresBase, _StockAsyncPostgresSaver):
    """langgraph's ``AsyncPostgresSaver``, with every channel value encrypted by the serde.

    Args:
        conn: a psycopg ``AsyncConnection`` (``autocommit=True``,
            ``row_factory=dict_row``) or an ``AsyncConnectionPool`` of them.
        pipe: a pipeline on ``conn``, as for the stock saver.
        serde: the serializer; pass an `EncryptedSerializer`.
        seal_metadata: ``True`` (the default) seals every metadata key
            except `STRUCTURAL_METADATA_KEYS` and ``plaintext_metadata``
            into one encrypted entry bound to its checkpoint; it needs an
            encrypting serde. ``False`` stores metadata as the stock saver
            (and secure_serde 0.1.0 by default) does, every key in plaintext.
        plaintext_metadata: more keys to keep in plaintext (0.1.0 meaning;
            only the default changed: ``None`` now seals too).
            ``list(filter=...)`` on a sealed key without an index raises
            `ConfigurationError`.
        indexed_metadata: sealed keys that ``list(filter=...)`` can match
            by equality, through a keyed blind index (docs/postgres.md).
        index_key: the blind-index key(s), in any form a key is written
            (the first writes); default: derived from the serde's keyring
            (HKDF, never the data key). Needed with KMS ciphers.
        migration: what unauthenticated content may still be read
            (`secure_serde.Migration`). ``inline_values``: state values found
            in the plaintext checkpoint JSON, which only a stock saver
            writes (threads it started); off, they raise
            `PlaintextRefusedError`, and even on, anything but a JSON
            primitive raises `StrictDecodeError`. ``plaintext_metadata``:
            sealed keys found in plaintext, or rows with no sealed entry
            (written before sealing); off, they raise
            `MetadataDowngradeError`. ``unbound``: values, records and sealed
            metadata entries written without a binding to their row (by the
            stock saver or secure_serde 0.1); off, they raise
            `UnboundValueError` (`MetadataMovedError` for a metadata entry
            that names no row). Each read under a switch is logged
            (rate-limited).
    """

    def __init__(  # noqa: PLR0913 - langgraph's constructor plus our keyword-only options
        self,
        conn: AsyncConn,
        pipe: AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: str | bytes | Iterable[str | bytes] | None = None,
        migration: Migration | None = None,
    ) -> None:
        sealer = MetadataSealer.from_options(
            seal_metadata=seal_metadata,
            plaintext_metadata=plaintext_metadata,
            indexed_metadata=indexed_metadata,
        )
        resolved = Migration.resolve(migration)
        super().__init__(conn, pipe, serde)
        self._configure(sealer, resolved, index_key)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # noqa: PLR0913 - langgraph's constructor plus our keyword-only options
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
        index_key: str | bytes | Iterable[str | bytes] | None = None,
        migration: Migration | None = None,
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """A saver on a new connection, closed on exit, opened as the stock one opens it."""
        dsn = Dsn(conn_string)  # no frame below holds the password as text
        del conn_string
        MetadataSealer.from_options(  # fail before connecting
            seal_metadata=seal_metadata,
            plaintext_metadata=plaintext_metadata,
            indexed_metadata=indexed_metadata,
        )
        migration = Migration.resolve(migration)
        async with await aconnect(dsn) as conn:
            if pipeline:
                async with conn.pipeline() as pipe:
                    yield cls(
                        conn,
                        pipe,
                        serde,
                        seal_metadata=seal_metadata,
                        plaintext_metadata=plaintext_metadata,
                        indexed_metadata=indexed_metadata,
                        index_key=index_key,
                        migration=migration,
                    )
            else:
                yield cls(
                    conn,
                    None,
                    serde,
                    seal_metadata=seal_metadata,
                    plaintext_metadata=plaintext_metadata,
                    indexed_metadata=indexed_metadata,
                    index_key=index_key,
                    migration=migration,
                )

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        binder = self._bound()
        local = binder is None or isinstance(binder.serde.cipher, V1Cipher)
        if self._metadata_sealer is None and local:
            # A local-key seal of the record costs microseconds: no thread hop.
            args, stored = self._prepare_put(config, checkpoint, metadata, new_versions)
        else:
            # Sealing runs the cipher (a KMS call, maybe): keep it off the loop,
            # as the stock saver does for its blobs.
            args, stored = await asyncio.to_thread(
                self._prepare_put, config, checkpoint, metadata, new_versions
            )
        next_config = await super().aput(*args)
        self._stored_primitives.record(*stored)
        return next_config

    # 0.3's savers are kept to read the stores 0.3 wrote: they copy no threads
    # (langgraph's NotImplementedError; adopt the store, then SealedSaver copies).
    acopy_thread = BaseCheckpointSaver.acopy_thread
    copy_thread = BaseCheckpointSaver.copy_thread

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        token, read = self._delta_at(config)
        try:
            history = await super().aget_delta_channel_history(config=config, channels=channels)
        finally:
            self._delta_done(token)
        binder = self._bound()
        if binder is not None and read.chains:
            async with async_postgres_cursor(self) as cur:
                await cur.execute(CHAIN_SQL, read.chain_params())
                rows = await cur.fetchall()
            await asyncio.to_thread(verify_chain, binder, read, rows)
        return history

    @postgres_hook
    async def _load_checkpoint_tuple(self, value: DictRow) -> CheckpointTuple:
        binder = self._bound()
        if binder is not None:
            return await asyncio.to_thread(self._load_bound, binder, value)
        self._check_row(value)
        checkpoint_tuple = await super()._load_checkpoint_tuple(value)
        metadata: Any = checkpoint_tuple.metadata
        self._metadata_opener.check(metadata)
        if SEALED_METADATA_KEY not in metadata:
            return checkpoint_tuple
        # Unsealing runs the cipher (a KMS call, maybe): off the loop.
        return await asyncio.to_thread(self._unseal, checkpoint_tuple)


# The public names (secure_serde.savers): 0.3's savers, the readers of its stores.
V03PostgresSaver = PostgresSaver
V03AsyncPostgresSaver = AsyncPostgresSaver
