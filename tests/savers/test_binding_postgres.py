"""The sealed PostgreSQL savers return only checkpoints the application wrote, where it wrote them.

Every stored value (channel blob, pending write, sealed-metadata envelope, checkpoint-record
seal) is planted into every other value's row, across threads, namespaces, channels, versions
(the same thread at an older version included), checkpoints, tasks, indices and kinds. Each read
that touches the planted row raises `BindingError`, and the planted value is never
deserialized. Re-pointing ``channel_versions``, re-parenting and editing plaintext metadata are
refused the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.postgres import PostgresSaver as StockSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer
from psycopg.types.json import Jsonb
from typing_extensions import TypedDict

from secure_serde import BindingError, DecryptionError
from secure_serde.savers import SEALED_METADATA_KEY
from secure_serde.savers._bound import RECORD_KEY
from secure_serde.savers._v03_postgres import AsyncPostgresSaver, PostgresSaver
from tests.fixtures_services import saver_connection
from tests.graphs_support import linear_graph
from tests.savers.binding_support import (
    CHECKPOINTS,
    NAMESPACES,
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
    reads,
    version,
    write_cells,
)


def blob_cells() -> Iterator[Cell]:
    for thread_id in THREADS:
        for ns in NAMESPACES:
            for channel, at in (("x", version(1)), ("x", version(2)), ("y", version(1))):
                yield Cell("blob", thread_id, ns, (channel, at))


CELLS = [*blob_cells(), *write_cells(), *per_checkpoint("metadata"), *per_checkpoint("record")]


def _where(cell: Cell) -> tuple[str, tuple[Any, ...]]:
    ids = (cell.thread_id, cell.checkpoint_ns, *cell.key)
    if cell.kind == "blob":
        return "thread_id = %s AND checkpoint_ns = %s AND channel = %s AND version = %s", ids
    if cell.kind == "write":
        return (
            "thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s"
            " AND idx = %s AND channel = %s",
            ids,
        )
    return "thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s", ids


def get(conn: psycopg.Connection[Any], cell: Cell) -> tuple[str, bytes]:
    where, params = _where(cell)
    if cell.kind in ("blob", "write"):
        table = "checkpoint_blobs" if cell.kind == "blob" else "checkpoint_writes"
        row = conn.execute(f"SELECT type, blob FROM {table} WHERE {where}", params).fetchone()  # noqa: S608
        assert row is not None, cell
        return row["type"], bytes(row["blob"])
    column, key = _json_slot(cell)
    row = conn.execute(f"SELECT {column} -> %s AS v FROM checkpoints WHERE {where}", (key, *params))  # noqa: S608
    found = row.fetchone()
    assert found is not None, cell
    assert found["v"] is not None, cell
    return from_envelope(found["v"])


def put(conn: psycopg.Connection[Any], cell: Cell, value: tuple[str, bytes]) -> None:
    where, params = _where(cell)
    if cell.kind in ("blob", "write"):
        table = "checkpoint_blobs" if cell.kind == "blob" else "checkpoint_writes"
        done = conn.execute(
            f"UPDATE {table} SET type = %s, blob = %s WHERE {where}",  # noqa: S608
            (*value, *params),
        )
    else:
        column, key = _json_slot(cell)
        done = conn.execute(
            f"UPDATE checkpoints SET {column} = jsonb_set({column}, %s, %s) WHERE {where}",  # noqa: S608
            ([key], Jsonb(envelope(value)), *params),
        )
    assert done.rowcount == 1, cell


def _json_slot(cell: Cell) -> tuple[str, str]:
    if cell.kind == "metadata":
        return "metadata", SEALED_METADATA_KEY
    return "checkpoint", RECORD_KEY


def thread_of(cell: Cell) -> RunnableConfig:
    return {"configurable": {"thread_id": cell.thread_id, "checkpoint_ns": cell.checkpoint_ns}}


def legitimately_read(source: Cell, target: Cell) -> bool:
    """Whether the reads of ``target``'s checkpoints also read ``source`` in its own row."""
    same = (source.thread_id, source.checkpoint_ns) == (target.thread_id, target.checkpoint_ns)
    return same and any(reads(source, c["configurable"]["checkpoint_id"]) for c in configs(target))


@pytest.fixture
def store(postgres_url: str) -> Iterator[tuple[psycopg.Connection[Any], PostgresSaver, Any]]:
    serde, inner = marking_serde()
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
        saver = PostgresSaver(conn, serde=serde, plaintext_metadata=[])
        populate(saver)
        yield conn, saver, inner


