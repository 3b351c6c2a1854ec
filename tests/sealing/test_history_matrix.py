"""History is complete or it is an error, and rows from another store are refused, for every
inner saver kind: the storage is tampered with below the wrapper (SQL, DynamoDB items,
InMemorySaver's dicts, through `Store`'s raw helpers) and the sealed saver must refuse.

The graph has a ``DeltaChannel`` that never snapshots within the run, so rebuilding the head's
state walks the whole chain. The bare inner saver accepts every one of these tamperings
silently (a shorter history, a different state): each test fails with the wrapper off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from secure_serde import BindingError, HistoryError, StoreIdentityError
from tests.graphs_support import Driver
from tests.sealing.backends_support import SEALED_WRAPPER, Lane, RawCheckpoint, Store, Stores

THREAD = "history"
STEPS = 6


def extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return [*state, *(item for batch in writes for item in batch)]


class State(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=100)]
    step: int


def _work(state: State) -> dict[str, Any]:
    n = state.get("step", 0) + 1
    return {"log": [f"step {n}"], "step": n}


def _route(state: State) -> str:
    return "work" if state["step"] < STEPS else END


def build_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(State)
    builder.add_node("work", _work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", _route)
    return builder.compile(checkpointer=checkpointer)


CFG: RunnableConfig = {"configurable": {"thread_id": THREAD}}
FULL_LOG = [f"step {n}" for n in range(1, STEPS + 1)]


async def written(store: Store, lane: Lane) -> list[RawCheckpoint]:
    """Run the graph on ``store`` through the wrapper; the thread's rows, oldest first."""
    async with store.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
        graph = Driver(build_graph(saver), lane.is_async)
        await graph.invoke({"step": 0}, CFG)
        assert (await graph.state(CFG)).values["log"] == FULL_LOG
    rows = store.checkpoints(THREAD)
    assert len(rows) == STEPS + 2
    assert [r.parent_checkpoint_id for r in rows[1:]] == [r.checkpoint_id for r in rows[:-1]]
    return rows


READS = ("list", "history", "state", "delta")


async def _read(read: str, saver: BaseCheckpointSaver[Any], lane: Lane) -> Any:
    graph = Driver(build_graph(saver), lane.is_async)
    if read == "list":
        return await graph.checkpoints(CFG)
    if read == "history":
        return await graph.history(CFG)
    head = await graph.state(CFG)
    if read == "state":
        return head.values["log"]
    if lane.is_async:  # the DeltaChannel fast path, from the head
        return await saver.aget_delta_channel_history(config=head.config, channels=["log"])
    return saver.get_delta_channel_history(config=head.config, channels=["log"])


async def outcomes(store: Store, lane: Lane) -> dict[str, str]:
    """Each read of the thread through the wrapper: the error it raised, or "ok"."""
    found: dict[str, str] = {}
    async with store.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
        for read in READS:
            try:
                await _read(read, saver, lane)
            except BindingError as exc:
                found[read] = type(exc).__name__
            else:
                found[read] = "ok"
    return found


async def test_cut_parent_is_refused(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)
    rows = await written(store, lane)
    store.set_parent(rows[3], None)
    assert await outcomes(store, lane) == dict.fromkeys(READS, HistoryError.__name__)


async def test_deleted_ancestor_is_refused(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)
    rows = await written(store, lane)
    store.delete_checkpoint(rows[3])
    assert await outcomes(store, lane) == dict.fromkeys(READS, HistoryError.__name__)


async def test_repointed_parent_is_refused(lane: Lane, stores: Stores) -> None:
    """A parent pointer moved to an older checkpoint of the same thread (skipping one)."""
    store = stores.new(lane.kind)
    rows = await written(store, lane)
    store.set_parent(rows[4], rows[2].checkpoint_id)
    refused = await outcomes(store, lane)
    assert "ok" not in refused.values(), refused


async def test_untouched_history_reads_back(lane: Lane, stores: Stores) -> None:
    """The control: without tampering, every read succeeds, with the whole history."""
    store = stores.new(lane.kind)
    await written(store, lane)
    assert await outcomes(store, lane) == dict.fromkeys(READS, "ok")
    async with store.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
        assert len(await _read("history", saver, lane)) == STEPS + 2
        assert await _read("state", saver, lane) == FULL_LOG


async def _transplant(source: Store, target: Store) -> None:
    """Copy the thread row for row through the bare inner savers' public API."""
    async with source.saver(sealed=False) as bare_source:
        tuples = [t async for t in bare_source.alist(CFG)] if source.kind in _ASYNC else []
        if source.kind not in _ASYNC:
            tuples = list(bare_source.list(CFG))
    async with target.saver(sealed=False) as bare_target:
        for t in sorted(tuples, key=lambda t: t.config["configurable"]["checkpoint_id"]):
            parent = dict(t.config["configurable"])
            parent.pop("checkpoint_id")
            if t.parent_config is not None:
                parent["checkpoint_id"] = t.parent_config["configurable"]["checkpoint_id"]
            config: RunnableConfig = {"configurable": parent}
            versions = dict(t.checkpoint["channel_versions"])
            writes_by_task: dict[str, list[tuple[str, Any]]] = {}
            for task_id, channel, value in t.pending_writes or ():
                writes_by_task.setdefault(task_id, []).append((channel, value))
            if target.kind in _ASYNC:
                stored = await bare_target.aput(config, t.checkpoint, t.metadata, versions)
                for task_id, writes in writes_by_task.items():
                    await bare_target.aput_writes(stored, writes, task_id)
            else:
                stored = bare_target.put(config, t.checkpoint, t.metadata, versions)
                for task_id, writes in writes_by_task.items():
                    bare_target.put_writes(stored, writes, task_id)


_ASYNC = ("aiosqlite", "apostgres")


async def test_transplant_between_stores_is_refused(lane: Lane, stores: Stores) -> None:
    """A thread copied row for row into another store that uses the same key."""
    source, target = stores.new(lane.kind), stores.new(lane.kind)
    await written(source, lane)
    async with target.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async):
        pass  # the target store exists (and has its own identity) before the copy
    await _transplant(source, target)
    assert len(target.checkpoints(THREAD)) == STEPS + 2
    # Refused, by every read, and named for what it is: rows from another store.
    assert await outcomes(target, lane) == dict.fromkeys(READS, StoreIdentityError.__name__)
