"""Rotation of a store SealedSaver sealed, on a real SQLite file and a real PostgreSQL database.

Each store is written by the thin constructors (`secure_serde.savers.sqlite.SqliteSaver`,
`secure_serde.savers.postgres.PostgresSaver`) with a real graph under key A, rotated to a
keyring with B primary (A still decrypting), rewrapped in place; then a saver holding only key
B must read every state and history exactly as A's saver did before, and `audit_sealed` must
count no cell outside the primary.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from secure_serde import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    Migration,
    RewrapProgress,
    StoreIdentityError,
    rewrap,
)
from secure_serde.crypto import format_v1 as _format
from secure_serde.sealing import cell_layout as _cell
from secure_serde.stores import StoreError, open_store
from tests.passes.live_writer import live_writer
from tests.passes.rewrap_support import (
    KEY_A,
    KEY_B,
    KEY_C,
    build_graph,
    config,
    key_id,
    resume,
    rotation_serde,
)
from tests.passes.sealed_support import (
    A_AND_B,
    CHAT_THREADS,
    audit,
    digest,
    factory,
    observe,
    populate,
    raw_rows,
    serde_a,
    serde_b,
    serde_rotated,
)


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    path = tmp_path / "sealed.sqlite"
    return str(path)


@pytest.fixture
def written(location: str) -> tuple[str, dict[str, Any]]:
    """A store written under A, and what A's saver reads from it."""
    open_saver = factory(location)
    populate(open_saver)
    return location, observe(open_saver, serde_a())


def test_rotation_then_only_b_reads_everything(written: tuple[str, dict[str, Any]]) -> None:
    location, before = written
    open_saver = factory(location)
    pending = audit(open_saver, serde_rotated())
    assert pending.not_under_primary > 0
    assert pending.under_primary == 0
    with pytest.raises(DecryptionError):
        observe(open_saver, serde_b())

    report = rewrap(location, serde_rotated())

    assert report.ok, report.failures
    assert report.rewrapped > 0
    assert report.primary.startswith("aesgcm/")
    assert sum(report.sources.values()) == report.rewrapped
    assert observe(open_saver, serde_b()) == before
    after = audit(open_saver, serde_b())
    assert after.findings == ()
    assert after.not_under_primary == 0
    assert after.under_primary == pending.not_under_primary
    # The graph resumes on B alone: a new turn on top of the rotated history.
    with open_saver(serde_b()) as saver:
        graph = build_graph(saver)
        resume(graph, CHAT_THREADS[0], "approved after rotation")
        assert graph.get_state(config(CHAT_THREADS[0])).values["approvals"][-1] == (
            "approved after rotation"
        )


def test_second_run_writes_nothing(written: tuple[str, dict[str, Any]]) -> None:
    location, _ = written
    first = rewrap(location, serde_rotated())
    assert first.rewrapped > 0
    rows = digest(raw_rows(location))

    second = rewrap(location, serde_rotated())

    assert second.ok
    assert second.rewrapped == 0
    assert second.current == second.scanned == first.scanned
    assert digest(raw_rows(location)) == rows
    # --verify opens every current cell too, and still writes nothing.
    verified = rewrap(location, serde_rotated(), verify=True)
    assert verified.ok
    assert verified.rewrapped == 0
    assert digest(raw_rows(location)) == rows


def test_dry_run_writes_nothing(written: tuple[str, dict[str, Any]]) -> None:
    location, before = written
    rows = digest(raw_rows(location))

    report = rewrap(location, serde_rotated(), dry_run=True)

    assert report.dry_run
    assert report.ok
    assert report.rewrapped > 0
    assert digest(raw_rows(location)) == rows
    assert audit(factory(location), serde_rotated()).under_primary == 0
    # What it said it would do is what a real run does.
    assert rewrap(location, serde_rotated()).rewrapped == report.rewrapped
    assert observe(factory(location), serde_b()) == before


def test_rotating_back_and_to_a_third_key(written: tuple[str, dict[str, Any]]) -> None:
    """B then C: cells under a key that is neither A nor the primary move too."""
    location, before = written
    assert rewrap(location, serde_rotated()).ok
    keys = {**A_AND_B, "c": KEY_C}
    report = rewrap(location, rotation_serde(keys, "c"))
    assert report.ok
    assert report.rewrapped > 0
    assert observe(factory(location), rotation_serde({"c": KEY_C}, "c")) == before