def test_every_value_reads_back_where_it_was_written(store: Any) -> None:
    _, saver, inner = store
    assert len(listings(saver)) == len(THREADS) * len(NAMESPACES) * len(CHECKPOINTS)
    loaded = " ".join(inner.loaded)
    assert all(cell.marker in loaded for cell in CELLS if cell.kind != "record")


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
        if source == CELLS[0] or (target == CELLS[0] and source == CELLS[1]):
            with pytest.raises(BindingError):
                list(saver.list(thread_of(target)))
        put(conn, target, original)
    assert all(saver.get_tuple(config) is not None for config in configs(target))


async def test_async_saver_refuses_moved_values(postgres_url: str) -> None:
    serde, inner = marking_serde()
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
        populate(PostgresSaver(conn, serde=serde, plaintext_metadata=[]))
        pairs = [
            (CELLS[0], CELLS[1]),
            (CELLS[3], CELLS[20]),
            (CELLS[-1], CELLS[-2]),
            (CELLS[-5], CELLS[2]),
        ]
        async with AsyncPostgresSaver.from_conn_string(
            postgres_url, serde=serde, plaintext_metadata=[]
        ) as saver:
            for source, target in pairs:
                original = get(conn, target)
                put(conn, target, get(conn, source))
                read_in_place = legitimately_read(source, target)
                await check_refused_async(saver, inner, source, target, read_in_place=read_in_place)
                put(conn, target, original)
                for config in configs(target):
                    assert await saver.aget_tuple(config) is not None


def _record(conn: psycopg.Connection[Any], thread_id: str, checkpoint_id: str) -> Any:
    return conn.execute(
        "SELECT * FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''"
        " AND checkpoint_id = %s",
        (thread_id, checkpoint_id),
    ).fetchone()


EDITS = {
    # c2 reads x at version 2; point it at version 1, whose blob exists and is valid there.
    "re-point channel_versions": (
        "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_versions,x}', %s)",
        Jsonb(version(1)),
    ),
    "re-parent": ("UPDATE checkpoints SET parent_checkpoint_id = %s", "1f0000000000000000000000"),
    "edit plaintext metadata": (
        "UPDATE checkpoints SET metadata = jsonb_set(metadata, '{step}', %s)",
        Jsonb(7),
    ),
    "drop the record seal": (
        "UPDATE checkpoints SET checkpoint = checkpoint - %s",
        RECORD_KEY,
    ),
    "edit versions_seen": (
        "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{versions_seen}', %s)",
        Jsonb({"node": {"x": version(1)}}),
    ),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_record_edits_are_refused(store: Any, edit: str) -> None:
    conn, saver, inner = store
    sql, value = EDITS[edit]
    where = " WHERE thread_id = 'tenant-a' AND checkpoint_ns = '' AND checkpoint_id = %s"
    conn.execute(sql + where, (value, CHECKPOINTS[1]))
    config = {
        "configurable": {
            "thread_id": "tenant-a",
            "checkpoint_ns": "",
            "checkpoint_id": CHECKPOINTS[1],
        }
    }
    inner.loaded.clear()
    with pytest.raises(DecryptionError) as raised:
        saver.get_tuple(config)
    assert isinstance(raised.value, BindingError)
    assert inner.loaded == []
    # The other thread is untouched.
    assert saver.get_tuple(
        {**config, "configurable": {**config["configurable"], "thread_id": "tenant-b"}}
    )


def test_swapping_whole_checkpoint_rows_between_threads_is_refused(store: Any) -> None:
    conn, saver, inner = store
    a, b = (_record(conn, t, CHECKPOINTS[0]) for t in THREADS)
    for row, other in ((a, b), (b, a)):
        conn.execute(
            "UPDATE checkpoints SET checkpoint = %s, metadata = %s WHERE thread_id = %s"
            " AND checkpoint_ns = '' AND checkpoint_id = %s",
            (
                Jsonb(other["checkpoint"]),
                Jsonb(other["metadata"]),
                row["thread_id"],
                CHECKPOINTS[0],
            ),
        )
    for thread_id in THREADS:
        config = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": CHECKPOINTS[0],
            }
        }
        with pytest.raises(BindingError):
            saver.get_tuple(config)
    assert inner.loaded == []


