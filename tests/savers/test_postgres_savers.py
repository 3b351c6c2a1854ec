"""secure_serde.savers._v03_postgres on a real PostgreSQL: storage, compatibility, metadata, pins.

Every test runs real LangGraph graphs or the savers' public API against the throwaway cluster
from tests/fixtures_services.py. Stock savers (langgraph's own) are used side by side to show
the rows are theirs: they read everything ours write, on the same schema, and ours continue
threads they started.
"""

from __future__ import annotations

import inspect
import operator
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, TypeVar

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointTuple
from langgraph.checkpoint.postgres import PostgresSaver as StockSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as StockAsyncSaver
from langgraph.checkpoint.postgres.base import BasePostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from typing_extensions import TypedDict

from secure_serde import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    EncryptedSerializer,
    EncryptionError,
    PlaintextRefusedError,
    UnboundValueError,
)
from secure_serde._migration import Migration
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers import SEALED_METADATA_KEY, STRUCTURAL_METADATA_KEYS
from secure_serde.savers._v03_postgres import AsyncPostgresSaver, PostgresSaver
from tests import canary_support as canary
from tests.fixtures_services import PostgresServer, pg_dump, saver_connection
from tests.graphs_support import linear_graph

KEY = b"saver-tests-key-0123456789abcdef"
OTHER_KEY = b"saver-tests-other-key-0123456789"
SUFFIX = "+aesgcm"
DELTA_CHANNELS = {"deltas"}
CONNECT_KWARGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": 0,
    "row_factory": dict_row,
}


def serde(key: bytes = KEY) -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(key))


def setup_schema(url: str) -> None:
    """The stock migrations (they cannot run in pipeline mode: CREATE INDEX CONCURRENTLY)."""
    with saver_connection(url) as conn:
        StockSaver(conn).setup()


def rows(url: str, sql: str, *params: Any) -> list[dict[str, Any]]:
    with saver_connection(url) as conn:
        return list(conn.execute(sql, params).fetchall())


