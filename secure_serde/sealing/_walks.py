"""The bookkeeping `SealedSaver` shares between its sync and async methods; no I/O here.

History is complete or it is an error: a list or a walk that references a
parent it cannot find raises `HistoryError`, unless the child's record says
its parent may be gone (``prune`` and ``delete_for_runs`` through the
wrapper seal that before they delete).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
)
from langgraph.checkpoint.serde.types import TASKS

from secure_serde._errors import HistoryError
from secure_serde.crypto import Location
from secure_serde.sealing import _cell
from secure_serde.sealing._codec import Opened, Sealer, ids, reduced
from secure_serde.sealing._identity import IDENTITY_THREAD
from secure_serde.sealing._index import FilterPlan, matches

__all__ = [
    "History",
    "ListWalk",
    "add_sends",
    "check_complete",
    "copy_of",
    "key_of",
    "latest_per_namespace",
    "missing",
    "needs_sends",
    "oldest_first",
    "orphans_after",
    "overrides",
    "parent_config",
    "resealed",
]

Key = tuple[str, str, str]
Row = tuple[CheckpointTuple, Opened]
PutArgs = tuple[RunnableConfig, Checkpoint, CheckpointMetadata]


def overrides(inner: BaseCheckpointSaver[Any], name: str) -> bool:
    return getattr(type(inner), name, None) is not getattr(BaseCheckpointSaver, name)


def key_of(found: CheckpointTuple) -> Key:
    return _key(found.config)


def _key(config: RunnableConfig) -> Key:
    thread, ns, checkpoint_id = ids(config)
    return thread, ns, str(checkpoint_id)


def _config(thread: str, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if checkpoint_id is not None:
        config["configurable"]["checkpoint_id"] = checkpoint_id
    return config


def missing(config: RunnableConfig) -> HistoryError:
    configurable = config["configurable"]
    return HistoryError(
        f"checkpoint {configurable.get('checkpoint_id')!r} of thread"
        f" {configurable.get('thread_id')!r} is referenced as a parent but missing from the"
        " store: its history was cut, and a shorter one is never returned"
    )


def parent_config(found: CheckpointTuple, parent_id: str) -> RunnableConfig:
    thread, ns, _ = ids(found.config)
    return _config(thread, ns, parent_id)


# -- checkpoints before v4 rebuild their pending sends from the parent's writes, as stock savers do


def needs_sends(found: CheckpointTuple, parent_id: str | None) -> bool:
    version = found.checkpoint.get("v")
    return parent_id is not None and isinstance(version, int) and version < 4


def add_sends(
    saver: BaseCheckpointSaver[Any], found: CheckpointTuple, parent: Opened | None
) -> CheckpointTuple:
    if parent is None:
        return found
    sends = [value for _, channel, value in parent.tuple.pending_writes or () if channel == TASKS]
    if not sends:
        return found
    checkpoint: dict[str, Any] = dict(found.checkpoint)
    versions = dict(checkpoint.get("channel_versions") or {})
    checkpoint["channel_values"] = {**checkpoint["channel_values"], TASKS: sends}
    versions[TASKS] = max(versions.values()) if versions else saver.get_next_version(None, None)
    checkpoint["channel_versions"] = versions
    return found._replace(checkpoint=cast(Checkpoint, checkpoint))


class ListWalk:
    def __init__(
        self,
        sealer: Sealer,
        plan: FilterPlan,
        config: RunnableConfig | None,
        limit: int | None,
    ) -> None:
        self.sealer = sealer
        self.plan = plan
        self.limit = limit
        self.inner_config = None if config is None else reduced(config)
        all_threads = config is None or "thread_id" not in (config.get("configurable") or {})
        if plan.residual or limit is None:
            self.inner_limit = None  # rows are matched here; the inner limit would cut early
        else:
            # One row past the page: usually the parent of its oldest row, whose existence
            # then needs no query of its own. The store identity may be among all threads'.
            self.inner_limit = limit + (2 if all_threads else 1)
        self.count = 0
        self.seen: set[Key] = set()
        self.parents: dict[Key, None] = {}

    @property
    def full(self) -> bool:
        return self.limit is not None and self.count >= self.limit

    def opened(self, listed: Iterable[CheckpointTuple]) -> Iterator[Opened]:
        for found in listed:
            if self.full:
                self.seen.add(key_of(found))
                continue
            opened = self.take(found)
            if opened is not None:
                yield opened

    def take(self, found: CheckpointTuple) -> Opened | None:
        configurable = found.config.get("configurable") or {}
        if str(configurable.get("thread_id")) == IDENTITY_THREAD:
            return None
        opened = self.sealer.open(found)
        self.sealer.check_filter(opened.tuple, self.plan.checked)
        if self.plan.residual and not matches(opened.tuple.metadata, self.plan.residual):
            return None
        thread, ns, checkpoint_id = key_of(found)
        self.seen.add((thread, ns, checkpoint_id))
        if opened.parent_id is not None and not opened.detached:
            self.parents[(thread, ns, opened.parent_id)] = None
        self.count += 1
        return opened

    def unseen_parents(self, *, complete: bool) -> Iterator[RunnableConfig]:
        """Each must exist; a filtered list checks none."""
        if self.plan.inner or self.plan.residual:
            return
        unseen = [k for k in self.parents if k not in self.seen]
        # A page has at most its oldest rows' parents beyond it; a complete listing has all.
        for thread, ns, checkpoint_id in unseen if complete else unseen[-4:]:
            yield _config(thread, ns, checkpoint_id)


class History:
    """`get_delta_channel_history`'s walk over verified records: seeds and writes per channel.

    Every ancestor is opened and checked exactly as `get_tuple` would (record,
    parent pointer, metadata, values and writes at their locations). Only how the
    rows are fetched differs: pages of the inner saver's ``list`` (``before``
    the last checkpoint walked), one query for many ancestors, in place of one
    ``get_tuple`` per ancestor. A row the pages do not hold is asked for by id,
    so an inner saver that lists in another order is still walked, only slower.
    """

    def __init__(self, channels: Sequence[str]) -> None:
        self.channels = list(channels)
        self.remaining = set(channels)
        self.collected: dict[str, list[PendingWrite]] = {c: [] for c in channels}
        self.seeds: dict[str, Any] = {}
        self.optional = False
        self.paging = True
        self.page_size = _FIRST_PAGE
        self.listed: dict[Key, CheckpointTuple] = {}
        self.child: RunnableConfig | None = None

    def start(self, target: Opened) -> RunnableConfig | None:
        self.page_size = _page_hint(target.tuple.metadata, self.channels)
        return self._next(target)

    def prefetched(self, cursor: RunnableConfig) -> CheckpointTuple | None:
        return self.listed.pop(_key(cursor), None)

    def page(self) -> tuple[RunnableConfig, RunnableConfig | None, int] | None:
        """(config, before, limit) of the next page to list, or None: ask by id."""
        if not self.paging or self.child is None:
            return None
        size = self.page_size
        self.page_size = min(size * 2, _LAST_PAGE)
        thread, ns, _ = ids(self.child)
        return _config(thread, ns, None), self.child, size

    def keep(self, rows: Iterable[CheckpointTuple], cursor: RunnableConfig) -> None:
        """Rows of one page; a page without the cursor ends paging (the inner order differs)."""
        for found in rows:
            if isinstance(found.pending_writes, list):  # a listing without writes is not used
                self.listed[key_of(found)] = found
        if _key(cursor) not in self.listed:
            self.paging = False
            self.listed.clear()

    def step(self, opened: Opened) -> RunnableConfig | None:
        found = opened.tuple
        for write in reversed(found.pending_writes or ()):
            if write[1] in self.remaining:
                self.collected[write[1]].append(write)
        values = found.checkpoint["channel_values"]
        for channel in list(self.remaining):
            if channel in values:
                self.seeds[channel] = values[channel]
                self.remaining.discard(channel)
        return self._next(opened)

    def _next(self, opened: Opened) -> RunnableConfig | None:
        if not self.remaining or opened.parent_id is None:
            return None
        # A detached record may have lost its parent legitimately.
        self.optional = opened.detached
        self.child = opened.tuple.config
        return parent_config(opened.tuple, opened.parent_id)

    def result(self) -> dict[str, DeltaChannelHistory]:
        out: dict[str, DeltaChannelHistory] = {}
        for channel in self.channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(self.collected[channel]))}
            if channel in self.seeds:
                entry["seed"] = self.seeds[channel]
            out[channel] = entry
        return out


# Pages of ancestors: the first sized by the target's own count of supersteps since each
# channel's last snapshot (sealed metadata, a hint only), then doubling, each at most the last.
_FIRST_PAGE = 8
_LAST_PAGE = 128
_COUNTERS = "counters_since_delta_snapshot"


def _page_hint(metadata: Any, channels: Sequence[str]) -> int:
    counters = metadata.get(_COUNTERS) if isinstance(metadata, dict) else None
    if not isinstance(counters, dict):
        return _FIRST_PAGE
    depths = [
        entry[1]
        for channel in channels
        if isinstance(entry := counters.get(channel), (list, tuple))
        and len(entry) == 2  # (updates, supersteps)
        and isinstance(entry[1], int)
    ]
    if not depths:
        return _FIRST_PAGE
    return max(2, min(max(depths) + 2, _LAST_PAGE))


def check_complete(rows: Sequence[Row]) -> None:
    have = {key_of(found) for found, _ in rows}
    for found, opened in rows:
        thread, ns, _ = key_of(found)
        parent = opened.parent_id
        if parent is not None and not opened.detached and (thread, ns, parent) not in have:
            raise missing(parent_config(found, parent))


def oldest_first(row: Row) -> tuple[str, str]:
    _, ns, checkpoint_id = key_of(row[0])
    return checkpoint_id, ns


def latest_per_namespace(rows: Iterable[Row]) -> list[Row]:
    latest: dict[str, Row] = {}
    for row in rows:
        _, ns, checkpoint_id = key_of(row[0])
        if ns not in latest or key_of(latest[ns][0])[2] < checkpoint_id:
            latest[ns] = row
    return list(latest.values())


def orphans_after(rows: Iterable[Row], doomed: set[Key]) -> list[Row]:
    out = []
    for found, opened in rows:
        thread, ns, checkpoint_id = key_of(found)
        if (thread, ns, checkpoint_id) in doomed or opened.parent_id is None:
            continue
        if (thread, ns, opened.parent_id) in doomed:
            out.append((found, opened))
    return out


def _cells(found: CheckpointTuple, opened: Opened) -> dict[str, Any]:
    stored = found.checkpoint.get("channel_values") or {}
    return {channel: stored[channel] for channel in opened.with_values}


def resealed(  # noqa: PLR0913 - the row, and where and how it is sealed again
    sealer: Sealer,
    found: CheckpointTuple,
    opened: Opened,
    *,
    detached: bool,
    target: str | None = None,
    cells: dict[str, Any] | None = None,
) -> PutArgs:
    """``put`` arguments of ``opened`` sealed again, for its location or in thread ``target``."""
    thread, ns, _ = key_of(found)
    checkpoint: Any = {**opened.tuple.checkpoint, "channel_values": opened.inline}
    config = _config(target or thread, ns, opened.parent_id)
    cells = _cells(found, opened) if cells is None else cells
    return sealer.seal_checkpoint(
        config, checkpoint, opened.tuple.metadata, detached=detached, cells=cells
    )


def copy_of(
    sealer: Sealer, found: CheckpointTuple, opened: Opened, target: str
) -> tuple[PutArgs, list[tuple[str, str, list[tuple[str, Any]]]]]:
    thread, ns, checkpoint_id = key_of(found)
    versions = opened.tuple.checkpoint.get("channel_versions") or {}
    cells = {
        channel: sealer.rebind(
            raw,
            _cell.VALUE,
            Location.blob(thread, ns, channel, versions.get(channel)),
            Location.blob(target, ns, channel, versions.get(channel)),
        )
        for channel, raw in _cells(found, opened).items()
    }
    put_args = resealed(sealer, found, opened, detached=opened.detached, target=target, cells=cells)
    batches: dict[tuple[str, str], list[tuple[int, str, bytes]]] = {}
    for task_id, channel, raw in found.pending_writes or ():
        cell = _cell.unpack(raw, _cell.WRITE)
        moved = sealer.rebind(
            raw,
            _cell.WRITE,
            Location.write(thread, ns, checkpoint_id, task_id, cell.task_path, cell.idx, channel),
            Location.write(target, ns, checkpoint_id, task_id, cell.task_path, cell.idx, channel),
        )
        batches.setdefault((task_id, cell.task_path), []).append((cell.idx, channel, moved))
    writes = [
        (task_id, task_path, [(channel, moved) for _, channel, moved in sorted(batch)])
        for (task_id, task_path), batch in batches.items()
    ]
    return put_args, writes
