"""``adopt``: a store secure_serde 0.3.0 wrote becomes a `SealedSaver` store that resumes the graph.

The frozen store, tests/vectors/v03_sqlite_store.sqlite, was written by 0.3's sealed
SqliteSaver under the test key ``VECTOR_KEY``, by ``make_vector`` of this file at commit
b2e8dcec8947834760da4032f4fac020b2fc3ed7, the last with 0.3's savers
(``python -m tests.savers.test_adopt PATH`` there): `graph` below run on one thread, two
human turns, and an interrupt left pending. The PostgreSQL one,
tests/vectors/v03_postgres_store.sql, is described in tests/stores/test_v03_postgres_vector.py.
Both are read by `V03Reader`; stock stores are adopted from the stock saver itself, their rows
classified from the stores layer's type tags.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from secure_serde import EncryptedSerializer, Migration, StoreIdentityError
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers import AdoptReport, V03Reader, adopt
from secure_serde.savers.sqlite import SqliteSaver
from tests.fixtures_services import saver_connection
from tests.graphs_support import build_parent_graph, build_review_graph, transcript
from tests.stores.test_v03_postgres_vector import THREADS as PG_THREADS
from tests.stores.test_v03_postgres_vector import load_vector
from tests.stores.v03_support import INDEXED
from tests.stores.v03_support import serde as pg_serde

VECTOR: Final = Path(__file__).resolve().parent.parent / "vectors" / "v03_sqlite_store.sqlite"
# A test key, committed with the store it opens; never a real one.
VECTOR_KEY: Final = b"secure-serde-0.3-adopt-test-key!"
THREAD: Final[RunnableConfig] = {"configurable": {"thread_id": "chat-1"}}
ROOT: Final = Path(__file__).resolve().parents[2]


def chat(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}


def approve(state: MessagesState) -> dict[str, Any]:
    answer = interrupt({"question": "send it?", "turns": len(state["messages"])})
    return {"messages": [AIMessage(f"approved: {answer}")]}


def graph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_node("approve", approve)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", "approve")
    return builder.compile(checkpointer=saver)


def serde(migration: Migration | None = None) -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(VECTOR_KEY), migration=migration)


LENIENT: Final = Migration(plaintext=True, unbound=True, unsealed_metadata=True)


@contextmanager
def v03(path: Path | str, *, lenient: bool = False) -> Iterator[V03Reader]:
    migration = LENIENT if lenient else None
    with V03Reader(path, serde=serde(migration), migration=migration) as reader:
        yield reader


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "v03.sqlite"
    shutil.copyfile(VECTOR, path)
    return path


def pending(saver: BaseCheckpointSaver[Any]) -> tuple[Any, Any, Any]:
    """The state waiting at the interrupt (message ids included)."""
    before = graph(saver).get_state(THREAD)
    return before.values, before.next, before.interrupts[0].value


def resumed(saver: BaseCheckpointSaver[Any]) -> tuple[Any, Any]:
    """The state before resuming, and what resuming adds (the new message's id is fresh)."""
    before = pending(saver)
    app = graph(saver)
    app.invoke(Command(resume="later"), THREAD)
    after = app.get_state(THREAD)
    old = before[0]["messages"]
    assert after.values["messages"][: len(old)] == old
    new = [(type(m).__name__, m.content) for m in after.values["messages"][len(old) :]]
    return before, new


def test_the_vector_is_a_0_3_store_the_new_saver_refuses(store: Path) -> None:
    with (
        SqliteSaver.from_conn_string(str(store), serde=serde()) as saver,
        pytest.raises(StoreIdentityError, match=r"secure_serde\.savers\.adopt"),
    ):
        saver.setup()


def test_adopt_converts_the_frozen_store_and_the_graph_resumes_identically(
    store: Path, tmp_path: Path
) -> None:
    with (
        v03(store) as source,
        SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=serde()) as target,
    ):
        target.setup()
        dry = adopt(source, target, dry_run=True)
        assert dry.unvouched == ()
        assert list(target.list(THREAD)) == []  # a dry run writes nothing
        report = adopt(source, target)
        assert isinstance(report, AdoptReport)
        assert (report.threads, report.unvouched) == (1, ())
        assert report.checkpoints == len(list(source.list(THREAD))) == dry.checkpoints
        assert report.writes > 0
        expected = pending(source)
        got = resumed(target)
    assert got == (expected, [("AIMessage", "approved: later")])


