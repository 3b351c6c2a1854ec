"""`SealedSaver`: values, writes, metadata and records sealed around any checkpoint saver.

Only langgraph's public ``BaseCheckpointSaver`` API of the inner saver is
used. What the inner saver stores is laid out in secure_serde/sealing/_codec.py
and _cell.py. Each method and its async twin run the same plan (_saver_plans.py:
what to read, check and put); only the driver, ``_run`` or ``_arun``, differs.
"""

from __future__ import annotations

import copy
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from secure_serde._errors import ConfigurationError
from secure_serde._report import PassProgress
from secure_serde.sealing import _saver_plans as plans
from secure_serde.sealing._codec import RECORD_KEY, Sealer, ids
from secure_serde.sealing._identity import IDENTITY_KEY, StoreIdentity, identity_plan
from secure_serde.sealing._inner import read_errors, unreadable
from secure_serde.sealing._reindex import (
    BATCH,
    ReindexReport,
    begin_reindex,
    reindex_plan,
    release_reindex,
)
from secure_serde.sealing._walks import overrides
from secure_serde.serde import EncryptedSerializer

__all__ = ["DEFAULT_INDEXED_METADATA", "PruningSealedSaver", "ReindexReport", "SealedSaver"]

# langgraph's own keys that callers and savers filter on: indexed by default.
# ``run_id`` must be: ``delete_for_runs`` finds rows by it.
DEFAULT_INDEXED_METADATA: Final = frozenset(
    {"source", "step", "run_id", "counters_since_delta_snapshot"}
)
T = TypeVar("T")
_RESERVED_KEYS: Final = frozenset({RECORD_KEY, IDENTITY_KEY, "parents"})


