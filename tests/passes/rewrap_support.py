"""A real graph, real savers and store probes shared by the rewrap and rotation tests.

The graph has a message history, a list channel and an ``interrupt()`` in every turn, so a
store holds checkpoints, channel blobs (PostgreSQL), ordinary writes and ``__interrupt__``
writes. Each thread's last turn is left waiting at its interrupt, so resuming it is part of
"the graph resumes".
"""

from __future__ import annotations

import hashlib
import operator
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Command, StateSnapshot, interrupt
from typing_extensions import TypedDict

from secure_serde import EncryptedSerializer, RetiredKeyError, UnknownKeyError
from secure_serde.ciphers import KeyRotationCipher
from secure_serde.stores import Cell, open_store
from tests.graphs_support import linear_graph
from tests.serdes_support import stock_postgres, stock_sqlite

# Raw 32-character keys: the form LANGGRAPH_AES_KEY takes in drop-in deployments.
KEY_A = "rotation-test-key-A-0123456789ab"
KEY_B = "rotation-test-key-B-0123456789ab"
KEY_C = "rotation-test-key-C-0123456789ab"
SECRET = "SSN 078-05-1120"
REPO_ROOT = Path(__file__).resolve().parents[2]


class ChatState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approvals: Annotated[list[str], operator.add]


def _reply(state: ChatState) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"reply to {last.content} ({SECRET})")]}


def _review(state: ChatState) -> dict[str, Any]:
    verdict = interrupt({"draft": state["messages"][-1].content})
    return {"approvals": [str(verdict)]}


ChatGraph = CompiledStateGraph[ChatState, None, ChatState, ChatState]


def build_graph(checkpointer: Checkpointer) -> ChatGraph:
    nodes = ("reply", _reply), ("review", _review)
    return linear_graph(ChatState, *nodes, checkpointer=checkpointer)


def config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def run_turns(graph: ChatGraph, thread_id: str, turns: int, *, start: int = 0) -> None:
    """``turns`` human turns; each is approved, except the last, left at its interrupt."""
    cfg = config(thread_id)
    for turn in range(start, start + turns):
        if graph.get_state(cfg).next:
            graph.invoke(Command(resume=f"ok {turn - 1}"), cfg)
        graph.invoke({"messages": [HumanMessage(content=f"{thread_id} turn {turn}")]}, cfg)


def resume(graph: ChatGraph, thread_id: str, verdict: str) -> None:
    graph.invoke(Command(resume=verdict), config(thread_id))


def history(graph: ChatGraph, thread_id: str) -> list[StateSnapshot]:
    """Every StateSnapshot of a thread, newest first: values, config, metadata, tasks."""
    return list(graph.get_state_history(config(thread_id)))


def histories(graph: ChatGraph, threads: Sequence[str]) -> dict[str, list[StateSnapshot]]:
    return {thread: history(graph, thread) for thread in threads}


def rotation_serde(
    keys: Mapping[str, str], primary: str, *, retired: Sequence[str] = ()
) -> EncryptedSerializer:
    return EncryptedSerializer(KeyRotationCipher(keys, primary, retired=retired))


def key_id(key: str) -> str:
    return KeyRotationCipher({"k": key}, "k").primary_key_id


# ---------------------------------------------------------------------------------------------
# Savers


@contextmanager
def sqlite_graph(path: Path, serde: SerializerProtocol) -> Iterator[ChatGraph]:
    with stock_sqlite(path, serde) as saver:
        yield build_graph(saver)


@contextmanager
def postgres_graph(url: str, serde: SerializerProtocol) -> Iterator[ChatGraph]:
    with stock_postgres(url, serde) as saver:
        yield build_graph(saver)


# ---------------------------------------------------------------------------------------------
# Looking at the stored cells directly


def cells(location: str | Path) -> list[Cell]:
    with open_store(str(location)) as store:
        return [cell for cell in store.iter_cells() if cell.data is not None]


def header_key_ids(location: str | Path) -> dict[str, int]:
    """How many cells carry each v1 header key id ("aes"/"plain" for the other kinds)."""
    counts: dict[str, int] = {}
    for cell in cells(location):
        tag = cell.type_tag or ""
        assert cell.data is not None
        if tag.endswith("+aesgcm"):
            name = cell.data[1:5].hex()
        elif tag.endswith("+aes"):
            name = "aes"
        else:
            name = "plain"
        counts[name] = counts.get(name, 0) + 1
    return counts