def plant_plaintext_write(path: Path) -> str:
    """A plaintext pending write, planted on the thread's newest checkpoint."""
    with sqlite3.connect(path) as conn:
        (checkpoint_id,) = conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'chat-1'"
            " ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchone()
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path,"
            " idx, channel, type, value) VALUES ('chat-1', '', ?, 'planted-task', '', 0,"
            " 'messages', 'json', ?)",
            (checkpoint_id, b'[{"type": "human", "content": "planted"}]'),
        )
    return str(checkpoint_id)


def test_a_planted_plaintext_row_is_listed_and_refused(store: Path, tmp_path: Path) -> None:
    checkpoint_id = plant_plaintext_write(store)
    with (
        v03(store) as source,
        v03(store, lenient=True) as lenient,
        SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=serde()) as target,
    ):
        target.setup()
        dry = adopt(source, target, lenient=lenient, dry_run=True)
        assert [(u.checkpoint_id, u.row, u.reason, u.copied) for u in dry.unvouched] == [
            (checkpoint_id, "write planted-task messages", "plaintext", False)
        ]
        assert "planted-task" in "\n".join(dry.lines())
        report = adopt(source, target, lenient=lenient)
        assert report.refused == dry.unvouched
        assert report.checkpoints == dry.checkpoints
        stored = [w for t in target.list(THREAD) for w in t.pending_writes or ()]
        assert stored
        assert all(task != "planted-task" for task, _, _ in stored)
        # Without the planted row, the adopted store resumes from the original's state.
        original = tmp_path / "original.sqlite"
        shutil.copyfile(VECTOR, original)
        with v03(original) as clean:
            assert resumed(target) == (pending(clean), [("AIMessage", "approved: later")])


def test_accepting_unvouched_rows_needs_a_lenient_reader(store: Path, tmp_path: Path) -> None:
    with (
        v03(store) as source,
        SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=serde()) as target,
    ):
        target.setup()
        with pytest.raises(ValueError, match="lenient"):
            adopt(source, target, accept_unvouched=True)


def test_the_0_3_reader_only_reads(store: Path) -> None:
    """The 0.3 reader copies no threads and writes nothing: adopt's job, then SealedSaver's."""
    before = store.read_bytes()
    with v03(store) as reader:
        assert reader.get_tuple(THREAD) is not None
        with pytest.raises(NotImplementedError):
            reader.copy_thread("chat-1", "chat-2")
        with pytest.raises(ValueError, match="only reads"):
            graph(reader).invoke(Command(resume="no"), THREAD)
        assert reader.get_tuple({"configurable": {"thread_id": "chat-2"}}) is None
    assert store.read_bytes() == before


# --- PostgreSQL: the frozen store 0.3's sealed PostgresSaver wrote -------------------------


def test_adopt_converts_the_frozen_postgres_store(postgres_url: str, tmp_path: Path) -> None:
    load_vector(postgres_url)
    with (
        V03Reader(postgres_url, serde=pg_serde(), indexed_metadata=INDEXED) as source,
        SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=pg_serde()) as target,
    ):
        target.setup()
        report = adopt(source, target)
        assert (report.threads, report.unvouched) == (3, ())
        assert report.checkpoints == len(list(source.list(None)))
        for thread in PG_THREADS:
            config: RunnableConfig = {"configurable": {"thread_id": thread}}
            builder = build_parent_graph if thread.startswith("parent") else build_review_graph
            old = builder(source).get_state(config, subgraphs=True)
            new = builder(target).get_state(config, subgraphs=True)
            assert (new.values, new.next, new.interrupts) == (old.values, old.next, old.interrupts)
            assert new.tasks == old.tasks
            assert [t.metadata for t in target.list(config)] == [
                t.metadata for t in source.list(config)
            ]
        review = build_review_graph(target)
        done = review.invoke(
            Command(resume={"verdict": "ok", "note": "later"}),
            {"configurable": {"thread_id": "review-2"}},
        )
        assert transcript(done["messages"])[-1] == ("ai", "published (ok)")


