"""The steps of `SealedSaver`'s multi-call methods, shared by its sync and async twins.

A plan is a generator that yields what it asks of the inner saver and
receives the answer (or, thrown in at the ``yield``, the error the call
raised). `SealedSaver._run` answers by calling the inner saver and ``_arun``
by awaiting it, so only the I/O differs. An ask is one of:

- ``READY``: the sealer (``_ready``, creating the store identity if needed);
- ``IDENTITY``: the store identity row, which must exist;
- ``("read", config)``: the inner ``get_tuple``, its decode failures typed;
- ``("rows", config, kwargs)``: the inner ``list``, read to the end;
- ``("call", name, args, kwargs)``: the inner saver's ``name`` (or ``aname``),
  a ``list`` read to the end.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.serde.types import TASKS

from secure_serde._errors import StoreIdentityError
from secure_serde.sealing._codec import Opened, Sealer, ids, reduced
from secure_serde.sealing._identity import StoreIdentity, identity_config
from secure_serde.sealing._index import plan_filters
from secure_serde.sealing._record import new_versions_of
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
    "Host",
    "Plan",
    "copy_plan",
    "delete_for_runs_plan",
    "get_plan",
    "history_plan",
    "inner_call",
    "list_plan",
    "parents_plan",
    "prune_plan",
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


def _put(put_args: tuple[Any, ...]) -> Ask:
    return ("call", "put", (*put_args, new_versions_of(put_args[1])), {})


def _opened_rows(sealer: Sealer, config: RunnableConfig | None) -> Plan[Any]:
    rows: list[CheckpointTuple] = yield ("rows", config, {})
    return [(f, sealer.open(f, channels=())) for f in rows]


def inner_call(ask: Ask) -> tuple[bool, str, tuple[Any, ...], dict[str, Any]]:
    if ask == IDENTITY:
        return False, "get_tuple", (identity_config(),), {}
    if ask[0] == "read":
        return True, "get_tuple", (ask[1],), {}
    if ask[0] == "rows":
        return True, "list", (ask[1],), ask[2]
    return False, ask[1], ask[2], ask[3]


def answered(ask: Ask, answer: Any) -> Any:
    if ask == IDENTITY and answer is None:
        raise StoreIdentityError("the store identity is gone: restore it first")
    return answer


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


def merged(rows: Iterable[CheckpointTuple]) -> list[CheckpointTuple]:
    """Rows of one filter asked once per index key: each once, newest checkpoint id first."""
    seen: dict[tuple[str, str, str], CheckpointTuple] = {}
    for found in rows:
        seen.setdefault(key_of(found), found)
    return [seen[key] for key in sorted(seen, key=lambda k: (k[2], k[0], k[1]), reverse=True)]


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
        written = yield _put(put_args)
        for task_id, task_path, batch in writes:
            yield ("call", "put_writes", (written, batch, task_id, task_path), {})


def _detach(sealer: Sealer, rows: list[tuple[CheckpointTuple, Opened]]) -> Plan[None]:
    """Re-seal each row as one whose parent may be deleted, before it is."""
    for found, opened in rows:
        if not opened.detached:
            yield _put(resealed(sealer, found, opened, detached=True))


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
