"""Stores secure_serde 0.3's savers wrote are adopt-only: rewrap and audit refuse them, naming
``secure-serde adopt OLD NEW``, before writing anything; inspect still reads them.

The stores are the frozen ones 0.3 wrote: tests/vectors/v03/ (SQLite, and PostgreSQL rows) and
tests/vectors/v03_postgres_store.sql. A mixed store holds threads langgraph's stock saver wrote
(``serde=EncryptedSerializer``: encrypted, bound to no row) beside 0.3's, written after them, as
in a store 0.3's savers took over: inspect reads both, flagging the stock ones.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from secure_serde import ConfigurationError, EncryptedSerializer, rewrap
from secure_serde.ciphers import SealingCipher
from secure_serde.cli import main
from secure_serde.crypto import Location
from secure_serde.stores import (
    INDEX_METADATA_KEY,
    SEALED_METADATA_KEY,
    canonical,
    metadata_record,
)
from tests import v03_fixtures as v03
from tests.cli.cli_support import only_env_key, run_main
from tests.passes.rewrap_support import KEY_A, rotation_serde, run_turns, sqlite_graph
from tests.stores import v03_support
from tests.stores.test_v03_postgres_vector import load_vector

STOCK_THREADS = v03.STOCK_THREADS
SEALED_THREADS = ("sealed-1",)
ADOPT = "secure-serde adopt OLD NEW"


@pytest.fixture(autouse=True)
def _key_a(monkeypatch: pytest.MonkeyPatch) -> None:
    only_env_key(monkeypatch, KEY_A)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pg_rows(url: str) -> list[Any]:
    with psycopg.connect(url) as conn:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3").fetchall()  # noqa: S608
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        ]


def _assert_refused(capsys: pytest.CaptureFixture[str], location: str, serde: Any) -> None:
    """rewrap (CLI, dry run too, and API) and audit (with and without keys) refuse, naming adopt."""
    for argv in (
        ["rewrap", location],
        ["rewrap", location, "--dry-run"],
        ["audit", location],
        ["audit", location, "--no-decrypt"],
    ):
        code, out, err = run_main(capsys, *argv)
        assert code == 2, (argv, out, err)
        assert ADOPT in err, argv
        assert "0.3" in err
    with pytest.raises(ConfigurationError, match=ADOPT):
        rewrap(location, serde)


def test_rewrap_and_audit_refuse_the_frozen_sqlite_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v03.sqlite"
    path.write_bytes(v03.SQLITE_STORE.read_bytes())
    before = _digest(path)
    _assert_refused(capsys, str(path), v03.serde())
    assert _digest(path) == before


@pytest.mark.parametrize("thread", ["t0", "sealed-1", "indexed-1"])
def test_one_thread_0_3_wrote_is_enough(
    thread: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = v03.sqlite_copy(tmp_path / "mixed.sqlite", (*STOCK_THREADS, thread))
    before = _digest(path)
    _assert_refused(capsys, str(path), v03.serde())
    assert _digest(path) == before


def test_rewrap_and_audit_refuse_the_frozen_postgres_stores(
    postgres_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    v03.load_postgres(postgres_url, (*STOCK_THREADS, "t0"))
    before = _pg_rows(postgres_url)
    _assert_refused(capsys, postgres_url, v03.serde())
    assert _pg_rows(postgres_url) == before


def test_rewrap_and_audit_refuse_the_postgres_dump(
    postgres_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    load_vector(postgres_url)
    only_env_key(monkeypatch, v03_support.KEY.decode())
    before = _pg_rows(postgres_url)
    _assert_refused(capsys, postgres_url, v03_support.serde())
    assert _pg_rows(postgres_url) == before


def _without_metadata_entries(path: Path, serde: EncryptedSerializer, thread_id: str) -> None:
    """The thread as 0.3's SQLite saver wrote it with ``seal_metadata=False``: no entry in the
    metadata (so no mark in plaintext), each checkpoint sealed for its plaintext metadata."""
    cipher = serde.cipher
    assert isinstance(cipher, SealingCipher)
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
            " checkpoint, metadata FROM checkpoints WHERE thread_id = ?",
            (thread_id,),
        ).fetchall()
        for thread, ns, checkpoint_id, parent, type_tag, blob, stored in rows:
            metadata = json.loads(stored)
            inner, _, name = type_tag.rpartition("+")
            was = Location.checkpoint(
                thread, ns, checkpoint_id, parent, canonical(metadata_record(metadata))
            )
            plain = cipher.decrypt_at(name, blob, inner, was.encode())
            for entry in (SEALED_METADATA_KEY, INDEX_METADATA_KEY):
                metadata.pop(entry, None)
            at = Location.checkpoint(thread, ns, checkpoint_id, parent, canonical(metadata))
            name, sealed = cipher.encrypt_at(plain, inner, at.encode())
            conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ?, metadata = ?"
                " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (f"{inner}+{name}", sealed, json.dumps(metadata), thread, ns, checkpoint_id),
            )
    conn.close()


def test_a_sqlite_store_without_marks_is_told_with_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = v03.sqlite_copy(tmp_path / "unmarked.sqlite", (*STOCK_THREADS, "t0"))
    _without_metadata_entries(path, v03.serde(), "t0")
    with sqlite3.connect(path) as conn:
        marked = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE CAST(metadata AS TEXT) LIKE '%secure_serde%'"
        ).fetchone()[0]
    conn.close()
    assert marked == 0
    # 0.3's reader still reads it as 0.3 wrote it, bound: this is the store the probe must tell.
    code, shown, _ = _json(capsys, "inspect", str(path), "--thread", "t0")
    assert code == 0
    assert [e["unbound"] for e in shown["checkpoints"]] == [False] * len(shown["checkpoints"])
    before = _digest(path)
    for argv in (["rewrap", str(path)], ["audit", str(path)]):
        code, out, err = run_main(capsys, *argv)
        assert code == 2, (argv, out, err)
        assert ADOPT in err
    with pytest.raises(ConfigurationError, match=ADOPT):
        rewrap(str(path), v03.serde())
    assert _digest(path) == before


def test_a_store_only_the_stock_saver_wrote_is_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = v03.sqlite_copy(tmp_path / "stock.sqlite", STOCK_THREADS)
    code, document, err = _json(capsys, "audit", str(path))
    assert code == 0, (document, err)
    report = rewrap(str(path), rotation_serde({"a": KEY_A}, "a"), dry_run=True)
    assert report.scanned > 0
    assert not report.failures


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_inspect_warns_on_an_unbound_checkpoint_in_a_store_0_3_wrote(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    # The stock PostgreSQL saver inlines primitives in the checkpoint JSON.
    inline: tuple[str, ...] = ()
    if backend == "sqlite":
        location = str(v03.sqlite_copy(tmp_path / "mixed.sqlite", STOCK_THREADS + SEALED_THREADS))
    else:
        location = request.getfixturevalue("postgres_url")
        v03.load_postgres(location, STOCK_THREADS + SEALED_THREADS)
        inline = ("--allow-inline-values",)

    code, shown, err = _json(capsys, "inspect", location, "--thread", STOCK_THREADS[0], *inline)
    assert code == 0, [e["error"] for e in shown["checkpoints"]]
    assert shown["binding_store"] is True
    entries = shown["checkpoints"]
    assert entries
    assert all(e["unbound"] for e in entries)
    assert all(e["warning"] and "not sealed for its location" in e["warning"] for e in entries)
    assert f"warning: {len(entries)} checkpoint(s) shown are not sealed for" in err

    main(["inspect", location, "--thread", STOCK_THREADS[0], *inline])
    out, _ = capsys.readouterr()
    assert out.count("WARNING: not sealed for its location") == len(entries)

    code, shown, err = _json(capsys, "inspect", location, "--thread", SEALED_THREADS[0], *inline)
    assert code == 0, shown
    assert [e["unbound"] for e in shown["checkpoints"]] == [False] * len(shown["checkpoints"])
    assert [e["warning"] for e in shown["checkpoints"]] == [None] * len(shown["checkpoints"])
    assert "warning" not in err


def test_inspect_does_not_warn_on_a_store_only_the_stock_saver_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "stock.sqlite"
    with sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        run_turns(graph, STOCK_THREADS[0], 2)
    code, shown, err = _json(capsys, "inspect", str(path), "--thread", STOCK_THREADS[0])
    assert code == 0, shown
    assert shown["binding_store"] is False
    assert all(e["unbound"] for e in shown["checkpoints"])
    assert [e["warning"] for e in shown["checkpoints"]] == [None] * len(shown["checkpoints"])
    assert "warning" not in err


def test_inspect_opens_0_3_sealed_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The viewer opens 0.3's metadata entries: each history as LangGraph showed it."""
    threads = ["m1", "m2", "m3"]
    path = v03.sqlite_copy(tmp_path / "cli.sqlite", threads)
    for thread in threads:
        code, shown, _ = _json(capsys, "inspect", str(path), "--thread", thread)
        assert code == 0, shown
        assert [e["error"] for e in shown["checkpoints"]] == [None] * len(shown["checkpoints"])
        assert {e["metadata"]["api_key"] for e in shown["checkpoints"]} == {v03.API_KEY}
        v03.assert_shown(shown["checkpoints"], v03.history("sqlite", thread))
    assert v03.API_KEY.encode() not in path.read_bytes()


