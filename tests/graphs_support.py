"""Small, deterministic LangGraph graphs shared by the graph-level tests (no LLM anywhere).

Every builder takes a checkpointer and returns a compiled graph. `Driver` runs a graph through
its sync or its async API with the same calls, so one scenario covers both kinds of saver.
`strict_msgpack_report` is run in a subprocess with ``LANGGRAPH_STRICT_MSGPACK=true`` (langgraph
reads that variable at import time); `Profile` and `Opaque` live here, in an importable module,
because the msgpack allowlist names types by module and qualified name.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Command, StateSnapshot, interrupt
from pydantic import BaseModel
from typing_extensions import TypedDict

from secure_serde import EncryptedSerializer

# A fixed test key (32 bytes); tests that need a second, different key use OTHER_KEY.
KEY = b"graph-tests-key-0123456789abcdef"
OTHER_KEY = b"a-completely-different-key-32byt"
assert len(KEY) == len(OTHER_KEY) == 32

# --------------------------------------------------------------------------------------------
# 1. Conversation memory


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def reply_text(turn: int, text: str) -> str:
    """What the chat node answers to the ``turn``-th human message ``text``."""
    return f"echo #{turn}: {text}"


def _reply(state: ChatState) -> dict[str, Any]:
    humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
    return {"messages": [AIMessage(content=reply_text(len(humans), str(humans[-1].content)))]}


def build_chat_graph(
    checkpointer: Checkpointer,
) -> CompiledStateGraph[ChatState, None, ChatState, ChatState]:
    builder = StateGraph(ChatState)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


def transcript(messages: Sequence[Any]) -> list[tuple[str, str]]:
    """Messages as (type, content) pairs, ignoring the random ids add_messages assigns."""
    return [(m.type, m.content) for m in messages]


# --------------------------------------------------------------------------------------------
# 2. interrupt() and Command(resume=...)


class ReviewState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    verdict: str
    reviewer_note: str


def _draft(state: ReviewState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"draft: {state['messages'][-1].content}")]}


def _review(state: ReviewState) -> dict[str, Any]:
    answer = interrupt({"question": "approve this draft?", "draft": state["messages"][-1].content})
    return {
        "verdict": answer["verdict"],
        "reviewer_note": answer["note"],
        "messages": [HumanMessage(content=f"review: {answer['verdict']} / {answer['note']}")],
    }


def _publish(state: ReviewState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"published ({state['verdict']})")]}


def build_review_graph(
    checkpointer: Checkpointer,
) -> CompiledStateGraph[ReviewState, None, ReviewState, ReviewState]:
    builder = StateGraph(ReviewState)
    builder.add_node("draft", _draft)
    builder.add_node("review", _review)
    builder.add_node("publish", _publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=checkpointer)


# --------------------------------------------------------------------------------------------
# 3. A linear pipeline for history, update_state, replay and fork


class StepsState(TypedDict):
    steps: Annotated[list[str], operator.add]
    topic: str


def _step(name: str) -> Any:
    def node(state: StepsState) -> dict[str, Any]:
        return {"steps": [f"{name}({state['topic']})"]}

    node.__name__ = name
    return node


def build_steps_graph(
    checkpointer: Checkpointer,
) -> CompiledStateGraph[StepsState, None, StepsState, StepsState]:
    builder = StateGraph(StepsState)
    for name in ("a", "b", "c"):
        builder.add_node(name, _step(name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=checkpointer)


# --------------------------------------------------------------------------------------------
# 4. A subgraph with its own checkpoint namespace, which interrupts


class ChildState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    findings: Annotated[list[str], operator.add]


class ParentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    log: Annotated[list[str], operator.add]


def _research(state: ChildState) -> dict[str, Any]:
    question = str(state["messages"][-1].content)
    return {"findings": [f"found: {question}"]}


def _confirm(state: ChildState) -> dict[str, Any]:
    ok = interrupt({"confirm": state["findings"][-1]})
    return {"messages": [AIMessage(content=f"child answer ({ok}): {state['findings'][-1]}")]}


def _prepare(state: ParentState) -> dict[str, Any]:
    return {"log": ["prepared"]}


def _summarize(state: ParentState) -> dict[str, Any]:
    return {"log": [f"summarized {len(state['messages'])} messages"]}


def build_child_graph() -> CompiledStateGraph[ChildState, None, ChildState, ChildState]:
    builder = StateGraph(ChildState)
    builder.add_node("research", _research)
    builder.add_node("confirm", _confirm)
    builder.add_edge(START, "research")
    builder.add_edge("research", "confirm")
    builder.add_edge("confirm", END)
    return builder.compile()


def build_parent_graph(
    checkpointer: Checkpointer,
) -> CompiledStateGraph[ParentState, None, ParentState, ParentState]:
    builder = StateGraph(ParentState)
    builder.add_node("prepare", _prepare)
    builder.add_node("child", build_child_graph())
    builder.add_node("summarize", _summarize)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "child")
    builder.add_edge("child", "summarize")
    builder.add_edge("summarize", END)
    return builder.compile(checkpointer=checkpointer)


# --------------------------------------------------------------------------------------------
# Running a graph through its sync or async API


@dataclasses.dataclass
class Driver:
    """The same calls on a compiled graph, through ``invoke`` or ``ainvoke`` and friends."""

    graph: CompiledStateGraph[Any, Any, Any, Any]
    is_async: bool

    async def invoke(self, inp: Any, config: RunnableConfig) -> Any:
        if self.is_async:
            return await self.graph.ainvoke(inp, config)
        return self.graph.invoke(inp, config)

    async def resume(self, value: Any, config: RunnableConfig) -> Any:
        return await self.invoke(Command(resume=value), config)

    async def state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        if self.is_async:
            return await self.graph.aget_state(config, subgraphs=subgraphs)
        return self.graph.get_state(config, subgraphs=subgraphs)

    async def history(self, config: RunnableConfig) -> list[StateSnapshot]:
        if self.is_async:
            return [s async for s in self.graph.aget_state_history(config)]
        return list(self.graph.get_state_history(config))

    async def update(
        self, config: RunnableConfig, values: Any, as_node: str | None = None
    ) -> RunnableConfig:
        if self.is_async:
            return await self.graph.aupdate_state(config, values, as_node=as_node)
        return self.graph.update_state(config, values, as_node=as_node)

    async def checkpoints(self, config: RunnableConfig) -> list[CheckpointTuple]:
        """Raw checkpoint tuples from the saver (decrypted by its serde)."""
        saver = self.graph.checkpointer
        assert isinstance(saver, BaseCheckpointSaver)
        if self.is_async:
            return [t async for t in saver.alist(config)]
        return list(saver.list(config))


# --------------------------------------------------------------------------------------------
# 8. Strict msgpack (run in a subprocess with LANGGRAPH_STRICT_MSGPACK=true)


class Profile(BaseModel):
    name: str
    tags: list[str]


@dataclasses.dataclass
class Opaque:
    label: str
    n: int


class StrictState(TypedDict, total=False):
    profile: Profile
    extra: Any
    greeting: str


def _pause(state: StrictState) -> dict[str, Any]:
    interrupt("go on?")
    return {}


def _greet(state: StrictState) -> dict[str, Any]:
    # Runs after a resume, so on state restored from the checkpoint: says what it was handed.
    profile = state["profile"]
    if isinstance(profile, Profile):
        return {"greeting": f"hello {profile.name} (Profile)"}
    return {"greeting": f"hello {profile['name']} ({type(profile).__name__})"}


def build_strict_graph(
    checkpointer: Checkpointer,
) -> CompiledStateGraph[StrictState, None, StrictState, StrictState]:
    builder = StateGraph(StrictState)
    builder.add_node("pause", _pause)
    builder.add_node("greet", _greet)
    builder.add_edge(START, "pause")
    builder.add_edge("pause", "greet")
    builder.add_edge("greet", END)
    return builder.compile(checkpointer=checkpointer)


class PassThroughSerde:
    """A serializer wrapper that is not a JsonPlusSerializer (langgraph cannot reach inside)."""

    def __init__(self, inner: SerializerProtocol) -> None:
        self.inner = inner

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)


class AuditedSerializer(EncryptedSerializer):
    """A user subclass of our serializer that counts what it encrypts (say, for metrics)."""

    __slots__ = ()
    dumps_calls: ClassVar[int] = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type(self).dumps_calls += 1
        return super().dumps_typed(obj)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


def _describe(value: Any) -> dict[str, Any]:
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if isinstance(value, BaseModel):
        data: Any = value.model_dump()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = dataclasses.asdict(value)
    else:
        data = value
    return {"type": kind, "data": data}


def strict_msgpack_report() -> dict[str, Any]:
    """Run `build_strict_graph` on InMemorySaver under several serdes and describe the results.

    Returns JSON-able data: whether strict mode is on, and for each serde the type and data of
    the ``profile`` (in the schema) and ``extra`` (typed ``Any``) values read back by
    ``get_state``, the greeting the node computed, the serde the compiled graph's checkpointer
    ended up with, and the warnings logged while compiling and running.
    """
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.serde import _msgpack
    from langgraph.checkpoint.serde.encrypted import (
        EncryptedSerializer as LangGraphEncryptedSerializer,
    )
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from secure_serde.ciphers import EnvKeyCipher

    serdes: dict[str, Any] = {
        "secure": EncryptedSerializer(EnvKeyCipher(KEY)),
        "secure_drop_in": EncryptedSerializer.from_pycryptodome_aes(key=KEY),
        "secure_subclass": AuditedSerializer(EnvKeyCipher(KEY)),
        "jsonplus": JsonPlusSerializer(),
        "langgraph_encrypted": LangGraphEncryptedSerializer.from_pycryptodome_aes(
            JsonPlusSerializer(), key=KEY
        ),
        "wrapped_jsonplus": PassThroughSerde(JsonPlusSerializer()),
        "secure_over_wrapper": EncryptedSerializer(
            EnvKeyCipher(KEY), PassThroughSerde(JsonPlusSerializer())
        ),
    }
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    report: dict[str, Any] = {"strict": _msgpack.STRICT_MSGPACK_ENABLED, "runs": {}}
    for name, serde in serdes.items():
        handler = _Collect()
        root.addHandler(handler)
        AuditedSerializer.dumps_calls = 0
        try:
            saver = InMemorySaver(serde=serde)
            graph = build_strict_graph(saver)
            config: RunnableConfig = {"configurable": {"thread_id": f"strict-{name}"}}
            graph.invoke(
                {"profile": Profile(name="Ada", tags=["x", "y"]), "extra": Opaque("boom", 3)},
                config,
            )
            graph.invoke(Command(resume=True), config)
            values = graph.get_state(config).values
            assert isinstance(graph.checkpointer, BaseCheckpointSaver)
            used = graph.checkpointer.serde
            report["runs"][name] = {
                "profile": _describe(values["profile"]),
                "extra": _describe(values["extra"]),
                "greeting": values["greeting"],
                "serde_type": f"{type(used).__module__}.{type(used).__qualname__}",
                "serde_rebuilt": used is not serde,
                "warnings": handler.messages,
                "subclass_dumps_calls": AuditedSerializer.dumps_calls,
            }
        finally:
            root.removeHandler(handler)
    return report
