"""Inner savers and key stores for the tenant tests: real files, real PostgreSQL."""

from __future__ import annotations

import contextlib
import operator
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from secure_serde import EncryptedSerializer, SealedSaver, TenantKeys
from secure_serde.ciphers import EnvKeyCipher
from tests.fixtures_services import saver_connection

PRIMARY = b"tenant-tests-primary-key-0123456"
INNERS = ("memory", "sqlite", "postgres")
KEY_STORES = ("sqlite", "postgres")


def primary_serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(PRIMARY, legacy_mode=None))


class Turns(TypedDict):
    said: Annotated[list[str], operator.add]


def chat_graph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph = StateGraph(Turns)
    graph.add_node("echo", lambda state: {"said": [f"echo {len(state['said'])}"]})
    graph.add_edge(START, "echo")
    graph.add_edge("echo", END)
    return graph.compile(checkpointer=saver)


def config(tenant: str, thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "tenant_id": tenant}}


@contextlib.contextmanager
def inner_saver(kind: str, where: Path | str) -> Iterator[BaseCheckpointSaver[Any]]:
    """An inner saver of ``kind``: a SQLite file path, or a PostgreSQL URL for postgres."""
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        conn = sqlite3.connect(str(where), check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        with saver_connection(str(where)) as pg:
            saver = PostgresSaver(pg)
            saver.setup()
            yield saver


def key_location(kind: str, tmp_path: Path, postgres_url: str | None) -> str:
    if kind == "sqlite":
        return os.fspath(tmp_path / "tenant-keys.sqlite")
    assert postgres_url is not None
    return postgres_url


def sealed(inner: BaseCheckpointSaver[Any], keys: TenantKeys) -> SealedSaver:
    saver = SealedSaver(inner, serde=primary_serde(), tenant_keys=keys)
    saver.setup()
    return saver
