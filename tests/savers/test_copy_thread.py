"""copy_thread on the sealed savers: a real graph forked under a new thread id, re-encrypted.

The graph loops a node that extends a ``DeltaChannel`` (snapshot every 3 updates), then
enters a subgraph (its own checkpoint namespace) that stops at ``interrupt()``. The thread
is copied to a new id; there, history, state at every checkpoint, the delta history, a
replay from an old checkpoint and the resume all equal the source's, and the source's rows
are byte for byte unchanged. The same rows copied by raw SQL into a third thread id fail to
read (`BindingError`): the re-encryption is what makes a copy readable. A tampered source
row aborts the copy with the typed error and leaves the target empty. Rows a stock saver
wrote unbound are copied bound under ``Migration(unbound=True)`` and refused without it.

Both databases (a real SQLite file, the real PostgreSQL fixture), sync and async.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import ExitStack, asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Annotated, Any, Final

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg.types.json import Jsonb
from typing_extensions import TypedDict

from secure_serde import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    EncryptedSerializer,
    Migration,
    UnboundValueError,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers._v03_postgres import SEALED_METADATA_KEY, AsyncPostgresSaver, PostgresSaver
from secure_serde.savers._v03_sqlite import AsyncSqliteSaver, SqliteSaver
from tests.fixtures_services import saver_connection
from tests.savers.binding_support import NAMESPACES, THREADS, marking_serde, populate

KEY = b"copy-thread-key-0123456789abcdef"
LOOPS = 5

# --- the graph ----------------------------------------------------------------------------


def extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    out = list(state)
    for write in writes:
        out.extend(write)
    return out


class Inner(TypedDict, total=False):
    step: int
    notes: Annotated[list[str], operator.add]


class State(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=3)]
    step: int
    notes: Annotated[list[str], operator.add]


def _ask(state: Inner) -> dict[str, Any]:
    answer = interrupt(f"approve step {state.get('step', 0)}?")
    return {"notes": [f"answer:{answer}"]}


def _tick(state: Any) -> dict[str, Any]:  # Any: a typed hint would add its channels
    step = state.get("step", 0) + 1
    return {"log": [f"tick{step}"], "step": step}


def _after_tick(state: Any) -> str:
    return "tick" if state["step"] < LOOPS else "review"


class PlainState(TypedDict, total=False):
    """`State` without the DeltaChannel (keep_latest refuses to prune delta threads)."""

    log: Annotated[list[str], operator.add]
    step: int
    notes: Annotated[list[str], operator.add]


def build_graph(checkpointer: Any, state: type[Any] = State) -> Any:
    inner = StateGraph(Inner).add_node("ask", _ask)
    inner.add_edge(START, "ask").add_edge("ask", END)
    outer = StateGraph(state).add_node("tick", _tick).add_node("review", inner.compile())
    outer.add_edge(START, "tick").add_conditional_edges("tick", _after_tick, ["tick", "review"])
    outer.add_edge("review", END)
    return outer.compile(checkpointer=checkpointer)


def cfg(thread_id: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, **extra}}


START_INPUT: Final[dict[str, Any]] = {"log": [], "step": 0, "notes": []}


def _strip(config: RunnableConfig | None) -> tuple[str, str] | None:
    # A config without its thread id: what must match between source and copy.
    if config is None:
        return None
    c = config["configurable"]
    return c["checkpoint_ns"], c["checkpoint_id"]


def view(snapshots: Sequence[Any]) -> list[Any]:
    """A state history, thread ids left out."""
    return [
        (
            s.values,
            s.next,
            _strip(s.config),
            _strip(s.parent_config),
            s.metadata,
            [(t.name, [i.value for i in t.interrupts]) for t in s.tasks],
        )
        for s in snapshots
    ]


def result(out: dict[str, Any]) -> dict[str, Any]:
    """An invoke's result; an interrupt by its value (its id names the new checkpoint's task)."""
    return {k: [i.value for i in v] if k == "__interrupt__" else v for k, v in out.items()}


def subgraph_state(graph: Any, thread_id: str) -> Any:
    state = graph.get_state(cfg(thread_id), subgraphs=True)
    (task,) = [t for t in state.tasks if t.state is not None]
    return task.state.values, task.state.next, _strip(task.state.config)[1]  # type: ignore[index]


def serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY))


# --- the databases, seen by raw SQL --------------------------------------------------------


class Sqlite:
    """Raw access to a SQLite checkpoint file, as an attacker with the database has it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, thread_id: str) -> list[Any]:
        with closing(sqlite3.connect(self.path)) as conn:
            cps = conn.execute(
                "SELECT * FROM checkpoints WHERE thread_id = ? ORDER BY 2, 3", (thread_id,)
            ).fetchall()
            ws = conn.execute(
                "SELECT * FROM writes WHERE thread_id = ? ORDER BY 2, 3, 4, 6", (thread_id,)
            ).fetchall()
        return [*cps, *ws]

    def raw_copy(self, source: str, target: str) -> None:
        with closing(sqlite3.connect(self.path)) as conn, conn:
            conn.execute(
                "INSERT INTO checkpoints SELECT ?, checkpoint_ns, checkpoint_id,"
                " parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints"
                " WHERE thread_id = ?",
                (target, source),
            )
            conn.execute(
                "INSERT INTO writes SELECT ?, checkpoint_ns, checkpoint_id, task_id, task_path,"
                " idx, channel, type, value FROM writes WHERE thread_id = ?",
                (target, source),
            )

    def tamper(self, thread_id: str, kind: str) -> None:
        """Flip one bit of the thread's oldest value of ``kind`` (checkpoint, write, metadata)."""
        with closing(sqlite3.connect(self.path)) as conn, conn:
            if kind == "write":
                rowid, blob = conn.execute(
                    "SELECT rowid, value FROM writes WHERE thread_id = ? ORDER BY checkpoint_id",
                    (thread_id,),
                ).fetchone()
                flipped = bytes([*blob[:-1], blob[-1] ^ 1])
                conn.execute("UPDATE writes SET value = ? WHERE rowid = ?", (flipped, rowid))
                return
            rowid, blob, metadata = conn.execute(
                "SELECT rowid, checkpoint, metadata FROM checkpoints WHERE thread_id = ?"
                " ORDER BY checkpoint_id LIMIT 1",
                (thread_id,),
            ).fetchone()
            if kind == "metadata":
                # An edit of the plaintext metadata: the checkpoint blob's binding covers it.
                edited = json.dumps({**json.loads(metadata), "step": 99}).encode()
                conn.execute("UPDATE checkpoints SET metadata = ? WHERE rowid = ?", (edited, rowid))
                return
            flipped = bytes([*blob[:-1], blob[-1] ^ 1])
            conn.execute("UPDATE checkpoints SET checkpoint = ? WHERE rowid = ?", (flipped, rowid))


