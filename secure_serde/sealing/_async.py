"""The async twins of `SealedSaver`'s methods: the same steps, awaiting the inner saver.

Each method mirrors the sync one of the same name in _saver.py; the checks
themselves live in _codec.py and _walks.py, shared by both.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.types import TASKS

from secure_serde._errors import ConfigurationError, SecureSerdeError, StoreIdentityError
from secure_serde._serializer import EncryptedSerializer
from secure_serde.sealing._codec import Opened, Sealer, ids, reduced
from secure_serde.sealing._identity import (
    IDENTITY_THREAD,
    StoreIdentity,
    drop_put,
    identity_config,
    new_identity_put,
    open_identity,
    refuse_unempty,
    rotate_put,
    unenumerable,
)
from secure_serde.sealing._index import plan_filters
from secure_serde.sealing._inner import guarded_async, read_errors, unreadable
from secure_serde.sealing._record import new_versions_of
from secure_serde.sealing._reindex import (
    MAX_ROUNDS,
    ReindexReport,
    ReindexScan,
    ReindexTally,
    check_max_rows,
    claim_reindex,
    concurrent,
    merged,
    release_reindex,
    row_config,
    unenumerable_store,
)
from secure_serde.sealing._walks import (
    History,
    ListWalk,
    add_sends,
    check_complete,
    copy_of,
    key_of,
    latest_per_namespace,
    missing,
    needs_sends,
    oldest_first,
    orphans_after,
    parent_config,
    resealed,
)

__all__ = ["AsyncMethods"]


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
        if sealer is not None:
            return sealer
        found = await self.inner.aget_tuple(identity_config())
        if found is None:
            if await self._aholds_checkpoints():
                raise refuse_unempty()
            await self.inner.aput(*new_identity_put(self._encrypting), {})
            found = await self.inner.aget_tuple(identity_config())
            if found is None:
                raise StoreIdentityError("the inner saver did not keep the store identity record")
        if self._sealer is None:
            self._sealer = self._sealer_for(open_identity(found, self._encrypting))
        return self._sealer

    async def _aholds_checkpoints(self) -> bool:
        try:
            async for row in self.inner.alist(None, limit=2):
                if str(row.config["configurable"].get("thread_id")) != IDENTITY_THREAD:
                    return True
        except ValueError:
            unenumerable(self.inner)
            return False
        except Exception:  # noqa: BLE001 - rows the inner serde cannot read are still rows
            return True
        return False

    async def _aread(self, config: RunnableConfig) -> CheckpointTuple | None:
        try:
            return await self.inner.aget_tuple(config)
        except read_errors() as exc:
            error = exc
        raise unreadable(self.inner, error) from None

    def _arows(
        self, config: RunnableConfig | None, **kwargs: Any
    ) -> AsyncIterator[CheckpointTuple]:
        return guarded_async(self.inner, self.inner.alist(config, **kwargs))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        sealer = await self._aready()
        ids(config)
        found = await self._aread(reduced(config))
        if found is None:
            return None
        return await self._awith_sends(sealer.open(found))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        sealer = await self._aready()
        plans = plan_filters(filter, sealer.index_keys, self._indexed, self._plaintext)
        walk = ListWalk(sealer, plans[0], config, limit)
        listed: list[CheckpointTuple] = []
        for plan in plans:
            listed.extend(
                [
                    found
                    async for found in self._arows(
                        walk.inner_config,
                        filter=plan.inner,
                        before=None if before is None else reduced(before),
                        limit=walk.inner_limit,
                    )
                ]
            )
        if len(plans) > 1:
            listed = merged(listed)
        for found in listed:
            if walk.full:
                walk.peek(found)
                continue
            opened = walk.take(found)
            if opened is not None:
                yield await self._awith_sends(opened)
        for parent in walk.unseen_parents(complete=not walk.full):
            if await self._aread(parent) is None:
                raise missing(parent)

    async def _awith_sends(self, opened: Opened) -> CheckpointTuple:
        found = opened.tuple
        if opened.parent_id is None or not needs_sends(found, opened.parent_id):
            return found
        parent = await self._aread(parent_config(found, opened.parent_id))
        sealer = await self._aready()
        sends = sealer.open(parent, channels=(TASKS,)) if parent is not None else None
        return add_sends(self, found, sends)  # type: ignore[arg-type]

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        sealer = await self._aready()
        history = History(channels)
        found = await self._aread(reduced(config))
        if found is None:
            return history.result()
        cursor = history.start(sealer.open(found, channels=()))
        while cursor is not None:
            found = history.prefetched(cursor)
            page = None if found is not None else history.page()
            if page is not None:
                config_, before, limit = page
                rows = [row async for row in self._arows(config_, before=before, limit=limit)]
                history.keep(rows, cursor)
                found = history.prefetched(cursor)
            if found is None:
                found = await self._aread(cursor)
            if found is None:
                if history.optional:
                    break
                raise missing(cursor)
            cursor = history.step(sealer.open(found, channels=history.remaining))
        return history.result()

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
        sealer = await self._aready()
        ids({"configurable": {"thread_id": target_thread_id}})
        source: RunnableConfig = {"configurable": {"thread_id": str(source_thread_id)}}
        rows = [(f, sealer.open(f, channels=())) async for f in self._arows(source)]
        check_complete(rows)
        for found, opened in sorted(rows, key=oldest_first):
            put_args, writes = copy_of(sealer, found, opened, str(target_thread_id))
            written = await self.inner.aput(*put_args, new_versions_of(put_args[1]))
            for task_id, task_path, batch in writes:
                await self.inner.aput_writes(written, batch, task_id, task_path)

    async def _adetach(self, rows: list[tuple[CheckpointTuple, Opened]]) -> None:
        sealer = await self._aready()
        for found, opened in rows:
            if not opened.detached:
                put_args = resealed(sealer, found, opened, detached=True)
                await self.inner.aput(*put_args, new_versions_of(put_args[1]))

    async def _aprune(self, thread_ids: Sequence[str], strategy: str) -> None:
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        for thread_id in thread_ids:
            ids({"configurable": {"thread_id": thread_id}})
        if strategy == "keep_latest":
            sealer = await self._aready()
            for thread_id in thread_ids:
                config: RunnableConfig = {"configurable": {"thread_id": str(thread_id)}}
                rows = [(f, sealer.open(f, channels=())) async for f in self._arows(config)]
                await self._adetach(latest_per_namespace(rows))
        await self.inner.aprune(thread_ids, strategy=strategy)

    async def _adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        if isinstance(run_ids, str):
            raise TypeError("run_ids must be a sequence of run IDs, not a str")
        sealer = await self._aready()
        tokens = [t for r in run_ids for t in sealer.tokens("run_id", str(r))]
        doomed = set()
        for token in tokens:
            async for found in self._arows(None, filter={"run_id": token}):
                doomed.add(key_of(found))
        for thread in sorted({key[0] for key in doomed}):
            config: RunnableConfig = {"configurable": {"thread_id": thread}}
            rows = [(f, sealer.open(f, channels=())) async for f in self._arows(config)]
            await self._adetach(orphans_after(rows, doomed))
        await self.inner.adelete_for_runs(tokens)

    # -- the blind-index key's rotation (the steps of `SealedSaver.reindex`) ------------------

    async def areindex(
        self, *, dry_run: bool = False, rotate: bool = True, max_rows: int | None = None
    ) -> ReindexReport:
        """The async twin of `SealedSaver.reindex`."""
        if self._tenant_keys is not None:
            raise ConfigurationError(
                "reindex() rotates the store's own index key; per-tenant index keys are"
                " rotated with the tenant's keys (docs/tenants.md)"
            )
        check_max_rows(max_rows)
        claim_reindex(self.inner)
        try:
            return (
                await self._areindex(dry_run=dry_run, rotate=rotate, max_rows=max_rows)
            ).report()
        finally:
            release_reindex(self.inner)

    async def _aidentity_row(self) -> CheckpointTuple:
        found = await self.inner.aget_tuple(identity_config())
        if found is None:
            raise StoreIdentityError("this store's identity record is gone: restore it first")
        return found

    async def _areindex(self, *, dry_run: bool, rotate: bool, max_rows: int | None) -> ReindexTally:
        await self._aready()
        found = await self._aidentity_row()
        identity = open_identity(found, self._encrypting)
        begin = rotate and len(identity.index_keys.generations) == 1
        if begin and not dry_run:
            put_args, new_id = rotate_put(found, self._encrypting)
            await self.inner.aput(*put_args, {})
            identity = open_identity(await self._aidentity_row(), self._encrypting)
            if identity.index_keys.current.key_id != new_id:
                raise concurrent()
        sealer = self._sealer = self._sealer_for(identity)
        report = ReindexTally(
            key_id=None if begin and dry_run else sealer.index_keys.current.key_id,
            dry_run=dry_run,
            rotated=begin and not dry_run,
        )
        for _ in range(MAX_ROUNDS):
            scan = ReindexScan(sealer, rotating=begin and dry_run)
            await self._ascan(scan)
            report.current = scan.current
            if dry_run or not scan.todo:
                report.rewritten = len(scan.todo) if dry_run else report.rewritten
                break
            for index, key in enumerate(scan.todo):
                if max_rows is not None and report.rewritten >= max_rows:
                    report.remaining = len(scan.todo) - index
                    return report
                await self._amove(sealer, scan, key, report)
            if report.refused:
                return report
        else:
            report.remaining = len(scan.todo)
            return report
        if not dry_run:
            await self._adrop_old(sealer, report)
        return report

    async def _ascan(self, scan: ReindexScan) -> None:
        try:
            async for row in self._arows(None):
                scan.see(row)
        except ValueError as exc:
            if isinstance(exc, SecureSerdeError):
                raise
            raise unenumerable_store(self.inner) from None

    async def _adrop_old(self, sealer: Sealer, report: ReindexTally) -> None:
        """Every row is under the current key: the older keys leave the identity."""
        old = [g.key_id for g in sealer.index_keys.generations[1:]]
        if old:
            found = await self._aidentity_row()
            held = open_identity(found, self._encrypting).index_keys.generations
            if [g.key_id for g in held] != [g.key_id for g in sealer.index_keys.generations]:
                raise concurrent()
            await self.inner.aput(*drop_put(found, self._encrypting), {})
            fresh = await self._aidentity_row()
            self._sealer = self._sealer_for(open_identity(fresh, self._encrypting))
            report.dropped = tuple(old)
        report.complete = True

    async def _amove(
        self, sealer: Sealer, scan: ReindexScan, key: tuple[str, str, str], report: ReindexTally
    ) -> None:
        try:
            found = await self._aread(row_config(key))
            if found is None or scan.is_current(found):
                return
            opened = sealer.open(found, channels=(), retoken=True)
        except SecureSerdeError as exc:
            report.refuse(key, type(exc))
            return
        put_args = resealed(sealer, found, opened, detached=opened.detached)
        await self.inner.aput(*put_args, new_versions_of(put_args[1]))
        report.rewritten += 1
