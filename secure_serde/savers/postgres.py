"""Drop-in PostgreSQL savers that leave no state value in plaintext JSON.

`PostgresSaver` and `AsyncPostgresSaver` subclass langgraph's. The schema,
the SQL and the rows are the stock ones, with two differences:

* every channel value, ``None``/``str``/``int``/``float``/``bool`` included,
  goes through the serde into ``checkpoint_blobs``; the ``checkpoint`` JSONB
  keeps only structure (ids, versions, ``versions_seen``) and the ``true``
  markers the stock saver writes for ``DeltaChannel`` snapshots;
* with ``plaintext_metadata=[...]``, every metadata key outside that list
  (and outside `STRUCTURAL_METADATA_KEYS`) is sealed into one encrypted
  entry, so values copied from ``config["configurable"]`` (an API key, say)
  are not stored in the clear.

The stock saver, given the same serde, reads everything these write (it
already reads primitives stored as blobs). These read what it wrote too, but
its inline values are plaintext nothing authenticates, so only under the
logged ``allow_inline_values=True`` migration switch; with it, one thread
can be written by both, in any order. Threads, channel names, checkpoint and
task ids, blob lengths and the plaintext metadata keys stay readable in the
database; see SECURITY.md.

Example::

    from secure_serde import EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher
    from secure_serde.savers.postgres import PostgresSaver

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
from psycopg import AsyncConnection, AsyncPipeline, Connection, Pipeline
from psycopg.rows import DictRow, dict_row

from secure_serde._migration import Migration
from secure_serde.ciphers._v1cipher import V1Cipher
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
]


class PostgresSaver(SealedPostgresBase, _StockPostgresSaver):
    """langgraph's ``PostgresSaver``, with every channel value encrypted by the serde.

    Args:
        conn: a psycopg ``Connection`` (``autocommit=True``,
            ``row_factory=dict_row``) or a ``ConnectionPool`` of them, as for
            the stock saver.
        pipe: a pipeline on ``conn``, as for the stock saver.
        serde: the serializer; pass an `EncryptedSerializer`.
        plaintext_metadata: ``None`` (the default) stores metadata as the
            stock saver does, every key in plaintext. A collection of key
            names seals every other key (except `STRUCTURAL_METADATA_KEYS`)
            into one encrypted entry; ``list(filter=...)`` then accepts only
            plaintext keys and raises `ConfigurationError` for sealed ones.
            Sealing needs an encrypting serde.
        migration: what unauthenticated content may still be read
            (`secure_serde.Migration`). ``inline_values``: state values found
            in the plaintext checkpoint JSON, which only a stock saver
            writes (threads it started); off, they raise
            `PlaintextRefusedError`, and even on, anything but a JSON
            primitive raises `StrictDecodeError`. ``plaintext_metadata``:
            keys that ``plaintext_metadata`` seals but that are found in
            plaintext; off, they raise `MetadataDowngradeError`. Each read
            under a switch is logged (rate-limited).
        allow_inline_values: 0.1.0 alias: sets ``migration.inline_values``.
        (``migration.unbound``: values and records written without a binding to
            their row, by the stock saver or secure_serde 0.1, logged; off, they
            raise `UnboundValueError`.)
    """

    def __init__(
        self,
        conn: Conn,
        pipe: Pipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        plaintext_metadata: Iterable[str] | None = None,
        migration: Migration | None = None,
        allow_inline_values: bool = False,
    ) -> None:
        sealer = MetadataSealer.from_option(plaintext_metadata)
        resolved = Migration.resolve(migration, allow_inline_values=allow_inline_values)
        super().__init__(conn, pipe, serde)
        self._configure(sealer, resolved)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        plaintext_metadata: Iterable[str] | None = None,
        migration: Migration | None = None,
        allow_inline_values: bool = False,
    ) -> Iterator[PostgresSaver]:
        """A saver on a new connection, closed on exit; unlike the stock one, takes ``serde``.

        The connection is opened as the stock ``from_conn_string`` opens it
        (``autocommit=True, prepare_threshold=0, row_factory=dict_row``).
        """
        MetadataSealer.from_option(plaintext_metadata)  # fail before connecting
        with Connection.connect(
            conn_string, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            if pipeline:
                with conn.pipeline() as pipe:
                    yield cls(
                        conn,
                        pipe,
                        serde,
                        plaintext_metadata=plaintext_metadata,
                        migration=migration,
                        allow_inline_values=allow_inline_values,
                    )
            else:
                yield cls(
                    conn,
                    None,
                    serde,
                    plaintext_metadata=plaintext_metadata,
                    migration=migration,
                    allow_inline_values=allow_inline_values,
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
            with self._cursor() as cur:
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
        plaintext_metadata: ``None`` (the default) stores metadata as the
            stock saver does, every key in plaintext. A collection of key
            names seals every other key (except `STRUCTURAL_METADATA_KEYS`)
            into one encrypted entry; ``list(filter=...)`` then accepts only
            plaintext keys and raises `ConfigurationError` for sealed ones.
            Sealing needs an encrypting serde.
        migration: what unauthenticated content may still be read
            (`secure_serde.Migration`). ``inline_values``: state values found
            in the plaintext checkpoint JSON, which only a stock saver
            writes (threads it started); off, they raise
            `PlaintextRefusedError`, and even on, anything but a JSON
            primitive raises `StrictDecodeError`. ``plaintext_metadata``:
            keys that ``plaintext_metadata`` seals but that are found in
            plaintext; off, they raise `MetadataDowngradeError`. Each read
            under a switch is logged (rate-limited).
        allow_inline_values: 0.1.0 alias: sets ``migration.inline_values``.
        (``migration.unbound``: values and records written without a binding to
            their row, by the stock saver or secure_serde 0.1, logged; off, they
            raise `UnboundValueError`.)
    """

    def __init__(
        self,
        conn: AsyncConn,
        pipe: AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        plaintext_metadata: Iterable[str] | None = None,
        migration: Migration | None = None,
        allow_inline_values: bool = False,
    ) -> None:
        sealer = MetadataSealer.from_option(plaintext_metadata)
        resolved = Migration.resolve(migration, allow_inline_values=allow_inline_values)
        super().__init__(conn, pipe, serde)
        self._configure(sealer, resolved)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        plaintext_metadata: Iterable[str] | None = None,
        migration: Migration | None = None,
        allow_inline_values: bool = False,
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """A saver on a new connection, closed on exit, opened as the stock one opens it."""
        MetadataSealer.from_option(plaintext_metadata)  # fail before connecting
        async with await AsyncConnection.connect(
            conn_string, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            if pipeline:
                async with conn.pipeline() as pipe:
                    yield cls(
                        conn,
                        pipe,
                        serde,
                        plaintext_metadata=plaintext_metadata,
                        migration=migration,
                        allow_inline_values=allow_inline_values,
                    )
            else:
                yield cls(
                    conn,
                    None,
                    serde,
                    plaintext_metadata=plaintext_metadata,
                    migration=migration,
                    allow_inline_values=allow_inline_values,
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
            async with self._cursor() as cur:
                await cur.execute(CHAIN_SQL, read.chain_params())
                rows = await cur.fetchall()
            await asyncio.to_thread(verify_chain, binder, read, rows)
        return history

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
        return await asyncio.to_thread(self._unseal, checkpoint_tuple, True)
