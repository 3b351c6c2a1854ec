"""KmsEnvelopeCipher under real LangGraph graphs on SQLite and PostgreSQL, KMS served by moto.

KMS calls are counted with botocore event hooks on the client the cipher
uses, so every number below is a request that really went over HTTP.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import aiosqlite
import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from psycopg.rows import dict_row

from secure_serde import EncryptedSerializer, UnknownCipherError, UnknownKeyError, rewrap
from secure_serde.ciphers import EnvKeyCipher, KmsEnvelopeCipher
from secure_serde.ciphers import _kms_format as fmt
from tests.ciphers.kms_support import KmsCallCounter, new_cmk
from tests.graphs_support import KEY, build_chat_graph, reply_text, transcript

CHECKPOINTS = 2000
THREADS = 50


@pytest.fixture
def counter(kms_client: Any) -> KmsCallCounter:
    return KmsCallCounter(kms_client)


def _say(thread: str, turn: int) -> str:
    return f"{thread}: message {turn}"


def _expected(thread: str, turns: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for turn in range(turns):
        out += [("human", _say(thread, turn)), ("ai", reply_text(turn + 1, _say(thread, turn)))]
    return out


def _turn(graph: Any, thread: str, turn: int) -> None:
    graph.invoke(
        {"messages": [HumanMessage(content=_say(thread, turn))]},
        {"configurable": {"thread_id": thread}},
    )


def _write_until(graph: Any, count: Callable[[], int], threads: int, target: int) -> int:
    """Chat turns round-robin over ``threads`` threads until ``target`` checkpoints exist."""
    turns = 0
    while count() < target:
        for t in range(threads):
            _turn(graph, f"t{t}", turns)
        turns += 1
    return turns


def _read_checkpoints(graph: Any, ids: list[tuple[str, str]], turns: int) -> None:
    """Load each checkpoint through the graph; each must be a prefix of its thread's chat."""
    full = {thread: _expected(thread, turns) for thread, _ in ids}
    for thread, checkpoint_id in ids:
        config = {"configurable": {"thread_id": thread, "checkpoint_id": checkpoint_id}}
        snapshot = graph.get_state(config)
        assert snapshot.config["configurable"]["checkpoint_id"] == checkpoint_id
        got = transcript(snapshot.values.get("messages", []))
        assert got == full[thread][: len(got)]


def _final_transcripts(graph: Any, threads: int, turns: int) -> None:
    for t in range(threads):
        values = graph.get_state({"configurable": {"thread_id": f"t{t}"}}).values
        assert transcript(values["messages"]) == _expected(f"t{t}", turns)


def test_sqlite_2000_checkpoint_writes_then_2000_reads(
    tmp_path: Path, kms_client: Any, counter: KmsCallCounter
) -> None:
    cmk = new_cmk(kms_client)
    counter.reset()
    serde = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
    path = tmp_path / "kms.sqlite"
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn, serde=serde)
        saver.setup()
        graph = build_chat_graph(saver)

        def count() -> int:
            return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])

        turns = _write_until(graph, count, THREADS, CHECKPOINTS)
        assert count() >= CHECKPOINTS
        assert counter.calls == {"GenerateDataKey": 1}
        ids = conn.execute(
            "SELECT thread_id, checkpoint_id FROM checkpoints ORDER BY checkpoint_id LIMIT ?",
            (CHECKPOINTS,),
        ).fetchall()
        _read_checkpoints(graph, ids, turns)
        assert counter.calls == {"GenerateDataKey": 1}  # own data key: read from the cache
        types = {row[0] for row in conn.execute("SELECT type FROM checkpoints")}
        types |= {row[0] for row in conn.execute("SELECT type FROM writes")}
        assert types
        assert all(t.endswith("+kms") for t in types)

        # A restarted process (a new cipher) unwraps that data key once.
        fresh = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
        reread = build_chat_graph(SqliteSaver(conn, serde=fresh))
        _read_checkpoints(reread, ids[:200], turns)
        _final_transcripts(reread, THREADS, turns)
    assert counter.calls == {"GenerateDataKey": 1, "Decrypt": 1}


