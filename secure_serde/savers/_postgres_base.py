"""What the sync and async sealed Postgres savers share.

The overrides of langgraph-checkpoint-postgres are all here or in
``postgres.py``. Each private hook is listed, with its reason, in
``secure_serde/_langgraph.py`` (``POSTGRES_SAVER_HOOKS``), marked
``@postgres_hook`` here, and pinned by tests/test_langgraph_private_savers.py.
The overrides: ``put``/``aput`` (public, thin: they rewrite their arguments and call the
stock method) and four private hooks that every read and write path of the
stock savers already goes through: ``_dump_blobs`` (writes),
``_load_checkpoint_tuple`` (``get_tuple``/``list``),
``_build_delta_channels_writes_history`` (``DeltaChannel`` reads) and
``_search_where`` (``list`` filters). No SQL is copied or changed.

With an `EncryptedSerializer` whose cipher binds (every secure_serde
cipher), every value is bound to its row and every checkpoint record is
sealed (``_postgres_bound``); ``_dump_writes`` and
``get_delta_channel_history`` are then overridden too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.postgres.base import BasePostgresSaver
from psycopg.types.json import Jsonb

from secure_serde._binding import Location
from secure_serde._errors import ConfigurationError
from secure_serde._langgraph import postgres_hook
from secure_serde._migration import Migration
from secure_serde.savers._bound import Binder, binder_for
from secure_serde.savers._index_sql import postgres_index_predicate, with_predicate
from secure_serde.savers._inline import InlineValueGuard, blob_channels
from secure_serde.savers._metadata import (
    MetadataOpener,
    MetadataSealer,
    refuse_reserved_key,
)
from secure_serde.savers._postgres_bound import (
    DeltaRead,
    bound_delta_history,
    dump_bound_blobs,
    dump_bound_writes,
    load_bound_tuple,
    seal_put,
)
from secure_serde.savers._values import StoredPrimitives, route_primitives_to_blobs, unbox

__all__ = ["SealedPostgresBase"]

_PutArgs = tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]
# What a successful put lets `StoredPrimitives` record: thread, namespace, versions.
_Stored = tuple[str, str, ChannelVersions]

# The (thread, namespace) a delta-history read is for: the stock hook that
# decodes its rows is not told, and the rows do not say.
_DELTA_AT: Final[ContextVar[DeltaRead | None]] = ContextVar("secure_serde_delta_at", default=None)


class SealedPostgresBase(BasePostgresSaver):
    """Routes primitives to blobs, seals metadata, checks and unseals on read."""

    _metadata_sealer: MetadataSealer | None = None
    _metadata_opener: MetadataOpener
    _inline_guard: InlineValueGuard
    _stored_primitives: StoredPrimitives
    _migration: Migration = Migration.NONE
    _binder: Binder | None = None

    def _configure(
        self,
        sealer: MetadataSealer | None,
        migration: Migration,
        index_key: str | bytes | Iterable[str | bytes] | None = None,
    ) -> None:
        # Metadata (issue 11): the blind-index keys come from the serde, so
        # they are resolved here, once the stock __init__ has set it.
        if sealer is not None:
            sealer = sealer.with_keys(self.serde, index_key)
        self._metadata_sealer = sealer
        self._migration = migration
        self._metadata_opener = MetadataOpener(sealer, migration)
        self._inline_guard = InlineValueGuard(migration.inline_values)
        self._stored_primitives = StoredPrimitives()

    def _bound(self) -> Binder | None:
        """The binder for the current serde (``with_allowlist`` may have swapped it)."""
        binder = self._binder
        if binder is None or binder.serde is not self.serde:
            binder = self._binder = binder_for(self.serde, self._migration)
        return binder

    @property
    def metadata_sealer(self) -> MetadataSealer | None:
        """The metadata policy; ``None`` (``seal_metadata=False``) keeps every key in plaintext."""
        return self._metadata_sealer

    def _prepare_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[_PutArgs, _Stored]:
        """The stock ``put``'s arguments, and what to record once it has succeeded."""
        refuse_reserved_key(metadata)
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        checkpoint_ns = configurable.get("checkpoint_ns", "")
        checkpoint, new_versions, primitives = route_primitives_to_blobs(
            checkpoint, new_versions, self._stored_primitives.versions(thread_id, checkpoint_ns)
        )
        stored = (thread_id, checkpoint_ns, primitives)
        binder = self._bound()
        if binder is None:
            if self._metadata_sealer is not None:
                config, metadata = self._metadata_sealer.seal(
                    self.serde, config, metadata, checkpoint["id"]
                )
            return (config, checkpoint, metadata, new_versions), stored
        if self._metadata_sealer is not None:
            # Sealed first (bound to its metadata location), then the record is
            # sealed over the final plaintext metadata, index tokens included.
            at = Location.metadata(thread_id, checkpoint_ns, checkpoint["id"])
            config, metadata = self._metadata_sealer.seal(
                binder.at(at), config, metadata, checkpoint["id"]
            )
        config, checkpoint, metadata = seal_put(binder, config, checkpoint, metadata)
        return (config, checkpoint, metadata, new_versions), stored

    def _load_bound(self, binder: Binder, value: Mapping[str, Any]) -> CheckpointTuple:
        self._check_row(value)
        loaded = load_bound_tuple(binder, value)  # authenticates the record first
        # Then the metadata, as on the unbound path: downgrade (a sealed record
        # could predate sealing, an unsealed one is read only under
        # Migration(unbound=True)), the entry's row, the blind indexes; the
        # entry is opened at its own location.
        row = (value["thread_id"], value["checkpoint_ns"], value["checkpoint_id"])
        metadata = self._metadata_opener.open(
            binder.at(Location.metadata(*row)), value["metadata"], row
        )
        return loaded._replace(metadata=metadata)

    def _check_row(self, value: Mapping[str, Any]) -> None:
        """Refuse a ``SELECT_SQL`` row with state values in its checkpoint JSON."""
        inline = value["checkpoint"].get("channel_values")
        if inline:
            self._inline_guard.check_row(inline, blob_channels(value["channel_values"]))

    def _unseal(self, checkpoint_tuple: CheckpointTuple) -> CheckpointTuple:
        """Check the row's metadata (downgrade, row, blind indexes), then unseal it."""
        configurable = checkpoint_tuple.config["configurable"]
        row = (
            configurable["thread_id"],
            configurable["checkpoint_ns"],
            configurable["checkpoint_id"],
        )
        metadata = self._metadata_opener.open(self.serde, checkpoint_tuple.metadata, row)
        if metadata is checkpoint_tuple.metadata:
            return checkpoint_tuple
        return checkpoint_tuple._replace(metadata=metadata)

    @postgres_hook
    def _dump_blobs(
        self,
        thread_id: str,
        checkpoint_ns: str,
        values: dict[str, Any],
        versions: ChannelVersions,
    ) -> list[tuple[str, str, str, str, str, bytes | None]]:
        binder = self._bound()
        if binder is None:
            return super()._dump_blobs(thread_id, checkpoint_ns, unbox(values, versions), versions)
        return dump_bound_blobs(binder, thread_id, checkpoint_ns, unbox(values, versions), versions)

    @postgres_hook
    def _dump_writes(  # noqa: PLR0913 - langgraph's hook signature
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: Sequence[tuple[str, Any]],
    ) -> list[tuple[str, str, str, str, str, int, str, str, bytes]]:
        binder = self._bound()
        if binder is None:
            return super()._dump_writes(
                thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes
            )
        return dump_bound_writes(
            binder, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes
        )

    @staticmethod
    def _delta_at(config: RunnableConfig) -> tuple[Any, DeltaRead]:
        configurable = config["configurable"]
        read = DeltaRead(str(configurable["thread_id"]), configurable.get("checkpoint_ns", ""))
        return _DELTA_AT.set(read), read

    @staticmethod
    def _delta_done(token: Any) -> None:
        _DELTA_AT.reset(token)

    @postgres_hook
    def _build_delta_channels_writes_history(
        self,
        *,
        channels: Sequence[str],
        chain_by_ch: Mapping[str, list[str]],
        seed_ver_by_ch: Mapping[str, str | None],
        seed_inline_by_ch: Mapping[str, Any],
        stage2_rows: Sequence[Any],
    ) -> dict[str, DeltaChannelHistory]:
        self._inline_guard.check_seeds(seed_inline_by_ch)
        binder = self._bound()
        at = _DELTA_AT.get()
        if binder is not None and at is not None:
            at.chains.extend(chain_by_ch.values())
            return bound_delta_history(
                binder,
                at.thread_id,
                at.checkpoint_ns,
                channels=channels,
                chain_by_ch=chain_by_ch,
                seed_ver_by_ch=seed_ver_by_ch,
                seed_inline_by_ch=seed_inline_by_ch,
                stage2_rows=stage2_rows,
            )
        if binder is not None:
            # Reached without our get_delta_channel_history: a stock code path
            # we do not know; refuse rather than read unbound.
            raise ConfigurationError("delta history read outside the sealed saver's entry points")
        return super()._build_delta_channels_writes_history(
            channels=channels,
            chain_by_ch=chain_by_ch,
            seed_ver_by_ch=seed_ver_by_ch,
            seed_inline_by_ch=seed_inline_by_ch,
            stage2_rows=stage2_rows,
        )

    @postgres_hook
    def _search_where(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None = None,
    ) -> tuple[str, list[Any]]:
        if self._metadata_sealer is None:
            return super()._search_where(config, filter, before)
        # Plaintext terms go to the stock containment; indexed ones become
        # an OR of containments on the blind-index entry (one per index key).
        plan = self._metadata_sealer.plan_filter(filter)
        predicate, documents = postgres_index_predicate(plan)
        # With index terms, the documents carry the plaintext terms as well.
        stock_filter = None if documents else (plan.plain or None)
        where, params = super()._search_where(config, stock_filter, before)
        return with_predicate(where, params, predicate, [Jsonb(d) for d in documents])
