"""``adopt``: a store secure_serde 0.3.0 wrote becomes a `SealedSaver` store that resumes the graph.

The frozen store, tests/vectors/v03_sqlite_store.sqlite, was written by 0.3's sealed
SqliteSaver (now secure_serde.savers.V03SqliteSaver) under the test key ``VECTOR_KEY``,
by ``make_vector`` below (``python -m tests.savers.test_adopt``): one thread, two
human turns, and an interrupt left pending.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from secure_serde import EncryptedSerializer, Migration
from secure_serde._errors import StoreIdentityError
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers import AdoptReport, V03SqliteSaver, adopt
from secure_serde.savers.sqlite import SqliteSaver

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


def make_vector(path: Path) -> None:
    """Write the frozen store with 0.3's sealed SqliteSaver (run once, committed)."""
    with V03SqliteSaver.from_conn_string(str(path), serde=serde()) as saver:
        app = graph(saver)
        app.invoke({"messages": [HumanMessage("first, user@example.com")]}, THREAD)
        app.invoke(Command(resume="yes"), THREAD)
        app.invoke({"messages": [HumanMessage("second")]}, THREAD)  # stops at the interrupt


LENIENT: Final = Migration(plaintext=True, unbound=True, plaintext_metadata=True)


@contextmanager
def v03(path: Path, *, lenient: bool = False) -> Iterator[V03SqliteSaver]:
    migration = LENIENT if lenient else None
    with V03SqliteSaver.from_conn_string(
        str(path), serde=serde(migration), migration=migration
    ) as saver:
        yield saver


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "v03.sqlite"
    shutil.copyfile(VECTOR, path)
    return path


def resumed(saver: BaseCheckpointSaver[Any]) -> tuple[Any, Any]:
    """The state before resuming (ids included), and after (the new message's id is fresh)."""
    app = graph(saver)
    before = app.get_state(THREAD)
    app.invoke(Command(resume="later"), THREAD)
    after = app.get_state(THREAD)
    old = before.values["messages"]
    assert after.values["messages"][: len(old)] == old
    new = [(type(m).__name__, m.content) for m in after.values["messages"][len(old) :]]
    return (before.values, before.next, before.interrupts[0].value), new


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
        expected = resumed(source)
        assert expected[1] == [("AIMessage", "approved: later")]
        got = resumed(target)
    assert got == expected


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
        # Without the planted row, the adopted store resumes as the original did.
        original = tmp_path / "original.sqlite"
        shutil.copyfile(VECTOR, original)
        with v03(original) as clean:
            assert resumed(target) == resumed(clean)


def test_accepting_unvouched_rows_needs_a_lenient_reader(store: Path, tmp_path: Path) -> None:
    with (
        v03(store) as source,
        SqliteSaver.from_conn_string(str(tmp_path / "new.sqlite"), serde=serde()) as target,
    ):
        target.setup()
        with pytest.raises(ValueError, match="lenient"):
            adopt(source, target, accept_unvouched=True)


def test_the_vector_is_what_make_vector_writes(tmp_path: Path) -> None:
    """The committed store has the shape make_vector gives (its ciphertexts are random)."""
    fresh = tmp_path / "fresh.sqlite"
    subprocess.run(
        [sys.executable, "-m", "tests.savers.test_adopt", str(fresh)], cwd=ROOT, check=True
    )

    def shape(path: Path) -> list[tuple[Any, ...]]:
        with sqlite3.connect(path) as conn:
            return conn.execute(
                "SELECT thread_id, checkpoint_ns, type, length(checkpoint) > 0"
                " FROM checkpoints ORDER BY checkpoint_id"
            ).fetchall()

    assert shape(fresh) == shape(VECTOR)


if __name__ == "__main__":
    make_vector(Path(sys.argv[1]))


def test_the_0_3_savers_copy_no_threads(store: Path) -> None:
    """0.3's savers only read: copying a thread is adopt's job, then SealedSaver's."""
    before = store.read_bytes()
    with v03(store) as saver:
        assert saver.get_tuple(THREAD) is not None
        with pytest.raises(NotImplementedError):
            saver.copy_thread("chat-1", "chat-2")
        assert saver.get_tuple({"configurable": {"thread_id": "chat-2"}}) is None
    assert store.read_bytes() == before