def test_postgres_2000_checkpoint_writes_then_2000_reads(
    postgres_url: str, kms_client: Any, counter: KmsCallCounter
) -> None:
    cmk = new_cmk(kms_client)
    counter.reset()
    serde = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
    with psycopg.connect(
        postgres_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        saver = PostgresSaver(conn, serde=serde)
        saver.setup()
        graph = build_chat_graph(saver)

        def count() -> int:
            row = conn.execute("SELECT count(*) AS n FROM checkpoints").fetchone()
            assert row is not None
            return int(row["n"])

        turns = _write_until(graph, count, THREADS, CHECKPOINTS)
        assert counter.calls == {"GenerateDataKey": 1}
        rows = conn.execute(
            "SELECT thread_id, checkpoint_id FROM checkpoints ORDER BY checkpoint_id LIMIT %s",
            (CHECKPOINTS,),
        ).fetchall()
        ids = [(row["thread_id"], row["checkpoint_id"]) for row in rows]
        assert len(ids) == CHECKPOINTS
        _read_checkpoints(graph, ids, turns)
        assert counter.calls == {"GenerateDataKey": 1}
        stored = conn.execute(
            "SELECT type FROM checkpoint_blobs WHERE type <> 'empty'"
            " UNION ALL SELECT type FROM checkpoint_writes"
        ).fetchall()
        assert stored
        assert all(row["type"].endswith("+kms") for row in stored)
        blob = conn.execute(
            "SELECT blob FROM checkpoint_blobs WHERE channel = 'messages' LIMIT 1"
        ).fetchone()
        assert blob is not None
        assert fmt.parse_header(blob["blob"]).cmk_id == fmt.cmk_id(cmk)
        assert b"message 0" not in bytes(blob["blob"])

        fresh = PostgresSaver(
            conn, serde=EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
        )
        reread = build_chat_graph(fresh)
        _read_checkpoints(reread, ids[:200], turns)
        _final_transcripts(reread, THREADS, turns)
    assert counter.calls == {"GenerateDataKey": 1, "Decrypt": 1}


async def test_async_sqlite_saver_warmed_cipher_makes_no_kms_call_on_the_loop(
    tmp_path: Path, kms_client: Any, counter: KmsCallCounter
) -> None:
    cmk = new_cmk(kms_client)
    loop_thread = threading.get_ident()
    call_threads: list[int] = []
    kms_client.meta.events.register(
        "before-call.kms.*", lambda **_: call_threads.append(threading.get_ident())
    )

    async def run(cipher: KmsEnvelopeCipher, path: Path) -> None:
        async with aiosqlite.connect(path) as conn:
            graph = build_chat_graph(AsyncSqliteSaver(conn, serde=EncryptedSerializer(cipher)))
            for turn in range(3):
                for t in range(4):
                    config: RunnableConfig = {"configurable": {"thread_id": f"t{t}"}}
                    msg = HumanMessage(content=_say(f"t{t}", turn))
                    await graph.ainvoke({"messages": [msg]}, config)
            for t in range(4):
                state = await graph.aget_state({"configurable": {"thread_id": f"t{t}"}})
                assert transcript(state.values["messages"]) == _expected(f"t{t}", 3)

    # Cold: the first write pays one GenerateDataKey, on the event loop's thread.
    counter.reset()
    await run(KmsEnvelopeCipher(cmk, client=kms_client), tmp_path / "cold.sqlite")
    assert counter.calls == {"GenerateDataKey": 1}
    assert call_threads == [loop_thread]

    # Warmed off the loop at start-up: the graph's run makes no KMS call at all.
    warm = KmsEnvelopeCipher(cmk, client=kms_client)
    await warm.awarm()
    counter.reset()
    call_threads.clear()
    await run(warm, tmp_path / "warm.sqlite")
    assert counter.total == 0
    assert call_threads == []


def _types(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT type FROM checkpoints UNION ALL SELECT type FROM writes")
    return [row[0] for row in rows]


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite"


def test_an_env_key_store_moves_to_kms(
    sqlite_path: Path, kms_client: Any, counter: KmsCallCounter
) -> None:
    cmk = new_cmk(kms_client)
    threads = 4
    with closing(sqlite3.connect(sqlite_path, check_same_thread=False)) as conn:
        old = build_chat_graph(SqliteSaver(conn, serde=EncryptedSerializer(EnvKeyCipher(KEY))))
        for turn in range(3):
            for t in range(threads):
                _turn(old, f"t{t}", turn)
        env_rows = len(_types(conn))
        assert all(t.endswith("+aesgcm") for t in _types(conn))

        # Deploy: KMS encrypts, the env key still reads.
        moving = EncryptedSerializer(
            KmsEnvelopeCipher(cmk, client=kms_client), decrypt_only=[EnvKeyCipher(KEY)]
        )
        graph = build_chat_graph(SqliteSaver(conn, serde=moving))
        _final_transcripts(graph, threads, 3)
        for t in range(threads):
            _turn(graph, f"t{t}", 3)
        _final_transcripts(graph, threads, 4)
        types = _types(conn)
        assert sum(t.endswith("+aesgcm") for t in types) == env_rows
        assert sum(t.endswith("+kms") for t in types) == len(types) - env_rows > 0

        # Without the env key, the old checkpoints are refused with a typed error.
        kms_only = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
        kms_graph = build_chat_graph(SqliteSaver(conn, serde=kms_only))
        with pytest.raises(UnknownCipherError, match="aesgcm"):
            list(kms_graph.get_state_history({"configurable": {"thread_id": "t0"}}))

    # Rewrap moves every old row under the CMK; a second run has nothing to do.
    report = rewrap(sqlite_path, moving)
    assert report.ok
    assert report.rewrapped == env_rows
    assert report.sources == {"aesgcm/" + EnvKeyCipher(KEY).key_id: env_rows}
    assert rewrap(sqlite_path, moving).rewrapped == 0
    with closing(sqlite3.connect(sqlite_path, check_same_thread=False)) as conn:
        assert all(t.endswith("+kms") for t in _types(conn))
        graph = build_chat_graph(SqliteSaver(conn, serde=kms_only))
        _final_transcripts(graph, threads, 4)
        history = list(graph.get_state_history({"configurable": {"thread_id": "t1"}}))
        assert len(history) == 4 * 3
    assert counter.calls["GenerateDataKey"] <= 3


def test_changing_cmk_on_a_graph(sqlite_path: Path, kms_client: Any) -> None:
    old_cmk, new_cmk_arn = new_cmk(kms_client), new_cmk(kms_client)
    threads = 3
    with closing(sqlite3.connect(sqlite_path, check_same_thread=False)) as conn:
        old = EncryptedSerializer(KmsEnvelopeCipher(old_cmk, client=kms_client))
        graph = build_chat_graph(SqliteSaver(conn, serde=old))
        for turn in range(2):
            for t in range(threads):
                _turn(graph, f"t{t}", turn)
        old_rows = len(_types(conn))

        # The new CMK becomes primary, the old one decrypt-only.
        rotated = EncryptedSerializer(
            KmsEnvelopeCipher(new_cmk_arn, client=kms_client, decrypt_kms_keys=[old_cmk])
        )
        graph = build_chat_graph(SqliteSaver(conn, serde=rotated))
        _final_transcripts(graph, threads, 2)
        for t in range(threads):
            _turn(graph, f"t{t}", 2)
        _final_transcripts(graph, threads, 3)
        blobs = [row[0] for row in conn.execute("SELECT checkpoint FROM checkpoints")]
        by_cmk = {fmt.cmk_id(old_cmk): 0, fmt.cmk_id(new_cmk_arn): 0}
        for blob in blobs:
            by_cmk[fmt.parse_header(blob).cmk_id] += 1
        assert by_cmk[fmt.cmk_id(old_cmk)] == 2 * 3 * threads
        assert by_cmk[fmt.cmk_id(new_cmk_arn)] == 3 * threads

    # A dry run only reads: it must need neither GenerateDataKey nor its IAM permission.
    counter = KmsCallCounter(kms_client)
    planned = rewrap(
        sqlite_path,
        KmsEnvelopeCipher(new_cmk_arn, client=kms_client, decrypt_kms_keys=[old_cmk]),
        dry_run=True,
    )
    assert planned.rewrapped == old_rows
    assert counter.calls["GenerateDataKey"] == 0
    assert counter.calls["Decrypt"] >= 1

    report = rewrap(sqlite_path, rotated)
    assert report.ok
    assert report.rewrapped == old_rows
    with closing(sqlite3.connect(sqlite_path, check_same_thread=False)) as conn:
        assert report.current == len(_types(conn)) - old_rows
        new_only = EncryptedSerializer(KmsEnvelopeCipher(new_cmk_arn, client=kms_client))
        graph = build_chat_graph(SqliteSaver(conn, serde=new_only))
        _final_transcripts(graph, threads, 3)
        assert len(list(graph.get_state_history({"configurable": {"thread_id": "t0"}}))) == 9
        # Nothing is left under the old CMK, so dropping it loses nothing.
        cells = [row[0] for row in conn.execute("SELECT checkpoint FROM checkpoints")]
        cells += [row[0] for row in conn.execute("SELECT value FROM writes")]
        assert {fmt.parse_header(cell).cmk_id for cell in cells} == {fmt.cmk_id(new_cmk_arn)}
        stale = EncryptedSerializer(KmsEnvelopeCipher(old_cmk, client=kms_client))
        stale_graph = build_chat_graph(SqliteSaver(conn, serde=stale))
        for t in range(threads):
            with pytest.raises(UnknownKeyError):
                stale_graph.get_state({"configurable": {"thread_id": f"t{t}"}})
