"""A real graph gives exactly the same states and history through ``SealedSaver(inner)`` as
through the bare inner saver, for every inner saver kind, sync and async.

The graph: messages with ``add_messages``, a ``DeltaChannel`` log (a snapshot every 2
updates), and a subgraph (tests/graphs_support.py's child graph) that interrupts. The
scenario: two turns, each interrupted in the subgraph and resumed; the subgraph's own state
at the interrupt; ``update_state``; a replay from an older checkpoint; a fork. The report of
each run holds every ``get_state_history`` entry, the state rebuilt at each of its
checkpoints, and ``get_delta_channel_history`` there. Ids differ between two runs (checkpoint,
task and message ids are time- or random-based), so every UUID (and interrupt id) in a report is
replaced by its rank of first appearance; everything else must be equal, types included.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata
from langgraph.graph.message import add_messages
from langgraph.types import StateSnapshot
from pydantic import BaseModel
from typing_extensions import TypedDict

from secure_serde.serde import langgraph_internals as lg
from tests.graphs_support import Driver, build_child_graph, linear_graph
from tests.sealing.backends_support import HEAVY_LANE_IDS, HEAVY_LANES, SEALED_WRAPPER, Lane, Stores

THREAD = "graph-matrix"
# UUIDs (checkpoint, task and message ids) and 32-hex-digit hashes (interrupt ids).
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b")

pytestmark = pytest.mark.parametrize("lane", HEAVY_LANES, ids=HEAVY_LANE_IDS)


def extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return [*state, *(item for batch in writes for item in batch)]


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=2)]
    turn: int


def _prepare(state: State) -> dict[str, Any]:
    turn = state.get("turn", 0) + 1
    return {"log": [f"prepare {turn}"], "turn": turn}


def _summarize(state: State) -> dict[str, Any]:
    count = len(state["messages"])
    return {"messages": [AIMessage(content=f"summary of {count}")], "log": [f"summarize {count}"]}


def build_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    return linear_graph(
        State,
        ("prepare", _prepare),
        ("child", build_child_graph()),
        ("summarize", _summarize),
        checkpointer=checkpointer,
    )


# --- normalized reports ----------------------------------------------------------------------


class Ids:
    """Replaces each UUID by its rank of first appearance."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def text(self, value: str) -> str:
        return _UUID.sub(lambda m: self.seen.setdefault(m.group(), f"<id{len(self.seen)}>"), value)

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bool | int | float) or value is None:
            return (type(value).__name__, value)
        if isinstance(value, bytes):
            return ("bytes", value)
        if isinstance(value, BaseModel):
            return {"<model>": type(value).__name__, **self(value.model_dump())}
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            names: tuple[str, ...] = getattr(type(value), "_fields")  # noqa: B009
            fields = {name: self(getattr(value, name)) for name in names}
            return {"<tuple>": type(value).__name__, **fields}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: self(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return {"<dataclass>": type(value).__name__, **fields}
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else repr(k): self(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [type(value).__name__, *(self(v) for v in value)]
        return ("<repr>", repr(value))


def _without_message_ids(value: Any) -> Any:
    """A normalized task result without its messages' ids.

    A task's result is read back from its pending writes. ``add_messages`` gives a new message
    its id in place, on the object the node returned, while a sync saver's ``put_writes``
    serializes it on a background thread: whether the stored write has the id is a race in
    langgraph, not a property of the saver.
    """
    if isinstance(value, dict):
        if value.get("<model>", "").endswith("Message"):
            return {k: v for k, v in value.items() if k != "id"}
        return {k: _without_message_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_message_ids(v) for v in value]
    return value


def snapshot_report(ids: Ids, snapshot: StateSnapshot) -> dict[str, Any]:
    tasks = [
        {
            "name": t.name,
            "path": ids(t.path),
            "error": repr(t.error),
            "interrupts": ids([i.value for i in t.interrupts]),
            "state": ids(t.state),
            "result": _without_message_ids(ids(t.result)),
        }
        for t in snapshot.tasks
    ]
    return {
        "values": ids(snapshot.values),
        "next": list(snapshot.next),
        "config": ids(snapshot.config),
        "parent_config": ids(snapshot.parent_config),
        "metadata": ids(snapshot.metadata),
        "tasks": tasks,
        "interrupts": ids([i.value for i in snapshot.interrupts]),
    }


async def delta_history(
    saver: BaseCheckpointSaver[Any], config: RunnableConfig, is_async: bool
) -> Any:
    if is_async:
        return await saver.aget_delta_channel_history(config=config, channels=["log"])
    return saver.get_delta_channel_history(config=config, channels=["log"])


async def run_scenario(saver: BaseCheckpointSaver[Any], is_async: bool) -> dict[str, Any]:
    """Run the scenario on ``saver``; everything it observed, with ids normalized."""
    ids = Ids()
    graph = Driver(build_graph(saver), is_async)
    cfg: RunnableConfig = {"configurable": {"thread_id": THREAD}}
    report: dict[str, Any] = {"steps": []}

    async def step(name: str, result: Any) -> None:
        state = await graph.state(cfg, subgraphs=True)
        sub = [
            snapshot_report(ids, t.state) for t in state.tasks if isinstance(t.state, StateSnapshot)
        ]
        report["steps"].append({"step": name, "result": ids(result), "subgraphs": sub})

    for turn in (1, 2):
        await step(f"ask {turn}", await graph.invoke({"messages": [HumanMessage(f"q{turn}")]}, cfg))
        await step(f"resume {turn}", await graph.resume(f"yes-{turn}", cfg))

    history = await graph.history(cfg)
    await step("update", ids(await graph.update(cfg, {"log": ["manual"]}, as_node="summarize")))

    # Replay from the oldest checkpoint that was about to run the subgraph, then resume it.
    before_child = [s for s in history if s.next == ("child",)]
    await step("replay", await graph.invoke(None, before_child[-1].config))
    await step("resume replay", await graph.resume("replayed", cfg))

    # Fork from the newest such checkpoint (second turn), run it, resume it.
    fork = await graph.update(before_child[0].config, {"log": ["fork"]}, as_node="prepare")
    await step("fork", await graph.invoke(None, fork))
    await step("resume fork", await graph.resume("forked", cfg))

    entries = []
    for snapshot in await graph.history(cfg):
        rebuilt = await graph.state(snapshot.config)
        entries.append(
            {
                "snapshot": snapshot_report(ids, snapshot),
                "rebuilt": ids(rebuilt.values),
                "delta": ids(await delta_history(saver, snapshot.config, is_async)),
            }
        )
    report["history"] = entries
    report["final"] = ids((await graph.state(cfg)).values)
    return report


def differences(got: Any, want: Any, path: str = "$") -> list[str]:
    """Where two reports differ: one line per differing leaf (or key set)."""
    if isinstance(got, dict) and isinstance(want, dict):
        # Key for key; not in order (PostgreSQL's JSONB orders keys its own way).
        if sorted(got) != sorted(want):
            return [f"{path}: keys {sorted(got)} != {sorted(want)}"]
        return [d for k in sorted(got) for d in differences(got[k], want[k], f"{path}.{k}")]
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in differences(g, w, f"{path}[{i}]")
        ]
    return [] if got == want else [f"{path}: {got!r:.300} != {want!r:.300}"]


def _not_vacuous(report: dict[str, Any]) -> None:
    """The scenario exercised what it is meant to: interrupts, subgraph state, delta seeds."""
    entries = report["history"]
    assert len(entries) >= 15
    assert sum(1 for e in entries if e["snapshot"]["interrupts"] != ["list"]) >= 4
    assert sum(1 for s in report["steps"] if s["subgraphs"]) >= 4
    seeds = [e["delta"]["log"].get("seed") for e in entries if "log" in e["delta"]]
    snapshot_name = lg.DeltaSnapshot.__name__
    snapshots = [s for s in seeds if isinstance(s, dict) and s.get("<tuple>") == snapshot_name]
    assert len(snapshots) >= 5
    final = report["final"]
    assert [m["content"] for m in final["messages"][1:]] == [
        "q1",
        "child answer (yes-1): found: q1",
        "summary of 2",
        "q2",
        "child answer (forked): found: q2",
        "summary of 5",
    ]
    assert final["log"] == ["list", "prepare 1", "summarize 2", "prepare 2", "fork", "summarize 5"]


async def test_graph_matches_bare_saver(lane: Lane, stores: Stores) -> None:
    async with stores.new(lane.kind).saver(sealed=False) as bare:
        expected = await run_scenario(bare, lane.is_async)
    _not_vacuous(expected)

    async with stores.new(lane.kind).saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
        assert (type(saver).__name__ != type(bare).__name__) is SEALED_WRAPPER
        actual = await run_scenario(saver, lane.is_async)

    if lane.kind == "dynamodb":
        # DynamoDBSaver builds metadata its own way (config["metadata"] verbatim, never
        # configurable); SealedSaver builds it as langgraph's get_checkpoint_metadata does, like
        # the stock savers, and seals it. README ("Seal any saver") says so. The rest must match.
        expected, actual = _langgraph_metadata_only(expected), _langgraph_metadata_only(actual)
    problems = differences(actual, expected)
    assert not problems, "sealed != bare at:\n" + "\n".join(problems)


_LANGGRAPH_METADATA = frozenset(CheckpointMetadata.__annotations__)


def _langgraph_metadata_only(report: Any) -> Any:
    """``report`` with every ``metadata`` mapping cut to the keys langgraph itself defines."""
    if isinstance(report, dict):
        return {
            key: (
                {k: v for k, v in value.items() if k in _LANGGRAPH_METADATA}
                if key == "metadata" and isinstance(value, dict)
                else _langgraph_metadata_only(value)
            )
            for key, value in report.items()
        }
    if isinstance(report, list):
        return [_langgraph_metadata_only(item) for item in report]
    return report
