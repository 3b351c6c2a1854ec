"""Real LangGraph graphs on real savers, with secure_serde as the serde.

The scenario tests run on InMemorySaver and SqliteSaver (sync API) and on AsyncSqliteSaver
(async API), and check both the graph-level results and that every stored row went through our
cipher. Then: the raw SQLite file holds no plaintext, stock PostgresSaver / AsyncPostgresSaver
work with our serde, a store written by langgraph's built-in encryption is taken over, a wrong
key is refused with a typed error, and strict msgpack keeps working through our wrapper.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.encrypted import (
    EncryptedSerializer as LangGraphEncryptedSerializer,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import StateSnapshot

from secure_serde import DecryptionError, EncryptedSerializer, UnknownKeyError
from secure_serde.ciphers import EnvKeyCipher
from tests.fixtures_services import PostgresServer, pg_dump, saver_connection
from tests.graphs_support import (
    KEY,
    OTHER_KEY,
    AuditedSerializer,
    Driver,
    build_chat_graph,
    build_parent_graph,
    build_review_graph,
    build_steps_graph,
    reply_text,
    transcript,
)
from tests.serdes_support import env_serde
from tests.strict_support import run_strict_report

SUFFIX = "+aesgcm"
CANARY = "CANARY-q7Zx-owl-9f3b1e-do-not-store"


def our_serde(key: bytes = KEY) -> EncryptedSerializer:
    return env_serde(key)


def cfg(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


# --------------------------------------------------------------------------------------------
# Savers


@dataclass
class SaverCase:
    kind: str
    saver: Any
    is_async: bool
    path: Path | None = None

    def driver(self, build: Callable[[Any], Any]) -> Driver:
        return Driver(build(self.saver), self.is_async)

    def stored_tags(self) -> list[tuple[str, str, str]]:
        """(table, checkpoint_ns, type tag) of every serialized value the saver holds."""
        if self.kind == "memory":
            return memory_tags(self.saver)
        assert self.path is not None
        return sqlite_tags(self.path)


def memory_tags(saver: InMemorySaver) -> list[tuple[str, str, str]]:
    tags: list[tuple[str, str, str]] = []
    for namespaces in saver.storage.values():
        for ns, checkpoints in namespaces.items():
            for checkpoint, metadata, _parent in checkpoints.values():
                tags += [("checkpoints", ns, checkpoint[0]), ("metadata", ns, metadata[0])]
    for (_thread, ns, _channel, _version), (tag, _data) in saver.blobs.items():
        if tag != "empty":
            tags.append(("blobs", ns, tag))
    for (_thread, ns, _checkpoint), writes in saver.writes.items():
        tags += [("writes", ns, typed[0]) for _task, _channel, typed, _path in writes.values()]
    return tags


def sqlite_tags(path: Path) -> list[tuple[str, str, str]]:
    with closing(sqlite3.connect(path)) as conn:
        return [
            *(
                ("checkpoints", ns, t)
                for ns, t in conn.execute("SELECT checkpoint_ns, type FROM checkpoints")
            ),
            *(
                ("writes", ns, t)
                for ns, t in conn.execute("SELECT checkpoint_ns, type FROM writes")
            ),
        ]


def assert_all_encrypted(case: SaverCase, *, min_rows: int) -> list[tuple[str, str, str]]:
    tags = case.stored_tags()
    assert len(tags) >= min_rows, tags
    not_ours = [t for t in tags if not t[2].endswith(SUFFIX)]
    assert not not_ours, f"rows not encrypted by secure_serde: {not_ours}"
    return tags


SAVER_KINDS = [
    "memory",
    "sqlite",
    "async_sqlite",
    # SealedSaver runs the same kind of graphs in tests/sealing/test_graph_matrix.py.
]


@pytest.fixture(params=SAVER_KINDS)
async def case(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SaverCase]:
    kind = request.param
    if kind == "memory":
        yield SaverCase(kind, InMemorySaver(serde=our_serde()), is_async=False)
    elif kind == "sqlite":
        path = tmp_path / "sync.sqlite"
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            yield SaverCase(kind, SqliteSaver(conn, serde=our_serde()), False, path)
        finally:
            conn.close()
    else:
        path = tmp_path / "async.sqlite"
        async with aiosqlite.connect(path) as aconn:
            yield SaverCase(kind, AsyncSqliteSaver(aconn, serde=our_serde()), True, path)


# --------------------------------------------------------------------------------------------
# 1. Conversation memory


async def test_conversation_memory_across_invocations(case: SaverCase) -> None:
    chat = case.driver(build_chat_graph)
    config = cfg("chat")
    turns = [f"hello {CANARY}", "what did I say?", "bye"]
    expected: list[tuple[str, str]] = []
    for n, text in enumerate(turns, start=1):
        result = await chat.invoke({"messages": [HumanMessage(content=text)]}, config)
        expected += [("human", text), ("ai", reply_text(n, text))]
        assert transcript(result["messages"]) == expected
        state = await chat.state(config)
        assert transcript(state.values["messages"]) == expected
        assert state.next == ()
    # The AI message really is an AIMessage again after the encrypted round trip.
    assert isinstance(state.values["messages"][-1], AIMessage)
    assert state.values["messages"][-1].content == "echo #3: bye"

    # Another thread starts from nothing: memory is per thread, not global.
    other = await chat.invoke({"messages": [HumanMessage(content="fresh")]}, cfg("other"))
    assert transcript(other["messages"]) == [("human", "fresh"), ("ai", "echo #1: fresh")]

    assert_all_encrypted(case, min_rows=10)


# --------------------------------------------------------------------------------------------
# 2. interrupt() and Command(resume=...)


async def test_interrupt_and_resume(case: SaverCase) -> None:
    review = case.driver(build_review_graph)
    config = cfg("review")
    question = {"question": "approve this draft?", "draft": "draft: write about owls"}

    result = await review.invoke({"messages": [HumanMessage(content="write about owls")]}, config)
    assert [i.value for i in result["__interrupt__"]] == [question]

    paused = await review.state(config)
    assert paused.next == ("review",)
    assert [i.value for i in paused.interrupts] == [question]
    assert [(t.name, [i.value for i in t.interrupts]) for t in paused.tasks] == [
        ("review", [question])
    ]
    assert "verdict" not in paused.values

    answer = {"verdict": "approved", "note": "ship it"}
    done = await review.resume(answer, config)
    assert "__interrupt__" not in done
    final = await review.state(config)
    assert final.next == ()
    assert final.interrupts == ()
    assert final.values["verdict"] == "approved"
    assert final.values["reviewer_note"] == "ship it"
    assert transcript(final.values["messages"]) == [
        ("human", "write about owls"),
        ("ai", "draft: write about owls"),
        ("human", "review: approved / ship it"),
        ("ai", "published (approved)"),
    ]
    tags = assert_all_encrypted(case, min_rows=10)
    assert any(table == "writes" for table, _, _ in tags)


# --------------------------------------------------------------------------------------------
# 3. History, update_state, replay and fork


Summary = list[tuple[int, str, tuple[str, ...], dict[str, Any]]]


def summarize(history: list[StateSnapshot]) -> Summary:
    """Oldest first: (step, source, next, values) of every snapshot."""
    return [(s.metadata["step"], s.metadata["source"], s.next, s.values) for s in reversed(history)]


def checkpoint_id(config: RunnableConfig | None) -> str | None:
    return None if config is None else config["configurable"]["checkpoint_id"]


async def test_history_update_replay_and_fork(case: SaverCase) -> None:
    steps = case.driver(build_steps_graph)
    config = cfg("steps")
    result = await steps.invoke({"steps": [], "topic": "x"}, config)
    assert result == {"steps": ["a(x)", "b(x)", "c(x)"], "topic": "x"}

    original = await steps.history(config)
    assert summarize(original) == [
        (-1, "input", ("__start__",), {"steps": []}),
        (0, "loop", ("a",), {"steps": [], "topic": "x"}),
        (1, "loop", ("b",), {"steps": ["a(x)"], "topic": "x"}),
        (2, "loop", ("c",), {"steps": ["a(x)", "b(x)"], "topic": "x"}),
        (3, "loop", (), {"steps": ["a(x)", "b(x)", "c(x)"], "topic": "x"}),
    ]
    # Every snapshot points at the one before it.
    assert [checkpoint_id(s.parent_config) for s in original] == [
        checkpoint_id(s.config) for s in original[1:]
    ] + [None]

    # update_state as node "a": state changes and the graph now waits for "b".
    await steps.update(config, {"steps": ["manual"]}, as_node="a")
    updated = await steps.state(config)
    assert updated.next == ("b",)
    assert updated.metadata is not None
    assert updated.metadata["source"] == "update"
    assert updated.values == {"steps": ["a(x)", "b(x)", "c(x)", "manual"], "topic": "x"}
    continued = await steps.invoke(None, config)
    assert continued["steps"] == ["a(x)", "b(x)", "c(x)", "manual", "b(x)", "c(x)"]

    # Replay from the old checkpoint that was about to run "b".
    before_b = next(s for s in original if s.next == ("b",))
    replayed = await steps.invoke(None, before_b.config)
    assert replayed == {"steps": ["a(x)", "b(x)", "c(x)"], "topic": "x"}
    head = await steps.state(config)
    assert head.values == replayed

    # Fork: change the old checkpoint, then continue from the fork.
    fork_config = await steps.update(before_b.config, {"topic": "y"})
    fork = await steps.state(fork_config)
    assert fork.values == {"steps": ["a(x)"], "topic": "y"}
    assert fork.next == ("b",)
    assert checkpoint_id(fork.parent_config) == checkpoint_id(before_b.config)
    forked = await steps.invoke(None, fork_config)
    assert forked == {"steps": ["a(x)", "b(y)", "c(y)"], "topic": "y"}

    # The original checkpoint is untouched, and reads back exactly as before.
    assert (await steps.state(before_b.config)).values == {"steps": ["a(x)"], "topic": "x"}

    full = await steps.history(config)
    assert summarize(full) == [
        *summarize(original),
        (4, "update", ("b",), {"steps": ["a(x)", "b(x)", "c(x)", "manual"], "topic": "x"}),
        (5, "loop", ("c",), {"steps": ["a(x)", "b(x)", "c(x)", "manual", "b(x)"], "topic": "x"}),
        (
            6,
            "loop",
            (),
            {"steps": ["a(x)", "b(x)", "c(x)", "manual", "b(x)", "c(x)"], "topic": "x"},
        ),
        (2, "fork", ("b",), {"steps": ["a(x)"], "topic": "x"}),
        (3, "loop", ("c",), {"steps": ["a(x)", "b(x)"], "topic": "x"}),
        (4, "loop", (), {"steps": ["a(x)", "b(x)", "c(x)"], "topic": "x"}),
        (2, "update", ("b",), {"steps": ["a(x)"], "topic": "y"}),
        (3, "loop", ("c",), {"steps": ["a(x)", "b(y)"], "topic": "y"}),
        (4, "loop", (), {"steps": ["a(x)", "b(y)", "c(y)"], "topic": "y"}),
    ]
    # Both the replay and the fork branch off the checkpoint that was about to run "b".
    branch_roots = [
        s
        for s in full
        if s.metadata and s.metadata["source"] in ("fork", "update") and s.metadata["step"] == 2
    ]
    assert len(branch_roots) == 2
    assert {checkpoint_id(s.parent_config) for s in branch_roots} == {
        checkpoint_id(before_b.config)
    }
    assert_all_encrypted(case, min_rows=30)


# --------------------------------------------------------------------------------------------
# 4. Subgraphs


async def test_subgraph_state_and_interrupt(case: SaverCase) -> None:
    parent = case.driver(build_parent_graph)
    config = cfg("sub")
    confirm = {"confirm": "found: find owls"}

    result = await parent.invoke({"messages": [HumanMessage(content="find owls")]}, config)
    assert [i.value for i in result["__interrupt__"]] == [confirm]
    assert result["log"] == ["prepared"]

    state = await parent.state(config, subgraphs=True)
    assert state.next == ("child",)
    assert state.values["log"] == ["prepared"]
    assert [i.value for i in state.interrupts] == [confirm]
    (task,) = state.tasks
    assert task.name == "child"
    assert [i.value for i in task.interrupts] == [confirm]
    child = task.state
    assert isinstance(child, StateSnapshot)
    child_ns = child.config["configurable"]["checkpoint_ns"]
    assert child_ns.startswith("child:")
    assert child.next == ("confirm",)
    assert transcript(child.values["messages"]) == [("human", "find owls")]
    assert child.values["findings"] == ["found: find owls"]
    assert [i.value for i in child.interrupts] == [confirm]
    assert [(t.name, [i.value for i in t.interrupts]) for t in child.tasks] == [
        ("confirm", [confirm])
    ]
    # The subgraph's own checkpoint namespace can be read directly, too.
    direct = await parent.state(child.config)
    assert direct.values == child.values
    assert direct.next == ("confirm",)

    # Without subgraphs=True the task only carries the subgraph's config.
    shallow = await parent.state(config)
    assert not isinstance(shallow.tasks[0].state, StateSnapshot)

    done = await parent.resume("yes", config)
    assert transcript(done["messages"]) == [
        ("human", "find owls"),
        ("ai", "child answer (yes): found: find owls"),
    ]
    assert done["log"] == ["prepared", "summarized 2 messages"]
    after = await parent.state(config, subgraphs=True)
    assert after.next == ()
    assert after.tasks == ()

    # The subgraph's checkpoints were stored under its namespace and decrypt to its state.
    child_checkpoints = await parent.checkpoints(
        {"configurable": {"thread_id": "sub", "checkpoint_ns": child_ns}}
    )
    assert child_checkpoints
    latest = child_checkpoints[0].checkpoint["channel_values"]
    assert latest["findings"] == ["found: find owls"]
    assert transcript(latest["messages"])[-1] == ("ai", "child answer (yes): found: find owls")

    tags = assert_all_encrypted(case, min_rows=10)
    assert {ns for _, ns, _ in tags} >= {"", child_ns}


# --------------------------------------------------------------------------------------------
# 5. The SQLite file holds ciphertext only


def raw_bytes(path: Path) -> bytes:
    """The database file and any WAL/SHM files next to it."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


