"""Under ``LANGGRAPH_STRICT_MSGPACK=true``, with a compiled graph's allowlist.

langgraph reads the variable once, at import, so the graph runs in a
subprocess (`strict_report`, below, is what it runs). The graph pauses on an
interrupt and resumes, so every value the second node sees was restored from
the checkpoint. Frames are pickled; the schema's dataclass holding a frame
goes through the nested-container path and must be rebuilt because the
graph's allowlist names it; a dataclass outside the schema must be blocked,
exactly as plain JsonPlus blocks it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import pytest
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from tests.graphs_support import linear_graph
from tests.strict_support import collected_warnings, run_strict_report

KEY = b"s" * 32


@dataclasses.dataclass
class Holder:
    """In the schema, so the compiled graph allowlists it."""

    label: str
    table: Any


@dataclasses.dataclass
class Stray:
    """Only ever in an ``Any`` field: strict mode blocks it."""

    table: Any


class StrictState(TypedDict, total=False):
    table: pd.DataFrame
    holder: Holder
    extra: Any
    seen: dict[str, str]


def _table() -> pd.DataFrame:
    return pd.DataFrame({"t": pd.date_range("2024", periods=2, tz="Europe/Paris"), "n": [1, 2]})


def _kind(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def strict_report() -> dict[str, Any]:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.serde import _msgpack

    from secure_serde import EncryptedSerializer, PickleFallbackSerializer
    from secure_serde.ciphers import EnvKeyCipher
    from secure_serde.pickling import PANDAS

    def pause(state: StrictState) -> dict[str, Any]:
        interrupt("go on?")
        return {}

    def look(state: StrictState) -> dict[str, Any]:
        extra = state["extra"]
        return {
            "seen": {
                "table": _kind(state["table"]),
                "holder": _kind(state["holder"]),
                "holder.table": _kind(state["holder"].table),
                "extra": _kind(extra),
                "extra.table": _kind(extra["table"] if isinstance(extra, dict) else extra.table),
                "frames_equal": str(state["table"].equals(_table())),
            }
        }

    serde = EncryptedSerializer(EnvKeyCipher(KEY), PickleFallbackSerializer(allowed=[PANDAS]))
    config: RunnableConfig = {"configurable": {"thread_id": "strict"}}
    # Compiling is where langgraph hands the graph's allowlist to the serializer (or warns).
    with collected_warnings() as warnings:
        graph = linear_graph(
            StrictState, ("pause", pause), ("look", look), checkpointer=InMemorySaver(serde=serde)
        )
        graph.invoke(
            {"table": _table(), "holder": Holder("h", _table()), "extra": Stray(_table())}, config
        )
        graph.invoke(Command(resume=True), config)
        seen = graph.get_state(config).values["seen"]
    assert isinstance(graph.checkpointer, InMemorySaver)
    used = graph.checkpointer.serde
    # A chain other than ours reports NoneType below, and the test comparing it fails.
    inner = used.serde if isinstance(used, EncryptedSerializer) else None
    innermost = inner.serde if isinstance(inner, PickleFallbackSerializer) else None
    return {
        "strict": _msgpack.STRICT_MSGPACK_ENABLED,
        "seen": seen,
        "serde": [_kind(used), _kind(inner), _kind(innermost)],
        "rebuilt": used is not serde,
        "warnings": warnings,
    }


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return run_strict_report(__name__, "strict_report").report


def test_frames_come_back_under_strict_msgpack(report: dict[str, Any]) -> None:
    assert report["seen"]["table"] == "pandas.DataFrame"
    assert report["seen"]["frames_equal"] == "True"


def test_schema_types_holding_frames_are_rebuilt(report: dict[str, Any]) -> None:
    assert report["seen"]["holder"] == f"{__name__}.Holder"
    assert report["seen"]["holder.table"] == "pandas.DataFrame"


def test_types_outside_the_schema_stay_blocked(report: dict[str, Any]) -> None:
    assert report["seen"]["extra"] == "builtins.dict"
    assert report["seen"]["extra.table"] == "pandas.DataFrame"
    assert any(f"{__name__}.Stray" in w for w in report["warnings"])


def test_the_graph_allowlist_reached_our_layers(report: dict[str, Any]) -> None:
    assert report["rebuilt"] is True
    assert report["serde"] == [
        "secure_serde.serde._serializer.EncryptedSerializer",
        "secure_serde.pickling._serializer.PickleFallbackSerializer",
        "langgraph.checkpoint.serde.jsonplus.JsonPlusSerializer",
    ]
    assert not [w for w in report["warnings"] if "does not support msgpack allowlist" in w]