# ---------------------------------------------------------------------------------------------
# Rows that do not authenticate are listed and left


def _tamper(location: str) -> list[tuple[str, tuple[Any, ...]]]:
    """Flip a byte in one write cell, and move one record onto another checkpoint.

    Returns (table, key) of both rows.
    """
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            row = conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, blob"
                " FROM checkpoint_writes WHERE thread_id = %s ORDER BY 3 DESC, 4, 5 LIMIT 1",
                (CHAT_THREADS[1],),
            ).fetchone()
            assert row is not None
            blob = bytearray(row[5])
            blob[-1] ^= 1
            conn.execute(
                "UPDATE checkpoint_writes SET blob = %s WHERE thread_id = %s AND checkpoint_ns = %s"
                " AND checkpoint_id = %s AND task_id = %s AND idx = %s",
                (bytes(blob), *row[:5]),
            )
            first, second = conn.execute(
                "SELECT checkpoint_id, metadata ->> '__secure_serde__' FROM checkpoints"
                " WHERE thread_id = %s ORDER BY checkpoint_id LIMIT 2",
                (CHAT_THREADS[2],),
            ).fetchall()
            conn.execute(
                "UPDATE checkpoints SET metadata = jsonb_set(metadata, '{__secure_serde__}',"
                " to_jsonb(%s::text)) WHERE thread_id = %s AND checkpoint_id = %s",
                (first[1], CHAT_THREADS[2], second[0]),
            )
        return [
            ("checkpoint_writes", tuple(row[:5])),
            ("checkpoints.metadata", (CHAT_THREADS[2], "", second[0])),
        ]
    lite = sqlite3.connect(location)
    try:
        row = lite.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, value FROM writes"
            " WHERE thread_id = ? ORDER BY 3 DESC, 4, 5 LIMIT 1",
            (CHAT_THREADS[1],),
        ).fetchone()
        blob = bytearray(row[5])
        blob[-1] ^= 1
        lite.execute(
            "UPDATE writes SET value = ? WHERE thread_id = ? AND checkpoint_ns = ?"
            " AND checkpoint_id = ? AND task_id = ? AND idx = ?",
            (bytes(blob), *row[:5]),
        )
        first, second = lite.execute(
            "SELECT checkpoint_id, json_extract(CAST(metadata AS TEXT), '$.__secure_serde__')"
            " FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id LIMIT 2",
            (CHAT_THREADS[2],),
        ).fetchall()
        lite.execute(
            "UPDATE checkpoints SET metadata = json_set(CAST(metadata AS TEXT),"
            " '$.__secure_serde__', ?) WHERE thread_id = ? AND checkpoint_id = ?",
            (first[1], CHAT_THREADS[2], second[0]),
        )
        lite.commit()
    finally:
        lite.close()
    return [
        ("writes", tuple(row[:5])),
        ("checkpoints.metadata", (CHAT_THREADS[2], "", second[0])),
    ]


def _row_of(rows: dict[str, list[tuple[Any, ...]]], table: str, key: tuple[Any, ...]) -> Any:
    name = "checkpoints" if table == "checkpoints.metadata" else table
    width = len(key)
    found = [r for r in rows[name] if tuple(r[:width]) == key]
    assert len(found) == 1, (table, key)
    # The metadata column only: the checkpoint's own values (SQLite) move independently.
    if table == "checkpoints.metadata":
        return found[0][-1]
    return found[0][:-1] if table == "checkpoints" else found[0]


def test_tampered_and_moved_cells_are_listed_and_left(
    written: tuple[str, dict[str, Any]],
) -> None:
    location, _ = written
    bad = _tamper(location)
    before = raw_rows(location)

    report = rewrap(location, serde_rotated())

    assert not report.ok
    assert report.failure_count == 2
    listed = {(f.ref.table, f.ref.key_values) for f in report.failures}
    assert listed == {(table, key) for table, key in bad}
    assert all(
        f.error is not None and issubclass(f.error, DecryptionError) for f in report.failures
    )
    assert all("authenticate" in f.reason for f in report.failures)
    after = raw_rows(location)
    for table, key in bad:
        assert _row_of(after, table, key) == _row_of(before, table, key)
    # Everything else moved; the two checkpoints holding the bad cells do not open.
    found = audit(factory(location), serde_rotated())
    assert found.not_under_primary == 0
    assert len({(f.thread_id, f.checkpoint_id) for f in found.findings}) == 2
    # A rerun lists the same two rows, and writes nothing.
    rows = digest(after)
    again = rewrap(location, serde_rotated())
    assert again.failure_count == 2
    assert again.rewrapped == 0
    assert digest(raw_rows(location)) == rows