def test_inspect_shows_a_write_moved_to_another_row_as_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = v03.sqlite_copy(tmp_path / "moved.sqlite", ["t0"])
    code, shown, _ = _json(capsys, "inspect", str(path), "--thread", "t0")
    assert code == 0
    assert [e["error"] for e in shown["checkpoints"]] == [None] * len(shown["checkpoints"])
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT rowid, checkpoint_id, type, value FROM writes ORDER BY rowid"
        ).fetchall()
        (victim, checkpoint_id, *_), (_, _, type_tag, value) = rows[0], rows[1]
        conn.execute(
            "UPDATE writes SET type = ?, value = ? WHERE rowid = ?", (type_tag, value, victim)
        )
    conn.close()
    code, shown, _ = _json(capsys, "inspect", str(path), "--thread", "t0")
    errors = {e["checkpoint_id"]: e["error"] for e in shown["checkpoints"]}
    assert errors[checkpoint_id] is not None
    assert [i for i, e in errors.items() if e is not None] == [checkpoint_id]


def test_a_0_3_thread_the_probe_cannot_tell_is_not_laundered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An attacker who corrupts every checkpoint of a 0.3 thread defeats the 0.3 probe.

    Then rewrap runs as on a stock store: it writes nothing (the 0.3 rows are under the
    primary already, and a pass never re-seals what it skips), and audit lists every 0.3 row,
    the bound writes included, as unreadable and exits 1.
    """
    path = v03.sqlite_copy(tmp_path / "unmarked.sqlite", (*STOCK_THREADS, "t0"))
    _without_metadata_entries(path, v03.serde(), "t0")
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = 't0'"
        ).fetchall()
        for checkpoint_id, blob in rows:
            flipped = bytes(blob[:-1]) + bytes([blob[-1] ^ 1])
            conn.execute(
                "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = 't0'"
                " AND checkpoint_id = ?",
                (flipped, checkpoint_id),
            )
        bound_writes = conn.execute(
            "SELECT count(*) FROM writes WHERE thread_id = 't0'"
        ).fetchone()[0]
    conn.close()
    before = _digest(path)

    report = rewrap(str(path), v03.serde())
    assert report.rewrapped == 0
    assert _digest(path) == before

    code, out, err = run_main(capsys, "audit", str(path))
    assert code == 1, (out, err)
    assert f"cannot decrypt: {len(rows) + bound_writes} " in out
    assert _digest(path) == before