async def _fill(case: SaverCase) -> None:
    chat = case.driver(build_chat_graph)
    await chat.invoke({"messages": [HumanMessage(content=f"my secret is {CANARY}")]}, cfg("c"))
    review = case.driver(build_review_graph)
    await review.invoke({"messages": [HumanMessage(content=f"write {CANARY}")]}, cfg("r"))
    await review.resume({"verdict": "ok", "note": CANARY}, cfg("r"))


@pytest.mark.parametrize("case", ["sqlite", "async_sqlite"], indirect=True)
async def test_sqlite_file_is_ciphertext(case: SaverCase) -> None:
    await _fill(case)
    assert case.path is not None
    with closing(sqlite3.connect(case.path)) as conn:
        checkpoint_types = [t for (t,) in conn.execute("SELECT type FROM checkpoints")]
        write_types = [t for (t,) in conn.execute("SELECT type FROM writes")]
    assert len(checkpoint_types) >= 6
    assert len(write_types) >= 6
    assert all(t.endswith(SUFFIX) for t in checkpoint_types), checkpoint_types
    assert all(t.endswith(SUFFIX) for t in write_types), write_types
    assert CANARY.encode() not in raw_bytes(case.path)

    # A new connection and a new serializer with the same key read the data back.
    with closing(sqlite3.connect(case.path, check_same_thread=False)) as conn:
        graph = build_chat_graph(SqliteSaver(conn, serde=our_serde()))
        values = graph.get_state(cfg("c")).values
    assert transcript(values["messages"]) == [
        ("human", f"my secret is {CANARY}"),
        ("ai", f"echo #1: my secret is {CANARY}"),
    ]


