"""rewrap, audit and inspect on stores secure_serde 0.3's sealed savers wrote: every value bound
to its row.

The stores are the frozen ones of tests/vectors/v03/ (four chat threads, interrupts pending,
sealed metadata, all under key A). Each cell is opened at the `Location` its row names and
sealed again at that same location, so the store still reads, value for value and checkpoint
for checkpoint as LangGraph showed it when it was written, after a rotation, with the old key
retired and then dropped. A bound value copied into another row is refused, never re-sealed at
its new row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from secure_serde import RetiredKeyError, UnknownKeyError, rewrap
from secure_serde.stores import METADATA_TABLE, SEALED_METADATA_KEY, SqliteStore, Swap, open_store
from tests import v03_fixtures as v03
from tests.rewrap.rewrap_support import (
    A_AND_B,
    KEY_A,
    KEY_B,
    header_key_ids,
    key_id,
    rotation_serde,
)

_KEY_VARS = (
    "LANGGRAPH_AES_KEY",
    "SECURE_SERDE_KEYRING_FILE",
    "SECURE_SERDE_KMS_KEY_ID",
    "SECURE_SERDE_KMS_DECRYPT_KEY_IDS",
    "SECURE_SERDE_KMS_ENCRYPTION_CONTEXT",
)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., None]:
    """Configure the CLI's keys as an operator would: a keyring file, nothing else."""
    for var in _KEY_VARS:
        monkeypatch.delenv(var, raising=False)

    def configure(keyring: Mapping[str, Any]) -> None:
        path = tmp_path / f"keyring-{len(list(tmp_path.glob('keyring-*')))}.json"
        path.write_text(json.dumps(keyring))
        path.chmod(0o600)  # keyring files must be private to their owner
        monkeypatch.setenv("SECURE_SERDE_KEYRING_FILE", str(path))

    return configure


def _cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    from secure_serde.cli import main

    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _kinds(location: str | Path) -> set[str]:
    with open_store(str(location)) as store:
        return {c.location.kind for c in store.iter_cells() if c.data and c.location}