def _plant_plaintext(location: str) -> tuple[str, tuple[Any, ...]]:
    """Replace one sealed value with a plaintext one: a row without a cell."""
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            row = conn.execute(
                "SELECT thread_id, checkpoint_ns, channel, version FROM checkpoint_blobs"
                " WHERE thread_id = %s AND blob IS NOT NULL ORDER BY 4 DESC LIMIT 1",
                (CHAT_THREADS[0],),
            ).fetchone()
            assert row is not None
            conn.execute(
                "UPDATE checkpoint_blobs SET type = 'msgpack', blob = %s WHERE thread_id = %s"
                " AND checkpoint_ns = %s AND channel = %s AND version = %s",
                (b"\xa5plain", *row),
            )
        return "checkpoint_blobs", tuple(row)
    import ormsgpack

    lite = sqlite3.connect(location)
    try:
        row = lite.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint FROM checkpoints"
            " WHERE thread_id = ? ORDER BY 3 DESC LIMIT 1",
            (CHAT_THREADS[0],),
        ).fetchone()
        checkpoint = ormsgpack.unpackb(row[3])
        channel = next(iter(checkpoint["channel_values"]))
        checkpoint["channel_values"][channel] = b"plaintext planted"
        lite.execute(
            "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_ns = ?"
            " AND checkpoint_id = ?",
            (ormsgpack.packb(checkpoint), *row[:3]),
        )
        lite.commit()
    finally:
        lite.close()
    return "checkpoints", tuple(row[:3])


def test_a_row_without_a_cell_is_a_failure_never_sealed(
    written: tuple[str, dict[str, Any]],
) -> None:
    location, _ = written
    table, key = _plant_plaintext(location)
    before = raw_rows(location)

    report = rewrap(location, serde_rotated())

    assert [(f.ref.table, f.ref.key_values) for f in report.failures] == [(table, key)]
    failure = report.failures[0]
    assert failure.error is not None
    assert issubclass(failure.error, BindingError)
    assert "sealed" in failure.reason
    assert _row_of(raw_rows(location), table, key) == _row_of(before, table, key)


def test_migration_switches_and_compress_are_refused(written: tuple[str, dict[str, Any]]) -> None:
    location, _ = written
    rows = digest(raw_rows(location))
    with pytest.raises(ConfigurationError, match="never seals"):
        rewrap(location, serde_rotated(), migration=Migration(plaintext=True))
    with pytest.raises(ConfigurationError, match="compress"):
        rewrap(location, serde_rotated(), compress=True)
    assert digest(raw_rows(location)) == rows


def test_keys_that_do_not_open_the_identity_refuse_the_store(
    written: tuple[str, dict[str, Any]],
) -> None:
    location, _ = written
    rows = digest(raw_rows(location))
    with pytest.raises(StoreIdentityError):
        rewrap(location, rotation_serde({"c": KEY_C}, "c"))
    assert digest(raw_rows(location)) == rows


def test_the_0_3_passes_still_refuse_a_sealed_store(written: tuple[str, dict[str, Any]]) -> None:
    location, _ = written
    with pytest.raises(StoreError, match="SealedSaver"):
        open_store(location)


def test_the_identity_moves_to_the_primary(written: tuple[str, dict[str, Any]]) -> None:
    location, _ = written
    old = _cell.from_text(_identity_text(location), _cell.IDENTITY)
    report = rewrap(location, serde_rotated())
    assert report.ok
    cell = _cell.from_text(_identity_text(location), _cell.IDENTITY)
    assert cell.type_tag == old.type_tag == "msgpack+aesgcm"
    header = _format.key_id_hex(cell.ciphertext[1 : _format.HEADER_SIZE])
    assert report.primary == f"aesgcm/{header}" == f"aesgcm/{key_id(KEY_B)}"
    assert _format.key_id_hex(old.ciphertext[1 : _format.HEADER_SIZE]) == key_id(KEY_A)


