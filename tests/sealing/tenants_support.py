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
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from secure_serde import EncryptedSerializer, SealedSaver, TenantKeys
from secure_serde.ciphers import EnvKeyCipher
from tests.serdes_support import stock_postgres

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
        with stock_postgres(str(where)) as saver:
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


# -- audit and rewrap of a tenant-keyed store (test_tenants_audit.py, passes/test_sealed_tenants.py)

TWO_TENANTS = ("acme", "globex")
TWO_THREADS = ("t1", "t2")


@contextlib.contextmanager
def store_places(kind: str, tmp_path: Path, request: Any) -> Iterator[tuple[str, str]]:
    """(checkpoint store, tenant key store): two SQLite files, or two PostgreSQL databases."""
    if kind == "sqlite":
        yield os.fspath(tmp_path / "checkpoints.sqlite"), os.fspath(tmp_path / "keys.sqlite")
        return
    store = str(request.getfixturevalue("postgres_url"))
    with new_database(request.getfixturevalue("postgres_server"), "keys") as keys:
        yield store, keys


@contextlib.contextmanager
def new_database(server: Any, stem: str) -> Iterator[str]:
    """A fresh PostgreSQL database on ``server`` (its URL), dropped on exit."""
    import uuid

    import psycopg
    from psycopg import sql

    name = f"{stem}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield server.url(name)
    finally:
        with psycopg.connect(server.conninfo, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def write_tenants(store: str, keys_location: str, serde: EncryptedSerializer) -> None:
    """Two tenants, two threads each, two turns each, through a real graph."""
    kind = "postgres" if store.startswith("postgresql://") else "sqlite"
    keys = TenantKeys.open(keys_location)
    try:
        with inner_saver(kind, store) as inner:
            saver = SealedSaver(inner, serde=serde, tenant_keys=keys)
            saver.setup()
            graph = chat_graph(saver)
            for tenant in TWO_TENANTS:
                for thread in TWO_THREADS:
                    for turn in range(2):
                        graph.invoke({"said": [f"{tenant} {turn}"]}, config(tenant, thread))
    finally:
        keys.close()


def checkpoint_threads(store: str) -> list[str]:
    """The thread id of every checkpoint row, read with SQL (no code under test)."""
    query = "SELECT thread_id FROM checkpoints ORDER BY 1"
    if store.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(store) as conn:
            return [str(r[0]) for r in conn.execute(query).fetchall()]
    db = sqlite3.connect(store)
    try:
        return [str(r[0]) for r in db.execute(query).fetchall()]
    finally:
        db.close()


def tenant_prefixes(store: str, serde: EncryptedSerializer) -> dict[str, str]:
    """Each tenant's inner thread-id prefix, from the store identity's index key."""
    from secure_serde.sealing._tenant_inner import tenant_prefix

    kind = "postgres" if store.startswith("postgresql://") else "sqlite"
    with inner_saver(kind, store) as inner:
        index = SealedSaver(inner, serde=serde)._ready().identity.index
        return {tenant: tenant_prefix(index, tenant) for tenant in TWO_TENANTS}
