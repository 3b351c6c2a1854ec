"""`secure_serde.savers.postgres` on a real PostgreSQL (ported from 0.3's saver tests).

The thin constructors take everything the stock savers take: a connection pool (sync and
async), a pipeline, and ``from_conn_string`` opens its connection exactly as the stock saver
opens its own. Whichever way it is connected, no canary reaches the database in plaintext.
Last, the stock saver's ``empty`` blob rows, which it reads as "no value": one planted beside a
value, or beside a value planted inline in the checkpoint's JSON, never puts a value in front of
the application.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver as StockSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as StockAsyncSaver
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from secure_serde import DecryptionError, EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers.postgres import AsyncPostgresSaver, PostgresSaver
from tests import canary_support as canary
from tests.fixtures_services import saver_connection

KEY = b"sealing-postgres-ctor-key-012345"
CONNECT_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0}
CANARIES = [
    canary.STR,
    *canary.LIST,
    *canary.DICT,
    *canary.DICT.values(),
    canary.HUMAN,
    canary.AI,
    canary.FINAL,
    canary.INTERRUPT,
    canary.RESUME,
    canary.SUBGRAPH,
    canary.API_KEY,
]


def serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY))


def inner_of(saver: Any) -> Any:
    """The stock saver a thin constructor wraps (its ``conn`` and ``pipe``)."""
    return saver.inner


def assert_no_canary_at_rest(url: str) -> None:
    with psycopg.connect(url) as conn:
        text = " ".join(
            str(row[0])
            for sql in (
                "SELECT checkpoint::text || metadata::text FROM checkpoints",
                "SELECT encode(blob, 'escape') FROM checkpoint_blobs WHERE blob IS NOT NULL",
                "SELECT encode(blob, 'escape') FROM checkpoint_writes",
            )
            for row in conn.execute(sql)
        )
    assert "CANARY" not in text
    assert text  # the store does hold the run


def test_a_connection_pool(postgres_url: str) -> None:
    with ConnectionPool(
        postgres_url,
        connection_class=psycopg.Connection[DictRow],
        kwargs={**CONNECT_KWARGS, "row_factory": dict_row},
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
    assert_no_canary_at_rest(postgres_url)


async def test_an_async_connection_pool(postgres_url: str) -> None:
    async with AsyncConnectionPool(
        postgres_url,
        connection_class=psycopg.AsyncConnection[DictRow],
        kwargs={**CONNECT_KWARGS, "row_factory": dict_row},
        min_size=1,
        max_size=2,
        open=False,
    ) as pool:
        saver = AsyncPostgresSaver(pool, serde=serde())
        await saver.asetup()
        canary.check_final_state(await canary.run_async(canary.build_canary_graph(saver), "t"))
    assert_no_canary_at_rest(postgres_url)


def test_pipeline_mode(postgres_url: str) -> None:
    with PostgresSaver.from_conn_string(postgres_url, serde=serde()) as saver:
        saver.setup()
    with PostgresSaver.from_conn_string(postgres_url, serde=serde(), pipeline=True) as saver:
        assert inner_of(saver).pipe is not None
        canary.check_final_state(canary.run_sync(canary.build_canary_graph(saver), "t"))
    with saver_connection(postgres_url) as conn, conn.pipeline() as pipe:
        again = PostgresSaver(conn, pipe, serde=serde())
        state = canary.build_canary_graph(again).get_state(canary.canary_config("t"))
        canary.check_final_state(state.values)
    assert_no_canary_at_rest(postgres_url)


async def test_async_pipeline_mode(postgres_url: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(postgres_url, serde=serde()) as saver:
        await saver.asetup()
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url, serde=serde(), pipeline=True
    ) as saver:
        assert inner_of(saver).pipe is not None
        canary.check_final_state(await canary.run_async(canary.build_canary_graph(saver), "t"))
    assert_no_canary_at_rest(postgres_url)


async def test_from_conn_string_opens_connections_as_the_stock_savers_do(
    postgres_url: str,
) -> None:
    def described(conn: Any) -> tuple[Any, ...]:
        return (conn.autocommit, conn.prepare_threshold, conn.row_factory, conn.closed)

    with (
        StockSaver.from_conn_string(postgres_url) as stock,
        PostgresSaver.from_conn_string(postgres_url, serde=serde()) as ours,
    ):
        assert described(inner_of(ours).conn) == described(stock.conn)
    assert inner_of(ours).conn.closed
    async with (
        StockAsyncSaver.from_conn_string(postgres_url) as astock,
        AsyncPostgresSaver.from_conn_string(postgres_url, serde=serde()) as aours,
    ):
        assert described(inner_of(aours).conn) == described(astock.conn)
        assert described(inner_of(aours).conn) == (*described(inner_of(ours).conn)[:3], False)
    assert inner_of(aours).conn.closed


# --- a planted ``empty`` blob row -------------------------------------------------------------

ROOT: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
VALUES = {"kept": ["a value of its own cell"], "other": ["another cell"]}


def _written(url: str) -> RunnableConfig:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(VALUES)
    checkpoint["channel_versions"] = {"kept": "1", "other": "1"}
    with PostgresSaver.from_conn_string(url, serde=serde()) as saver:
        saver.setup()
        return saver.put(ROOT, checkpoint, {"step": 1}, {"kept": "1", "other": "1"})


def _read(url: str, config: RunnableConfig) -> Any:
    with PostgresSaver.from_conn_string(url, serde=serde()) as saver:
        try:
            found = saver.get_tuple(config)
        except DecryptionError as exc:
            return exc
        assert found is not None
        listed = [t.checkpoint["channel_values"] for t in saver.list(ROOT)]
    assert listed == [found.checkpoint["channel_values"]]
    return found.checkpoint["channel_values"]


@pytest.mark.parametrize("channel", ["kept", "planted"])
def test_an_empty_blob_beside_a_planted_inline_value_returns_no_planted_value(
    postgres_url: str, channel: str
) -> None:
    """``kept`` has a sealed value: its blob row is turned ``empty`` and a value planted inline
    in its place. ``planted`` has none: an inline value and an ``empty`` row are added."""
    config = _written(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, %s, %s)"
            " WHERE thread_id = 't'",
            (["channel_values", channel], Jsonb("PLANTED")),
        )
        conn.execute(
            "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)"
            " VALUES ('t', '', %s, '1', 'empty', NULL)"
            " ON CONFLICT (thread_id, checkpoint_ns, channel, version)"
            " DO UPDATE SET type = 'empty', blob = NULL",
            (channel,),
        )
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, %s, '\"1\"')"
            " WHERE thread_id = 't'",
            (["channel_versions", channel],),
        )
    outcome = _read(postgres_url, config)
    if channel == "kept":  # its sealed value is gone: refused, never replaced
        assert isinstance(outcome, DecryptionError)
    else:  # nothing sealed names it: not returned
        assert outcome == VALUES