def inline_values(url: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(thread, namespace, JSON channel_values) of every checkpoint row that has any."""
    found = rows(
        url,
        "SELECT thread_id, checkpoint_ns, checkpoint -> 'channel_values' AS cv FROM checkpoints",
    )
    return [(r["thread_id"], r["checkpoint_ns"], r["cv"]) for r in found if r["cv"]]


def assert_no_inline_state(url: str, thread_id: str) -> None:
    """Only DeltaChannel snapshot markers, each with its blob, are left in the checkpoint JSON."""
    markers = rows(
        url,
        "SELECT v.key AS channel, v.value AS value, EXISTS (SELECT 1 FROM checkpoint_blobs b"
        " WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns"
        " AND b.channel = v.key AND b.version = c.checkpoint -> 'channel_versions' ->> v.key)"
        " AS has_blob FROM checkpoints c, jsonb_each(c.checkpoint -> 'channel_values') v"
        " WHERE c.thread_id = %s",
        thread_id,
    )
    assert {m["channel"] for m in markers} <= DELTA_CHANNELS, markers
    assert all(m["value"] is True and m["has_blob"] for m in markers), markers


def blob_types(url: str, thread_id: str) -> dict[str, set[str]]:
    found = rows(url, "SELECT channel, type FROM checkpoint_blobs WHERE thread_id = %s", thread_id)
    types: dict[str, set[str]] = {}
    for r in found:
        types.setdefault(r["channel"], set()).add(r["type"])
    return types


def all_tuples(saver: Any, url: str, thread_id: str) -> list[CheckpointTuple]:
    """Every checkpoint of a thread, every namespace, newest first, as ``saver`` reads them."""
    ids = rows(
        url,
        "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = %s"
        " ORDER BY checkpoint_id DESC",
        thread_id,
    )
    got = []
    for r in ids:
        config = {"configurable": {"thread_id": thread_id, **r}}
        tup = saver.get_tuple(config)
        assert tup is not None
        got.append(tup)
    return got


def same_tuples(left: list[CheckpointTuple], right: list[CheckpointTuple]) -> None:
    assert len(left) == len(right) > 0
    for a, b in zip(left, right, strict=True):
        assert a.config == b.config
        assert a.checkpoint == b.checkpoint
        assert a.metadata == b.metadata
        assert a.parent_config == b.parent_config
        assert a.pending_writes == b.pending_writes


def history_values(graph: canary.CanaryGraph, config: RunnableConfig) -> list[tuple[Any, ...]]:
    return [(s.values, s.next, s.metadata) for s in graph.get_state_history(config)]


# --------------------------------------------------------------------------------------------
# Storage: every value through the serde, on the sync and the async saver


@pytest.mark.parametrize("pipeline", [False, True])
def test_sync_saver_keeps_no_state_in_json(postgres_url: str, pipeline: bool) -> None:
    setup_schema(postgres_url)
    # from_conn_string takes a serde here; the stock sync one cannot (langgraph#8116).
    with PostgresSaver.from_conn_string(postgres_url, serde=serde(), pipeline=pipeline) as saver:
        canary.check_final_state(canary.run_sync(canary.build_canary_graph(saver), "t"))
    assert_no_inline_state(postgres_url, "t")
    types = blob_types(postgres_url, "t")
    for channel in ("text", canary.INT_CHANNEL, canary.FLOAT_CHANNEL, canary.BOOL_CHANNEL):
        assert types[channel] == {"msgpack" + SUFFIX}, channel
    assert all(t.endswith(SUFFIX) for ts in types.values() for t in ts), types
    # A fresh saver, on a fresh connection, rebuilds the whole state from the store alone.
    with PostgresSaver.from_conn_string(postgres_url, serde=serde()) as saver:
        graph = canary.build_canary_graph(saver)
        canary.check_final_state(graph.get_state(canary.canary_config("t")).values)


@pytest.mark.parametrize("pipeline", [False, True])
async def test_async_saver_keeps_no_state_in_json(postgres_url: str, pipeline: bool) -> None:
    setup_schema(postgres_url)
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url, serde=serde(), pipeline=pipeline
    ) as saver:
        graph = canary.build_canary_graph(saver)
        canary.check_final_state(await canary.run_async(graph, "t"))
    assert_no_inline_state(postgres_url, "t")
    assert blob_types(postgres_url, "t")["text"] == {"msgpack" + SUFFIX}


def test_primitive_without_version_is_refused_and_nothing_written(postgres_url: str) -> None:
    with PostgresSaver.from_conn_string(postgres_url, serde=serde()) as saver:
        saver.setup()
        checkpoint = _checkpoint({"secret": "value"}, versions={})
        config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        with pytest.raises(EncryptionError, match="'secret'"):
            saver.put(config, checkpoint, {"source": "input", "step": -1}, {})
    assert rows(postgres_url, "SELECT count(*) AS n FROM checkpoints")[0]["n"] == 0


def test_wrong_key_cannot_read_a_primitive(postgres_url: str) -> None:
    with PostgresSaver.from_conn_string(postgres_url, serde=serde()) as saver:
        saver.setup()
        stored = saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            _checkpoint({"ssn": "123-45-6789"}),
            {"source": "input", "step": -1},
            {"ssn": 1},
        )
    with (
        PostgresSaver.from_conn_string(postgres_url, serde=serde(OTHER_KEY)) as saver,
        pytest.raises(DecryptionError),
    ):
        saver.get_tuple(stored)


# --------------------------------------------------------------------------------------------
# Bound rows are ours alone; ours continue what the stock saver wrote (under migration)


def test_stock_saver_cannot_read_bound_rows(postgres_url: str) -> None:
    """Every value is bound to its row, which the stock saver's unbound reads cannot name."""
    with saver_connection(postgres_url) as conn:
        ours = PostgresSaver(conn, serde=serde(), seal_metadata=False)
        ours.setup()
        canary.run_sync(canary.build_canary_graph(ours), "t")
        config = canary.canary_config("t")
        assert ours.get_tuple(config) is not None
        with pytest.raises(DecryptionError):
            StockSaver(conn, serde=serde()).get_tuple(config)
        canary.check_final_state(canary.build_canary_graph(ours).get_state(config).values)
        assert len(history_values(canary.build_canary_graph(ours), config)) >= 6


def _run_to_interrupt(saver: Any, thread_id: str) -> None:
    graph = canary.build_canary_graph(saver)
    out = graph.invoke(canary.FIRST_INPUT, canary.canary_config(thread_id))
    assert [i.value for i in out["__interrupt__"]] == [canary.INTERRUPT]


def _resume(saver: Any, thread_id: str) -> dict[str, Any]:
    graph = canary.build_canary_graph(saver)
    config = canary.canary_config(thread_id)
    graph.invoke(canary.RESUME_COMMAND, config)
    values: dict[str, Any] = graph.get_state(config).values
    return values


UNBOUND = Migration(unbound=True)
UNBOUND_INLINE = Migration(unbound=True, inline_values=True)


def test_ours_continue_a_thread_the_stock_saver_started(postgres_url: str) -> None:
    with saver_connection(postgres_url) as conn:
        stock = StockSaver(conn, serde=serde())
        stock.setup()
        _run_to_interrupt(stock, "t")
        before = {
            r["checkpoint_id"] for r in rows(postgres_url, "SELECT checkpoint_id FROM checkpoints")
        }
        assert inline_values(postgres_url)  # the stock saver did inline its primitives

        # Strict by default: those inline values are plaintext nothing authenticates.
        strict = PostgresSaver(conn, serde=serde(), seal_metadata=False)
        with pytest.raises(PlaintextRefusedError, match=r"Migration\.inline_values is off"):
            strict.get_tuple(canary.canary_config("t"))
        # And its rows are bound to nothing: refused without the unbound switch too.
        inline_only = PostgresSaver(conn, serde=serde(), migration=Migration(inline_values=True))
        with pytest.raises(UnboundValueError):
            inline_only.get_tuple(canary.canary_config("t"))

        migrating = PostgresSaver(
            conn, serde=serde(), seal_metadata=False, migration=UNBOUND_INLINE
        )
        # The primitives set before the interrupt did not change after it: they only exist
        # inline in the stock rows, so ours must write their blobs at the old versions.
        canary.check_final_state(_resume(migrating, "t"))

        after = rows(
            postgres_url,
            "SELECT checkpoint_id, checkpoint -> 'channel_values' AS cv FROM checkpoints",
        )
        written_by_ours = [r["cv"] for r in after if r["checkpoint_id"] not in before]
        assert len(written_by_ours) >= 3
        assert all(set(cv) <= DELTA_CHANNELS for cv in written_by_ours), written_by_ours
        # The newest checkpoint is ours and sealed, but the blobs of channels that did not
        # change since the stock saver wrote them are still the stock saver's, unbound.
        with pytest.raises(UnboundValueError):
            strict.get_tuple(canary.canary_config("t"))
        latest = migrating.get_tuple(canary.canary_config("t"))
        assert latest is not None
        assert latest.config["configurable"]["checkpoint_id"] not in before


class NotesV1(TypedDict, total=False):
    notes: Annotated[str, operator.add]
    turn: int


def _concat(state: str, writes: Any) -> str:
    return state + "".join(writes)


class NotesV2(TypedDict, total=False):
    notes: Annotated[str, DeltaChannel(_concat, snapshot_frequency=100)]
    turn: int


# The same node over either schema: they differ only in the notes channel's reducer.
NotesT = TypeVar("NotesT", NotesV1, NotesV2)


def _notes_graph(
    schema: type[NotesT], checkpointer: Checkpointer
) -> CompiledStateGraph[NotesT, None, NotesT, NotesT]:
    def write(state: NotesT) -> dict[str, Any]:
        turn = state.get("turn", 0) + 1
        return {"notes": f"[note {turn}: secret-{turn * 7919}]", "turn": turn}

    return linear_graph(schema, ("write", write), checkpointer=checkpointer)


@pytest.mark.parametrize("first_writer", ["ours", "stock"])
def test_str_channel_migrates_to_a_delta_channel(postgres_url: str, first_writer: str) -> None:
    """A plain str channel turned DeltaChannel: the delta walk seeds from the old plain value.

    Ours store that value as a blob, the stock saver inline; the stock delta-history walk reads
    both (its migration path for primitives stored as blobs), and ours refuse the inline one
    unless migrating.
    """
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    expected = "".join(f"[note {t}: secret-{t * 7919}]" for t in (1, 2, 3, 4))
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
        first = (
            PostgresSaver(conn, serde=serde(), seal_metadata=False)
            if first_writer == "ours"
            else StockSaver(conn, serde=serde())
        )
        for _ in range(2):
            _notes_graph(NotesV1, first).invoke({}, config)

        migrating = PostgresSaver(
            conn, serde=serde(), seal_metadata=False, migration=UNBOUND_INLINE
        )
        for _ in range(2):
            _notes_graph(NotesV2, migrating).invoke({}, config)
        assert _notes_graph(NotesV2, migrating).get_state(config).values["notes"] == expected

        strict = _notes_graph(NotesV2, PostgresSaver(conn, serde=serde(), seal_metadata=False))
        if first_writer == "ours":
            assert strict.get_state(config).values["notes"] == expected
        else:
            # The latest row is ours and clean; the seed the delta walk found is not.
            with pytest.raises(PlaintextRefusedError):
                strict.get_state(config)


def test_planted_inline_value_is_refused(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with saver_connection(postgres_url) as conn:
        ours = PostgresSaver(conn, serde=serde(), seal_metadata=False)
        ours.setup()
        canary.run_sync(canary.build_canary_graph(ours), "t")
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,verdict}',"
            " '\"approved\"') WHERE thread_id = 't'"
        )
        config = canary.canary_config("t")
        with pytest.raises(PlaintextRefusedError, match="verdict"):
            ours.get_tuple(config)
        with pytest.raises(PlaintextRefusedError):
            list(ours.list(config))
        # The inline switch reads values a stock saver left inline; it does not make a
        # sealed record accept an edit: the record's seal covers its JSON.
        migrating = PostgresSaver(
            conn,
            serde=serde(),
            seal_metadata=False,
            migration=Migration.EVERYTHING,
        )
        with pytest.raises(BindingError):
            migrating.get_tuple(config)


