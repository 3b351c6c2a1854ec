"""The steps of `SealedSaver`'s multi-call methods, shared by its sync and async twins.

A plan is a generator that yields what it asks of the inner saver and
receives the answer (or, thrown in at the ``yield``, the error the call
raised). _saver.py runs a plan by calling the inner saver and _async.py by
awaiting it, so only the I/O differs. An ask is one of:

- ``READY``: the sealer (``_ready``, creating the store identity if needed);
- ``IDENTITY``: the store identity row, which must exist;
- ``("read", config)``: the inner ``get_tuple``, its decode failures typed;
- ``("rows", config, kwargs)``: the inner ``list``, read to the end;
- ``("call", name, args, kwargs)``: the inner saver's ``name`` (or ``aname``).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.serde.types import TASKS

from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde.sealing._codec import Opened, Sealer, ids, reduced
from secure_serde.sealing._identity import StoreIdentity, drop_put, open_identity, rotate_put
from secure_serde.sealing._index import plan_filters
from secure_serde.sealing._record import new_versions_of
from secure_serde.sealing._reindex import (
    MAX_ROUNDS,
    ReindexScan,
    ReindexTally,
    check_max_rows,
    claim_reindex,
    concurrent,
    merged,
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
from secure_serde.serde import EncryptedSerializer

__all__ = [
    "IDENTITY",
    "READY",
    "Plan",
    "begin_reindex",
    "copy_plan",
    "delete_for_runs_plan",
    "get_plan",
    "history_plan",
    "list_plan",
    "parents_plan",
    "prune_plan",
    "reindex_plan",
    "with_sends",
]

T = TypeVar("T")
Ask = tuple[Any, ...]
Plan = Generator[Ask, Any, T]
READY: Final[Ask] = ("ready",)
IDENTITY: Final[Ask] = ("identity",)


class Host(Protocol):
    """What a plan reads and sets on the `SealedSaver` that runs it."""

    inner: BaseCheckpointSaver[Any]
    _encrypting: EncryptedSerializer
    _sealer: Sealer | None
    _tenant_keys: Any
    _indexed: frozenset[str]
    _plaintext: frozenset[str]

    def _sealer_for(self, identity: StoreIdentity) -> Sealer: ...

    def get_next_version(self, current: Any, channel: None) -> Any: ...


def _put(put_args: tuple[Any, ...], new_versions: Any) -> Ask:
    return ("call", "put", (*put_args, new_versions), {})


def _opened_rows(sealer: Sealer, config: RunnableConfig | None) -> Plan[Any]:
    rows: list[CheckpointTuple] = yield ("rows", config, {})
    return [(f, sealer.open(f, channels=())) for f in rows]


def get_plan(saver: Host, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
    sealer: Sealer = yield READY
    ids(config)
    found = yield ("read", reduced(config))
    if found is None:
        return None
    return (yield from with_sends(saver, sealer.open(found)))


def list_plan(
    saver: Host,
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> Plan[tuple[ListWalk, list[CheckpointTuple]]]:
    """The rows a ``list`` call walks: the caller opens them with ``walk.opened``."""
    sealer: Sealer = yield READY
    plans = plan_filters(filter, sealer.index_keys, saver._indexed, saver._plaintext)
    walk = ListWalk(sealer, plans[0], config, limit)
    # Read to the end before calling the inner saver again: stock savers hold their
    # connection's lock for as long as their list generator lives. Once per index key
    # (during a re-index): each row's tokens are under one key.
    listed: list[CheckpointTuple] = []
    for plan in plans:
        inner_before = None if before is None else reduced(before)
        asked = {"filter": plan.inner, "before": inner_before, "limit": walk.inner_limit}
        listed.extend((yield ("rows", walk.inner_config, asked)))
    return walk, merged(listed) if len(plans) > 1 else listed


def parents_plan(walk: ListWalk) -> Plan[None]:
    """After a ``list``: the parents its rows named and it did not return must exist."""
    for parent in walk.unseen_parents(complete=not walk.full):
        if (yield ("read", parent)) is None:
            raise missing(parent)


def with_sends(saver: Host, opened: Opened) -> Plan[CheckpointTuple]:
    found = opened.tuple
    if opened.parent_id is None or not needs_sends(found, opened.parent_id):
        return found
    parent = yield ("read", parent_config(found, opened.parent_id))
    sealer: Sealer = yield READY
    sends = sealer.open(parent, channels=(TASKS,)) if parent is not None else None
    return add_sends(saver, found, sends)  # type: ignore[arg-type]


def history_plan(
    config: RunnableConfig, channels: Sequence[str]
) -> Plan[Mapping[str, DeltaChannelHistory]]:
    if not channels:
        return {}
    sealer: Sealer = yield READY
    history = History(channels)
    found = yield ("read", reduced(config))
    if found is None:
        return history.result()
    cursor = history.start(sealer.open(found, channels=()))
    while cursor is not None:
        found = history.prefetched(cursor)
        page = None if found is not None else history.page()
        if page is not None:
            config_, before, limit = page
            history.keep((yield ("rows", config_, {"before": before, "limit": limit})), cursor)
            found = history.prefetched(cursor)
        if found is None:
            found = yield ("read", cursor)
        if found is None:
            if history.optional:
                break
            raise missing(cursor)
        cursor = history.step(sealer.open(found, channels=history.remaining))
    return history.result()


def copy_plan(source_thread_id: str, target_thread_id: str) -> Plan[None]:
    sealer: Sealer = yield READY
    ids({"configurable": {"thread_id": target_thread_id}})
    source: RunnableConfig = {"configurable": {"thread_id": str(source_thread_id)}}
    rows = yield from _opened_rows(sealer, source)
    check_complete(rows)
    for found, opened in sorted(rows, key=oldest_first):
        put_args, writes = copy_of(sealer, found, opened, str(target_thread_id))
        written = yield _put(put_args, new_versions_of(put_args[1]))
        for task_id, task_path, batch in writes:
            yield ("call", "put_writes", (written, batch, task_id, task_path), {})


def _detach(sealer: Sealer, rows: list[tuple[CheckpointTuple, Opened]]) -> Plan[None]:
    """Re-seal each row as one whose parent may be deleted, before it is."""
    for found, opened in rows:
        if not opened.detached:
            put_args = resealed(sealer, found, opened, detached=True)
            yield _put(put_args, new_versions_of(put_args[1]))


def prune_plan(thread_ids: Sequence[str], strategy: str) -> Plan[None]:
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    for thread_id in thread_ids:
        ids({"configurable": {"thread_id": thread_id}})
    if strategy == "keep_latest":
        sealer: Sealer = yield READY
        for thread_id in thread_ids:
            config: RunnableConfig = {"configurable": {"thread_id": str(thread_id)}}
            rows = yield from _opened_rows(sealer, config)
            yield from _detach(sealer, latest_per_namespace(rows))
    yield ("call", "prune", (thread_ids,), {"strategy": strategy})


def delete_for_runs_plan(run_ids: Sequence[str]) -> Plan[None]:
    if isinstance(run_ids, str):
        raise TypeError("run_ids must be a sequence of run IDs, not a str")
    sealer: Sealer = yield READY
    tokens = [t for r in run_ids for t in sealer.tokens("run_id", str(r))]
    doomed = set()
    for token in tokens:
        for found in (yield ("rows", None, {"filter": {"run_id": token}})):
            doomed.add(key_of(found))
    for thread in sorted({key[0] for key in doomed}):
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        rows = yield from _opened_rows(sealer, config)
        yield from _detach(sealer, orphans_after(rows, doomed))
    yield ("call", "delete_for_runs", (tokens,), {})


# -- the blind-index key's rotation (`SealedSaver.reindex` documents it) ------------------


def begin_reindex(saver: Host, max_rows: int | None) -> None:
    """The checks before a re-index, then its claim on the inner saver."""
    if saver._tenant_keys is not None:
        raise ConfigurationError(
            "reindex() rotates the store's own index key; per-tenant index keys are"
            " rotated with the tenant's keys (docs/tenants.md)"
        )
    check_max_rows(max_rows)
    claim_reindex(saver.inner)


def reindex_plan(
    saver: Host, *, dry_run: bool, rotate: bool, max_rows: int | None
) -> Plan[ReindexTally]:
    yield READY
    found = yield IDENTITY
    identity = open_identity(found, saver._encrypting)
    begin = rotate and len(identity.index_keys.generations) == 1
    if begin and not dry_run:
        put_args, new_id = rotate_put(found, saver._encrypting)
        yield _put(put_args, {})
        identity = open_identity((yield IDENTITY), saver._encrypting)
        if identity.index_keys.current.key_id != new_id:
            raise concurrent()
    sealer = saver._sealer = saver._sealer_for(identity)
    report = ReindexTally(
        key_id=None if begin and dry_run else sealer.index_keys.current.key_id,
        dry_run=dry_run,
        rotated=begin and not dry_run,
    )
    for _ in range(MAX_ROUNDS):
        scan = ReindexScan(sealer, rotating=begin and dry_run)
        yield from _scan(saver, scan)
        report.current = scan.current
        if dry_run or not scan.todo:
            report.rewritten = len(scan.todo) if dry_run else report.rewritten
            break
        for index, key in enumerate(scan.todo):
            if max_rows is not None and report.rewritten >= max_rows:
                report.remaining = len(scan.todo) - index
                return report
            yield from _move(sealer, scan, key, report)
        if report.refused:
            return report
    else:
        report.remaining = len(scan.todo)
        return report
    if not dry_run:
        yield from _drop_old(saver, sealer, report)
    return report


def _scan(saver: Host, scan: ReindexScan) -> Plan[None]:
    try:
        for row in (yield ("rows", None, {})):
            scan.see(row)
    except ValueError as exc:
        if isinstance(exc, SecureSerdeError):
            raise
        raise unenumerable_store(saver.inner) from None


def _drop_old(saver: Host, sealer: Sealer, report: ReindexTally) -> Plan[None]:
    """Every row is under the current key: the older keys leave the identity."""
    old = [g.key_id for g in sealer.index_keys.generations[1:]]
    if old:
        found = yield IDENTITY
        held = open_identity(found, saver._encrypting).index_keys.generations
        if [g.key_id for g in held] != [g.key_id for g in sealer.index_keys.generations]:
            raise concurrent()
        yield _put(drop_put(found, saver._encrypting), {})
        fresh = yield IDENTITY
        saver._sealer = saver._sealer_for(open_identity(fresh, saver._encrypting))
        report.dropped = tuple(old)
    report.complete = True


def _move(
    sealer: Sealer, scan: ReindexScan, key: tuple[str, str, str], report: ReindexTally
) -> Plan[None]:
    try:
        found = yield ("read", row_config(key))
        if found is None or scan.is_current(found):
            return
        opened = sealer.open(found, channels=(), retoken=True)
    except SecureSerdeError as exc:
        report.refuse(key, type(exc))
        return
    put_args = resealed(sealer, found, opened, detached=opened.detached)
    yield _put(put_args, new_versions_of(put_args[1]))
    report.rewritten += 1
