"""A graph that plants a recognisable canary in every kind of place LangGraph stores state.

Used by tests/test_canaries.py (nothing of it may reach a store in plaintext), by the
sealing tests (tests/sealing/test_at_rest_matrix.py, test_postgres_constructors.py) and by
the frozen 0.3 stores' generator (tests/vectors/v03/).

Canaries: one per channel type (str, int, float, bool, list, dict, messages), the value passed
to ``interrupt()`` and the value it is resumed with, a subgraph's own state (with a private int
channel), a ``DeltaChannel`` (snapshotting every 2 updates, so both its write chain and a
``_DeltaSnapshot`` blob are stored), and a secret passed in ``config["configurable"]``, which
langgraph copies into checkpoint metadata.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Command, interrupt
from typing_extensions import TypedDict

from tests.graphs_support import linear_graph

STR = "CANARY-str-7f3a91c2"
INT = 73519046282
FLOAT = 2718.281828459
LIST = ["CANARY-list-1c4e8b", "CANARY-list-2d5f9a"]
DICT = {"CANARY-dictkey-55ab1f": "CANARY-dictval-9e02c7"}
HUMAN = "CANARY-human-msg-3d7c44"
AI = "CANARY-ai-msg-81be20"
FINAL = "CANARY-final-msg-6a0f13"
INTERRUPT = "CANARY-interrupt-question-a61f77"
RESUME = "CANARY-resume-answer-b27c05"
SUBGRAPH = "CANARY-subgraph-note-c88d3e"
SUB_INT = 90817263545
DELTAS = [
    "CANARY-delta-0-4b1e9d",
    "CANARY-delta-1-e5c2a8",
    "CANARY-delta-2-77d0f1",
    "CANARY-delta-3-0c9b36",
]
API_KEY = "CANARY-api-key-sk-2f8e6d0b"
RUN_ID = "1f0c2a9e-5b7d-6e41-8a3c-9d2b7e6f4a10"
# A bool has no byte pattern of its own, so the tests look for its channel's inline JSON (the
# int and float channels get the same check, beside their digits).
BOOL_CHANNEL = "canary_flag"
INT_CHANNEL = "canary_count"
FLOAT_CHANNEL = "canary_ratio"


def state_canaries() -> dict[str, list[bytes]]:
    """Every canary that is state (not config): name -> the byte strings a plaintext copy shows.

    Text as UTF-8; the numbers also as msgpack writes them (big-endian uint64 and float64), for
    stores that keep serialized values unencrypted.
    """
    texts = [STR, *LIST, *DICT, *DICT.values(), HUMAN, AI, FINAL, INTERRUPT, RESUME, SUBGRAPH]
    found = {text: [text.encode()] for text in texts}
    found.update({d: [d.encode()] for d in DELTAS})
    found["int"] = [str(INT).encode(), INT.to_bytes(8, "big")]
    found["float"] = [repr(FLOAT).encode(), struct.pack(">d", FLOAT)]
    found["sub_int"] = [str(SUB_INT).encode(), SUB_INT.to_bytes(8, "big")]
    return found


def leaks(data: bytes, canaries: dict[str, list[bytes]], *, hex_too: bool = False) -> set[str]:
    """Names of the canaries found in ``data``; with ``hex_too`` also as lowercase hex.

    pg_dump writes bytea columns as hex, so a plaintext value in a blob only shows that way.
    """
    found = set()
    for name, patterns in canaries.items():
        forms = [*patterns, *(p.hex().encode() for p in patterns)] if hex_too else patterns
        if any(form in data for form in forms):
            found.add(name)
    return found


def inline_json_patterns() -> dict[str, list[bytes]]:
    """How the stock Postgres saver's JSONB shows the primitive channels (pg_dump text)."""
    return {
        "inline-bool": [f'"{BOOL_CHANNEL}": true'.encode()],
        "inline-int": [f'"{INT_CHANNEL}": {INT}'.encode()],
        "inline-float": [f'"{FLOAT_CHANNEL}": {FLOAT!r}'.encode()],
    }


def _extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return [*state, *(item for batch in writes for item in batch)]


class ChildState(TypedDict, total=False):
    sub_note: str
    approval: str
    sub_count: int


