"""`bind_sqlite` / `bind_postgres` on stores the stock langgraph savers wrote, with a real graph.

Once bound, the sealed savers read the store with no migration switch at all, and every
history, time-travel read and pending interrupt is what the stock saver stored. The pass is
idempotent, writes nothing in a dry run, refuses (and keeps) a tampered row, never overwrites
a row another writer changed after it was read, and leaves a store in which a moved value is
refused as in any store the sealed savers wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from secure_serde import BindingError, DecryptionError, Migration
from secure_serde.savers import BindReport, bind_sqlite
from secure_serde.savers._bind_in_place import Tally
from secure_serde.savers._bind_sqlite import CHECKPOINT_PASS, plan_page, swap_page
from secure_serde.savers._bind_values import ValueRebinder
from secure_serde.savers._v03_sqlite import SqliteSaver
from tests.rewrap.bind_support import (
    THREADS,
    Db,
    config,
    histories,
    run_turns,
    sealed_graph,
    serde,
    sqlite_db,
    written_by_stock,
)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Db:
    if request.param == "sqlite":
        return sqlite_db(tmp_path)
    return Db("postgres", request.getfixturevalue("postgres_url"))


def _flip_last_byte(db: Db) -> tuple[Any, ...]:
    """Tamper with one pending write's ciphertext; return its key."""
    table, value = ("writes", "value") if db.kind == "sqlite" else ("checkpoint_writes", "blob")
    key = "thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
    (row,) = db.execute(f"SELECT {key}, {value} FROM {table} ORDER BY {key} LIMIT 1")  # noqa: S608
    data = bytearray(row[5])
    data[-1] ^= 1
    db.execute(
        f"UPDATE {table} SET {value} = ? WHERE thread_id = ? AND checkpoint_ns = ?"  # noqa: S608
        " AND checkpoint_id = ? AND task_id = ? AND idx = ?",
        (bytes(data), *row[:5]),
    )
    return tuple(row[:5])


def test_a_stock_store_once_bound_reads_with_no_migration_switch(db: Db) -> None:
    reference = written_by_stock(db)
    # Before: the sealed saver refuses the stock rows by name.
    with sealed_graph(db) as graph, pytest.raises(DecryptionError):
        graph.get_state(config(THREADS[0]))

    report = db.bind()
    assert report.ok, report.refusals
    assert report.refused == report.raced == report.already_bound == 0
    assert report.checkpoints_sealed == sum(len(h) for h in reference.values())
    assert report.writes_bound > 0
    if db.kind == "postgres":
        assert report.blobs_bound > 0
        # The str and int channels (and langgraph's None-valued branch channels) moved.
        assert report.inline_values_moved > 0
        leftover = db.execute("SELECT checkpoint -> 'channel_values' FROM checkpoints")
        assert all(values == {} for (values,) in leftover)

    with sealed_graph(db) as graph:
        assert histories(graph) == reference
        # Time travel: every past checkpoint reads back as it was.
        for snapshot in reference[THREADS[0]]:
            assert graph.get_state(snapshot.config) == snapshot
        # The pending interrupt resumes, and the thread goes on, bound.
        graph.invoke(Command(resume="approved after binding"), config(THREADS[0]))
        assert graph.get_state(config(THREADS[0])).values["approvals"][-1] == (
            "approved after binding"
        )
        # Replay from an older checkpoint forks the thread from there.
        older = reference[THREADS[1]][3].config
        graph.invoke(None, older)
        assert len(list(graph.get_state_history(config(THREADS[1])))) > len(reference[THREADS[1]])


def test_a_second_pass_changes_nothing(db: Db) -> None:
    written_by_stock(db)
    first = db.bind()
    rows = db.rows()
    second = db.bind()
    assert second.changed == second.inline_values_moved == second.refused == 0
    # Every value and record is counted once, the blobs the first pass created included.
    held = sum(len(r) for r in rows.values())
    if db.kind == "postgres":
        held -= len(db.execute("SELECT 1 FROM checkpoint_blobs WHERE type = 'empty'"))
    assert first.already_bound == 0
    assert second.already_bound == held
    assert db.rows() == rows


def test_a_dry_run_writes_nothing_and_counts_what_a_pass_does(db: Db) -> None:
    written_by_stock(db)
    rows = db.rows()
    dry = db.bind(dry_run=True)
    assert db.rows() == rows
    assert dry.dry_run
    real = db.bind()
    assert (dry.checkpoints_sealed, dry.blobs_bound, dry.writes_bound) == (
        real.checkpoints_sealed,
        real.blobs_bound,
        real.writes_bound,
    )
    # Each checkpoint counts its own inline values, whether or not another moved them first.
    assert dry.inline_values_moved == real.inline_values_moved