def survey(
    location: str | Path, serde: EncryptedSerializer
) -> tuple[dict[tuple[Any, ...], bytes], dict[str, int]]:
    """In one pass: each cell's identity -> digest of (inner type tag, plaintext), and how many
    cells each v1 key id holds.

    Decrypts without deserializing, so it is cheap enough to run after every kill.
    """
    by_name = {name: c for c in serde.decrypt_ciphers for name in c.cipher_names}
    digests: dict[tuple[Any, ...], bytes] = {}
    counts: dict[str, int] = {}
    sha256 = hashlib.sha256
    for cell in cells(location):
        tag, data = cell.type_tag, cell.data
        assert tag is not None
        assert data is not None
        inner, _, name = tag.rpartition("+")
        plaintext = by_name[name].decrypt_with_tag(name, data, inner)
        digests[(cell.ref.table, cell.ref.key)] = sha256(inner.encode() + plaintext).digest()
        kid = data[1:5].hex() if name == "aesgcm" else name
        counts[kid] = counts.get(kid, 0) + 1
    return digests, counts


def fingerprints(location: str | Path, serde: EncryptedSerializer) -> dict[tuple[Any, ...], bytes]:
    return survey(location, serde)[0]


def decoded(
    location: str | Path, serde: SerializerProtocol, *, stride: int = 1
) -> dict[tuple[Any, ...], Any]:
    """Each cell's identity -> its fully deserialized value (every ``stride``-th cell only)."""
    # cells() keeps only cells with data; a None type tag exists only in damaged rows.
    return {
        (cell.ref.table, cell.ref.key): serde.loads_typed((cell.type_tag, cell.data))  # type: ignore[arg-type]
        for cell in cells(location)[::stride]
    }


# ---------------------------------------------------------------------------------------------
# The CLI, as a subprocess with its own environment


@dataclass(frozen=True)
class KeyEnv:
    """LANGGRAPH_AES_KEY plus a keyring file, as an operator would configure them."""

    env_key: str | None
    keyring: Mapping[str, Any] | None

    def environ(self, tmp: Path) -> dict[str, str]:
        import json

        env = {k: v for k, v in os.environ.items() if k not in ("LANGGRAPH_AES_KEY",)}
        env.pop("SECURE_SERDE_KEYRING_FILE", None)
        env["PYTHONPATH"] = str(REPO_ROOT)
        if self.env_key is not None:
            env["LANGGRAPH_AES_KEY"] = self.env_key
        if self.keyring is not None:
            path = tmp / f"keyring-{abs(hash(json.dumps(self.keyring, sort_keys=True)))}.json"
            path.write_text(json.dumps(self.keyring))
            path.chmod(0o600)  # keyring files must be private to their owner
            env["SECURE_SERDE_KEYRING_FILE"] = str(path)
        return env


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "secure_serde.cli", *args]


def run_cli(
    keys: KeyEnv, tmp: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args),
        env=keys.environ(tmp),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# ---------------------------------------------------------------------------------------------
# Tink's staged rotation, on any store


THREADS = ("t0", "t1", "t2", "t3")
TURNS = 3
A_ONLY = {"a": KEY_A}
A_AND_B = {"a": KEY_A, "b": KEY_B}