class Postgres:
    """Raw access to the PostgreSQL checkpoint tables."""

    def __init__(self, url: str) -> None:
        self.url = url

    def rows(self, thread_id: str) -> list[Any]:
        with psycopg.connect(self.url) as conn:
            out: list[Any] = []
            for table, order in (
                ("checkpoints", "2, 3"),
                ("checkpoint_blobs", "2, 3, 4"),
                ("checkpoint_writes", "2, 3, 4, 5"),
            ):
                out += conn.execute(
                    f"SELECT * FROM {table} WHERE thread_id = %s ORDER BY {order}",  # noqa: S608
                    (thread_id,),
                ).fetchall()
            return out

    def raw_copy(self, source: str, target: str) -> None:
        with psycopg.connect(self.url) as conn:
            conn.execute(
                "INSERT INTO checkpoints SELECT %s, checkpoint_ns, checkpoint_id,"
                " parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints"
                " WHERE thread_id = %s",
                (target, source),
            )
            conn.execute(
                "INSERT INTO checkpoint_blobs SELECT %s, checkpoint_ns, channel, version, type,"
                " blob FROM checkpoint_blobs WHERE thread_id = %s",
                (target, source),
            )
            conn.execute(
                "INSERT INTO checkpoint_writes SELECT %s, checkpoint_ns, checkpoint_id, task_id,"
                " idx, channel, type, blob, task_path FROM checkpoint_writes WHERE thread_id = %s",
                (target, source),
            )

    def tamper(self, thread_id: str, kind: str) -> None:
        """Spoil the thread's oldest value of ``kind`` (blob, write, record, metadata entry)."""
        with psycopg.connect(self.url) as conn:
            if kind == "checkpoint":
                # Re-point a channel at another version: the record seal refuses it.
                conn.execute(
                    "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint,"
                    " '{channel_versions,step}', '\"00000000000000000000000000000099.0.1\"')"
                    " WHERE thread_id = %s AND checkpoint_id = (SELECT max(checkpoint_id)"
                    " FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '')"
                    " AND checkpoint_ns = ''",
                    (thread_id, thread_id),
                )
                return
            if kind == "metadata":
                # Swap in the sealed entry of another checkpoint of the same thread.
                rows = conn.execute(
                    "SELECT checkpoint_id, metadata FROM checkpoints WHERE thread_id = %s"
                    " AND checkpoint_ns = '' ORDER BY checkpoint_id LIMIT 2",
                    (thread_id,),
                ).fetchall()
                entry = rows[1][1][SEALED_METADATA_KEY]
                conn.execute(
                    "UPDATE checkpoints SET metadata = jsonb_set(metadata, %s, %s)"
                    " WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s",
                    ([SEALED_METADATA_KEY], Jsonb(entry), thread_id, rows[0][0]),
                )
                return
            table = "checkpoint_writes" if kind == "write" else "checkpoint_blobs"
            key = "checkpoint_id, task_id, idx" if kind == "write" else "channel, version"
            row = conn.execute(
                f"SELECT checkpoint_ns, {key}, blob FROM {table}"  # noqa: S608 - literals
                " WHERE thread_id = %s AND blob IS NOT NULL ORDER BY 1, 2 LIMIT 1",
                (thread_id,),
            ).fetchone()
            assert row is not None
            blob = bytes(row[-1])
            where = " AND ".join(f"{c.strip()} = %s" for c in key.split(","))
            conn.execute(
                f"UPDATE {table} SET blob = %s WHERE thread_id = %s"  # noqa: S608 - literals
                f" AND checkpoint_ns = %s AND {where}",
                (bytes([*blob[:-1], blob[-1] ^ 1]), thread_id, *row[:-1]),
            )


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any, Any]]:
    if request.param == "sqlite":
        db = tmp_path / "copy.sqlite"

        @contextmanager
        def sync_saver(**options: Any) -> Iterator[Any]:
            with SqliteSaver.from_conn_string(str(db), serde=serde(), **options) as saver:
                yield saver

        @asynccontextmanager
        async def async_saver(**options: Any) -> AsyncIterator[Any]:
            async with AsyncSqliteSaver.from_conn_string(
                str(db), serde=serde(), **options
            ) as saver:
                yield saver

        yield "sqlite", Sqlite(db), (sync_saver, async_saver)
        return
    url = request.getfixturevalue("postgres_url")

    @contextmanager
    def pg_sync_saver(**options: Any) -> Iterator[Any]:
        with saver_connection(url) as conn:
            saver = PostgresSaver(conn, serde=serde(), **options)
            saver.setup()
            yield saver

    @asynccontextmanager
    async def pg_async_saver(**options: Any) -> AsyncIterator[Any]:
        async with AsyncPostgresSaver.from_conn_string(url, serde=serde(), **options) as saver:
            await saver.setup()
            yield saver

    yield "postgres", Postgres(url), (pg_sync_saver, pg_async_saver)


