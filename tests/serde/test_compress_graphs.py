"""Compression under encryption on real graphs and savers: SQLite, PostgreSQL, strict msgpack.

On PostgreSQL both langgraph's saver and secure_serde's sealed one (`SealedSaver` around it),
whose type tags are those inside the sealed cells the stock saver holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from secure_serde import CompressedSerializer, EncryptedSerializer, PickleFallbackSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import PANDAS
from secure_serde.savers.postgres import PostgresSaver as SealedPostgresSaver
from secure_serde.sealing import cell_layout as _cell
from tests.fixtures_services import saver_connection
from tests.graphs_support import (
    KEY,
    Profile,
    build_chat_graph,
    build_strict_graph,
    reply_text,
    transcript,
)
from tests.strict_support import run_strict_report

TURNS = 12
# A different sentence each turn, about 400 characters, so the state is worth compressing.
SENTENCE = "turn {turn}: the checkpoint of a long conversation grows with every message; "


def message(turn: int) -> str:
    return (SENTENCE.format(turn=turn) * 6)[:400]


def expected_transcript(turns: int) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for turn in range(1, turns + 1):
        pairs += [("human", message(turn)), ("ai", reply_text(turn, message(turn)))]
    return pairs


def cfg(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def run_chat(saver: Any, thread: str, turns: int = TURNS) -> Any:
    graph = build_chat_graph(saver)
    for turn in range(1, turns + 1):
        graph.invoke({"messages": [HumanMessage(content=message(turn))]}, cfg(thread))
    return graph


def compressed_serde() -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=KEY, compress=True)


def check_tags(tags: list[str]) -> None:
    """Every value encrypted; the large ones compressed under the cipher, the small ones not."""
    assert tags
    assert all(tag.endswith("+aesgcm") for tag in tags), tags
    assert "msgpack+zstd+aesgcm" in tags, tags
    # Small values (the branch markers' None, say) stay uncompressed.
    assert any("zstd" not in tag.split("+") for tag in tags), tags


# --- SQLite --------------------------------------------------------------------------------


def test_chat_graph_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "chat.sqlite"
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        graph = run_chat(SqliteSaver(conn, serde=compressed_serde()), "t1")
        state = graph.get_state(cfg("t1"))
        assert transcript(state.values["messages"]) == expected_transcript(TURNS)
        assert len(list(graph.get_state_history(cfg("t1")))) == 3 * TURNS
    with closing(sqlite3.connect(path)) as conn:
        tags = [t for (t,) in conn.execute("SELECT type FROM checkpoints")]
        tags += [t for (t,) in conn.execute("SELECT type FROM writes")]
        raw = b"".join(b for (b,) in conn.execute("SELECT checkpoint FROM checkpoints"))
    check_tags(tags)
    assert b"long conversation" not in raw
    # A new process (a new serializer, same key) reads the whole history back.
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        graph = build_chat_graph(SqliteSaver(conn, serde=compressed_serde()))
        assert transcript(graph.get_state(cfg("t1")).values["messages"]) == (
            expected_transcript(TURNS)
        )


def test_turning_compression_on_midway_keeps_the_thread_readable(tmp_path: Path) -> None:
    path = tmp_path / "mixed.sqlite"
    plain = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    zlib_serde = EncryptedSerializer(EnvKeyCipher(KEY), CompressedSerializer(algorithm="zlib"))
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        run_chat(SqliteSaver(conn, serde=plain), "m", turns=3)
        graph = build_chat_graph(SqliteSaver(conn, serde=zlib_serde))
        graph.invoke({"messages": [HumanMessage(content=message(4))]}, cfg("m"))
        graph = build_chat_graph(SqliteSaver(conn, serde=compressed_serde()))
        graph.invoke({"messages": [HumanMessage(content=message(5))]}, cfg("m"))
        history = list(graph.get_state_history(cfg("m")))
        assert transcript(history[0].values["messages"]) == expected_transcript(5)
        tags = {t for (t,) in conn.execute("SELECT type FROM checkpoints")}
    assert {"msgpack+aesgcm", "msgpack+zlib+aesgcm", "msgpack+zstd+aesgcm"} <= tags


# --- PostgreSQL ----------------------------------------------------------------------------


def blob_tags(url: str, *, sealed: bool) -> list[str]:
    if sealed:
        # The sealed cells the stock saver holds, read by a bare one: each names its type tag.
        with saver_connection(url) as conn:
            tuples = list(StockPostgresSaver(conn).list(None))
        tags = [
            _cell.unpack(v, _cell.VALUE).type_tag
            for t in tuples
            for v in t.checkpoint["channel_values"].values()
        ]
        tags += [
            _cell.unpack(v, _cell.WRITE).type_tag
            for t in tuples
            for _, _, v in t.pending_writes or ()
        ]
        return tags
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT type FROM checkpoint_blobs WHERE type <> 'empty'").fetchall()
        rows += conn.execute("SELECT type FROM checkpoint_writes").fetchall()
    return [t for (t,) in rows]


@pytest.fixture(params=["stock", "sealed"])
def pg_saver(request: pytest.FixtureRequest, postgres_url: str) -> Iterator[Any]:
    cls = StockPostgresSaver if request.param == "stock" else SealedPostgresSaver
    with saver_connection(postgres_url) as conn:
        saver = cls(conn, serde=compressed_serde())
        saver.setup()
        yield saver


def test_chat_graph_on_postgres(pg_saver: Any, postgres_url: str) -> None:
    graph = run_chat(pg_saver, "pg")
    assert transcript(graph.get_state(cfg("pg")).values["messages"]) == (expected_transcript(TURNS))
    tags = blob_tags(postgres_url, sealed=isinstance(pg_saver, SealedPostgresSaver))
    check_tags(tags)
    with psycopg.connect(postgres_url) as conn:
        (dump,) = conn.execute(
            "SELECT string_agg(encode(blob, 'escape'), '') FROM checkpoint_blobs"
        ).fetchone() or ("",)
    assert "long conversation" not in (dump or "")
    # The same store, read by a fresh saver and serializer.
    with saver_connection(postgres_url) as conn:
        again = build_chat_graph(type(pg_saver)(conn, serde=compressed_serde()))
        messages = again.get_state(cfg("pg")).values["messages"]
        assert transcript(messages) == expected_transcript(TURNS)


# --- strict msgpack, in a subprocess (langgraph reads LANGGRAPH_STRICT_MSGPACK on import) -------


def strict_report() -> dict[str, Any]:
    """Run the strict graph on InMemorySaver with compression in several compositions."""
    from langgraph.checkpoint.serde import _msgpack

    big = Profile(name="Ada", tags=[f"tag-{i}" for i in range(200)])
    serdes: dict[str, Any] = {
        "compressed": CompressedSerializer(),
        "compressed_encrypted": EncryptedSerializer(EnvKeyCipher(KEY), CompressedSerializer()),
        "drop_in": EncryptedSerializer.from_pycryptodome_aes(key=KEY, compress=True),
        "pickle_fallback": EncryptedSerializer(
            EnvKeyCipher(KEY), CompressedSerializer(PickleFallbackSerializer(allowed=[PANDAS]))
        ),
    }
    report: dict[str, Any] = {"strict": _msgpack.STRICT_MSGPACK_ENABLED, "runs": {}}
    for name, serde in serdes.items():
        saver = InMemorySaver(serde=serde)
        graph = build_strict_graph(saver)
        config = cfg(f"strict-{name}")
        graph.invoke({"profile": big}, config)
        graph.invoke(Command(resume=True), config)
        values = graph.get_state(config).values
        assert isinstance(graph.checkpointer, InMemorySaver)
        used = graph.checkpointer.serde
        inner = getattr(used, "serde", used)
        report["runs"][name] = {
            "profile_type": type(values["profile"]).__name__,
            "profile_tags": len(values["profile"].tags),
            "greeting": values["greeting"],
            "serde_rebuilt": used is not serde,
            "inner_type": type(inner).__name__,
            "tags": sorted({tag for tag, _ in saver.blobs.values() if tag != "empty"}),
        }
    return report


def test_strict_msgpack_keeps_the_allowlist_through_compression() -> None:
    run = run_strict_report(__name__, "strict_report", log_warnings=True, timeout=180)
    assert "msgpack allowlist" not in run.stderr, run.stderr
    report = run.report
    for name, run in report["runs"].items():
        assert run["profile_type"] == "Profile", name
        assert run["profile_tags"] == 200, name
        assert run["greeting"] == "hello Ada (Profile)", name
        assert run["serde_rebuilt"] is True, name
        suffix = "" if name == "compressed" else "+aesgcm"
        assert f"msgpack+zstd{suffix}" in run["tags"], (name, run["tags"])
    assert report["runs"]["compressed_encrypted"]["inner_type"] == "CompressedSerializer"
    assert report["runs"]["pickle_fallback"]["inner_type"] == "CompressedSerializer"
