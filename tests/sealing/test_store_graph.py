"""A real graph keeps long-term memories through ``get_store()`` in a node, sealed.

``compile(checkpointer=SealedSaver(...), store=SealedStore(inner))`` over each inner store: a
node reads the user's memories (an indexed-field filter) and writes a new one; three runs on
two threads for one user. The graph's answers and the memories read back are those of the
same graph on the bare store, and the memories' text is nowhere at rest in the sealed one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph

from secure_serde import SealedSaver
from tests.sealing.store_support import KEY, LANES, EnvFactory, StoreEnv, envs
from tests.serdes_support import env_serde

FACTS = ["CANARY-fact-likes-oolong", "CANARY-fact-allergic-to-cats", "CANARY-fact-lives-in-Lyon"]


class State(TypedDict):
    user: str
    fact: str
    recalled: list[str]


def _remember(state: State) -> dict[str, Any]:
    store = get_store()
    namespace = ("memories", state["user"])
    found = store.search(namespace, filter={"kind": "fact"}, limit=20)
    store.put(namespace, f"f{len(found)}", {"kind": "fact", "text": state["fact"]})
    return {"recalled": sorted(item.value["text"] for item in found)}


async def _aremember(state: State) -> dict[str, Any]:
    store = get_store()
    namespace = ("memories", state["user"])
    found = await store.asearch(namespace, filter={"kind": "fact"}, limit=20)
    await store.aput(namespace, f"f{len(found)}", {"kind": "fact", "text": state["fact"]})
    return {"recalled": sorted(item.value["text"] for item in found)}


@pytest.fixture(params=LANES)
def make_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvFactory]:
    with envs(request.param, tmp_path, request) as make:
        yield make


def _run(env: StoreEnv, sealed: bool) -> tuple[list[Any], list[Any]]:
    store = env.store(sealed=sealed, indexed=("kind",))
    builder = StateGraph(State)
    builder.add_node("remember", _aremember if env.lane == "apostgres" else _remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    graph = builder.compile(
        checkpointer=SealedSaver(InMemorySaver(), serde=env_serde(KEY)), store=store
    )
    answers = []
    for i, fact in enumerate(FACTS):
        config: RunnableConfig = {"configurable": {"thread_id": f"t{i % 2}"}}
        state: State = {"user": "ada", "fact": fact, "recalled": []}
        if env.lane == "apostgres":
            out = env.run(graph.ainvoke(state, config))
        else:
            out = graph.invoke(state, config)
        answers.append(out["recalled"])
    memories = env.call(store, "search", ("memories", "ada"), limit=20)
    return answers, sorted((m.key, m.value["text"]) for m in memories)


def test_a_graph_keeps_its_memories_sealed(make_env: EnvFactory) -> None:
    bare_env, sealed_env = make_env(), make_env()
    bare = _run(bare_env, sealed=False)
    sealed = _run(sealed_env, sealed=True)
    assert sealed == bare
    assert bare[0] == [[], FACTS[:1], sorted(FACTS[:2])]
    assert all(fact.encode() in bare_env.at_rest() for fact in FACTS)
    dump = sealed_env.at_rest()
    assert not [fact for fact in FACTS if fact.encode() in dump]
