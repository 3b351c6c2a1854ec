"""`SealedSaver.reindex` on the pass engine: a dry run writes nothing, progress after every batch,
and a pass killed after its first batch finishes on a rerun (a real graph, a SQLite file).
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from secure_serde import PassReport, SealedSaver
from secure_serde.passes import PassProgress
from tests.serdes_support import env_serde, sealed_sqlite

KEY = b"reindex-pass-test-key-0123456789"
USERS = {"t1": "alice", "t2": "bob", "t3": "alice"}
IDENTITY_THREAD = "__secure_serde_store__"


class State(TypedDict):
    notes: Annotated[list[str], operator.add]


def _run_graph(saver: SealedSaver) -> None:
    """Three threads, two turns each, every checkpoint tagged with its thread's user."""
    graph = StateGraph(State)
    graph.add_node("note", lambda state: {"notes": [f"n{len(state['notes'])}"]})
    graph.add_edge(START, "note")
    graph.add_edge("note", END)
    app = graph.compile(checkpointer=saver)
    for thread, user in USERS.items():
        config: RunnableConfig = {"configurable": {"thread_id": thread}, "metadata": {"user": user}}
        for turn in range(2):
            app.invoke({"notes": [f"{thread}-{turn}"]}, config)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    with sealed_sqlite(path, env_serde(KEY), indexed_metadata=("user",)) as saver:
        _run_graph(saver)
    return path


def _raw(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row of every table, as the database holds it."""
    with closing(sqlite3.connect(path)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}")) for t in tables}  # noqa: S608


def _key_ids(path: Path) -> Counter[str]:
    """The index key ids the checkpoints' stored tokens name, with the checkpoints under each."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT json_extract(metadata, '$.user') FROM checkpoints WHERE thread_id != ?",
            (IDENTITY_THREAD,),
        )
        return Counter(str(token).split(":")[1] for (token,) in rows)


def _checkpoints(saver: SealedSaver) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for t in saver.list(None):
        found.setdefault(t.config["configurable"]["thread_id"], set()).add(
            t.config["configurable"]["checkpoint_id"]
        )
    return found


def _filtered(saver: SealedSaver) -> dict[str, set[str]]:
    """The checkpoints each user's filter finds, by thread."""
    found: dict[str, set[str]] = {}
    for user in sorted(set(USERS.values())):
        for t in saver.list(None, filter={"user": user}):
            assert USERS[t.config["configurable"]["thread_id"]] == user
            found.setdefault(t.config["configurable"]["thread_id"], set()).add(
                t.config["configurable"]["checkpoint_id"]
            )
    return found


def test_a_dry_run_writes_nothing_and_says_what_it_would_change(db: Path) -> None:
    before = _raw(db)
    with sealed_sqlite(db, env_serde(KEY), indexed_metadata=("user",)) as saver:
        total = sum(len(ids) for ids in _checkpoints(saver).values())
        dry = saver.reindex(dry_run=True, batch_size=2)
    assert _raw(db) == before
    assert (dry.dry_run, dry.changed, dry.scanned, dry.failure_count) == (True, total, total, 0)
    assert (dry.key_id, dry.rotated, dry.complete) == (None, False, False)
    assert f"would re-index {total:,}" in "\n".join(dry.lines())


def test_progress_is_called_after_every_batch(db: Path) -> None:
    seen: list[PassProgress] = []
    with sealed_sqlite(db, env_serde(KEY), indexed_metadata=("user",)) as saver:
        total = sum(len(ids) for ids in _checkpoints(saver).values())
        done = saver.reindex(batch_size=4, progress=seen.append)
    assert done.complete
    # Two scans (the moves, then the check that none is left), each cut into batches of 4.
    batches = -(-total // 4)
    assert len(seen) == 2 * batches
    assert [p.scanned for p in seen[:batches]] == [min(4 * (i + 1), total) for i in range(batches)]
    assert [p.changed for p in seen[:batches]] == [min(4 * (i + 1), total) for i in range(batches)]
    assert seen[-1].changed == total
    assert seen[-1].scanned == 2 * total


class Killed(Exception):
    """Raised from the progress callback: the process dies after the first batch."""


def test_a_pass_killed_after_its_first_batch_finishes_on_a_rerun(db: Path) -> None:
    (old,) = _key_ids(db)

    def die(progress: PassProgress) -> None:
        raise Killed

    with sealed_sqlite(db, env_serde(KEY), indexed_metadata=("user",)) as saver:
        every = _checkpoints(saver)
        by_user = _filtered(saver)
        assert by_user == every
        with pytest.raises(Killed):
            saver.reindex(batch_size=2, progress=die)
    # The first batch moved: two rows under the new key, the rest still under the old one.
    moved = _key_ids(db)
    assert sorted(moved.values()) == [2, sum(len(ids) for ids in every.values()) - 2]
    assert moved[old] > 2

    # Another process, opened afterwards: filters find every row mid-pass, then it resumes.
    with sealed_sqlite(db, env_serde(KEY), indexed_metadata=("user",)) as rerun:
        assert _filtered(rerun) == every
        done = rerun.reindex()
        assert (done.rotated, done.complete, done.dropped) == (False, True, (old,))
        assert done.changed == sum(len(ids) for ids in every.values()) - 2
        assert _filtered(rerun) == every
    (new,) = _key_ids(db)
    assert new == done.key_id
    assert new != old
    with sealed_sqlite(db, env_serde(KEY), indexed_metadata=("user",)) as fresh:
        assert _filtered(fresh) == every


def test_areindex_runs_the_same_batches_on_an_async_only_saver(tmp_path: Path) -> None:
    """AsyncSqliteSaver refuses every sync call: the pass's reads and puts are all awaited."""

    async def run() -> tuple[PassReport, dict[str, set[str]], dict[str, set[str]], int]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "async.db")) as inner:
            saver = SealedSaver(inner, serde=env_serde(KEY), indexed_metadata=("user",))
            graph = StateGraph(State)
            graph.add_node("note", lambda state: {"notes": [f"n{len(state['notes'])}"]})
            graph.add_edge(START, "note")
            app = graph.compile(checkpointer=saver)
            for thread, user in USERS.items():
                config: RunnableConfig = {
                    "configurable": {"thread_id": thread},
                    "metadata": {"user": user},
                }
                await app.ainvoke({"notes": [thread]}, config)
            every = await _afiltered(saver, None)
            done = await saver.areindex(batch_size=3, progress=seen.append)
            return (
                done,
                every,
                await _afiltered(saver, "alice"),
                len(await _afiltered(saver, "bob")),
            )

    seen: list[PassProgress] = []
    done, every, alice, bob = asyncio.run(run())
    total = sum(len(ids) for ids in every.values())
    assert (done.changed, done.complete, len(done.dropped)) == (total, True, 1)
    assert len(seen) == 2 * -(-total // 3)
    assert alice == {t: every[t] for t in ("t1", "t3")}
    assert bob == 1


async def _afiltered(saver: SealedSaver, user: str | None) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    async for t in saver.alist(None, filter=None if user is None else {"user": user}):
        configurable = t.config["configurable"]
        found.setdefault(configurable["thread_id"], set()).add(configurable["checkpoint_id"])
    return found