async def test_async_saver_refuses_inline_values(postgres_url: str) -> None:
    """The async read paths: get_tuple/list rows, and the DeltaChannel seed walk."""
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with saver_connection(postgres_url) as conn:
        stock = StockSaver(conn, serde=serde())
        stock.setup()
        for _ in range(2):
            _notes_graph(NotesV1, stock).invoke({}, config)  # "notes" and "turn" inline
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url, serde=serde(), seal_metadata=False
    ) as strict:
        with pytest.raises(PlaintextRefusedError, match="notes"):
            await strict.aget_tuple(config)
        with pytest.raises(PlaintextRefusedError):
            _ = [t async for t in strict.alist(config)]
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url,
        serde=serde(),
        seal_metadata=False,
        migration=UNBOUND_INLINE,
    ) as migrating:
        await _notes_graph(NotesV2, migrating).ainvoke({}, config)
        expected = "".join(f"[note {t}: secret-{t * 7919}]" for t in (1, 2, 3))
        state = await _notes_graph(NotesV2, migrating).aget_state(config)
        assert state.values["notes"] == expected
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url, serde=serde(), seal_metadata=False
    ) as strict:
        # The latest checkpoint is ours and clean; its delta seed is a stock inline value.
        assert await strict.aget_tuple(config) is not None
        with pytest.raises(PlaintextRefusedError, match="notes"):
            await _notes_graph(NotesV2, strict).aget_state(config)


