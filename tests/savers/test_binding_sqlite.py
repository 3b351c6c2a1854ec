"""The sealed SQLite savers return only checkpoints the application wrote, where it wrote them.

The same move matrix as on PostgreSQL: every stored value (checkpoint blob, pending write,
sealed-metadata envelope) is planted into every other value's row, across threads, namespaces,
checkpoints (the same thread's older checkpoint included), tasks, indices, channels and kinds.
Each read of the planted row raises `BindingError` and the planted value is never deserialized.
Re-parenting and editing plaintext metadata are refused too.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from secure_serde import (
    BindingError,
    ConfigurationError,
    MetadataDowngradeError,
    UnboundValueError,
)
from secure_serde._migration import Migration
from secure_serde.savers import SEALED_METADATA_KEY
from secure_serde.savers._v03_sqlite import AsyncSqliteSaver, SqliteSaver
from tests.savers.binding_support import (
    CHECKPOINTS,
    THREADS,
    Cell,
    check_refused,
    check_refused_async,
    configs,
    envelope,
    from_envelope,
    listings,
    marking_serde,
    per_checkpoint,
    populate,
    write_cells,
)

CELLS = [*per_checkpoint("checkpoint"), *write_cells(), *per_checkpoint("metadata")]


def _where(cell: Cell) -> tuple[str, tuple[Any, ...]]:
    ids = (cell.thread_id, cell.checkpoint_ns, *cell.key)
    if cell.kind == "write":
        return (
            "thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? AND task_id = ?"
            " AND idx = ? AND channel = ?",
            ids,
        )
    return "thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", ids


def get(conn: sqlite3.Connection, cell: Cell) -> tuple[str, bytes]:
    where, params = _where(cell)
    if cell.kind == "write":
        row = conn.execute(f"SELECT type, value FROM writes WHERE {where}", params).fetchone()  # noqa: S608
    elif cell.kind == "checkpoint":
        sql = f"SELECT type, checkpoint FROM checkpoints WHERE {where}"  # noqa: S608
        row = conn.execute(sql, params).fetchone()
    else:
        found = conn.execute(f"SELECT metadata FROM checkpoints WHERE {where}", params).fetchone()  # noqa: S608
        return from_envelope(json.loads(found[0])[SEALED_METADATA_KEY])
    assert row is not None, cell
    return row[0], bytes(row[1])


def put(conn: sqlite3.Connection, cell: Cell, value: tuple[str, bytes]) -> None:
    where, params = _where(cell)
    if cell.kind == "write":
        sql = f"UPDATE writes SET type = ?, value = ? WHERE {where}"  # noqa: S608
        done = conn.execute(sql, (*value, *params))
    elif cell.kind == "checkpoint":
        done = conn.execute(
            f"UPDATE checkpoints SET type = ?, checkpoint = ? WHERE {where}",  # noqa: S608
            (*value, *params),
        )
    else:
        found = conn.execute(f"SELECT metadata FROM checkpoints WHERE {where}", params).fetchone()  # noqa: S608
        metadata = json.loads(found[0])
        metadata[SEALED_METADATA_KEY] = envelope(value)
        done = conn.execute(
            f"UPDATE checkpoints SET metadata = ? WHERE {where}",  # noqa: S608
            (json.dumps(metadata, ensure_ascii=False).encode(), *params),
        )
    assert done.rowcount == 1, cell
    conn.commit()


def legitimately_read(source: Cell, target: Cell) -> bool:
    same = (source.thread_id, source.checkpoint_ns) == (target.thread_id, target.checkpoint_ns)
    return same and source.key[0] == target.key[0]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, SqliteSaver, Any]]:
    serde, inner = marking_serde()
    path = tmp_path / "bound.sqlite"
    with SqliteSaver.from_conn_string(str(path), serde=serde, plaintext_metadata=[]) as saver:
        populate(saver)
        with sqlite3.connect(path) as conn:
            yield conn, saver, inner


def test_every_value_reads_back_where_it_was_written(store: Any) -> None:
    _, saver, inner = store
    for config, tup in listings(saver):
        assert tup.parent_config == (
            None
            if tup.checkpoint["id"] == CHECKPOINTS[0]
            else {"configurable": {**config["configurable"], "checkpoint_id": CHECKPOINTS[0]}}
        )
    loaded = " ".join(inner.loaded)
    assert all(cell.marker in loaded for cell in CELLS if cell.kind != "checkpoint")


@pytest.mark.parametrize("target", CELLS, ids=str)
def test_every_value_moved_into_any_other_row_is_refused(store: Any, target: Cell) -> None:
    conn, saver, inner = store
    original = get(conn, target)
    for source in CELLS:
        if source == target:
            continue
        put(conn, target, get(conn, source))
        read_in_place = legitimately_read(source, target)
        check_refused(saver, inner, source, target, read_in_place=read_in_place)
        put(conn, target, original)
    assert all(saver.get_tuple(config) is not None for config in configs(target))


async def test_async_saver_refuses_moved_values(tmp_path: Path) -> None:
    serde, inner = marking_serde()
    path = tmp_path / "bound.sqlite"
    with SqliteSaver.from_conn_string(str(path), serde=serde, plaintext_metadata=[]) as sync:
        populate(sync)
    pairs = [
        (CELLS[0], CELLS[5]),
        (CELLS[10], CELLS[0]),
        (CELLS[-1], CELLS[-3]),
        (CELLS[-2], CELLS[12]),
    ]
    with sqlite3.connect(path) as conn:
        async with AsyncSqliteSaver.from_conn_string(
            str(path), serde=serde, plaintext_metadata=[]
        ) as saver:
            for source, target in pairs:
                original = get(conn, target)
                put(conn, target, get(conn, source))
                read_in_place = legitimately_read(source, target)
                await check_refused_async(saver, inner, source, target, read_in_place=read_in_place)
                put(conn, target, original)
                for config in configs(target):
                    assert await saver.aget_tuple(config) is not None


EDITS = {
    "re-parent": ("UPDATE checkpoints SET parent_checkpoint_id = ?", "1f0000000000000000000000"),
    "orphan": ("UPDATE checkpoints SET parent_checkpoint_id = ?", None),
    "edit plaintext metadata": (
        "UPDATE checkpoints SET metadata = json_set(metadata, '$.step', ?)",
        7,
    ),
    "drop metadata": ("UPDATE checkpoints SET metadata = ?", None),
    "drop the sealed envelope": (
        "UPDATE checkpoints SET metadata = json_remove(metadata, ?)",
        f"$.{SEALED_METADATA_KEY}",
    ),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_record_edits_are_refused(store: Any, edit: str) -> None:
    conn, saver, inner = store
    sql, value = EDITS[edit]
    where = " WHERE thread_id = 'tenant-a' AND checkpoint_ns = '' AND checkpoint_id = ?"
    assert conn.execute(sql + where, (value, CHECKPOINTS[1])).rowcount == 1
    conn.commit()
    ids = {"thread_id": "tenant-a", "checkpoint_ns": ""}
    inner.loaded.clear()
    with pytest.raises(BindingError):
        saver.get_tuple({"configurable": {**ids, "checkpoint_id": CHECKPOINTS[1]}})
    assert inner.loaded == []
    assert saver.get_tuple({"configurable": {**ids, "checkpoint_id": CHECKPOINTS[0]}})


def test_an_unbound_row_needs_the_migration_switch(tmp_path: Path) -> None:
    """A row the stock saver wrote, with the same serde, is refused unless migrating."""
    from langgraph.checkpoint.sqlite import SqliteSaver as StockSaver

    serde, _ = marking_serde()
    path = str(tmp_path / "stock.sqlite")
    with StockSaver.from_conn_string(path) as stock:
        stock.serde = serde
        populate(stock)
    config: RunnableConfig = {"configurable": {"thread_id": THREADS[0], "checkpoint_ns": ""}}
    with (
        SqliteSaver.from_conn_string(path, serde=serde) as strict,
        pytest.raises(UnboundValueError),
    ):
        strict.get_tuple(config)
    # Its metadata is all plaintext, which a sealing saver reads only under the switch too.
    with (
        SqliteSaver.from_conn_string(path, serde=serde, migration=Migration(unbound=True)) as half,
        pytest.raises(MetadataDowngradeError),
    ):
        half.get_tuple(config)
    with SqliteSaver.from_conn_string(
        path, serde=serde, migration=Migration(unbound=True, plaintext_metadata=True)
    ) as migrating:
        found = migrating.get_tuple(config)
        assert found is not None
        assert found.checkpoint["id"] == CHECKPOINTS[1]


def test_sealed_savers_need_a_binding_serde(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="EncryptedSerializer"):
        SqliteSaver(sqlite3.connect(tmp_path / "x.sqlite"))