async def test_sqlite_canary_check_detects_plaintext(tmp_path: Path) -> None:
    """Control for the test above: without encryption the canary is in the file."""
    path = tmp_path / "plain.sqlite"
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        plain = SaverCase("sqlite", SqliteSaver(conn, serde=JsonPlusSerializer()), False, path)
        await _fill(plain)
        assert CANARY.encode() in raw_bytes(path)
        assert not any(t.endswith(SUFFIX) for _, _, t in plain.stored_tags())


# --------------------------------------------------------------------------------------------
# 6. Stock PostgresSaver and AsyncPostgresSaver


async def _postgres_scenario(driver_for: Callable[[Callable[[Any], Any]], Driver]) -> None:
    """Memory, interrupt/resume and history on one saver."""
    chat = driver_for(build_chat_graph)
    for n, text in enumerate([f"hi {CANARY}", "again"], start=1):
        result = await chat.invoke({"messages": [HumanMessage(content=text)]}, cfg("pg-chat"))
        assert transcript(result["messages"])[-1] == ("ai", reply_text(n, text))
    state = await chat.state(cfg("pg-chat"))
    assert transcript(state.values["messages"]) == [
        ("human", f"hi {CANARY}"),
        ("ai", f"echo #1: hi {CANARY}"),
        ("human", "again"),
        ("ai", "echo #2: again"),
    ]
    history = await chat.history(cfg("pg-chat"))
    assert [len(s.values.get("messages", [])) for s in reversed(history)] == [0, 1, 2, 2, 3, 4]

    review = driver_for(build_review_graph)
    result = await review.invoke(
        {"messages": [HumanMessage(content=f"write {CANARY}")]}, cfg("pg-review")
    )
    assert [i.value for i in result["__interrupt__"]] == [
        {"question": "approve this draft?", "draft": f"draft: write {CANARY}"}
    ]
    paused = await review.state(cfg("pg-review"))
    assert paused.next == ("review",)
    await review.resume({"verdict": "approved", "note": "fine"}, cfg("pg-review"))
    final = await review.state(cfg("pg-review"))
    assert final.next == ()
    assert final.values["verdict"] == "approved"
    assert transcript(final.values["messages"])[-1] == ("ai", "published (approved)")