def test_a_tampered_row_is_refused_by_name_and_left_as_it_was(db: Db) -> None:
    written_by_stock(db)
    key = _flip_last_byte(db)
    table = "writes" if db.kind == "sqlite" else "checkpoint_writes"
    before = [r for r in db.rows()[table] if tuple(r[:5]) == key]

    report = db.bind()
    assert report.refused == 1
    (refusal,) = report.refusals
    assert refusal.startswith(f"{table} {key!r}: ")
    assert "Error" in refusal.split(": ")[1]
    assert [r for r in db.rows()[table] if tuple(r[:5]) == key] == before
    # Everything else was bound; the refused row is refused again, nothing else changes.
    again = db.bind()
    assert (again.changed, again.refused) == (0, 1)


def test_an_unbound_row_is_refused_without_the_unbound_switch(db: Db) -> None:
    written_by_stock(db)
    rows = db.rows()
    report = db.bind(migration=Migration(inline_values=True))
    assert report.changed == 0
    assert report.refused > 0
    assert all("UnboundValueError" in r for r in report.refusals)
    assert db.rows() == rows


def test_a_row_changed_after_it_was_read_is_not_overwritten_sqlite(tmp_path: Path) -> None:
    db = sqlite_db(tmp_path)
    written_by_stock(db)
    with SqliteSaver.from_conn_string(db.location, serde=serde()) as saver:
        rows = [
            dict(zip(CHECKPOINT_PASS.columns, r, strict=True))
            for r in saver.conn.execute(CHECKPOINT_PASS.first_sql, (1000,))
        ]
        tally = Tally()
        swaps = plan_page(
            ValueRebinder(serde(), Migration(unbound=True)), tally, CHECKPOINT_PASS, rows
        )
        assert len(swaps) == len(rows)
        # Another writer rewrites one checkpoint between our read and our write.
        target = rows[0]
        db.execute(
            "UPDATE checkpoints SET metadata = ? WHERE thread_id = ? AND checkpoint_ns = ?"
            " AND checkpoint_id = ?",
            (
                b'{"writer": "concurrent"}',
                target["thread_id"],
                target["checkpoint_ns"],
                target["checkpoint_id"],
            ),
        )
        applied = swap_page(saver.conn, CHECKPOINT_PASS, swaps)
    assert applied == len(swaps) - 1
    (kept,) = db.execute(
        "SELECT type, checkpoint, metadata FROM checkpoints WHERE checkpoint_id = ?"
        " AND thread_id = ?",
        (target["checkpoint_id"], target["thread_id"]),
    )
    assert kept == (target["type"], target["checkpoint"], b'{"writer": "concurrent"}')


def test_a_row_changed_after_it_was_read_is_not_overwritten_postgres(postgres_url: str) -> None:
    from secure_serde.savers._bind_postgres import existing_blobs, write_checkpoints
    from secure_serde.savers._bind_record import plan_checkpoint
    from secure_serde.savers._bound import Binder

    db = Db("postgres", postgres_url)
    written_by_stock(db)
    with db.sealed() as saver:
        with saver._cursor() as cur:
            cur.execute(
                "SELECT DISTINCT ON (thread_id) thread_id, checkpoint_ns, checkpoint_id,"
                " parent_checkpoint_id, checkpoint, metadata FROM checkpoints"
                " ORDER BY thread_id, checkpoint_id DESC"
            )
            rows = cur.fetchall()
            existing = existing_blobs(cur, rows)
        migration = Migration(unbound=True, inline_values=True)
        binder = Binder(serde(), migration)
        plans = [plan_checkpoint(binder, migration, r, existing) for r in rows]
        assert None not in plans
        row = rows[0]
        assert plans[0] is not None
        assert plans[0].inserts
        assert plans[0].moved
        # The application writes this checkpoint's metadata again meanwhile.
        db.execute(
            'UPDATE checkpoints SET metadata = metadata || \'{"by": "app"}\'::jsonb'
            " WHERE checkpoint_id = ? AND thread_id = ?",
            (row["checkpoint_id"], row["thread_id"]),
        )
        # The other thread's checkpoint lands; this one is left to the application.
        assert write_checkpoints(saver, [p for p in plans if p is not None]) == [False, True]
    (kept, metadata) = db.execute(
        "SELECT checkpoint, metadata FROM checkpoints WHERE checkpoint_id = ? AND thread_id = ?",
        (row["checkpoint_id"], row["thread_id"]),
    )[0]
    assert kept == row["checkpoint"]
    assert metadata["by"] == "app"
    # Its record is unsealed still, so the sealed saver refuses it until the next pass.
    with sealed_graph(db) as graph, pytest.raises(DecryptionError):
        graph.get_state(
            {"configurable": {"thread_id": row["thread_id"], "checkpoint_id": row["checkpoint_id"]}}
        )
    # The next pass binds it, as the application left it.
    report = db.bind()
    assert report.ok
    with sealed_graph(db) as graph:
        assert (
            graph.get_state(
                {
                    "configurable": {
                        "thread_id": row["thread_id"],
                        "checkpoint_id": row["checkpoint_id"],
                    }
                }
            ).metadata["by"]
            == "app"
        )


