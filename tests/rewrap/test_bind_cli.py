"""``secure-serde rewrap --bind`` (and ``--seal-metadata``) on stores the stock savers wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from secure_serde import DecryptionError
from tests.rewrap.bind_support import (
    KEY,
    THREADS,
    Db,
    config,
    histories,
    sealed_graph,
    sqlite_db,
    written_by_stock,
)
from tests.rewrap.rewrap_support import KeyEnv, run_cli

ENV = KeyEnv(env_key=KEY.decode(), keyring=None)


def test_rewrap_bind_on_sqlite(tmp_path: Path) -> None:
    db = sqlite_db(tmp_path)
    reference = written_by_stock(db)
    rows = db.rows()

    dry = run_cli(ENV, tmp_path, "rewrap", db.location, "--bind", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "bind: would bind 22 checkpoint record(s), 0 blob(s)" in dry.stdout
    assert db.rows() == rows

    done = run_cli(ENV, tmp_path, "rewrap", db.location, "--bind")
    assert done.returncode == 0, done.stderr
    assert "bind: bound 22 checkpoint record(s)" in done.stdout
    assert "refused 0" in done.stdout
    with sealed_graph(db) as graph:
        assert histories(graph) == reference

    again = run_cli(ENV, tmp_path, "rewrap", db.location, "--bind")
    assert again.returncode == 0, again.stderr
    assert "bind: bound 0 checkpoint record(s), 0 blob(s), 0 write(s)" in again.stdout


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_rewrap_bind_and_seal_metadata(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    db = (
        sqlite_db(tmp_path)
        if kind == "sqlite"
        else Db("postgres", request.getfixturevalue("postgres_url"))
    )
    reference = written_by_stock(db)
    # The sealed saver's default policy seals metadata: a stock store's is refused.
    with sealed_graph(db, seal_metadata=True) as graph, pytest.raises(DecryptionError):
        graph.get_state(config(THREADS[0]))

    done = run_cli(ENV, tmp_path, "rewrap", db.location, "--bind", "--seal-metadata")
    assert done.returncode == 0, done.stderr
    # Only the stock PostgreSQL saver keeps channel values inline.
    assert ("moved 0 inline" in done.stdout) == (kind == "sqlite")
    assert "metadata: resealed 22, already current 0" in done.stdout

    with sealed_graph(db, seal_metadata=True) as graph:
        got = histories(graph)
    assert {t: [s.values for s in h] for t, h in got.items()} == {
        t: [s.values for s in h] for t, h in reference.items()
    }
    assert {t: [s.metadata for s in h] for t, h in got.items()} == {
        t: [s.metadata for s in h] for t, h in reference.items()
    }
    rows = db.rows()
    again = run_cli(ENV, tmp_path, "rewrap", db.location, "--bind", "--seal-metadata")
    assert again.returncode == 0, again.stderr
    assert "metadata: resealed 0" in again.stdout
    assert db.rows() == rows


def test_seal_metadata_needs_bind(tmp_path: Path) -> None:
    db = sqlite_db(tmp_path)
    written_by_stock(db)
    done = run_cli(ENV, tmp_path, "rewrap", db.location, "--seal-metadata")
    assert done.returncode == 2
    assert "--seal-metadata and its options need --bind" in done.stderr


def test_a_tampered_row_fails_the_command_by_name(tmp_path: Path) -> None:
    db = sqlite_db(tmp_path)
    written_by_stock(db)
    (row,) = db.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint FROM checkpoints"
        " ORDER BY checkpoint_id LIMIT 1"
    )
    data = bytearray(row[3])
    data[-1] ^= 1
    db.execute(
        "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
        (bytes(data), row[0], row[2]),
    )
    done = run_cli(ENV, tmp_path, "rewrap", db.location, "--bind")
    assert done.returncode == 1
    assert "refused 1" in done.stdout
    assert "rows that could not be bound:" in done.stdout
    assert f"checkpoints ({row[0]!r}, '', {row[2]!r}): " in done.stdout


def test_a_database_error_is_named_by_class_only(tmp_path: Path) -> None:
    db = sqlite_db(tmp_path)
    written_by_stock(db)
    db.execute(
        "CREATE TRIGGER refuse BEFORE UPDATE ON checkpoints"
        " BEGIN SELECT RAISE(ABORT, 'driver message with password=hunter2'); END"
    )
    done = run_cli(ENV, tmp_path, "rewrap", db.location, "--bind")
    assert done.returncode == 2
    assert "failed: IntegrityError" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