def _assert_postgres_rows_encrypted(url: str, server: PostgresServer) -> None:
    with psycopg.connect(url) as conn:
        blob_rows = conn.execute("SELECT type, blob FROM checkpoint_blobs").fetchall()
        write_types = [t for (t,) in conn.execute("SELECT type FROM checkpoint_writes")]
    blob_types = [t for t, blob in blob_rows if t != "empty"]
    assert all(blob is None for t, blob in blob_rows if t == "empty")
    assert len(blob_types) >= 6
    assert len(write_types) >= 6
    assert all(t.endswith(SUFFIX) for t in blob_types), blob_types
    assert all(t.endswith(SUFFIX) for t in write_types), write_types
    # Messages are stored as blobs, so the canary in them must not be in a dump. (Plain
    # str/int channel values stay inline in the JSONB column; that gap is not asserted here.)
    assert CANARY.encode() not in pg_dump(server, url)


async def test_postgres_saver_with_our_serde(
    postgres_url: str, postgres_server: PostgresServer
) -> None:
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, serde=our_serde())
        saver.setup()
        await _postgres_scenario(lambda build: Driver(build(saver), is_async=False))
    _assert_postgres_rows_encrypted(postgres_url, postgres_server)


async def test_async_postgres_saver_with_our_serde(
    postgres_url: str, postgres_server: PostgresServer
) -> None:
    async with AsyncPostgresSaver.from_conn_string(postgres_url, serde=our_serde()) as saver:
        await saver.setup()
        assert isinstance(saver.serde, EncryptedSerializer)
        await _postgres_scenario(lambda build: Driver(build(saver), is_async=True))
    _assert_postgres_rows_encrypted(postgres_url, postgres_server)