def _rotate(
    location: str | Path,
    backend: str,
    keys: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Add B; promote B and rewrap; retire A; drop A: at every stage every value opens at its
    row, unchanged, and inspect shows each thread as LangGraph did when 0.3 wrote it."""
    a_id, b_id = key_id(KEY_A), key_id(KEY_B)
    before = v03.opened_cells(location, rotation_serde({"a": KEY_A}, "a"))
    assert before
    cells = len(before)
    assert header_key_ids(location) == {a_id: cells}

    def shows_every_thread(keyring: Mapping[str, Any]) -> None:
        keys(keyring)
        for thread in v03.CHAT_THREADS:
            code, shown = _cli_json(capsys, "inspect", str(location), "--thread", thread)
            assert code == 0, [e["error"] for e in shown["checkpoints"]]
            v03.assert_shown(shown["checkpoints"], v03.history(backend, thread))

    shows_every_thread({"primary": "a", "keys": {"a": KEY_A}})
    # Retiring A before the rewrap would lock rows out, by name.
    retired = rotation_serde(A_AND_B, "b", retired=["a"])
    with pytest.raises(RetiredKeyError, match=a_id):
        v03.opened_cells(location, retired)
    keys({"primary": "b", "keys": {"a": KEY_A, "b": KEY_B}, "retired": ["a"]})
    code, document = _cli_json(capsys, "audit", str(location))
    assert code == 1
    assert document["undecryptable"]["by_error"] == {"RetiredKeyError": cells}

    report = rewrap(location, rotation_serde(A_AND_B, "b"), verify=True, batch_size=7)
    assert report.ok, [str(f) for f in report.failures]
    assert report.rewrapped == cells
    # Nothing is left for a second run: the bound re-seals are current.
    again = rewrap(location, rotation_serde(A_AND_B, "b"), verify=True)
    assert again.ok
    assert again.rewrapped == 0
    assert header_key_ids(location) == {b_id: cells}

    assert v03.opened_cells(location, retired) == before
    shows_every_thread({"primary": "b", "keys": {"a": KEY_A, "b": KEY_B}, "retired": ["a"]})
    only_b = {"primary": "b", "keys": {"b": KEY_B}}
    assert v03.opened_cells(location, rotation_serde({"b": KEY_B}, "b")) == before
    shows_every_thread(only_b)
    keys(only_b)
    code, document = _cli_json(capsys, "audit", str(location))
    assert code == 0, document["findings"]
    assert document["undecryptable"]["count"] == 0
    with pytest.raises(UnknownKeyError):
        v03.opened_cells(location, rotation_serde({"a": KEY_A}, "a"))


def test_sealed_sqlite_store_rotates_and_retires_the_old_key(
    tmp_path: Path, keys: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    path = v03.sqlite_copy(tmp_path / "sealed.sqlite", v03.CHAT_THREADS)
    # Every checkpoint value, write and sealed-metadata entry (on every row, sealed by
    # default) of the sealed saver is read at its row.
    assert _kinds(path) == {"checkpoint", "write", "metadata"}
    _rotate(path, "sqlite", keys, capsys)


def test_sealed_postgres_store_rotates_and_retires_the_old_key(
    postgres_url: str, keys: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    v03.load_postgres(postgres_url, v03.CHAT_THREADS)
    # Channel blobs, writes, sealed metadata and each checkpoint record's seal.
    assert _kinds(postgres_url) == {"blob", "write", "metadata", "checkpoint"}
    _rotate(postgres_url, "postgres", keys, capsys)


def test_a_bound_value_copied_into_another_row_is_refused_not_resealed(tmp_path: Path) -> None:
    path = v03.sqlite_copy(tmp_path / "sealed.sqlite", ["t0"])
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


def test_audit_and_inspect_read_a_sealed_sqlite_store(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    keys: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    path = v03.sqlite_copy(tmp_path / "sealed.sqlite", ["t0"])
    newest = v03.history("sqlite", "t0")[0]["values"]
    code, document = _cli_json(capsys, "audit", str(path))
    assert code == 0, document
    assert document["undecryptable"]["count"] == 0
    code, shown = _cli_json(capsys, "inspect", str(path), "--thread", "t0")
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


def _metadata_of(path: Path, thread_id: str) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT metadata FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id",
            (thread_id,),
        ).fetchall()
    return [json.loads(metadata) for (metadata,) in rows]


def test_sqlite_store_swaps_a_sealed_entry_only_while_it_is_unchanged(tmp_path: Path) -> None:
    """rewrap's view of SQLite: each row's sealed entry is a cell, swapped compare-and-swap."""
    path = v03.sqlite_copy(tmp_path / "cells.sqlite", ["m1", "m2"])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE checkpoints SET metadata = X'00' WHERE thread_id = 'm2'")
    first = _metadata_of(path, "m1")[0]
    assert SEALED_METADATA_KEY in first
    with SqliteStore(path) as store:
        table = store.table(METADATA_TABLE)
        # The row whose metadata is not JSON is skipped, not an error.
        assert store.count(table) == len(_metadata_of(path, "m1"))
        cell = next(iter(store.iter_batches(table)))[0]
        assert cell.ref.thread_id == "m1"
        assert cell.location is not None
        assert cell.location.kind == "metadata"
        assert cell.data is not None
        # The same ciphertext, so the row still reads after the swap.
        assert store.compare_and_swap([Swap(cell, cell.type_tag or "", cell.data)]) == [True]
        stale = Swap(cell, "msgpack+aesgcm", b"\x00" * 40)
        with sqlite3.connect(path) as conn:
            changed = {**first, "source": "changed"}
            conn.execute(
                "UPDATE checkpoints SET metadata = ? WHERE thread_id = 'm1' AND checkpoint_id = ?",
                (json.dumps(changed), cell.ref.checkpoint_id),
            )
        assert store.compare_and_swap([stale]) == [True]  # the entry itself is still the same
        moved = store.reload(cell.ref)
        assert moved is not None
        assert moved.data == b"\x00" * 40
        assert store.compare_and_swap([stale]) == [False]  # no longer the entry read
    # The swap replaced the entry only: the key changed beside it is kept.
    assert _metadata_of(path, "m1")[0]["source"] == "changed"


def test_inspect_and_audit_open_sealed_metadata(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    keys: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CLI's viewer unseals 0.3's metadata entries, and audit authenticates each as a cell."""
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    threads = ["m1", "m2", "m3"]
    path = v03.sqlite_copy(tmp_path / "cli.sqlite", threads)
    entries = 0
    for thread in threads:
        code, shown = _cli_json(capsys, "inspect", str(path), "--thread", thread)
        assert code == 0, shown
        assert [e["error"] for e in shown["checkpoints"]] == [None] * len(shown["checkpoints"])
        assert {e["metadata"]["api_key"] for e in shown["checkpoints"]} == {v03.API_KEY}
        v03.assert_shown(shown["checkpoints"], v03.history("sqlite", thread))
        entries += len(shown["checkpoints"])
    assert v03.API_KEY.encode() not in path.read_bytes()
    code, document = _cli_json(capsys, "audit", str(path))
    assert code == 0, document["findings"]
    assert document["undecryptable"]["count"] == 0
    assert document["binding"]["metadata_envelopes"]["bound"] == entries