# --------------------------------------------------------------------------------------------
# Metadata


def _checkpoint(values: dict[str, Any], versions: dict[str, Any] | None = None) -> Checkpoint:
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = {k: 1 for k in values} if versions is None else versions
    return checkpoint


def _put(saver: BaseCheckpointSaver[Any], thread_id: str, **configurable: Any) -> RunnableConfig:
    config: RunnableConfig = {
        "configurable": {"thread_id": thread_id, "checkpoint_ns": "", **configurable}
    }
    # A list: stored as a blob by the stock saver too, so its rows read under the strict default.
    return saver.put(
        config, _checkpoint({"x": [1]}), {"source": "input", "step": -1, "parents": {}}, {"x": 1}
    )


def test_unsealed_metadata_is_the_stock_metadata(postgres_url: str) -> None:
    """``seal_metadata=False``: 0.1.0's default, the stock saver's metadata exactly."""
    with saver_connection(postgres_url) as conn:
        stock = StockSaver(conn, serde=serde())
        ours = PostgresSaver(conn, serde=serde(), seal_metadata=False)
        stock.setup()
        _put(stock, "stock", api_key=canary.API_KEY, tenant="acme")
        _put(ours, "ours", api_key=canary.API_KEY, tenant="acme")
    stored = {
        r["thread_id"]: r["metadata"] for r in rows(postgres_url, "SELECT * FROM checkpoints")
    }
    assert stored["ours"] == stored["stock"]
    assert stored["ours"]["api_key"] == canary.API_KEY
    with saver_connection(postgres_url) as conn:
        migrating = PostgresSaver(conn, serde=serde(), seal_metadata=False, migration=UNBOUND)
        found = list(migrating.list(None, filter={"api_key": canary.API_KEY}))
    assert sorted(t.config["configurable"]["thread_id"] for t in found) == ["ours", "stock"]