# --------------------------------------------------------------------------------------------
# 7. Taking over a store written by langgraph's built-in encryption; wrong keys


@pytest.mark.usefixtures("env_key")
def test_takes_over_langgraph_builtin_encrypted_store(tmp_path: Path) -> None:
    path = tmp_path / "legacy.sqlite"
    config = cfg("legacy")
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        legacy = SqliteSaver(conn, serde=LangGraphEncryptedSerializer.from_pycryptodome_aes())
        graph = build_chat_graph(legacy)
        graph.invoke({"messages": [HumanMessage(content="one")]}, config)
        graph.invoke({"messages": [HumanMessage(content="two")]}, config)
        legacy_history = summarize(list(graph.get_state_history(config)))
    old_tags = sqlite_tags(path)
    assert len(old_tags) >= 8
    assert all(t.endswith("+aes") for _, _, t in old_tags), old_tags

    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn, serde=EncryptedSerializer.from_pycryptodome_aes())
        graph = build_chat_graph(saver)
        # The old history reads back identically through our serializer.
        assert summarize(list(graph.get_state_history(config))) == legacy_history
        result = graph.invoke({"messages": [HumanMessage(content="three")]}, config)
        assert transcript(result["messages"]) == [
            ("human", "one"),
            ("ai", "echo #1: one"),
            ("human", "two"),
            ("ai", "echo #2: two"),
            ("human", "three"),
            ("ai", "echo #3: three"),
        ]
        history = list(graph.get_state_history(config))
        # Old checkpoints are still in the history and still read back.
        assert summarize(history)[: len(legacy_history)] == legacy_history
        assert len(history) == len(legacy_history) + 3

    new_tags = sqlite_tags(path)
    legacy_rows = [t for t in new_tags if t[2].endswith("+aes")]
    ours = [t for t in new_tags if t[2].endswith(SUFFIX)]
    assert sorted(legacy_rows) == sorted(old_tags)  # old rows untouched
    assert len(ours) >= 4
    assert len(legacy_rows) + len(ours) == len(new_tags)