# --- the scenario ---------------------------------------------------------------------------


def _run_to_interrupt(graph: Any, thread_id: str, **configurable: Any) -> None:
    graph.invoke(START_INPUT, cfg(thread_id, **configurable))
    state = graph.get_state(cfg(thread_id))
    assert state.next == ("review",)
    assert state.values["log"] == [f"tick{n}" for n in range(1, LOOPS + 1)]


def test_copy_is_the_same_thread_under_a_new_id(backend: tuple[str, Any, Any]) -> None:
    _, db, (sync_saver, _) = backend
    with sync_saver(indexed_metadata=["tenant"]) as saver:
        graph = build_graph(saver)
        # Both land in every checkpoint's metadata, sealed; "tenant" with a blind index.
        _run_to_interrupt(graph, "source", tenant="acme", api_key="sk-not-in-plaintext")
        source_rows = db.rows("source")
        history = view(list(graph.get_state_history(cfg("source"))))
        assert len(history) >= LOOPS + 2
        sub = subgraph_state(graph, "source")

        saver.copy_thread("source", "fork")

        assert db.rows("source") == source_rows  # the source untouched, byte for byte
        assert view(list(graph.get_state_history(cfg("fork")))) == history
        assert subgraph_state(graph, "fork") == sub
        namespaces = {r[1] for r in db.rows("fork")}
        assert any(ns for ns in namespaces), "the subgraph's namespace was copied"
        # Every checkpoint's state, DeltaChannel included, rebuilt on the fork as on the source.
        for snap in graph.get_state_history(cfg("source")):
            at = cfg("fork", checkpoint_id=snap.config["configurable"]["checkpoint_id"])
            assert graph.get_state(at).values == snap.values
            delta = saver.get_delta_channel_history(config=at, channels=["log"])
            src_delta = saver.get_delta_channel_history(config=snap.config, channels=["log"])
            assert delta == src_delta
        # Re-encrypted, not copied: no stored ciphertext of the fork equals the source's.
        source_bytes = {bytes(c) for r in source_rows for c in r if isinstance(c, bytes)}
        fork_bytes = {bytes(c) for r in db.rows("fork") for c in r if isinstance(c, bytes)}
        assert fork_bytes
        assert not (fork_bytes & source_bytes)
        # Sealed metadata re-sealed for the fork; its blind-index tokens still match.
        found = saver.list(cfg("fork"), filter={"tenant": "acme"})
        expected = ["sk-not-in-plaintext"] * len(list(saver.list(cfg("source"))))
        assert [t.metadata["api_key"] for t in found] == expected

        # A replay from an old checkpoint, and the resume, go the same way on both threads.
        old = list(graph.get_state_history(cfg("source")))[-3].config["configurable"]
        replayed = [
            result(graph.invoke(None, cfg(t, checkpoint_id=old["checkpoint_id"])))
            for t in ("source", "fork")
        ]
        assert replayed[0] == replayed[1]
        assert replayed[0]["__interrupt__"] == [f"approve step {LOOPS}?"]
        resumed = [graph.invoke(Command(resume="yes"), cfg(t)) for t in ("source", "fork")]
        assert resumed[0] == resumed[1]
        assert resumed[1]["notes"] == ["answer:yes"]

        # The same rows copied by raw SQL do not read: the binding names the thread.
        db.raw_copy("source", "raw")
        with pytest.raises(BindingError):
            saver.get_tuple(cfg("raw"))
        with pytest.raises(BindingError):
            graph.get_state(cfg("raw"))


