"""A store the stock savers wrote, and the sealed savers that read it once bound, per database.

The graph keeps a message history, a list channel, an ``interrupt()`` in every turn and two
primitive channels (a ``str`` and an ``int``), so the stock PostgreSQL saver leaves values
inline in its checkpoint JSON for the binding pass to move. Each thread's last turn waits at
its interrupt.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from secure_serde import EncryptedSerializer, Migration
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers import BindReport, bind_postgres, bind_sqlite

KEY = b"bind-in-place-test-key-012345678"
THREADS = ("alpha", "beta")
TURNS = 3


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approvals: Annotated[list[str], operator.add]
    mood: str
    turns: int


def _reply(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    return {
        "messages": [AIMessage(content=f"reply to {last.content}")],
        "mood": f"mood after {last.content}",
        "turns": state.get("turns", 0) + 1,
    }


def _review(state: State) -> dict[str, Any]:
    verdict = interrupt({"draft": state["messages"][-1].content})
    return {"approvals": [str(verdict)]}


def build_graph(checkpointer: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("reply", _reply)
    builder.add_node("review", _review)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=checkpointer)


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def run_turns(graph: Any, thread_id: str, turns: int) -> None:
    cfg = config(thread_id)
    for turn in range(turns):
        if graph.get_state(cfg).next:
            graph.invoke(Command(resume=f"ok {turn - 1}"), cfg)
        graph.invoke({"messages": [HumanMessage(content=f"{thread_id} turn {turn}")]}, cfg)


def histories(graph: Any) -> dict[str, list[Any]]:
    return {t: list(graph.get_state_history(config(t))) for t in THREADS}


def serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY))


@dataclass(frozen=True)
class Db:
    """One database: how the stock saver writes it, how a sealed saver reads and binds it."""

    kind: str
    location: str

    @contextmanager
    def stock(self) -> Iterator[Any]:
        """The stock langgraph saver, given secure_serde's serde (0.1's drop-in usage)."""
        if self.kind == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            with sqlite3.connect(self.location, check_same_thread=False) as conn:
                saver = SqliteSaver(conn, serde=serde())
                saver.setup()
                yield saver
            return
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(self.location) as stock:
            stock.serde = serde()
            stock.setup()
            yield stock

    def sealed(self, migration: Migration = Migration.NONE, **options: Any) -> Any:
        # The stock saver's metadata is plaintext: reading it with no migration switch
        # needs a sealed saver that keeps metadata as stored.
        options.setdefault("seal_metadata", False)
        if self.kind == "sqlite":
            return _sqlite_sealed(self.location, migration, options)
        from secure_serde.savers._v03_postgres import PostgresSaver

        return PostgresSaver.from_conn_string(
            self.location, serde=serde(), migration=migration, **options
        )

    def bind(self, **options: Any) -> BindReport:
        with self.sealed() as saver:
            if self.kind == "sqlite":
                return bind_sqlite(saver, **options)
            return bind_postgres(saver, **options)

    def rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, in key order: what 'nothing changed' compares."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.location) as conn:
                return {
                    t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4, 5").fetchall()  # noqa: S608
                    for t in ("checkpoints", "writes")
                }
        import psycopg

        with psycopg.connect(self.location) as conn:
            return {
                t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4").fetchall()  # noqa: S608
                for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
            }

    def execute(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            with sqlite3.connect(self.location) as conn:
                return conn.execute(statement, params).fetchall()
        import psycopg

        with psycopg.connect(self.location, autocommit=True) as conn:
            cur = conn.execute(statement.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []


@contextmanager
def _sqlite_sealed(path: str, migration: Migration, options: dict[str, Any]) -> Iterator[Any]:
    from secure_serde.savers._v03_sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(path, serde=serde(), migration=migration, **options) as saver:
        saver.setup()
        yield saver


def written_by_stock(db: Db) -> dict[str, list[Any]]:
    """Run the graph through the stock saver; every thread's history, newest first."""
    with db.stock() as saver:
        graph = build_graph(saver)
        for thread in THREADS:
            run_turns(graph, thread, TURNS)
        return histories(graph)


def sealed_graph(db: Db, **options: Any) -> AbstractContextManager[Any]:
    @contextmanager
    def opened() -> Iterator[Any]:
        with db.sealed(**options) as saver:
            yield build_graph(saver)

    return opened()


def sqlite_db(tmp: Path) -> Db:
    return Db("sqlite", str(tmp / "stock.sqlite"))