@pytest.mark.parametrize("case", ["sqlite", "async_sqlite"], indirect=True)
@pytest.mark.parametrize(
    "reader",
    [
        pytest.param(lambda: our_serde(OTHER_KEY), id="EnvKeyCipher"),
        pytest.param(
            lambda: EncryptedSerializer.from_pycryptodome_aes(key=OTHER_KEY),
            id="from_pycryptodome_aes",
        ),
    ],
)
async def test_wrong_key_is_refused_with_typed_error(
    case: SaverCase, reader: Callable[[], EncryptedSerializer]
) -> None:
    chat = case.driver(build_chat_graph)
    await chat.invoke({"messages": [HumanMessage(content=CANARY)]}, cfg("k"))
    assert case.path is not None
    with closing(sqlite3.connect(case.path, check_same_thread=False)) as conn:
        graph = build_chat_graph(SqliteSaver(conn, serde=reader()))
        with pytest.raises(DecryptionError) as excinfo:
            graph.get_state(cfg("k"))
        assert isinstance(excinfo.value, UnknownKeyError)
        assert CANARY not in str(excinfo.value)
        # The right key still reads it.
        graph = build_chat_graph(SqliteSaver(conn, serde=our_serde()))
        assert graph.get_state(cfg("k")).values["messages"][0].content == CANARY


def test_wrong_key_on_builtin_rows_is_refused_with_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "legacy-wrong-key.sqlite"
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY.decode())
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        legacy = SqliteSaver(conn, serde=LangGraphEncryptedSerializer.from_pycryptodome_aes())
        build_chat_graph(legacy).invoke({"messages": [HumanMessage(content="x")]}, cfg("w"))
    monkeypatch.setenv("LANGGRAPH_AES_KEY", OTHER_KEY.decode())
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        graph = build_chat_graph(
            SqliteSaver(conn, serde=EncryptedSerializer.from_pycryptodome_aes())
        )
        with pytest.raises(DecryptionError):
            graph.get_state(cfg("w"))


# --------------------------------------------------------------------------------------------
# 8. Strict msgpack, in a subprocess (langgraph reads LANGGRAPH_STRICT_MSGPACK on import)


