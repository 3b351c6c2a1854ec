"""``secure-serde inspect``: decrypted checkpoints and histories, checked against LangGraph itself.

Stores are written by real graphs: a chat graph with an interrupt in every turn (several
threads), the canary graph (a subgraph, an interrupt, a DeltaChannel, secrets in config), and a
fan-out graph (``Send`` tasks, a join edge, a tool call, an interrupt). For every checkpoint the
CLI's output is compared with what ``graph.get_state_history()`` says: the order, the values,
the metadata and ``next``, which the CLI derives without the graph. A store secure_serde 0.3's
sealed saver wrote is the frozen one of tests/vectors/v03/, with what ``get_state_history()``
said of it when it was written.
"""

from __future__ import annotations

import json
import operator
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Command, Send, interrupt
from typing_extensions import TypedDict

from secure_serde.cli import main
from secure_serde.cli._pretty import to_jsonable
from tests import canary_support as canary
from tests import v03_fixtures as v03
from tests.cli.cli_support import run_console_script, run_main
from tests.fixtures_services import saver_connection
from tests.graphs_support import linear_graph
from tests.passes.rewrap_support import KEY_A, SECRET, rotation_serde, run_turns
from tests.passes.rewrap_support import build_graph as build_chat_graph

SERDE_A = {"env": KEY_A}
CHAT_THREADS = ("chat-1", "chat-2")


# ---------------------------------------------------------------------------------------------
# A fan-out graph: two parallel starts joined, Send tasks, a tool call, an interrupt


class FanState(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    messages: Annotated[list[AnyMessage], add_messages]
    x: int


def _left(state: FanState) -> dict[str, Any]:
    return {"items": ["left"]}


def _right(state: FanState) -> dict[str, Any]:
    call = {"name": "lookup", "args": {"query": "fan"}, "id": "call-1"}
    return {"items": ["right"], "messages": [AIMessage(content="", tool_calls=[call])]}


def _join(state: FanState) -> dict[str, Any]:
    return {"items": ["joined"]}


def _fan(state: FanState) -> list[Send]:
    return [Send("worker", {"x": i}) for i in range(3)]


def _worker(state: FanState) -> dict[str, Any]:
    return {"items": [f"worker-{state['x']}"]}


def _ask(state: FanState) -> dict[str, Any]:
    return {"items": [str(interrupt("continue?"))]}


def build_fan_graph(
    checkpointer: Checkpointer,
) -> CompiledStateGraph[FanState, None, FanState, FanState]:
    builder = StateGraph(FanState)
    for name, node in (
        ("left", _left),
        ("right", _right),
        ("join", _join),
        ("worker", _worker),
        ("ask", _ask),
    ):
        builder.add_node(name, node)
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    builder.add_edge(["left", "right"], "join")
    builder.add_conditional_edges("join", _fan, ["worker"])
    builder.add_edge("worker", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=checkpointer)


def run_fan(graph: Any, thread_id: str) -> None:
    cfg = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"items": []}, cfg)
    graph.invoke(Command(resume="yes"), cfg)


# ---------------------------------------------------------------------------------------------
# Stores and the CLI


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SECURE_SERDE_KEYRING_FILE", "SECURE_SERDE_KMS_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)


class Graphs:
    """The compiled graphs on one saver, to ask LangGraph what each checkpoint holds."""

    def __init__(self, saver: Any) -> None:
        self.chat = build_chat_graph(saver)
        self.canary = canary.build_canary_graph(saver)
        self.fan = build_fan_graph(saver)


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inspect") / "graphs.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=rotation_serde(SERDE_A, "env"))
        saver.setup()
        graphs = Graphs(saver)
        run_turns(graphs.chat, CHAT_THREADS[0], 3)
        run_turns(graphs.chat, CHAT_THREADS[1], 1)
        canary.run_sync(graphs.canary, "canary")
        run_fan(graphs.fan, "fan")
    finally:
        conn.close()
    return path


@pytest.fixture
def store(sqlite_template: Path, tmp_path: Path) -> Path:
    path = tmp_path / "graphs.sqlite"
    shutil.copy(sqlite_template, path)
    return path


@pytest.fixture
def graphs(store: Path) -> Iterator[Graphs]:
    conn = sqlite3.connect(f"{store.as_uri()}?mode=ro", uri=True, check_same_thread=False)
    saver = SqliteSaver(conn, serde=rotation_serde(SERDE_A, "env"))
    saver.is_setup = True
    yield Graphs(saver)
    conn.close()


def inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return run_main(capsys, "inspect", *args)


def inspect_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = inspect(capsys, *args, "--json")
    assert out, err
    return code, json.loads(out)


def normal(value: Any) -> Any:
    """JSON's view of a value: what to compare the CLI's JSON output with."""
    return json.loads(json.dumps(to_jsonable(value)))


def check_history(
    capsys: pytest.CaptureFixture[str], store: str, graph: Any, config: dict[str, Any], *extra: str
) -> list[Any]:
    """The CLI's history of ``config``'s thread and namespace equals LangGraph's, entry by entry."""
    history = []
    for snapshot in graph.get_state_history(config):
        parent = snapshot.parent_config
        history.append(
            {
                "checkpoint_id": snapshot.config["configurable"]["checkpoint_id"],
                "parent_checkpoint_id": parent["configurable"]["checkpoint_id"] if parent else None,
                "next": sorted(snapshot.next),
                "metadata": normal(snapshot.metadata),
                "values": normal(snapshot.values),
            }
        )
    return check_entries(capsys, store, config, history, *extra)


def check_entries(
    capsys: pytest.CaptureFixture[str],
    store: str,
    config: dict[str, Any],
    history: list[dict[str, Any]],
    *extra: str,
) -> list[Any]:
    """The CLI's history equals ``history``: LangGraph's, in the form of `v03_fixtures.history`
    (compared by `v03_fixtures.assert_shown`)."""
    assert len(history) > 1
    conf = config["configurable"]
    code, document = inspect_json(
        capsys, store, "--thread", conf["thread_id"], "--ns", conf.get("checkpoint_ns", ""), *extra
    )
    assert code == 0
    entries: list[Any] = document["checkpoints"]
    v03.assert_shown(entries, history)
    return entries


# ---------------------------------------------------------------------------------------------
# SQLite


def test_histories_match_langgraph(
    keys: None, store: Path, graphs: Graphs, capsys: pytest.CaptureFixture[str]
) -> None:
    for thread in CHAT_THREADS:
        check_history(capsys, str(store), graphs.chat, {"configurable": {"thread_id": thread}})
    entries = check_history(capsys, str(store), graphs.fan, {"configurable": {"thread_id": "fan"}})
    # The fan-out's step runs three Send tasks, and the join waits for both of its sources.
    assert ["worker", "worker", "worker"] in [e["next"] for e in entries]
    assert ["join"] in [e["next"] for e in entries]
    assert ["left", "right"] in [e["next"] for e in entries]
    canary_entries = check_history(
        capsys, str(store), graphs.canary, {"configurable": {"thread_id": "canary"}}
    )
    # Between snapshots the DeltaChannel is shown as a snapshot plus the writes since.
    assert any(e["delta_channels"] for e in canary_entries)
    assert any("deltas" in e["values"] for e in canary_entries)


