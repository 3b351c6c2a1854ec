"""rewrap on a real PostgreSQL: staged rotation, worker processes, a live writer, migration."""

from __future__ import annotations

import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer

from secure_serde import EncryptedSerializer, rewrap
from secure_serde.stores import PostgresStore
from tests.passes.live_writer import live_writer
from tests.passes.rewrap_support import (
    A_AND_B,
    KEY_A,
    KEY_B,
    KeyEnv,
    cli_command,
    clone_postgres_threads,
    header_key_ids,
    histories,
    key_id,
    postgres_graph,
    rotation_matrix,
    rotation_serde,
    run_cli,
    run_turns,
)

STAGE3_ENV = KeyEnv(env_key=KEY_A, keyring={"primary": "b", "keys": {"b": KEY_B}})


def _blob_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM checkpoint_blobs WHERE blob IS NOT NULL"
        ).fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.parametrize("via", ["api", "cli-workers"])
def test_tink_staged_rotation_on_postgres(postgres_url: str, tmp_path: Path, via: str) -> None:
    def open_graph(serde: EncryptedSerializer) -> AbstractContextManager[Any]:
        return postgres_graph(postgres_url, serde)

    def rewrap_step(serde: EncryptedSerializer) -> None:
        assert _blob_rows(postgres_url) > 0, "channel blobs are cells too"
        if via == "api":
            report = rewrap(postgres_url, serde, batch_size=5)
            assert report.ok
            assert report.rewrapped > 0
            return
        proc = run_cli(
            STAGE3_ENV, tmp_path, "rewrap", postgres_url, "--workers", "3", "--batch-size", "4"
        )
        assert proc.returncode == 0, proc.stderr
        assert "with 3 workers" in proc.stdout

    rotation_matrix(open_graph, postgres_url, rewrap_step)


def test_live_writer_during_rewrap_with_workers(postgres_url: str, tmp_path: Path) -> None:
    base = [f"base-{i}" for i in range(6)]
    with postgres_graph(postgres_url, rotation_serde({"a": KEY_A}, "a")) as graph:
        for thread in base:
            run_turns(graph, thread, 3)
    cells = clone_postgres_threads(postgres_url, 40)
    assert cells > 4000
    stage3 = rotation_serde(A_AND_B, "b")
    with postgres_graph(postgres_url, stage3) as graph:
        original = histories(graph, base[:2])

    def pick_thread(turn: int) -> str:
        return f"live-{turn % 4}" if turn % 3 else f"base-{2 + turn % 4}~00007"

    with live_writer(
        lambda: postgres_graph(postgres_url, rotation_serde(A_AND_B, "b")), pick_thread
    ) as writer:
        child = subprocess.Popen(
            cli_command(
                "rewrap", postgres_url, "--workers", "3", "--batch-size", "10", "--progress"
            ),
            env=STAGE3_ENV.environ(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stderr is not None
        child.stderr.read(7)  # the first progress line: the workers are running
        working = time.monotonic()
        stdout, stderr = child.communicate(timeout=300)
        finished = time.monotonic()
    assert child.returncode == 0, stderr
    assert "with 3 workers" in stdout
    during = writer.between(working, finished)
    assert len(during) >= 3, "the writer should keep writing while the workers run"

    assert set(header_key_ids(postgres_url)) == {key_id(KEY_B)}
    with postgres_graph(postgres_url, rotation_serde({"b": KEY_B}, "b")) as graph:
        assert histories(graph, base[:2]) == original
        writer.check_turns_kept(graph, base_turns=3)


def test_thread_ranges_split_all_rows_exactly_once(postgres_url: str) -> None:
    with postgres_graph(postgres_url, rotation_serde({"a": KEY_A}, "a")) as graph:
        run_turns(graph, "seed", 2)
    clone_postgres_threads(postgres_url, 50)
    with PostgresStore(postgres_url) as store:
        every = sorted((c.ref.table, c.ref.key) for c in store.iter_cells(batch_size=33))
        ranges = store.thread_ranges(4)
        assert len(ranges) == 4
        assert ranges[0].low is None
        assert ranges[-1].high is None
        parts = [
            sorted((c.ref.table, c.ref.key) for c in store.iter_cells(37, thread_range))
            for thread_range in ranges
        ]
        assert sorted(cell for part in parts for cell in part) == every
        sizes = [len(part) for part in parts]
        assert min(sizes) > 0.5 * max(sizes), sizes  # split by row percentiles
        assert [store.count_all(r) for r in ranges] == sizes
        assert store.thread_ranges(1) == [ranges[0].__class__()]


def test_empty_blob_rows_are_counted_and_left_alone(postgres_url: str) -> None:
    with postgres_graph(postgres_url, rotation_serde({"a": KEY_A}, "a")) as graph:
        run_turns(graph, "t", 1)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # What PostgresSaver writes for a channel version without a value.
        conn.execute(
            "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)"
            " VALUES ('t', '', 'cleared', '00000000000000000000000000000009.1', 'empty', NULL)"
        )
    report = rewrap(postgres_url, rotation_serde(A_AND_B, "b"))
    assert report.ok
    assert report.empty == 1
    assert report.rewrapped == report.scanned - 1
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute(
            "SELECT type, blob FROM checkpoint_blobs WHERE channel = 'cleared'"
        ).fetchone()
    assert row == ("empty", None)


def test_legacy_rows_on_postgres_become_v1(postgres_url: str) -> None:
    builtin = BuiltinSerializer.from_pycryptodome_aes(key=KEY_A.encode())
    with postgres_graph(postgres_url, builtin) as graph:
        run_turns(graph, "old", 3)
        before = histories(graph, ["old"])
    assert set(header_key_ids(postgres_url)) == {"aes"}
    report = rewrap(postgres_url, EncryptedSerializer.from_pycryptodome_aes(key=KEY_A.encode()))
    assert report.ok
    assert dict(report.sources) == {"aes": report.rewrapped}
    assert set(header_key_ids(postgres_url)) == {key_id(KEY_A)}
    with postgres_graph(postgres_url, rotation_serde({"a": KEY_A}, "a")) as graph:
        assert histories(graph, ["old"]) == before