class SealedSaver(BaseCheckpointSaver[Any]):
    """Wraps any checkpoint saver so that it stores only sealed values, bound to their place.

    Args:
        inner: the saver that stores the rows (InMemorySaver, SqliteSaver,
            PostgresSaver, DynamoDBSaver, any ``BaseCheckpointSaver``).
        serde: an `EncryptedSerializer` whose cipher binds values to their
            row (every cipher in `secure_serde.ciphers`).
        indexed_metadata: metadata keys ``list(filter=)`` can match through
            the inner saver, by keyed blind-index tokens. ``source``,
            ``step``, ``run_id`` and ``counters_since_delta_snapshot`` always
            are. A filter on any other key is matched here, on the
            authenticated metadata, after the inner saver returns the rows.
        plaintext_metadata: metadata keys also stored in the clear, named one
            by one (checked against their sealed value on every read).
        tenant_keys: a `secure_serde.TenantKeys` key store: each tenant's rows
            are then sealed under its own keys, bound to it, and can be
            shredded (docs/tenants.md). Every call must then name a tenant.
        tenant: with ``tenant_keys``, a callable from the config to the
            tenant id; by default ``config["configurable"]["tenant_id"]``.

    Every channel value, pending write and metadata key reaches the inner
    saver sealed; the config reaches it reduced to the ids. Reads return
    only what this application wrote in this store and in that place, and
    refuse anything else with a typed error before deserializing it.
    """

    def __new__(cls, inner: BaseCheckpointSaver[Any] | None = None, **kwargs: Any) -> SealedSaver:
        # Capability-preserving: ``prune`` and ``delete_for_runs`` exist only where
        # the inner saver has them (langgraph detects capabilities by override).
        # No inner: copy.copy (with_allowlist's clone), which keeps the class it copies.
        if cls is SealedSaver and inner is not None:
            if kwargs.get("tenant_keys") is not None:
                cls = _TENANT_VARIANT[0](inner)
            else:
                cls = _VARIANTS[(overrides(inner, "prune"), overrides(inner, "delete_for_runs"))]
        return super().__new__(cls)

    def __init__(  # noqa: PLR0913 - public constructor: keyword-only options
        self,
        inner: BaseCheckpointSaver[Any],
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
        tenant_keys: Any = None,
        tenant: Callable[[RunnableConfig], Any] | None = None,
    ) -> None:
        if tenant is not None and tenant_keys is None:
            raise ConfigurationError("tenant= resolves tenants for tenant_keys=, which is not set")
        if tenant_keys is not None and not getattr(type(self), "TENANT_ROUTING", False):
            raise ConfigurationError("tenant_keys= is taken by SealedSaver itself, not a subclass")
        if not isinstance(inner, BaseCheckpointSaver):
            raise ConfigurationError(
                f"SealedSaver wraps a langgraph BaseCheckpointSaver, not {type(inner).__name__}"
            )
        if isinstance(inner, SealedSaver):
            raise ConfigurationError("this saver is sealed already; wrap the inner saver once")
        if not isinstance(serde, EncryptedSerializer) or not serde.seals_locations:
            raise ConfigurationError(
                "SealedSaver needs serde=secure_serde.EncryptedSerializer(cipher) with a cipher"
                " that binds values to their row (EnvKeyCipher, KeyRotationCipher,"
                " KmsEnvelopeCipher); nothing was written"
            )
        indexed = _names(indexed_metadata, "indexed_metadata")
        plaintext = _names(plaintext_metadata, "plaintext_metadata")
        if indexed & plaintext:
            raise ConfigurationError(
                f"metadata keys {sorted(indexed & plaintext)} are both indexed and plaintext"
            )
        super().__init__(serde=serde)
        self.inner = inner
        self._encrypting = serde
        self._indexed = (indexed | DEFAULT_INDEXED_METADATA) - plaintext
        self._plaintext = plaintext
        self._sealer: Sealer | None = None
        self._lock = threading.Lock()
        self._tenant_keys = tenant_keys
        self._tenant_of = tenant

    def __repr__(self) -> str:
        return f"SealedSaver({type(self.inner).__name__}, serde={self._encrypting!r})"

    @property
    def config_specs(self) -> list[Any]:
        return list(self.inner.config_specs)

    def for_tenant(self, tenant_id: str) -> SealedSaver:
        """This saver bound to one tenant: only with ``tenant_keys=`` (docs/tenants.md)."""
        raise ConfigurationError(
            "for_tenant needs per-tenant keys: SealedSaver(inner, serde=...,"
            " tenant_keys=TenantKeys.open(LOCATION))"
        )

    def with_allowlist(self, extra_allowlist: Any) -> SealedSaver:
        serde = self._encrypting.with_msgpack_allowlist(extra_allowlist)
        if serde is self._encrypting:
            return self
        clone = copy.copy(self)
        clone.serde = clone._encrypting = serde
        clone._sealer = None
        clone._lock = threading.Lock()
        return clone

    def setup(self) -> None:
        """Set up the inner saver (where it has ``setup``) and this store's identity."""
        inner_setup = getattr(self.inner, "setup", None)
        if callable(inner_setup):
            inner_setup()
        self._ready()

    async def asetup(self) -> None:
        inner_setup = getattr(self.inner, "setup", None)
        if callable(inner_setup):
            result = inner_setup()
            if inspect.isawaitable(result):
                await result
        await self._aready()

    def _ready(self) -> Sealer:
        sealer = self._sealer
        if sealer is None:
            with self._lock:
                if self._sealer is None:
                    identity = self._run(identity_plan(self.inner, self._encrypting))
                    self._sealer = self._sealer_for(identity)
                sealer = self._sealer
        return sealer

    async def _aready(self) -> Sealer:
        sealer = self._sealer
        if sealer is None:
            identity = await self._arun(identity_plan(self.inner, self._encrypting))
            sealer = self._sealer = self._sealer or self._sealer_for(identity)
        return sealer

    def _rows(self, config: RunnableConfig | None, **kwargs: Any) -> list[CheckpointTuple]:
        return cast("list[CheckpointTuple]", self._answer(("rows", config, kwargs)))

    def _sealer_for(self, identity: StoreIdentity) -> Sealer:
        return Sealer(self._encrypting, identity, self._indexed, self._plaintext)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(plans.get_plan(self, config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._arun(plans.get_plan(self, config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        walk, listed = self._run(plans.list_plan(self, config, filter, before, limit))
        for opened in walk.opened(listed):
            yield self._run(plans.with_sends(self, opened))
        self._run(plans.parents_plan(walk))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        walk, listed = await self._arun(plans.list_plan(self, config, filter, before, limit))
        for opened in walk.opened(listed):
            yield await self._arun(plans.with_sends(self, opened))
        await self._arun(plans.parents_plan(walk))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._run(plans.history_plan(config, channels))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._arun(plans.history_plan(config, channels))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        put_args = self._ready().put_args(config, checkpoint, metadata, new_versions)
        return cast(RunnableConfig, self._answer(("call", "put", put_args, {})))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        put_args = (await self._aready()).put_args(config, checkpoint, metadata, new_versions)
        return cast(RunnableConfig, await self._aanswer(("call", "put", put_args, {})))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        inner_config, sealed = self._ready().seal_writes(config, writes, task_id, task_path)
        self._answer(("call", "put_writes", (inner_config, sealed, task_id, task_path), {}))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        sealer = await self._aready()
        inner_config, sealed = sealer.seal_writes(config, writes, task_id, task_path)
        await self._aanswer(("call", "put_writes", (inner_config, sealed, task_id, task_path), {}))

    def delete_thread(self, thread_id: str) -> None:
        ids({"configurable": {"thread_id": thread_id}})
        self._answer(("call", "delete_thread", (thread_id,), {}))

    async def adelete_thread(self, thread_id: str) -> None:
        ids({"configurable": {"thread_id": thread_id}})
        await self._aanswer(("call", "delete_thread", (thread_id,), {}))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread through the inner saver's ``put``/``put_writes``, re-sealed for the target.

        Every source row is authenticated at its own place first; values
        move as ciphertext, re-encrypted for the target, never deserialized.
        """
        self._run(plans.copy_plan(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(plans.copy_plan(source_thread_id, target_thread_id))

    def _prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        self._run(plans.prune_plan(thread_ids, strategy))

    async def _aprune(self, thread_ids: Sequence[str], strategy: str) -> None:
        await self._arun(plans.prune_plan(thread_ids, strategy))

    def _delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(plans.delete_for_runs_plan(run_ids))

    async def _adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(plans.delete_for_runs_plan(run_ids))

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    def reindex(
        self,
        *,
        dry_run: bool = False,
        rotate: bool = True,
        max_rows: int | None = None,
        batch_size: int = BATCH,
        progress: Callable[[PassProgress], None] | None = None,
    ) -> ReindexReport:
        """Rotate the store's blind-index key: begin (or resume), move every row, drop the old.

        A new random index key becomes current unless a re-index is in progress
        already, which this call then resumes (``rotate=False``: never begin one,
        only finish the one in progress, or check that every row is current).
        Every checkpoint whose index tokens are under another key is re-put
        through the inner saver's ``put`` with its cells unchanged; rows under
        the current key are skipped. Once no row is left under an older key, those keys leave the
        store identity. ``max_rows`` stops after that many re-puts (run again to
        resume). ``dry_run`` writes nothing and counts what a call would do.
        Rows go in batches of ``batch_size``; ``progress`` gets a `PassProgress`
        after every batch. Filters find every row throughout. See docs/keys.md.
        """
        begin_reindex(self, max_rows, batch_size)
        try:
            plan = reindex_plan(self, dry_run, rotate, max_rows, batch_size, progress)
            return self._run(plan)
        finally:
            release_reindex(self.inner)

    async def areindex(
        self,
        *,
        dry_run: bool = False,
        rotate: bool = True,
        max_rows: int | None = None,
        batch_size: int = BATCH,
        progress: Callable[[PassProgress], None] | None = None,
    ) -> ReindexReport:
        """The async twin of `SealedSaver.reindex`."""
        begin_reindex(self, max_rows, batch_size)
        try:
            plan = reindex_plan(self, dry_run, rotate, max_rows, batch_size, progress)
            return await self._arun(plan)
        finally:
            release_reindex(self.inner)

    def _run(self, plan: plans.Plan[T]) -> T:
        answer: Any = None
        error: Exception | None = None
        while True:
            try:
                ask = plan.send(answer) if error is None else plan.throw(error)
            except StopIteration as done:
                return cast("T", done.value)
            answer, error = None, None
            try:
                answer = self._answer(ask)
            except Exception as exc:  # noqa: BLE001 - the plan decides; re-raised unless caught
                error = exc

    async def _arun(self, plan: plans.Plan[T]) -> T:
        answer: Any = None
        error: Exception | None = None
        while True:
            try:
                ask = plan.send(answer) if error is None else plan.throw(error)
            except StopIteration as done:
                return cast("T", done.value)
            answer, error = None, None
            try:
                answer = await self._aanswer(ask)
            except Exception as exc:  # noqa: BLE001 - the plan decides; re-raised unless caught
                error = exc

    def _answer(self, ask: tuple[Any, ...]) -> Any:
        if ask == plans.READY:
            return self._ready()
        typed, name, args, kwargs = plans.inner_call(ask)
        try:
            answer = getattr(self.inner, name)(*args, **kwargs)
            return plans.answered(ask, list(answer) if name == "list" else answer)
        except read_errors() as exc:
            if not typed:
                raise
            error = exc
        raise unreadable(self.inner, error) from None

    async def _aanswer(self, ask: tuple[Any, ...]) -> Any:
        if ask == plans.READY:
            return await self._aready()
        typed, name, args, kwargs = plans.inner_call(ask)
        try:
            called = getattr(self.inner, "a" + name)(*args, **kwargs)
            answer = [row async for row in called] if name == "list" else await called
            return plans.answered(ask, answer)
        except read_errors() as exc:
            if not typed:
                raise
            error = exc
        raise unreadable(self.inner, error) from None


# ---- the variants __new__ picks: module-level, so each is one fixed class ---------------


class _WithPrune(SealedSaver):
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._prune(thread_ids, strategy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._aprune(thread_ids, strategy)


class _WithDeleteForRuns(SealedSaver):
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._delete_for_runs(run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._adelete_for_runs(run_ids)


class _WithBoth(_WithPrune, _WithDeleteForRuns):
    pass


# _tenant_saver.py subclasses SealedSaver, so it registers its class picker here
# when imported: importing it from here would be a circle.
_TENANT_VARIANT: list[Callable[[BaseCheckpointSaver[Any]], type[SealedSaver]]] = []


def register_tenant_variant(pick: Callable[[BaseCheckpointSaver[Any]], type[SealedSaver]]) -> None:
    _TENANT_VARIANT[:] = [pick]


_VARIANTS: Final[dict[tuple[bool, bool], type[SealedSaver]]] = {
    (False, False): SealedSaver,
    (True, False): _WithPrune,
    (False, True): _WithDeleteForRuns,
    (True, True): _WithBoth,
}
for _variant in (_WithPrune, _WithDeleteForRuns, _WithBoth):
    _variant.__name__ = _variant.__qualname__ = "SealedSaver"

# The base of savers.postgres's savers: the stock PostgresSaver has prune, not delete_for_runs.
PruningSealedSaver = _WithPrune


def _names(values: Iterable[str], option: str) -> frozenset[str]:
    if isinstance(values, str):
        raise ConfigurationError(f"{option} takes a list of key names, not one string")
    names = frozenset(values)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"{option} holds {name!r}, which is not a key name")
    reserved = names & _RESERVED_KEYS
    if reserved:
        raise ConfigurationError(f"{option} may not name {sorted(reserved)}: reserved keys")
    return names
