"""Writing stores as secure_serde 0.3's sealed savers wrote them, for the `V03Reader` tests.

`write_scenario` drives real graphs through a 0.3 saver: several threads, an interrupt left
pending and one resumed, a subgraph that interrupts (its own namespace), a DeltaChannel, and
metadata that 0.3 seals (``configurable`` values), indexes (``user_id``) and hides (a key named
``writes``). The 0.3 savers are imported inside the functions that use them: they are only
needed to write stores, and go away once every frozen store is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Final

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from secure_serde import EncryptedSerializer, Migration
from secure_serde.ciphers import EnvKeyCipher
from tests.graphs_support import build_chat_graph, build_parent_graph, build_review_graph

# A test key, committed with the stores it opens; never a real one.
KEY: Final = b"secure-serde-0.3-reader-test-key"
INDEXED: Final = ("user_id",)
LENIENT: Final = Migration(unbound=True, plaintext_metadata=True, inline_values=True)
THREADS: Final = ("review-1", "review-2", "parent-1", "chat-1", "delta-1")


def serde(migration: Migration | None = None) -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY), migration=migration)


def config(thread_id: str, **configurable: Any) -> RunnableConfig:
    return {
        "configurable": {"thread_id": thread_id, **configurable},
        # 0.3's savers drop a metadata key named "writes"; "team" is sealed.
        "metadata": {"writes": "hidden by 0.3", "team": "blue"},
    }


def extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    out = list(state)
    for write in writes:
        out.extend(write)
    return out


class LogState(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=3)]
    step: int


def build_delta_graph(checkpointer: Any) -> Any:
    def work(state: Any) -> dict[str, Any]:
        n = state.get("step", 0) + 1
        return {"log": [f"step {n}"], "step": n}

    def route(state: Any) -> str:
        return "work" if state["step"] < 7 else END

    builder = StateGraph(LogState)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", route)
    return builder.compile(checkpointer=checkpointer)


def write_scenario(saver: BaseCheckpointSaver[Any]) -> None:
    """Every kind of row a 0.3 store holds, written through ``saver``."""
    review = build_review_graph(saver)
    review.invoke(
        {"messages": [HumanMessage("draft one")]},
        config("review-1", user_id="u-1", api_key="sk-canary-0123"),
    )
    review.invoke(Command(resume={"verdict": "ok", "note": "fine"}), config("review-1"))
    review.invoke({"messages": [HumanMessage("draft two")]}, config("review-2", user_id="u-2"))
    parent = build_parent_graph(saver)
    parent.invoke({"messages": [HumanMessage("what is new?")]}, config("parent-1", user_id="u-1"))
    chat = build_chat_graph(saver)
    for text in ("hello", "again"):
        chat.invoke({"messages": [HumanMessage(text)]}, config("chat-1", user_id=7, score=0.5))
    build_delta_graph(saver).invoke({"step": 0}, config("delta-1"))


def write_stock_thread(saver: BaseCheckpointSaver[Any], thread_id: str = "stock-1") -> None:
    """A thread a stock saver wrote beside 0.3's (unbound rows; inline values on PostgreSQL)."""
    review = build_review_graph(saver)
    review.invoke({"messages": [HumanMessage("stock draft")]}, config(thread_id, user_id="u-9"))
    review.invoke(Command(resume={"verdict": "no", "note": "stock"}), config(thread_id))


def v03_sqlite(path: str, migration: Migration | None = None, **options: Any) -> Any:
    from secure_serde.savers import V03SqliteSaver

    return V03SqliteSaver.from_conn_string(
        path,
        serde=serde(migration),
        migration=migration,
        **{"indexed_metadata": INDEXED, **options},
    )


def v03_postgres(url: str, migration: Migration | None = None, **options: Any) -> Any:
    from secure_serde.savers import V03PostgresSaver

    return V03PostgresSaver.from_conn_string(
        url, serde=serde(migration), migration=migration, **{"indexed_metadata": INDEXED, **options}
    )
