"""A LangGraph state holding a pandas DataFrame, checkpointed encrypted on SQLite.

Run it from the repository root:

    .venv/bin/pip install -q -e '.[sqlite,pandas]' langgraph
    .venv/bin/python examples/pandas_state.py

No services and no LLM: the graph is deterministic. The demo

1. runs a small graph whose state holds a DataFrame (tz-aware timestamps, a
   categorical, a nullable integer column) next to chat messages, checkpointed
   on SQLite through ``EncryptedSerializer(PickleFallbackSerializer(...))``;
2. reads the latest checkpoint row straight from the SQLite file, decrypts it
   with the library, and walks the msgpack inside: only the DataFrame is a
   pickle, everything else is JsonPlus msgpack;
3. reads the state back through the graph, exactly as it was.

The key is a demo key generated for this run only; keep real keys in a secret
manager.
"""

from __future__ import annotations

import operator
import sqlite3
import sys
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

try:
    import ormsgpack
    import pandas as pd
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.graph.state import CompiledStateGraph
    from typing_extensions import TypedDict
except ModuleNotFoundError as missing:  # pragma: no cover - a friendlier message
    sys.exit(
        f"This example needs pandas, langgraph and its SQLite saver ({missing}).\n"
        "Install them with: .venv/bin/pip install -e '.[sqlite,pandas]' langgraph"
    )

from secure_serde import EncryptedSerializer, PickleFallbackSerializer, generate_encoded_key
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import EXT_NESTED, EXT_PICKLE, PANDAS

# JsonPlus's own ext codes, for the walk below (see secure_serde/pickling/_codec.py).
JSONPLUS_EXT = {0: "constructor", 1: "constructor(*args)", 2: "constructor(**kwargs)",
                3: "method", 4: "pydantic v1", 5: "pydantic v2", 6: "numpy array",
                7: "_DeltaSnapshot"}  # fmt: skip


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    readings: pd.DataFrame
    log: Annotated[list[str], operator.add]


def measure(state: State) -> dict[str, Any]:
    readings = pd.DataFrame(
        {
            "at": pd.date_range("2024-03-31 01:00", periods=4, freq="h", tz="Europe/Paris"),
            "sensor": pd.Categorical(["north", "south", "north", "east"]),
            "value": pd.array([12, None, 15, 9], dtype="Int64"),
        }
    )
    return {"readings": readings, "log": ["measured 4 readings"]}


def summarize(state: State) -> dict[str, Any]:
    mean = state["readings"]["value"].mean()
    return {"messages": [AIMessage(content=f"mean reading: {mean:.2f}")], "log": ["summarized"]}


def build(checkpointer: SqliteSaver) -> CompiledStateGraph[State, None, State, State]:
    builder = StateGraph(State)
    builder.add_node("measure", measure)
    builder.add_node("summarize", summarize)
    builder.add_edge(START, "measure")
    builder.add_edge("measure", "summarize")
    builder.add_edge("summarize", END)
    return builder.compile(checkpointer=checkpointer)


def describe(node: Any, depth: int = 0, label: str = "") -> list[str]:
    """One line per msgpack node, saying which parts are msgpack and which are pickle."""
    pad = "  " * depth
    head = f"{pad}{label}"
    if isinstance(node, tuple) and node and node[0] == "ext":
        _, code, size, inner = node
        if code == EXT_PICKLE:
            return [f"{head}PICKLE ({size} bytes, read by the restricted unpickler)"]
        name = JSONPLUS_EXT.get(code, f"ext {code}")
        if code == EXT_NESTED:
            name = f"JsonPlus {JSONPLUS_EXT.get(inner[0], inner[0])} holding a pickle"
            inner = inner[1]
        lines = [f"{head}msgpack ext {code}: {name} ({size} bytes)"]
        return lines + describe(inner, depth + 1)
    if isinstance(node, dict):
        lines = [f"{head}msgpack map ({len(node)} keys)"]
        for key, value in node.items():
            lines += describe(value, depth + 1, f"{key}: ")
        return lines
    if isinstance(node, list):
        if node and all(not isinstance(item, (dict, list, tuple)) for item in node):
            return [f"{head}msgpack array {node!r:.60}"]
        lines = [f"{head}msgpack array ({len(node)} items)"]
        for index, item in enumerate(node[:3]):
            lines += describe(item, depth + 1, f"[{index}] ")
        if len(node) > 3:
            lines.append(f"{pad}  ...")
        return lines
    return [f"{head}msgpack {type(node).__name__} {node!r:.60}"]


def walk(payload: bytes) -> Any:
    """Decode msgpack without running anything: ext values become ("ext", code, size, body)."""

    def hook(code: int, data: bytes) -> Any:
        if code == EXT_PICKLE:
            return ("ext", code, len(data), None)
        if code == EXT_NESTED:
            return ("ext", code, len(data), (data[0], ormsgpack.unpackb(data[1:], ext_hook=hook)))
        return ("ext", code, len(data), ormsgpack.unpackb(data, ext_hook=hook))

    return ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)


def main() -> None:
    cipher = EnvKeyCipher(generate_encoded_key())
    serde = EncryptedSerializer(cipher, PickleFallbackSerializer(allowed=[PANDAS]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pandas_state.sqlite"
        config: RunnableConfig = {"configurable": {"thread_id": "readings"}}
        with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
            graph = build(SqliteSaver(conn, serde=serde))
            graph.invoke({"messages": [HumanMessage(content="how are the sensors?")]}, config)

            type_tag, blob = conn.execute(
                "SELECT type, checkpoint FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1"
            ).fetchone()
            print(f"stored row: type tag {type_tag!r}, {len(blob)} bytes of ciphertext")
            inner_tag, _, cipher_name = type_tag.rpartition("+")
            plaintext = cipher.decrypt_with_tag(cipher_name, blob, inner_tag)
            print(f"decrypted with the library: {len(plaintext)} bytes of {inner_tag!r}\n")
            checkpoint = walk(plaintext)
            print("\n".join(describe(checkpoint["channel_values"], label="channel_values: ")))

            state = graph.get_state(config).values
            print("\nread back through the graph:")
            print(state["readings"])
            print(state["readings"].dtypes.to_string())
            print(state["messages"][-1].content)


if __name__ == "__main__":
    main()