def test_a_postgres_row_that_does_not_authenticate_is_misplaced(
    postgres_url: str, tmp_path: Path
) -> None:
    load_vector(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoint_writes SET task_id = task_id || 'x' WHERE thread_id = 'review-2'"
        )
    lenient = Migration(plaintext=True, unbound=True, unsealed_metadata=True)
    with (
        V03Reader(postgres_url, serde=pg_serde(), indexed_metadata=INDEXED) as source,
        V03Reader(postgres_url, serde=pg_serde(lenient), migration=lenient) as loose,
        SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=pg_serde()) as target,
    ):
        target.setup()
        report = adopt(source, target, lenient=loose, dry_run=True)
    reasons = {(u.thread_id, u.reason) for u in report.unvouched}
    assert ("review-2", "misplaced") in reasons
    assert {r for t, r in reasons} <= {"misplaced", "parent refused"}
    assert all(u.thread_id == "review-2" and not u.copied for u in report.unvouched)
    assert report.threads == 2


# --- stock stores: the stock saver reads, the stores layer classifies ---------------------


def test_a_stock_plaintext_sqlite_store_is_listed_row_by_row(tmp_path: Path) -> None:
    path = tmp_path / "stock.sqlite"
    with StockSqliteSaver.from_conn_string(str(path)) as stock:
        graph(stock).invoke({"messages": [HumanMessage("hi")]}, THREAD)
        rows = len(list(stock.list(None)))
        writes = sum(len(t.pending_writes or ()) for t in stock.list(None))
        with SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=serde()) as target:
            target.setup()
            report = adopt(stock, target, dry_run=True)
    assert report.checkpoints == 0
    by_row = Counter((u.row.split()[0], u.reason) for u in report.unvouched)
    # The first checkpoint is plaintext (its writes too); its descendants go with it.
    assert by_row[("checkpoint", "plaintext")] == 1
    assert by_row[("checkpoint", "parent refused")] == rows - 1
    assert 0 < by_row[("write", "plaintext")] < writes


def test_a_legacy_aes_store_is_listed_as_legacy(tmp_path: Path) -> None:
    path = tmp_path / "legacy.sqlite"
    key = VECTOR_KEY
    with StockSqliteSaver.from_conn_string(str(path)) as stock:
        stock.serde = LangGraphEncrypted.from_pycryptodome_aes(key=key)
        graph(stock).invoke({"messages": [HumanMessage("hi")]}, THREAD)
    legacy = EncryptedSerializer.from_pycryptodome_aes(key=key)
    with (
        StockSqliteSaver.from_conn_string(str(path)) as source,
        SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=serde()) as target,
    ):
        source.serde = legacy
        target.setup()
        dry = adopt(source, target, lenient=source, dry_run=True)
        assert {u.reason for u in dry.unvouched} == {"legacy", "parent refused"}
        assert dry.checkpoints == 0
        taken = adopt(source, target, lenient=source, accept_unvouched=True)
        assert taken.checkpoints == len(list(source.list(None)))
        assert {u.reason for u in taken.unvouched} == {"legacy"}
        assert all(u.copied for u in taken.unvouched)
        assert pending(target) == pending(source)


def test_a_stock_postgres_saver_needs_its_store_named(postgres_url: str, tmp_path: Path) -> None:
    with saver_connection(postgres_url) as conn:
        stock = StockPostgresSaver(conn, serde=serde())
        stock.setup()
        build_review_graph(stock).invoke(
            {"messages": [HumanMessage("draft")]}, {"configurable": {"thread_id": "s"}}
        )
        with SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=serde()) as target:
            target.setup()
            with pytest.raises(ValueError, match="store="):
                adopt(stock, target, dry_run=True)
            report = adopt(stock, target, store=postgres_url, dry_run=True)
    # The stock saver keeps primitives inline in its JSON: plaintext, listed by channel.
    assert {u.reason for u in report.unvouched} == {"plaintext", "parent refused"}
    assert any(u.row.startswith("value ") for u in report.unvouched)