def test_sealed_metadata_keeps_configurable_out_of_plaintext(
    postgres_url: str, postgres_server: PostgresServer
) -> None:
    with saver_connection(postgres_url) as conn:
        ours = PostgresSaver(conn, serde=serde(), plaintext_metadata=["tenant"])
        ours.setup()
        canary.run_sync(canary.build_canary_graph(ours), "sealed")
        _put(StockSaver(conn, serde=serde()), "stock", api_key=canary.API_KEY, tenant="acme")

        # Ours give the full metadata back, the same as the stock saver stored it in the clear.
        for tup in all_tuples(ours, postgres_url, "sealed"):
            assert tup.metadata.get("api_key") == canary.API_KEY
            assert tup.metadata.get("tenant") == "acme"
        sealed_put = _put(ours, "sealed-put", api_key=canary.API_KEY, tenant="acme")
        stock_view = StockSaver(conn, serde=serde()).get_tuple(
            {"configurable": {"thread_id": "stock", "checkpoint_ns": ""}}
        )
        our_view = ours.get_tuple(sealed_put)
        assert stock_view is not None
        assert our_view is not None
        assert our_view.metadata == stock_view.metadata

        # Filters: plaintext keys as before; sealed ones refused rather than matching nothing.
        found = list(
            ours.list({"configurable": {"thread_id": "sealed"}}, filter={"tenant": "acme"})
        )
        assert len(found) == len(all_tuples(ours, postgres_url, "sealed"))
        with pytest.raises(ConfigurationError, match="api_key"):
            list(ours.list(None, filter={"api_key": canary.API_KEY}))

        # In the row: plaintext keys and the sealed envelope.
        raw = rows(postgres_url, "SELECT metadata FROM checkpoints WHERE thread_id = 'sealed-put'")
        assert "api_key" not in raw[0]["metadata"]
        assert raw[0]["metadata"][SEALED_METADATA_KEY]["type"].endswith(SUFFIX)

    stored = rows(postgres_url, "SELECT thread_id, metadata FROM checkpoints")
    keys = {k for r in stored if r["thread_id"] != "stock" for k in r["metadata"]}
    assert keys == {
        "source",
        "step",
        "parents",
        "counters_since_delta_snapshot",
        "tenant",
        SEALED_METADATA_KEY,
    }
    assert keys - {"tenant", SEALED_METADATA_KEY} <= STRUCTURAL_METADATA_KEYS
    dump = pg_dump(postgres_server, postgres_url)
    # Once: in the row the stock saver wrote, which shows the check can fail.
    assert dump.count(canary.API_KEY.encode()) == 1