@pytest.fixture(scope="module")
def strict_report() -> dict[str, Any]:
    return run_strict_report("tests.graphs_support", "strict_msgpack_report").report


PROFILE = {"type": "tests.graphs_support.Profile", "data": {"name": "Ada", "tags": ["x", "y"]}}
# Opaque is a dataclass not named by the schema (the field is typed Any): strict mode blocks it
# and langgraph's ext hook returns its constructor kwargs instead of an instance.
BLOCKED_OPAQUE = {"type": "builtins.dict", "data": {"label": "boom", "n": 3}}


def allowlist_warnings(run: dict[str, Any]) -> list[str]:
    return [w for w in run["warnings"] if "msgpack allowlist" in w]


@pytest.mark.parametrize("name", ["secure", "secure_drop_in"])
def test_strict_msgpack_keeps_allowlist(strict_report: dict[str, Any], name: str) -> None:
    run = strict_report["runs"][name]
    assert allowlist_warnings(run) == []
    # The compiled graph's saver got an allowlisted clone of *our* serializer.
    assert run["serde_type"] == "secure_serde.serde._serializer.EncryptedSerializer"
    assert run["serde_rebuilt"] is True
    # In the schema: comes back as the pydantic class, also to the node after a resume.
    assert run["profile"] == PROFILE
    assert run["greeting"] == "hello Ada (Profile)"
    # Not in the schema: blocked.
    assert run["extra"] == BLOCKED_OPAQUE


def test_strict_msgpack_same_results_as_plain_jsonplus(strict_report: dict[str, Any]) -> None:
    runs = strict_report["runs"]

    def outcome(run: dict[str, Any]) -> tuple[Any, ...]:
        return run["profile"], run["extra"], run["greeting"], allowlist_warnings(run)

    assert outcome(runs["jsonplus"]) == (PROFILE, BLOCKED_OPAQUE, "hello Ada (Profile)", [])
    assert outcome(runs["secure"]) == outcome(runs["jsonplus"])
    assert outcome(runs["secure_drop_in"]) == outcome(runs["jsonplus"])
    assert outcome(runs["langgraph_encrypted"]) == outcome(runs["jsonplus"])


def test_strict_msgpack_wrapper_without_hook_loses_allowlist(
    strict_report: dict[str, Any],
) -> None:
    """What the checks above guard against: an opaque wrapper warns and loses the schema types."""
    wrapped = strict_report["runs"]["wrapped_jsonplus"]
    assert wrapped["serde_rebuilt"] is False
    assert allowlist_warnings(wrapped)
    assert all("does not support msgpack allowlist" in w for w in allowlist_warnings(wrapped))
    assert wrapped["profile"] == {"type": "builtins.dict", "data": PROFILE["data"]}
    assert wrapped["greeting"] == "hello Ada (dict)"

    # Our serializer over such a wrapper says so itself, under its own logger.
    ours = strict_report["runs"]["secure_over_wrapper"]
    assert allowlist_warnings(ours)
    assert all(w.startswith("secure_serde:") for w in allowlist_warnings(ours))
    assert ours["profile"]["type"] == "builtins.dict"


def test_subclass_of_our_serializer_is_kept_without_strict_mode() -> None:
    """Control for the next test: outside strict mode the saver keeps the user's subclass."""
    AuditedSerializer.dumps_calls = 0
    graph = build_chat_graph(InMemorySaver(serde=AuditedSerializer(EnvKeyCipher(KEY))))
    assert isinstance(graph.checkpointer, InMemorySaver)
    assert type(graph.checkpointer.serde) is AuditedSerializer
    graph.invoke({"messages": [HumanMessage(content="hi")]}, cfg("audited"))
    assert AuditedSerializer.dumps_calls > 0


def test_strict_msgpack_keeps_subclass_of_our_serializer(strict_report: dict[str, Any]) -> None:
    run = strict_report["runs"]["secure_subclass"]
    assert run["profile"] == PROFILE
    assert allowlist_warnings(run) == []
    assert run["serde_type"] == "tests.graphs_support.AuditedSerializer"
    assert run["subclass_dumps_calls"] > 0
