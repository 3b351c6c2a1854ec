"""A small DeltaChannel graph, its rows, and the reads and row copies the tamper matrices use.

The graph's ``DeltaChannel`` never snapshots within the run, so rebuilding the head's state
walks the whole chain. `outcomes` reads a thread back through the wrapper four ways (list,
``get_state_history``, the head's state, the DeltaChannel fast path) and says what each raised.
`copy_thread_rows` copies a thread row for row through the bare inner savers' public API, into
another thread or another store: what an attacker with write access can do on any backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from secure_serde import BindingError
from tests.graphs_support import Driver
from tests.sealing.backends_support import SEALED_WRAPPER, Lane, RawCheckpoint, Store, bare_tuples

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


def cfg(thread_id: str = THREAD) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


CFG = cfg()
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


async def read(
    kind: str, saver: BaseCheckpointSaver[Any], lane: Lane, thread_id: str = THREAD
) -> Any:
    graph = Driver(build_graph(saver), lane.is_async)
    config = cfg(thread_id)
    if kind == "list":
        return await graph.checkpoints(config)
    if kind == "history":
        return await graph.history(config)
    head = await graph.state(config)
    if kind == "state":
        return head.values["log"]
    if lane.is_async:  # the DeltaChannel fast path, from the head
        return await saver.aget_delta_channel_history(config=head.config, channels=["log"])
    return saver.get_delta_channel_history(config=head.config, channels=["log"])


async def outcomes(store: Store, lane: Lane, thread_id: str = THREAD) -> dict[str, str]:
    """Each read of the thread through the wrapper: the error it raised, or "ok"."""
    found: dict[str, str] = {}
    async with store.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
        for kind in READS:
            try:
                await read(kind, saver, lane, thread_id)
            except BindingError as exc:
                found[kind] = type(exc).__name__
            else:
                found[kind] = "ok"
    return found


ASYNC_KINDS = ("aiosqlite", "apostgres")


def inner_config(t: CheckpointTuple, thread_id: str) -> RunnableConfig:
    """The config a bare ``put`` of ``t`` takes: its ids, with its parent's as checkpoint_id."""
    ids: dict[str, Any] = {
        "thread_id": thread_id,
        "checkpoint_ns": t.config["configurable"].get("checkpoint_ns", ""),
    }
    if t.parent_config is not None:
        ids["checkpoint_id"] = t.parent_config["configurable"]["checkpoint_id"]
    return {"configurable": ids}


async def bare_put(
    bare: BaseCheckpointSaver[Any],
    kind: str,
    t: CheckpointTuple,
    *,
    thread_id: str,
    metadata: Any = None,
    writes: Sequence[tuple[str, str, Any]] | None = None,
    new_versions: dict[str, Any] | None = None,
) -> None:
    """Store ``t`` (its checkpoint, ``metadata`` or its own, ``writes`` or its own) through
    ``bare``, an inner saver of this ``kind`` opened unsealed, under ``thread_id``."""
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in (t.pending_writes or []) if writes is None else writes:
        by_task.setdefault(task_id, []).append((channel, value))
    versions = dict(t.checkpoint["channel_versions"]) if new_versions is None else new_versions
    meta = t.metadata if metadata is None else metadata
    config = inner_config(t, thread_id)
    if kind in ASYNC_KINDS:
        stored = await bare.aput(config, t.checkpoint, meta, versions)
        for task_id, task_writes in by_task.items():
            await bare.aput_writes(stored, task_writes, task_id)
    else:
        stored = bare.put(config, t.checkpoint, meta, versions)
        for task_id, task_writes in by_task.items():
            bare.put_writes(stored, task_writes, task_id)


async def copy_thread_rows(
    source: Store, target: Store, thread_id: str, new_thread_id: str
) -> None:
    """Copy a thread row for row (every namespace) through the bare inner savers' API."""
    found = await bare_tuples(source, [thread_id])
    async with target.saver(sealed=False) as bare:
        for t in sorted(found, key=lambda t: t.config["configurable"]["checkpoint_id"]):
            await bare_put(bare, target.kind, t, thread_id=new_thread_id)