def _identity_text(location: str) -> str:
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location) as conn:
            row = conn.execute(
                "SELECT metadata ->> '__secure_serde_store__' FROM checkpoints"
                " WHERE thread_id = '__secure_serde_store__'"
            ).fetchone()
    else:
        conn2 = sqlite3.connect(location)
        try:
            row = conn2.execute(
                "SELECT json_extract(CAST(metadata AS TEXT), '$.__secure_serde_store__')"
                " FROM checkpoints WHERE thread_id = '__secure_serde_store__'"
            ).fetchone()
        finally:
            conn2.close()
    assert row is not None
    return str(row[0])


# ---------------------------------------------------------------------------------------------
# The application keeps writing while the pass runs


def test_a_concurrent_writer_loses_nothing(written: tuple[str, dict[str, Any]]) -> None:
    location, before = written
    open_saver = factory(location)

    def open_graph() -> Any:
        from contextlib import contextmanager

        @contextmanager
        def graph() -> Any:
            # The application not rolled over yet: it still writes under A.
            with open_saver(rotation_serde(A_AND_B, "a")) as saver:
                yield build_graph(saver)

        return graph()

    batches = 0

    def interleave(_: RewrapProgress) -> None:
        # After the first batch, wait for the writer to finish a turn: one certainly lands
        # while the pass runs, whatever the machine's speed.
        nonlocal batches
        batches += 1
        if batches == 1:
            writer.wait_for(len(writer.done) + 1)

    with live_writer(open_graph, lambda turn: f"live-{turn % 3}", min_turns=6) as writer:
        writer.wait_for(2)
        started = writer.mark()
        during = rewrap(location, serde_rotated(), batch_size=3, progress=interleave)
        landed = writer.since(started)
        assert during.ok, during.failures
        writer.wait_for(len(writer.done) + 2)
    assert batches >= 1
    assert landed, "no turn landed while a pass ran"
    # Rows the writer added behind the cursor were under A: a rerun moves them.
    final = rewrap(location, serde_rotated())
    assert final.ok
    assert audit(open_saver, serde_b()).not_under_primary == 0
    assert observe(open_saver, serde_b()) == before
    with open_saver(serde_b()) as saver:
        writer.check_turns_kept(build_graph(saver), base_turns=0)


def test_postgres_workers_rotate_a_sealed_store(postgres_url: str) -> None:
    """Forked workers, each on a range of thread ids, reopen the store as sealed rows."""
    open_saver = factory(postgres_url)
    populate(open_saver)
    before = observe(open_saver, serde_a())

    report = rewrap(postgres_url, serde_rotated(), workers=2, batch_size=7)

    assert report.ok, report.failures
    assert report.workers == 2
    assert report.rewrapped > 0
    assert observe(open_saver, serde_b()) == before
    assert audit(open_saver, serde_b()).not_under_primary == 0


def test_a_stripped_and_forged_record_is_listed_never_sealed(tmp_path: Path) -> None:
    """The review's attack 1: strip a record, forge the metadata, wait for maintenance."""
    import json

    path = tmp_path / "sealed.sqlite"
    populate(factory(path))
    lite = sqlite3.connect(path)
    try:
        checkpoint_id, metadata = lite.execute(
            "SELECT checkpoint_id, CAST(metadata AS TEXT) FROM checkpoints WHERE thread_id = ?"
            " ORDER BY checkpoint_id DESC LIMIT 1",
            (CHAT_THREADS[0],),
        ).fetchone()
        forged = json.loads(metadata)
        del forged["__secure_serde__"]
        forged["user_id"] = "mallory"
        lite.execute(
            "UPDATE checkpoints SET metadata = ? WHERE thread_id = ? AND checkpoint_id = ?",
            (json.dumps(forged), CHAT_THREADS[0], checkpoint_id),
        )
        lite.commit()
    finally:
        lite.close()

    for run in (rewrap(path, serde_rotated()), rewrap(path, serde_rotated(), dry_run=True)):
        assert [(f.ref.table, f.ref.key_values) for f in run.failures] == [
            ("checkpoints.metadata", (CHAT_THREADS[0], "", checkpoint_id))
        ]
        assert "no sealed record" in run.failures[0].reason
    after = _row_of(
        sqlite_rows_of(path), "checkpoints.metadata", (CHAT_THREADS[0], "", checkpoint_id)
    )
    assert json.loads(after) == forged


def sqlite_rows_of(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    return raw_rows(str(path))
