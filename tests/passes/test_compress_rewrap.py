"""``secure-serde rewrap --compress`` and audit's compression counts, on real stores.

The store is written by a real graph without compression; rewrap compresses it in place, without
deserializing, and a SIGKILL at any moment loses nothing: every row still opens to the value it
held, compressed or not yet.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver

from secure_serde import CompressedSerializer, EncryptedSerializer, rewrap
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.serde import compression_of
from tests.fixtures_services import saver_connection
from tests.graphs_support import build_chat_graph, transcript
from tests.passes.progress_support import progress_lines
from tests.passes.rewrap_support import KeyEnv, cli_command, run_cli
from tests.serdes_support import env_serde, stock_sqlite

KEY = "rewrap-compress-key-0123456789ab"
TABLES = {
    "checkpoints": ("checkpoint", "thread_id, checkpoint_ns, checkpoint_id"),
    "writes": ("value", "thread_id, checkpoint_ns, checkpoint_id, task_id, idx"),
}


def uncompressed() -> EncryptedSerializer:
    return env_serde(KEY)


def reader() -> EncryptedSerializer:
    return env_serde(KEY, CompressedSerializer())


def text(thread: str, turn: int) -> str:
    return (f"{thread} turn {turn}: a long message about invoices and refunds. " * 8)[:400]


def run_chat(saver: Any, threads: int, turns: int) -> None:
    graph = build_chat_graph(saver)
    for t in range(threads):
        for turn in range(turns):
            config: RunnableConfig = {"configurable": {"thread_id": f"t{t}"}}
            graph.invoke({"messages": [HumanMessage(content=text(f"t{t}", turn))]}, config)


def sqlite_rows(path: Path) -> dict[tuple[Any, ...], tuple[str, bytes]]:
    with sqlite3.connect(path) as conn:
        rows = {}
        for table, (data, key) in TABLES.items():
            for row in conn.execute(f"SELECT {key}, type, {data} FROM {table}"):  # noqa: S608
                rows[(table, *row[:-2])] = (row[-2], row[-1])
        return rows


def values(rows: dict[tuple[Any, ...], tuple[str, bytes]]) -> dict[tuple[Any, ...], Any]:
    serde = reader()
    return {key: serde.loads_typed(row) for key, row in rows.items()}


def keys() -> KeyEnv:
    return KeyEnv(env_key=KEY, keyring=None)


def test_rewrap_compress_then_audit_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with stock_sqlite(path, uncompressed()) as saver:
        run_chat(saver, threads=3, turns=6)
    before = sqlite_rows(path)
    assert all(compression_of(tag) is None for tag, _ in before.values())
    original = values(before)

    audit = run_cli(keys(), tmp_path, "audit", str(path), "--json")
    assert json.loads(audit.stdout)["compression"] == {"uncompressed": len(before)}

    dry = run_cli(keys(), tmp_path, "rewrap", str(path), "--compress", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert sqlite_rows(path) == before

    proc = run_cli(keys(), tmp_path, "rewrap", str(path), "--compress")
    assert proc.returncode == 0, proc.stderr
    after = sqlite_rows(path)
    assert after.keys() == before.keys()
    compressed = [k for k, (tag, _) in after.items() if compression_of(tag) == "zstd"]
    assert len(compressed) >= len(after) // 3
    for key in compressed:
        assert after[key][0] == before[key][0].replace("+aesgcm", "+zstd+aesgcm")
        assert len(after[key][1]) < len(before[key][1])
    # Not one value changed; small ones kept their bytes, tag and all.
    assert values(after) == original
    assert all(after[k] == before[k] for k in after.keys() - set(compressed))

    again = run_cli(keys(), tmp_path, "rewrap", str(path), "--compress")
    assert again.returncode == 0, again.stderr
    assert sqlite_rows(path) == after
    assert "rewrapped 0" in again.stdout

    audit = json.loads(run_cli(keys(), tmp_path, "audit", str(path), "--json").stdout)
    assert audit["compression"] == {
        "uncompressed": len(after) - len(compressed),
        "zstd": len(compressed),
    }
    text_report = run_cli(keys(), tmp_path, "audit", str(path)).stdout
    assert f"compressed: {len(compressed):,} (zstd {len(compressed):,})" in text_report

    with stock_sqlite(path, reader()) as saver:
        graph = build_chat_graph(saver)
        state = graph.get_state({"configurable": {"thread_id": "t1"}})
        assert transcript(state.values["messages"])[-2] == ("human", text("t1", 5))
        graph.invoke(
            {"messages": [HumanMessage(content="after")]}, {"configurable": {"thread_id": "t1"}}
        )


def test_rewrap_compress_on_postgres(postgres_url: str) -> None:
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, serde=uncompressed())
        saver.setup()
        run_chat(saver, threads=2, turns=5)
        before = conn.execute("SELECT sum(length(blob)) AS n FROM checkpoint_blobs").fetchone()
        history = list(
            build_chat_graph(saver).get_state_history({"configurable": {"thread_id": "t0"}})
        )

    report = rewrap(postgres_url, EnvKeyCipher(KEY), compress=True)
    assert report.ok
    assert report.rewrapped > 0

    with saver_connection(postgres_url) as conn:
        after = conn.execute("SELECT sum(length(blob)) AS n FROM checkpoint_blobs").fetchone()
        tags = [r["type"] for r in conn.execute("SELECT type FROM checkpoint_blobs")]
        assert "msgpack+zstd+aesgcm" in tags
        assert after is not None
        assert before is not None
        assert after["n"] < before["n"] / 2
        graph = build_chat_graph(PostgresSaver(conn, serde=reader()))
        again = list(graph.get_state_history({"configurable": {"thread_id": "t0"}}))
        assert [s.values for s in again] == [s.values for s in history]
    assert rewrap(postgres_url, EnvKeyCipher(KEY), compress=True).rewrapped == 0


def test_sigkill_during_rewrap_compress_loses_nothing(tmp_path: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)  # noqa: S311 - timing, not secrets
    path = tmp_path / "big.sqlite"
    with stock_sqlite(path, uncompressed()) as saver:
        run_chat(saver, threads=20, turns=8)
    before = sqlite_rows(path)
    original = values(before)
    env = keys().environ(tmp_path)
    candidates = sum(len(data) >= 600 for _, data in before.values())
    done, mid_run, log = 0, 0, []
    for trial in range(8):
        child = subprocess.Popen(
            cli_command("rewrap", str(path), "--compress", "--batch-size", "8", "--progress"),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert child.stderr is not None
        # Killed after the first progress line that reports a batch compressed and rows left,
        # at a random moment within the next batch: chosen by the work done, not a clock.
        first = None
        for first in progress_lines(child.stderr.fileno()):
            if first.rewrapped or first.finished:
                break
        if first is not None and not first.finished:
            time.sleep(rng.uniform(0, 8 / max(first.rate, 1)))
        child.send_signal(signal.SIGKILL)
        killed = child.wait(timeout=60) == -signal.SIGKILL
        child.stderr.close()
        assert first is not None, "the child drew no progress line"
        now = sqlite_rows(path)
        assert now.keys() == before.keys(), f"seed {seed}, trial {trial}"
        # Every row opens to the value it held: compressed or not yet, never half-written.
        assert values(now) == original, f"seed {seed}, trial {trial}"
        for key, (tag, _) in now.items():
            assert tag in (before[key][0], before[key][0].replace("+aesgcm", "+zstd+aesgcm"))
        now_done = sum(compression_of(tag) is not None for tag, _ in now.values())
        log.append((trial, first, killed, done, now_done))
        if killed and done < now_done < candidates:
            mid_run += 1
        done = now_done
        if mid_run >= 2 or done >= candidates:
            break
    assert mid_run >= 1, f"no kill landed mid-run (seed {seed}): {log}"
    proc = run_cli(keys(), tmp_path, "rewrap", str(path), "--compress")
    assert proc.returncode == 0, proc.stderr
    assert values(sqlite_rows(path)) == original
