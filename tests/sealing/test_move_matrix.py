"""The move matrix, per inner saver kind: sealed rows moved or swapped below the wrapper, through
the bare inner saver's own public API (so the same attack runs on every backend), are refused
with a typed error before anything is deserialized.

Moves: a whole thread copied into another thread of the same store; the sealed metadata of
two checkpoints swapped; a checkpoint's pending writes copied onto another checkpoint; a
checkpoint copied into another namespace. The bare inner saver returns each of them as if
nothing happened, so each test fails with the wrapper off.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from secure_serde import BindingError
from tests.sealing.backends_support import (
    HEAVY_LANE_IDS,
    HEAVY_LANES,
    SEALED_WRAPPER,
    Lane,
    Store,
    Stores,
    bare_tuples,
)
from tests.sealing.tamper_support import (
    READS,
    THREAD,
    bare_put,
    copy_thread_rows,
    outcomes,
    written,
)

pytestmark = pytest.mark.parametrize("lane", HEAVY_LANES, ids=HEAVY_LANE_IDS)


async def root_tuples(store: Store) -> list[CheckpointTuple]:
    """The thread's root-namespace checkpoints as the bare inner saver holds them, oldest first."""
    found = await bare_tuples(store, [THREAD])
    return sorted(
        (t for t in found if not t.config["configurable"].get("checkpoint_ns")),
        key=lambda t: t.config["configurable"]["checkpoint_id"],
    )


async def get_tuple_outcome(store: Store, lane: Lane, config: RunnableConfig) -> str:
    """``get_tuple`` of one checkpoint through the wrapper: the error it raised, or "ok"."""
    async with store.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
        sealed: BaseCheckpointSaver[Any] = saver
        try:
            if lane.is_async:
                await sealed.aget_tuple(config)
            else:
                sealed.get_tuple(config)
        except BindingError as exc:
            return type(exc).__name__
        return "ok"


def at(t: CheckpointTuple, **changes: str) -> RunnableConfig:
    return {"configurable": {**t.config["configurable"], **changes}}


async def test_thread_copied_within_store_is_refused(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)
    await written(store, lane)
    await copy_thread_rows(store, store, THREAD, "copied")
    assert len(store.checkpoints("copied")) == len(store.checkpoints(THREAD))
    refused = await outcomes(store, lane, "copied")
    assert "ok" not in refused.values(), refused
    # The original thread still reads.
    assert await outcomes(store, lane) == dict.fromkeys(READS, "ok")


async def test_swapped_metadata_is_refused(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)
    await written(store, lane)
    rows = await root_tuples(store)
    a, b = rows[2], rows[4]
    async with store.saver(sealed=False) as bare:
        swap: dict[str, Any] = {"thread_id": THREAD, "writes": [], "new_versions": {}}
        await bare_put(bare, store.kind, a, metadata=b.metadata, **swap)
        await bare_put(bare, store.kind, b, metadata=a.metadata, **swap)
    swapped = await root_tuples(store)
    assert swapped[2].metadata == b.metadata  # the swap took, below the wrapper
    assert await get_tuple_outcome(store, lane, at(a)) != "ok"
    assert await get_tuple_outcome(store, lane, at(b)) != "ok"


async def test_writes_copied_to_another_checkpoint_are_refused(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)
    await written(store, lane)
    rows = await root_tuples(store)
    source, target = rows[2], rows[4]
    assert source.pending_writes
    moved = [(f"moved-{task}", channel, value) for task, channel, value in source.pending_writes]
    async with store.saver(sealed=False) as bare:
        await bare_put(bare, store.kind, target, thread_id=THREAD, writes=moved, new_versions={})
    assert len((await root_tuples(store))[4].pending_writes or ()) > len(
        target.pending_writes or ()
    )
    assert await get_tuple_outcome(store, lane, at(target)) != "ok"
    assert await get_tuple_outcome(store, lane, at(source)) == "ok"


async def test_checkpoint_copied_to_another_namespace_is_refused(
    lane: Lane, stores: Stores
) -> None:
    store = stores.new(lane.kind)
    await written(store, lane)
    root = (await root_tuples(store))[0]
    moved = root._replace(config=at(root, checkpoint_ns="elsewhere:1"), parent_config=None)
    async with store.saver(sealed=False) as bare:
        await bare_put(bare, store.kind, moved, thread_id=THREAD)
    assert any(r.checkpoint_ns == "elsewhere:1" for r in store.checkpoints(THREAD))
    assert await get_tuple_outcome(store, lane, at(moved)) != "ok"
