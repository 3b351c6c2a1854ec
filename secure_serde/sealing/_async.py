"""The async twins of `SealedSaver`'s methods: the same plans (_saver_plans.py), awaited."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from secure_serde._report import PassProgress
from secure_serde.sealing import _saver_plans as plans
from secure_serde.sealing._codec import Sealer, ids
from secure_serde.sealing._identity import StoreIdentity, identity_plan
from secure_serde.sealing._inner import read_errors, unreadable
from secure_serde.sealing._reindex import (
    BATCH,
    ReindexReport,
    begin_reindex,
    reindex_plan,
    release_reindex,
)
from secure_serde.serde import EncryptedSerializer

__all__ = ["AsyncMethods"]

T = TypeVar("T")


class AsyncMethods:
    """Mixed into `SealedSaver`; relies on the attributes its ``__init__`` sets."""

    if TYPE_CHECKING:
        inner: BaseCheckpointSaver[Any]
        _encrypting: EncryptedSerializer
        _sealer: Sealer | None
        _indexed: frozenset[str]
        _plaintext: frozenset[str]
        _tenant_keys: Any

        def _sealer_for(self, identity: StoreIdentity) -> Sealer: ...

        def get_next_version(self, current: Any, channel: None) -> Any: ...

    async def asetup(self) -> None:
        """Set up the inner saver (where it has ``setup``) and this store's identity."""
        inner_setup = getattr(self.inner, "setup", None)
        if callable(inner_setup):
            result = inner_setup()
            if inspect.isawaitable(result):
                await result
        await self._aready()

    async def _aready(self) -> Sealer:
        sealer = self._sealer
        if sealer is None:
            identity = await self._arun(identity_plan(self.inner, self._encrypting))
            sealer = self._sealer = self._sealer or self._sealer_for(identity)
        return sealer

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._arun(plans.get_plan(self, config))

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

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._arun(plans.history_plan(config, channels))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        sealer = await self._aready()
        return await self.inner.aput(*sealer.put_args(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        sealer = await self._aready()
        inner_config, sealed = sealer.seal_writes(config, writes, task_id, task_path)
        await self.inner.aput_writes(inner_config, sealed, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        ids({"configurable": {"thread_id": thread_id}})
        await self.inner.adelete_thread(thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(plans.copy_plan(source_thread_id, target_thread_id))

    async def _aprune(self, thread_ids: Sequence[str], strategy: str) -> None:
        await self._arun(plans.prune_plan(thread_ids, strategy))

    async def _adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(plans.delete_for_runs_plan(run_ids))

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