async def test_async_saver_seals_and_unseals_metadata(postgres_url: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url, serde=serde(), plaintext_metadata=()
    ) as saver:
        await saver.setup()
        config: RunnableConfig = {
            "configurable": {"thread_id": "t", "checkpoint_ns": "", "api_key": "k-1"}
        }
        stored = await saver.aput(
            config, _checkpoint({"x": "y"}), {"source": "input", "step": -1}, {"x": 1}
        )
        tup = await saver.aget_tuple(stored)
        assert tup is not None
        assert tup.metadata == {"source": "input", "step": -1, "api_key": "k-1"}
        assert [t.metadata async for t in saver.alist(None)] == [tup.metadata]
    raw = rows(postgres_url, "SELECT metadata FROM checkpoints")[0]["metadata"]
    assert set(raw) == {"source", "step", SEALED_METADATA_KEY}


def test_sealing_needs_an_encrypting_serde(postgres_url: str) -> None:
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, plaintext_metadata=["tenant"])  # stock JsonPlus default
        saver.setup()
        with pytest.raises(EncryptionError, match="encrypting serde"):
            _put(saver, "t", api_key=canary.API_KEY)
    assert rows(postgres_url, "SELECT count(*) AS n FROM checkpoints")[0]["n"] == 0


def _flip_one_char(envelope: dict[str, Any]) -> Any:
    data = envelope["data"]
    middle = len(data) // 2
    return {
        **envelope,
        "data": data[:middle] + ("A" if data[middle] != "A" else "B") + data[middle + 1 :],
    }


TAMPERINGS: dict[str, tuple[Any, type[Exception]]] = {
    # One base64 character changed: the cipher's tag check fails.
    "flipped": (_flip_one_char, DecryptionError),
    "not-a-mapping": (lambda envelope: "not an envelope", DecryptionError),
    "extra-field": (lambda envelope: {**envelope, "x": 1}, DecryptionError),
    "bad-base64": (lambda envelope: {**envelope, "data": "***"}, DecryptionError),
    # Relabelled as unencrypted: the one read rule refuses plaintext before
    # any binding is looked at (loads_typed_at routes through it first).
    "relabelled": (lambda envelope: {**envelope, "type": "msgpack"}, PlaintextRefusedError),
}


@pytest.mark.parametrize("tampering", sorted(TAMPERINGS))
def test_tampered_sealed_metadata_is_refused(postgres_url: str, tampering: str) -> None:
    change, error = TAMPERINGS[tampering]
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, serde=serde(), plaintext_metadata=[])
        saver.setup()
        stored = _put(saver, "t", api_key=canary.API_KEY)
        assert saver.get_tuple(stored) is not None
        row = conn.execute("SELECT metadata FROM checkpoints").fetchone()
        assert row is not None
        metadata = row["metadata"]
        metadata[SEALED_METADATA_KEY] = change(metadata[SEALED_METADATA_KEY])
        conn.execute("UPDATE checkpoints SET metadata = %s", (Jsonb(metadata),))
        with pytest.raises(error):
            saver.get_tuple(stored)