KINDS = {
    "sqlite": ("checkpoint", "write", "metadata"),
    "postgres": ("checkpoint", "blob", "write", "metadata"),
}


def test_a_tampered_source_aborts_and_writes_nothing(backend: tuple[str, Any, Any]) -> None:
    name, db, (sync_saver, _) = backend
    with sync_saver() as saver:
        graph = build_graph(saver)
        for kind in KINDS[name]:
            _run_to_interrupt(graph, f"source-{kind}")
            saver.copy_thread(f"source-{kind}", f"before-{kind}")  # copies while intact
            db.tamper(f"source-{kind}", kind)
            with pytest.raises(DecryptionError):
                saver.copy_thread(f"source-{kind}", f"fork-{kind}")
            assert db.rows(f"fork-{kind}") == [], kind
            assert list(saver.list(cfg(f"fork-{kind}"))) == []


def test_refusals(backend: tuple[str, Any, Any]) -> None:
    _, db, (sync_saver, _) = backend
    with sync_saver() as saver:
        graph = build_graph(saver)
        _run_to_interrupt(graph, "source")
        _run_to_interrupt(graph, "other")
        before = db.rows("other")
        with pytest.raises(ConfigurationError, match="already has"):
            saver.copy_thread("source", "other")
        assert db.rows("other") == before
        with pytest.raises(ConfigurationError):
            saver.copy_thread("source", "source")
        saver.copy_thread("nobody", "empty")  # a source with no rows copies nothing
        assert db.rows("empty") == []


def _stock_thread(name: str, db: Any, thread_id: str) -> None:
    """A thread written by langgraph's own saver, through the same cipher (unbound rows)."""
    if name == "sqlite":
        with closing(sqlite3.connect(db.path, check_same_thread=False)) as conn:
            _run_to_interrupt(build_graph(StockSqliteSaver(conn, serde=serde())), thread_id)
        return
    with saver_connection(db.url) as conn:
        _run_to_interrupt(build_graph(StockPostgresSaver(conn, serde=serde())), thread_id)


def test_unbound_rows_are_copied_bound_only_under_migration(
    backend: tuple[str, Any, Any],
) -> None:
    name, db, (sync_saver, _) = backend
    with sync_saver():
        pass  # creates the schema
    _stock_thread(name, db, "stock")
    with sync_saver(seal_metadata=False) as strict:
        with pytest.raises(UnboundValueError):
            strict.copy_thread("stock", "fork")
        assert db.rows("fork") == []
    migration = Migration(unbound=True, inline_values=True, plaintext_metadata=True)
    with sync_saver(seal_metadata=False, migration=migration) as lenient:
        expected = view(list(build_graph(lenient).get_state_history(cfg("stock"))))
        lenient.copy_thread("stock", "fork")
    # The fork reads with no migration switch at all: every row was bound on the way.
    with sync_saver(seal_metadata=False) as strict:
        graph = build_graph(strict)
        assert view(list(graph.get_state_history(cfg("fork")))) == expected
        assert graph.invoke(Command(resume="ok"), cfg("fork"))["notes"] == ["answer:ok"]


