"""rewrap, audit and inspect on stores the sealed savers wrote: every value bound to its row.

Each cell is opened at the `Location` its row names and sealed again at that same location, so
the sealed savers keep reading the store after a rotation, with the old key retired and then
dropped. A bound value copied into another row is refused, never re-sealed at its new row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from secure_serde import EncryptedSerializer, rewrap
from secure_serde.savers._v03_sqlite import SqliteSaver as SealedSqliteSaver
from secure_serde.stores import SqliteStore
from tests.rewrap.rewrap_support import (
    A_AND_B,
    KEY_A,
    build_graph,
    config,
    key_id,
    rotation_matrix,
    rotation_serde,
    run_turns,
)


@contextmanager
def sealed_sqlite_graph(path: Path, serde: EncryptedSerializer) -> Iterator[Any]:
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SealedSqliteSaver(conn, serde=serde)
        saver.setup()
        yield build_graph(saver)
    finally:
        conn.close()


@contextmanager
def sealed_postgres_graph(url: str, serde: EncryptedSerializer) -> Iterator[Any]:
    from secure_serde.savers._v03_postgres import PostgresSaver as SealedPostgresSaver

    with SealedPostgresSaver.from_conn_string(url, serde=serde, plaintext_metadata=[]) as saver:
        saver.setup()
        yield build_graph(saver)


def _rewrap_step(location: str | Path) -> Any:
    def step(serde: EncryptedSerializer) -> None:
        report = rewrap(location, serde, verify=True, batch_size=7)
        assert report.ok, [str(f) for f in report.failures]
        assert report.rewrapped > 0
        # Nothing is left for a second run: the bound re-seals are current.
        again = rewrap(location, serde, verify=True)
        assert again.ok
        assert again.rewrapped == 0

    return step


def test_sealed_sqlite_store_rotates_and_retires_the_old_key(tmp_path: Path) -> None:
    path = tmp_path / "sealed.sqlite"

    def open_graph(serde: EncryptedSerializer) -> AbstractContextManager[Any]:
        return sealed_sqlite_graph(path, serde)

    rotation_matrix(open_graph, path, _rewrap_step(path))
    with SqliteStore(path) as store:
        located = [c for c in store.iter_cells() if c.data is not None]
    # Every checkpoint blob, write and sealed-metadata entry (on every row, sealed by
    # default) of the sealed saver was read at its row.
    assert located
    assert all(c.location is not None for c in located)
    kinds = {c.location.kind for c in located if c.location}
    assert kinds == {"checkpoint", "write", "metadata"}


def test_sealed_postgres_store_rotates_and_retires_the_old_key(postgres_url: str) -> None:
    def open_graph(serde: EncryptedSerializer) -> AbstractContextManager[Any]:
        return sealed_postgres_graph(postgres_url, serde)

    rotation_matrix(open_graph, postgres_url, _rewrap_step(postgres_url))


def test_a_bound_value_copied_into_another_row_is_refused_not_resealed(tmp_path: Path) -> None:
    path = tmp_path / "sealed.sqlite"
    with sealed_sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        run_turns(graph, "t", 2)
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT rowid, type, value FROM writes ORDER BY checkpoint_id, task_id, idx"
        ).fetchall()
        assert len(rows) >= 2
        (victim, *_), (_, type_tag, value) = rows[0], rows[1]
        conn.execute(
            "UPDATE writes SET type = ?, value = ? WHERE rowid = ?", (type_tag, value, victim)
        )
    report = rewrap(path, rotation_serde(A_AND_B, "b"), verify=True)
    assert not report.ok
    assert len(report.failures) == 1
    assert "DecryptionError" in report.failures[0].reason
    with sqlite3.connect(path) as conn:
        (still,) = conn.execute("SELECT value FROM writes WHERE rowid = ?", (victim,)).fetchone()
    # Left exactly as planted, still under A: not laundered into a value bound here.
    assert still == value
    assert still[1:5].hex() == key_id(KEY_A)


_KEY_VARS = (
    "LANGGRAPH_AES_KEY",
    "SECURE_SERDE_KEYRING_FILE",
    "SECURE_SERDE_KMS_KEY_ID",
    "SECURE_SERDE_KMS_DECRYPT_KEY_IDS",
    "SECURE_SERDE_KMS_ENCRYPTION_CONTEXT",
)


def _cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    from secure_serde.cli import main

    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_audit_and_inspect_read_a_sealed_sqlite_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in _KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    path = tmp_path / "sealed.sqlite"
    with sealed_sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        run_turns(graph, "t", 2)
        newest = graph.get_state(config("t")).values
    code, document = _cli_json(capsys, "audit", str(path))
    assert code == 0, document
    assert document["undecryptable"]["count"] == 0
    code, shown = _cli_json(capsys, "inspect", str(path), "--thread", "t")
    assert code == 0, shown
    assert [e["error"] for e in shown["checkpoints"]] == [None] * len(shown["checkpoints"])
    assert len(shown["checkpoints"][0]["values"]["messages"]) == len(newest["messages"])

    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT rowid, type, value FROM writes ORDER BY rowid").fetchall()
        (victim, *_), (_, type_tag, value) = rows[0], rows[1]
        conn.execute(
            "UPDATE writes SET type = ?, value = ? WHERE rowid = ?", (type_tag, value, victim)
        )
    code, document = _cli_json(capsys, "audit", str(path))
    assert code == 1
    assert document["undecryptable"]["by_error"] == {"DecryptionError": 1}