def test_subgraph_namespace_history(
    keys: None, store: Path, graphs: Graphs, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document = inspect_json(capsys, str(store), "--thread", "canary", "--limit", "1")
    assert code == 0
    [child_ns] = [ns for ns in document["namespaces"] if ns.startswith("child:")]
    config = {"configurable": {"thread_id": "canary", "checkpoint_ns": child_ns}}
    entries = check_history(capsys, str(store), graphs.canary, config)
    assert any(e["values"].get("sub_count") == canary.SUB_INT for e in entries)
    assert any(e["next"] == ["confirm"] for e in entries)


def test_interrupted_thread_text(
    keys: None, store: Path, graphs: Graphs, capsys: pytest.CaptureFixture[str]
) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": CHAT_THREADS[1]}}
    snapshot = graphs.chat.get_state(config)
    assert snapshot.next == ("review",)
    [task] = snapshot.tasks
    checkpoint_id = snapshot.config["configurable"]["checkpoint_id"]
    code, out, err = inspect(
        capsys, str(store), "--thread", CHAT_THREADS[1], "--checkpoint", checkpoint_id
    )
    assert code == 0, err
    assert f"== checkpoint {checkpoint_id}\n" in out
    assert "  next: review\n" in out
    assert "    messages: 2 message(s)\n" in out
    assert f"      [0] human: '{CHAT_THREADS[1]} turn 0'\n" in out
    assert f"      [1] ai: 'reply to {CHAT_THREADS[1]} turn 0 ({SECRET})'\n" in out
    assert "  pending writes (1):\n" in out
    assert f"    task {task.id[:8]} __interrupt__: [Interrupt(value={{'draft':" in out
    code, document = inspect_json(
        capsys, str(store), "--thread", CHAT_THREADS[1], "--checkpoint", checkpoint_id
    )
    [entry] = document["checkpoints"]
    [write] = entry["pending_writes"]
    assert (write["task_id"], write["channel"]) == (task.id, "__interrupt__")
    assert write["value"][0]["value"] == task.interrupts[0].value


def test_text_shows_tool_calls_and_shortens(
    keys: None, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = inspect(capsys, str(store), "--thread", "fan", "--limit", "1")
    assert code == 0
    assert "      [0] ai: ''\n" in out
    assert "\n          -> lookup(query='fan')\n" in out
    assert out.count("\n== checkpoint ") == 1
    code, out, _ = inspect(
        capsys, str(store), "--thread", "fan", "--limit", "1", "--max-chars", "12"
    )
    assert "    items: ['left', ...\n" in out
    code, short, _ = inspect(capsys, str(store), "--thread", "fan", "--limit", "1")
    assert "branch:to:" not in short
    code, everything, _ = inspect(
        capsys, str(store), "--thread", "fan", "--limit", "1", "--all-channels"
    )
    assert "__pregel_tasks" in everything


def test_tampered_checkpoint_is_shown_in_place(
    keys: None, store: Path, graphs: Graphs, capsys: pytest.CaptureFixture[str]
) -> None:
    thread = CHAT_THREADS[0]
    ids = [
        s.config["configurable"]["checkpoint_id"]
        for s in graphs.chat.get_state_history({"configurable": {"thread_id": thread}})
    ]
    victim = ids[len(ids) // 2]
    with sqlite3.connect(store) as conn:
        (blob,) = conn.execute(
            "SELECT checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
            (thread, victim),
        ).fetchone()
        conn.execute(
            "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
            (blob[:-1] + bytes([blob[-1] ^ 1]), thread, victim),
        )
    code, document = inspect_json(capsys, str(store), "--thread", thread)
    assert code == 1
    entries = document["checkpoints"]
    assert [e["checkpoint_id"] for e in entries] == ids
    broken = [e for e in entries if e["error"]]
    assert [e["checkpoint_id"] for e in broken] == [victim]
    # Read through the sealed saver (unbound rows allowed): the value authenticates neither
    # at its row nor unbound, which the serializer names BindingError (a DecryptionError).
    assert broken[0]["error"].startswith("BindingError")
    code, out, _ = inspect(capsys, str(store), "--thread", thread)
    assert f"== checkpoint {victim}\n  cannot read: BindingError" in out


def test_plaintext_store_needs_the_switch(
    keys: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plain.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    run_turns(build_chat_graph(saver), "plain", 2)
    conn.close()
    code, document = inspect_json(capsys, str(path), "--thread", "plain")
    assert code == 1
    assert all(e["error"].startswith("PlaintextRefusedError") for e in document["checkpoints"])
    code, document = inspect_json(capsys, str(path), "--thread", "plain", "--allow-plaintext")
    assert code == 0
    assert document["checkpoints"][0]["next"] == ["review"]


def test_not_found_and_errors(
    keys: None,
    store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = inspect(capsys, str(store), "--thread", "nobody")
    assert (code, out) == (1, "")
    assert "no checkpoints for thread 'nobody' in namespace ''; its namespaces: none" in err
    code, _, err = inspect(capsys, str(store), "--thread", "canary", "--ns", "nope")
    assert code == 1
    assert "its namespaces: '' (" in err
    assert "'child:" in err
    code, _, err = inspect(capsys, str(store), "--thread", "canary", "--checkpoint", "missing")
    assert (code, "no checkpoint 'missing'" in err) == (1, True)
    code, _, err = inspect(capsys, str(tmp_path / "absent.sqlite"), "--thread", "x")
    assert (code, "no SQLite file" in err) == (2, True)
    code, _, err = inspect(capsys, str(store), "--thread", "x", "--allow-inline-values")
    assert (code, "PostgreSQL stores only" in err) == (2, True)
    monkeypatch.delenv("LANGGRAPH_AES_KEY")
    code, _, err = inspect(capsys, str(store), "--thread", "canary")
    assert (code, "no keys configured" in err) == (2, True)
    with pytest.raises(SystemExit) as usage:
        main(["inspect", str(store)])
    assert usage.value.code == 2


def test_store_is_not_modified(keys: None, store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = store.read_bytes()
    wal = Path(f"{store}-wal")
    wal_before = wal.read_bytes() if wal.exists() else b""
    for thread in (*CHAT_THREADS, "canary", "fan"):
        assert inspect(capsys, str(store), "--thread", thread)[0] == 0
    assert store.read_bytes() == before
    # Opening a WAL-mode file may create an empty -wal file; nothing is written to it.
    assert (wal.read_bytes() if wal.exists() else b"") == wal_before


def test_console_script_subprocess(store: Path) -> None:
    args = ("inspect", str(store), "--thread", "fan", "--limit", "2", "--json")
    done = run_console_script(*args, env={"LANGGRAPH_AES_KEY": KEY_A})
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert len(document["checkpoints"]) == 2
    assert document["checkpoints"][0]["values"]["items"][-1] == "yes"


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def pg_graph(url: str) -> tuple[Any, Any]:
    conn = saver_connection(url)
    saver = StockPostgresSaver(conn, serde=rotation_serde(SERDE_A, "env"))
    saver.setup()
    return conn, canary.build_canary_graph(saver)


def test_postgres_sealed_metadata_is_shown_unsealed(
    keys: None, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The canary graph as 0.3's sealed saver wrote it with plaintext_metadata=[], against what
    # LangGraph's get_state_history() said of it then.
    v03.load_postgres(postgres_url, ["canary-strict"])
    config = {"configurable": {"thread_id": "canary-strict"}}
    history = v03.history("postgres", "canary-strict")
    entries = check_entries(capsys, postgres_url, config, history)
    assert all(e["metadata"]["api_key"] == canary.API_KEY for e in entries)
    # ... which the database holds sealed only.
    with saver_connection(postgres_url) as conn:
        rows = conn.execute(
            "SELECT metadata::text AS m FROM checkpoints WHERE checkpoint_ns = ''"
        ).fetchall()
    assert len(rows) == len(entries)
    assert not any(canary.API_KEY in row["m"] for row in rows)


def test_postgres_stock_thread_needs_inline_switch(
    keys: None, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    conn, graph = pg_graph(postgres_url)
    try:
        canary.run_sync(graph, "stock")
        code, document = inspect_json(capsys, postgres_url, "--thread", "stock")
        assert code == 1
        errors = [e["error"] for e in document["checkpoints"]]
        assert any(e and e.startswith("PlaintextRefusedError") for e in errors)
        check_history(
            capsys,
            postgres_url,
            graph,
            {"configurable": {"thread_id": "stock"}},
            "--allow-inline-values",
        )
    finally:
        conn.close()


class FrameState(TypedDict, total=False):
    frame: Any


def test_pickle_preset_reads_pandas_values(
    keys: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pandas as pd

    from secure_serde import EncryptedSerializer, PickleFallbackSerializer
    from secure_serde.ciphers import KeyRotationCipher
    from secure_serde.pickling import PANDAS

    frame = pd.DataFrame({"city": ["Oslo", "Lima"], "people": [709_000, 10_092_000]})
    serde = EncryptedSerializer(
        KeyRotationCipher(SERDE_A, "env"), PickleFallbackSerializer(allowed=[PANDAS])
    )
    path = tmp_path / "frames.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=serde)
        saver.setup()
        load = ("load", lambda state: {"frame": frame})
        graph = linear_graph(FrameState, load, checkpointer=saver)
        graph.invoke({}, {"configurable": {"thread_id": "f"}})
    finally:
        conn.close()
    code, out, _ = inspect(capsys, str(path), "--thread", "f", "--limit", "1")
    assert code == 1
    assert "cannot read: NotImplementedError: " in out
    assert "(written through PickleFallbackSerializer: see --pickle)" in out
    code, out, err = inspect(
        capsys, str(path), "--thread", "f", "--limit", "1", "--pickle", "pandas"
    )
    assert code == 0, err
    assert "Lima" in out
    assert "10092000" in out