def test_a_link_nulled_by_pruning_still_verifies(store: Any) -> None:
    """keep_latest nulls the parent link of the checkpoint it keeps: that is deleting history."""
    conn, saver, _ = store
    conn.execute(
        "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE checkpoint_id = %s",
        (CHECKPOINTS[1],),
    )
    ids = {"thread_id": THREADS[0], "checkpoint_ns": ""}
    found = saver.get_tuple({"configurable": {**ids, "checkpoint_id": CHECKPOINTS[1]}})
    assert found is not None
    assert found.parent_config is None
    # Re-linking it to any checkpoint but its own parent is refused.
    conn.execute(
        "UPDATE checkpoints SET parent_checkpoint_id = %s WHERE checkpoint_id = %s",
        (CHECKPOINTS[1], CHECKPOINTS[1]),
    )
    with pytest.raises(BindingError):
        saver.get_tuple({"configurable": {**ids, "checkpoint_id": CHECKPOINTS[1]}})


class Notes(TypedDict, total=False):
    notes: Annotated[str, DeltaChannel(lambda state, writes: state + "".join(writes))]


def _notes_graph(checkpointer: Checkpointer) -> CompiledStateGraph[Notes, None, Notes, Notes]:
    def write(state: Notes) -> dict[str, Any]:
        return {"notes": f"[{len(state.get('notes', ''))}]"}

    return linear_graph(Notes, ("write", write), checkpointer=checkpointer)


@pytest.mark.parametrize("attack", ["re-parent an ancestor", "plant another thread's write"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_delta_history_refuses_a_spliced_chain(
    postgres_url: str, attack: str, is_async: bool
) -> None:
    serde, _ = marking_serde()
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
        saver = PostgresSaver(conn, serde=serde)
        for thread_id in THREADS:
            for _ in range(4):
                _notes_graph(saver).invoke({}, {"configurable": {"thread_id": thread_id}})
        config: RunnableConfig = {"configurable": {"thread_id": THREADS[0]}}
        expected = _notes_graph(saver).get_state(config).values["notes"]
        chain = [
            r["checkpoint_id"]
            for r in conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s"
                " ORDER BY checkpoint_id DESC",
                (THREADS[0],),
            ).fetchall()
        ]
        if attack == "re-parent an ancestor":
            # The target's grandparent now points two steps further back: its writes vanish.
            conn.execute(
                "UPDATE checkpoints SET parent_checkpoint_id = %s WHERE checkpoint_id = %s",
                (chain[4], chain[2]),
            )
        else:
            found = conn.execute(
                "SELECT type, blob FROM checkpoint_writes WHERE thread_id = %s"
                " AND channel = 'notes' ORDER BY checkpoint_id DESC LIMIT 1",
                (THREADS[1],),
            ).fetchone()
            victim = conn.execute(
                "SELECT checkpoint_id, task_id, idx FROM checkpoint_writes WHERE thread_id = %s"
                " AND channel = 'notes' AND checkpoint_id <> %s ORDER BY checkpoint_id DESC"
                " LIMIT 1",
                (THREADS[0], chain[0]),
            ).fetchone()
            assert found is not None
            assert victim is not None
            done = conn.execute(
                "UPDATE checkpoint_writes SET type = %s, blob = %s WHERE thread_id = %s"
                " AND checkpoint_id = %s AND task_id = %s AND idx = %s",
                (found["type"], found["blob"], THREADS[0], *victim.values()),
            )
            assert done.rowcount == 1
        assert expected
        if is_async:
            async with AsyncPostgresSaver.from_conn_string(postgres_url, serde=serde) as asaver:
                with pytest.raises(BindingError):
                    await _notes_graph(asaver).aget_state(config)
        else:
            with pytest.raises(BindingError):
                _notes_graph(saver).get_state(config)


def test_removing_or_adding_a_sealed_envelope_breaks_the_record(store: Any) -> None:
    """The record covers the envelope's presence (its bytes authenticate themselves)."""
    conn, saver, inner = store
    conn.execute(
        "UPDATE checkpoints SET metadata = metadata - %s WHERE thread_id = %s"
        " AND checkpoint_ns = '' AND checkpoint_id = %s",
        (SEALED_METADATA_KEY, THREADS[0], CHECKPOINTS[0]),
    )
    ids = {"thread_id": THREADS[0], "checkpoint_ns": ""}
    inner.loaded.clear()
    with pytest.raises(BindingError):
        saver.get_tuple({"configurable": {**ids, "checkpoint_id": CHECKPOINTS[0]}})
    assert inner.loaded == []