class CanaryState(TypedDict, total=False):
    text: str
    canary_count: int
    canary_ratio: float
    canary_flag: bool
    items: list[str]
    mapping: dict[str, str]
    messages: Annotated[list[AnyMessage], add_messages]
    sub_note: str
    approval: str
    log: Annotated[list[str], operator.add]
    deltas: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=2)]


def _fill(state: CanaryState) -> dict[str, Any]:
    return {
        "text": STR,
        INT_CHANNEL: INT,
        FLOAT_CHANNEL: FLOAT,
        BOOL_CHANNEL: True,
        "items": list(LIST),
        "mapping": dict(DICT),
        "messages": [AIMessage(content=AI)],
        "deltas": [DELTAS[1]],
    }


def _research(state: ChildState) -> dict[str, Any]:
    return {"sub_note": SUBGRAPH, "sub_count": SUB_INT}


def _confirm(state: ChildState) -> dict[str, Any]:
    answer = interrupt(INTERRUPT)
    return {"approval": answer}


def build_child() -> CompiledStateGraph[ChildState, None, ChildState, ChildState]:
    return linear_graph(ChildState, ("research", _research), ("confirm", _confirm))


def _after_child(state: CanaryState) -> dict[str, Any]:
    return {"deltas": [DELTAS[2]], "log": ["after-child"]}


def _finish(state: CanaryState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=FINAL)], "deltas": [DELTAS[3]], "log": ["finish"]}


CanaryGraph = CompiledStateGraph[CanaryState, None, CanaryState, CanaryState]


def build_canary_graph(checkpointer: Checkpointer) -> CanaryGraph:
    return linear_graph(
        CanaryState,
        ("fill", _fill),
        ("child", build_child()),
        ("after_child", _after_child),
        ("finish", _finish),
        checkpointer=checkpointer,
    )


def canary_config(thread_id: str) -> RunnableConfig:
    # A run_id in config["metadata"], as LangGraph Platform sets one, is copied into metadata too.
    return {
        "configurable": {"thread_id": thread_id, "api_key": API_KEY, "tenant": "acme"},
        "metadata": {"run_id": RUN_ID},
    }


FIRST_INPUT: CanaryState = {"messages": [HumanMessage(content=HUMAN)], "deltas": [DELTAS[0]]}
RESUME_COMMAND: Command[Any] = Command(resume=RESUME)


@dataclass(frozen=True)
class Expected:
    """What the final state must hold after the run and its resume."""

    values: dict[str, Any]
    messages: list[str]


EXPECTED = Expected(
    values={
        "text": STR,
        INT_CHANNEL: INT,
        FLOAT_CHANNEL: FLOAT,
        BOOL_CHANNEL: True,
        "items": LIST,
        "mapping": DICT,
        "sub_note": SUBGRAPH,
        "approval": RESUME,
        "log": ["after-child", "finish"],
        "deltas": DELTAS,
    },
    messages=[HUMAN, AI, FINAL],
)


def check_final_state(values: dict[str, Any]) -> None:
    """Fail unless ``values`` is the state the canary run must end in."""
    for key, want in EXPECTED.values.items():
        assert values.get(key) == want, f"{key}: {values.get(key)!r} != {want!r}"
        assert type(values.get(key)) is type(want), key
    assert [m.content for m in values["messages"]] == EXPECTED.messages


def run_sync(graph: CanaryGraph, thread_id: str) -> dict[str, Any]:
    """Run to the interrupt, resume it, and return the final state values."""
    config = canary_config(thread_id)
    first = graph.invoke(FIRST_INPUT, config)
    assert [i.value for i in first["__interrupt__"]] == [INTERRUPT]
    graph.invoke(RESUME_COMMAND, config)
    values: dict[str, Any] = graph.get_state(config).values
    return values


async def run_async(graph: CanaryGraph, thread_id: str) -> dict[str, Any]:
    config = canary_config(thread_id)
    first = await graph.ainvoke(FIRST_INPUT, config)
    assert [i.value for i in first["__interrupt__"]] == [INTERRUPT]
    await graph.ainvoke(RESUME_COMMAND, config)
    values: dict[str, Any] = (await graph.aget_state(config)).values
    return values