async def test_async_copy(backend: tuple[str, Any, Any]) -> None:
    _, db, (_, async_saver) = backend
    async with async_saver() as saver:
        graph = build_graph(saver)
        await graph.ainvoke(START_INPUT, cfg("source"))
        source_rows = db.rows("source")
        history = view([s async for s in graph.aget_state_history(cfg("source"))])

        await saver.acopy_thread("source", "fork")

        assert db.rows("source") == source_rows
        assert view([s async for s in graph.aget_state_history(cfg("fork"))]) == history
        resumed = [await graph.ainvoke(Command(resume="yes"), cfg(t)) for t in ("source", "fork")]
        assert resumed[0] == resumed[1]

        db.raw_copy("source", "raw")
        with pytest.raises(BindingError):
            await saver.aget_tuple(cfg("raw"))

        # The sync method runs the copy on the saver's loop, from another thread only.
        await asyncio.to_thread(saver.copy_thread, "source", "fork-sync")
        assert view([s async for s in graph.aget_state_history(cfg("fork-sync"))]) == view(
            [s async for s in graph.aget_state_history(cfg("source"))]
        )
        with pytest.raises(asyncio.InvalidStateError):
            saver.copy_thread("source", "fork-blocked")

        db.tamper("source", "write")
        with pytest.raises(DecryptionError):
            await saver.acopy_thread("source", "fork2")
        assert db.rows("fork2") == []


def test_a_pruned_thread_copies(postgres_url: str) -> None:
    """keep_latest nulls the kept checkpoint's parent link: the copy keeps it nulled, and reads."""
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, serde=serde())
        saver.setup()
        graph = build_graph(saver, PlainState)
        _run_to_interrupt(graph, "source")
        before = len(list(saver.list(cfg("source"))))
        saver.prune(["source"], strategy="keep_latest")
        assert len(list(saver.list(cfg("source")))) < before
        expected = view(list(graph.get_state_history(cfg("source"))))
        saver.copy_thread("source", "fork")
        assert view(list(graph.get_state_history(cfg("fork")))) == expected
        resumed = [graph.invoke(Command(resume="yes"), cfg(t)) for t in ("source", "fork")]
        assert resumed[0] == resumed[1]


def test_values_are_moved_never_deserialized(tmp_path: Path, postgres_url: str) -> None:
    """Only the sealed metadata entries (they name their row) are decoded; every value is
    re-encrypted from its bytes, and reads back on the target as it was written."""
    for saver_kind in ("sqlite", "postgres"):
        encrypted, inner = marking_serde()
        with ExitStack() as stack:
            if saver_kind == "sqlite":
                conn = stack.enter_context(closing(sqlite3.connect(tmp_path / "marks.sqlite")))
                saver: Any = SqliteSaver(conn, serde=encrypted)
            else:
                saver = PostgresSaver(
                    stack.enter_context(saver_connection(postgres_url)), serde=encrypted
                )
                saver.setup()
            populate(saver)
            inner.loaded.clear()
            saver.copy_thread(THREADS[0], "copied")
            decoded = " ".join(inner.loaded)
            assert "marker<metadata|" in decoded, saver_kind  # the entries, re-sealed
            for kind in ("blob", "write", "checkpoint"):
                assert f"marker<{kind}|" not in decoded, (saver_kind, kind)
            for ns in NAMESPACES:
                got = saver.get_tuple(cfg("copied", checkpoint_ns=ns))
                want = saver.get_tuple(cfg(THREADS[0], checkpoint_ns=ns))
                assert got is not None
                assert want is not None
                assert got.checkpoint == want.checkpoint
                assert got.pending_writes == want.pending_writes
                assert got.metadata == want.metadata


def test_pipeline_mode(postgres_url: str) -> None:
    """A saver opened with ``pipeline=True`` copies too, and still writes nothing on a refusal."""
    with PostgresSaver.from_conn_string(postgres_url, serde=serde()) as saver:
        saver.setup()  # the stock setup cannot run in a pipeline
    db = Postgres(postgres_url)
    with PostgresSaver.from_conn_string(postgres_url, serde=serde(), pipeline=True) as saver:
        graph = build_graph(saver)
        _run_to_interrupt(graph, "source")
        saver.copy_thread("source", "fork")
        history = view(list(graph.get_state_history(cfg("source"))))
        assert view(list(graph.get_state_history(cfg("fork")))) == history
        db.tamper("source", "blob")
        with pytest.raises(DecryptionError):
            saver.copy_thread("source", "fork2")
        assert db.rows("fork2") == []