async def test_metadata_option_errors(postgres_url: str) -> None:
    # Refused before connecting: the address does not exist.
    nowhere = "postgresql://nowhere.invalid/x"
    with (
        pytest.raises(ConfigurationError, match="not one string"),
        PostgresSaver.from_conn_string(nowhere, plaintext_metadata="tenant"),
    ):
        pass
    with pytest.raises(ConfigurationError, match="must be str"):
        async with AsyncPostgresSaver.from_conn_string(nowhere, plaintext_metadata=[b"x"]):  # type: ignore[list-item]
            pass
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, serde=serde())
        saver.setup()
        with pytest.raises(ConfigurationError, match="reserved"):
            saver.put(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                _checkpoint({}),
                {"source": "input", "step": -1, SEALED_METADATA_KEY: {}},  # type: ignore[typeddict-unknown-key]
                {},
            )


# --------------------------------------------------------------------------------------------
# Constructors: pools, and the connection from_conn_string opens


def test_connection_pool(postgres_url: str) -> None:
    with ConnectionPool(
        postgres_url,
        connection_class=psycopg.Connection[DictRow],
        kwargs=CONNECT_KWARGS,
        min_size=1,
        max_size=2,
    ) as pool:
        saver = PostgresSaver(pool, serde=serde())
        saver.setup()
        canary.check_final_state(canary.run_sync(canary.build_canary_graph(saver), "t"))
        # As the stock saver: a pipeline belongs to one connection, not to a pool.
        with (
            pytest.raises(ValueError, match="Pipeline"),
            pool.connection() as conn,
            conn.pipeline() as pipe,
        ):
            PostgresSaver(pool, pipe, serde=serde())
    assert_no_inline_state(postgres_url, "t")


async def test_async_connection_pool(postgres_url: str) -> None:
    async with AsyncConnectionPool(
        postgres_url,
        connection_class=psycopg.AsyncConnection[DictRow],
        kwargs=CONNECT_KWARGS,
        min_size=1,
        max_size=2,
        open=False,
    ) as pool:
        saver = AsyncPostgresSaver(pool, serde=serde())
        await saver.setup()
        canary.check_final_state(await canary.run_async(canary.build_canary_graph(saver), "t"))
    assert_no_inline_state(postgres_url, "t")


async def test_from_conn_string_opens_connections_as_the_stock_savers_do(
    postgres_url: str,
) -> None:
    def described(conn: Any) -> tuple[Any, ...]:
        return (conn.autocommit, conn.prepare_threshold, conn.row_factory, conn.closed)

    with (
        StockSaver.from_conn_string(postgres_url) as stock,
        PostgresSaver.from_conn_string(postgres_url, serde=serde()) as ours,
    ):
        assert described(ours.conn) == described(stock.conn)
    assert ours.conn.closed
    async with (
        StockAsyncSaver.from_conn_string(postgres_url) as astock,
        AsyncPostgresSaver.from_conn_string(postgres_url, serde=serde()) as aours,
    ):
        assert described(aours.conn) == described(astock.conn)
        assert described(aours.conn) == (*described(ours.conn)[:3], False)
    assert aours.conn.closed


# --------------------------------------------------------------------------------------------
# Pins: the stock behaviour the savers rely on. A failure here means langgraph changed; read
# secure_serde/savers/_postgres_base.py before updating either side.


def test_pin_stock_saver_still_inlines_primitives(postgres_url: str) -> None:
    """Why the savers exist: if this fails, langgraph stopped inlining and ours may simplify."""
    with saver_connection(postgres_url) as conn:
        stock = StockSaver(conn, serde=serde())
        stock.setup()
        values = {"s": "text", "i": 7, "f": 1.5, "b": True, "n": None, "l": [1]}
        stock.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            _checkpoint(values),
            {"source": "input", "step": -1},
            {k: 1 for k in values},
        )
    assert inline_values(postgres_url) == [("t", "", {k: v for k, v in values.items() if k != "l"})]
    assert set(blob_types(postgres_url, "t")) == {"l"}