def test_a_bound_value_moved_to_another_row_is_refused(db: Db) -> None:
    written_by_stock(db)
    assert db.bind().ok
    if db.kind == "sqlite":
        table, value = "writes", "value"
    else:
        table, value = "checkpoint_writes", "blob"
    # Copy the first thread's latest interrupt write over the second thread's.
    key = "thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
    source, target = (
        db.execute(
            f"SELECT {key}, type, {value} FROM {table} WHERE thread_id = ?"  # noqa: S608
            " AND channel = '__interrupt__' ORDER BY checkpoint_id DESC LIMIT 1",
            (thread,),
        )[0]
        for thread in THREADS
    )
    db.execute(
        f"UPDATE {table} SET type = ?, {value} = ? WHERE thread_id = ? AND checkpoint_ns = ?"  # noqa: S608
        " AND checkpoint_id = ? AND task_id = ? AND idx = ?",
        (source[5], source[6], *target[:5]),
    )
    with sealed_graph(db) as graph, pytest.raises(BindingError):
        graph.get_state(config(THREADS[1]))


def test_a_bound_blob_moved_to_another_thread_is_refused(postgres_url: str) -> None:
    db = Db("postgres", postgres_url)
    written_by_stock(db)
    assert db.bind().ok
    # The mood blob the second thread's latest checkpoint reads, overwritten with the first's.
    (version,) = db.execute(
        "SELECT checkpoint -> 'channel_versions' ->> 'mood' FROM checkpoints"
        " WHERE thread_id = ? ORDER BY checkpoint_id DESC LIMIT 1",
        (THREADS[1],),
    )[0]
    (source,) = db.execute(
        "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = ? AND channel = 'mood'"
        " ORDER BY version DESC LIMIT 1",
        (THREADS[0],),
    )
    db.execute(
        "UPDATE checkpoint_blobs SET type = ?, blob = ? WHERE thread_id = ? AND channel = 'mood'"
        " AND version = ?",
        (*source, THREADS[1], version),
    )
    with sealed_graph(db) as graph, pytest.raises(BindingError):
        graph.get_state(config(THREADS[1]))


def test_the_report_is_frozen_and_counts_changes() -> None:
    report = BindReport(checkpoints_sealed=2, blobs_bound=3, writes_bound=4, refused=1)
    assert report.changed == 9
    assert not report.ok
    with pytest.raises(AttributeError):
        report.refused = 0  # type: ignore[misc]


def test_a_saver_without_an_encrypting_serde_is_refused(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver

    from secure_serde import ConfigurationError

    with (
        StockSqliteSaver.from_conn_string(str(tmp_path / "x.sqlite")) as saver,
        pytest.raises(ConfigurationError),
    ):
        bind_sqlite(saver)  # type: ignore[arg-type]


def test_a_thread_the_sealed_saver_continued_under_migration_binds(db: Db) -> None:
    written_by_stock(db)
    # The application switched to the sealed saver before binding: it reads the stock rows
    # under the migration switch and writes bound ones on top of them, in the same threads.
    with sealed_graph(db, migration=Migration(unbound=True, inline_values=True)) as graph:
        run_turns(graph, THREADS[0], 2)
        reference = histories(graph)
    report = db.bind()
    assert report.ok, report.refusals
    # The sealed saver's own records verify and are left alone; the stock ones are sealed.
    assert report.already_bound > 0
    assert report.checkpoints_sealed > 0
    with sealed_graph(db) as graph:
        assert histories(graph) == reference


def test_after_binding_records_are_authenticated(db: Db) -> None:
    written_by_stock(db)
    assert db.bind().ok
    (checkpoint_id, parent_id) = db.execute(
        "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = ?"
        " ORDER BY checkpoint_id DESC LIMIT 1",
        (THREADS[0],),
    )[0]
    # Re-parent the latest checkpoint onto its grandparent.
    (grandparent,) = db.execute(
        "SELECT parent_checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
        (THREADS[0], parent_id),
    )[0]
    db.execute(
        "UPDATE checkpoints SET parent_checkpoint_id = ? WHERE thread_id = ? AND checkpoint_id = ?",
        (grandparent, THREADS[0], checkpoint_id),
    )
    with sealed_graph(db) as graph, pytest.raises(BindingError):
        graph.get_state(config(THREADS[0]))
    # The binding pass does not vouch for it either: refused, left as it is.
    report = db.bind()
    assert report.refused == 1
    assert "BindingError" in report.refusals[0]