def rotation_matrix(
    open_graph: Callable[[EncryptedSerializer], AbstractContextManager[Any]],
    location: str | Path,
    rewrap_step: Callable[[EncryptedSerializer], None],
) -> None:
    """Write under A; add B decrypt-only; promote B; rewrap; retire A; drop A.

    At every stage the graph, configured for that stage, reads every thread's full history
    exactly as it was, then resumes one thread's pending interrupt and runs one more turn,
    whose new rows join the reference history for the following stages.
    """
    a_id, b_id = key_id(KEY_A), key_id(KEY_B)
    stage1 = rotation_serde(A_ONLY, "a")
    stage2 = rotation_serde(A_AND_B, "a")
    stage3 = rotation_serde(A_AND_B, "b")
    stage5 = rotation_serde(A_AND_B, "b", retired=["a"])
    stage6 = rotation_serde({"b": KEY_B}, "b")

    with open_graph(stage1) as graph:
        for thread in THREADS:
            run_turns(graph, thread, TURNS)
        reference = histories(graph, THREADS)
    assert set(header_key_ids(location)) == {a_id}

    def stage(serde: EncryptedSerializer, number: int) -> None:
        thread = THREADS[number % len(THREADS)]
        with open_graph(serde) as graph:
            assert histories(graph, THREADS) == reference, f"stage {number}: history differs"
            resume(graph, thread, f"stage {number}")
            run_turns(graph, thread, 1, start=TURNS + number)
            reference.update(histories(graph, THREADS))
            assert reference[thread][0].values["approvals"][-1] == f"stage {number}"

    stage(stage1, 1)
    stage(stage2, 2)
    assert set(header_key_ids(location)) == {a_id}, "B is decrypt-only at stage 2"
    stage(stage3, 3)
    mixed = header_key_ids(location)
    assert set(mixed) == {a_id, b_id}, mixed
    # An instance still on the stage-2 configuration reads what stage 3 wrote under B:
    # that is why B is deployed decrypt-only everywhere before it is promoted.
    with open_graph(stage2) as graph:
        assert histories(graph, THREADS) == reference
    # Retiring A before the rewrap would lock rows out, by name.
    with open_graph(stage5) as graph, pytest.raises(RetiredKeyError, match=a_id):
        histories(graph, THREADS)

    rewrap_step(stage3)
    after = header_key_ids(location)
    assert after == {b_id: sum(mixed.values())}, after
    stage(stage3, 4)
    stage(stage5, 5)
    stage(stage6, 6)
    with open_graph(rotation_serde(A_ONLY, "a")) as graph, pytest.raises(UnknownKeyError):
        histories(graph, THREADS)


# ---------------------------------------------------------------------------------------------
# Big stores, fast: a few real graph threads, cloned under new thread ids


TEMPLATES = tuple(f"tpl-{i}" for i in range(4))
_SQLITE_DATA = {"checkpoints": "checkpoint", "writes": "value"}


def clone_name(thread_id: str, copy: int) -> str:
    return f"{thread_id}~{copy:05d}"


def build_sqlite_store(path: Path, serde: EncryptedSerializer, copies: int, turns: int = 5) -> int:
    """Run the graph for `TEMPLATES`, then clone every row ``copies`` times; return the row count.

    Each clone is a valid, resumable thread: its rows are the template's, re-sealed (fresh
    nonce) under the template's inner type tag, under a new thread id, written with
    ``executemany`` in the stock schema.
    """
    with sqlite_graph(path, serde) as graph:
        for thread in TEMPLATES:
            run_turns(graph, thread, turns)
    cipher = serde.cipher
    conn = sqlite3.connect(path)
    try:
        for table, data_col in _SQLITE_DATA.items():
            cursor = conn.execute(f"SELECT * FROM {table}")  # noqa: S608
            columns = [d[0] for d in cursor.description]
            type_at, data_at = columns.index("type"), columns.index(data_col)
            opened = []
            for row in cursor.fetchall():
                inner, _, name = row[type_at].rpartition("+")
                opened.append((row, inner, cipher.decrypt_with_tag(name, row[data_at], inner)))
            insert = (
                f"INSERT INTO {table} ({', '.join(columns)})"  # noqa: S608
                f" VALUES ({', '.join('?' for _ in columns)})"
            )
            for copy in range(copies):
                rows = []
                for row, inner, plaintext in opened:
                    clone = list(row)
                    clone[0] = clone_name(row[0], copy)
                    clone[data_at] = cipher.encrypt_with_tag(plaintext, inner)[1]
                    rows.append(clone)
                conn.executemany(insert, rows)
        conn.commit()
        return sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _SQLITE_DATA)  # noqa: S608
    finally:
        conn.close()


def clone_postgres_threads(url: str, copies: int) -> int:
    """Clone every thread of a PostgreSQL store ``copies`` times in SQL; return the cell count.

    The clones share their template's ciphertexts byte for byte (same key, same nonce): fine
    for a test store, and rewrap seals every row afresh anyway.
    """
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_name = %s ORDER BY ordinal_position",
                    (table,),
                )
            ]
            picked = ", ".join(
                "t.thread_id || '~' || lpad(n::text, 5, '0')" if c == "thread_id" else f"t.{c}"
                for c in columns
            )
            conn.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked}"  # noqa: S608
                f" FROM {table} t, generate_series(0, %s) AS n WHERE t.thread_id NOT LIKE '%%~%%'",
                (copies - 1,),
            )
        row = conn.execute(
            "SELECT (SELECT count(*) FROM checkpoint_blobs WHERE blob IS NOT NULL)"
            " + (SELECT count(*) FROM checkpoint_writes)"
        ).fetchone()
        assert row is not None
        return int(row[0])