def test_pin_stock_hooks_we_override() -> None:
    def params(func: Any) -> list[str]:
        return list(inspect.signature(func).parameters)

    assert params(BasePostgresSaver._dump_blobs) == [
        "self",
        "thread_id",
        "checkpoint_ns",
        "values",
        "versions",
    ]
    assert params(BasePostgresSaver._search_where) == ["self", "config", "filter", "before"]
    assert params(BasePostgresSaver._build_delta_channels_writes_history) == [
        "self",
        "channels",
        "chain_by_ch",
        "seed_ver_by_ch",
        "seed_inline_by_ch",
        "stage2_rows",
    ]
    assert params(BasePostgresSaver._dump_writes) == [
        "self",
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "task_id",
        "task_path",
        "writes",
    ]
    assert (
        params(StockSaver.get_delta_channel_history)
        == params(StockAsyncSaver.aget_delta_channel_history)
        == ["self", "config", "channels"]
    )
    assert params(StockSaver._load_checkpoint_tuple) == ["self", "value"]
    assert inspect.iscoroutinefunction(StockAsyncSaver._load_checkpoint_tuple)
    assert (
        params(StockSaver.put)
        == params(StockAsyncSaver.aput)
        == ["self", "config", "checkpoint", "metadata", "new_versions"]
    )
    assert (
        params(StockSaver.__init__)
        == params(StockAsyncSaver.__init__)
        == ["self", "conn", "pipe", "serde"]
    )
    # Ours override exactly these, and nothing else with SQL in it.
    ours = {
        name
        for cls in (PostgresSaver, AsyncPostgresSaver)
        for klass in cls.__mro__
        if klass.__module__.startswith("secure_serde")
        for name, attr in vars(klass).items()
        if callable(attr) or isinstance(attr, (classmethod, property))
    }
    assert ours == {
        "__init__",
        "from_conn_string",
        "put",
        "aput",
        "_load_checkpoint_tuple",
        "_dump_blobs",
        "_dump_writes",
        "get_delta_channel_history",
        "aget_delta_channel_history",
        "_search_where",
        "_build_delta_channels_writes_history",
        "_configure",
        "_bound",
        "_load_bound",
        "_delta_at",
        "_delta_done",
        "_prepare_put",
        "_check_row",
        "_unseal",
        "metadata_sealer",
        # Set back to BaseCheckpointSaver's (NotImplementedError): 0.3's savers only read.
        "copy_thread",
        "acopy_thread",
    }


def test_allowlist_clone_keeps_the_policies(postgres_url: str) -> None:
    with saver_connection(postgres_url) as conn:
        # An explicit inner allowlist, so a merged one makes a new serializer, hence a clone.
        inner = JsonPlusSerializer(allowed_msgpack_modules=[("tests.canary_support", "Expected")])
        saver = PostgresSaver(
            conn, serde=EncryptedSerializer(EnvKeyCipher(KEY), inner), plaintext_metadata=["tenant"]
        )
        clone = saver.with_allowlist([("tests.canary_support", "ChildState")])
    assert clone is not saver
    assert type(clone) is PostgresSaver
    assert isinstance(clone.serde, EncryptedSerializer)
    assert clone.serde.serde is not inner
    assert clone.metadata_sealer == saver.metadata_sealer
    assert clone._inline_guard is saver._inline_guard


# --------------------------------------------------------------------------------------------
# The example


def test_production_example_runs(postgres_url: str) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "postgres_production.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LANGGRAPH_AES_KEY"] = KEY.decode()
    proc = subprocess.run(
        [sys.executable, str(example), postgres_url],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "with state values in their JSON: 0" in proc.stdout
    assert "rows whose plaintext metadata holds the API key: 0" in proc.stdout
    assert "'api_key': 'sk-demo-" in proc.stdout  # unsealed on read
    # It cleans up after itself: only the store identity (the reserved thread) stays.
    left = rows(postgres_url, "SELECT DISTINCT thread_id FROM checkpoints")
    assert [r["thread_id"] for r in left] == ["__secure_serde_store__"]
