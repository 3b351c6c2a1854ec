"""The sealed PostgreSQL savers' ``from_conn_string`` never lets a DSN password out.

Not in the error message (libpq's parse errors quote the string around the
fault), not in a traceback frame local (error trackers send them off the
host), not in a log line, not in the repr of the saver or its connection.
Each failing case runs the stock ``from_conn_string`` too, so the test
shows what it guards against; the error class stays the stock one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver as StockSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as StockAsyncSaver

from secure_serde import ConfigurationError, EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers._connect import Dsn
from secure_serde.savers.postgres import AsyncPostgresSaver, PostgresSaver
from tests.fixtures_services import PostgresServer
from tests.secrets_support import assert_no_secret_locals

PASSWORD = "hunter2-S3cret"
SERDE = EncryptedSerializer(EnvKeyCipher(key=b"s" * 32))

# Port 1 refuses; the others fail while the string is parsed.
FAILING = {
    "url-refused": f"postgresql://app:{PASSWORD}@127.0.0.1:1/db",
    "key-value-refused": f"host=127.0.0.1 port=1 user=app password={PASSWORD} dbname=db",
    # An unquoted space: libpq quotes the half after it ("missing = after ...").
    "unquoted-space": f"host=127.0.0.1 port=1 password=half {PASSWORD}",
    "bad-port": f"postgresql://app:{PASSWORD}@127.0.0.1:notaport/db",
    "bad-option": f"postgresql://app:{PASSWORD}@127.0.0.1:1/db?sslmode=bogus",
}


def _stock_holds_it(error: BaseException) -> bool:
    """Whether the password is in the stock error's message or a local of a frame below the
    test's own (what `secret_findings` looks at, for an error raised without secure_serde)."""
    tb = error.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return PASSWORD in str(error) or any(
        PASSWORD in repr(value) for frame in frames[1:] for value in frame.f_locals.values()
    )


def _sync_error(opener: Callable[..., Any], dsn: str) -> BaseException:
    with pytest.raises(psycopg.Error) as info, opener(dsn):
        pass
    return info.value


async def _async_error(opener: Callable[..., Any], dsn: str) -> BaseException:
    with pytest.raises(psycopg.Error) as info:
        async with opener(dsn):
            pass
    return info.value


@pytest.mark.parametrize("dsn", FAILING.values(), ids=FAILING.keys())
def test_a_failed_sync_connect_carries_no_password(dsn: str) -> None:
    stock = _sync_error(StockSaver.from_conn_string, dsn)
    ours = _sync_error(lambda d: PostgresSaver.from_conn_string(d, serde=SERDE), dsn)
    assert type(ours) is type(stock)
    # The stock saver's error holds it (a frame local, at least): the check can fail.
    assert _stock_holds_it(stock)
    assert_no_secret_locals(ours, PASSWORD)
    assert ours.__context__ is None
    assert ours.__cause__ is None


@pytest.mark.parametrize("dsn", FAILING.values(), ids=FAILING.keys())
async def test_a_failed_async_connect_carries_no_password(dsn: str) -> None:
    stock = await _async_error(StockAsyncSaver.from_conn_string, dsn)
    ours = await _async_error(lambda d: AsyncPostgresSaver.from_conn_string(d, serde=SERDE), dsn)
    assert type(ours) is type(stock)
    assert _stock_holds_it(stock)
    assert_no_secret_locals(ours, PASSWORD)


def test_the_parse_error_message_is_replaced() -> None:
    dsn = FAILING["unquoted-space"]
    assert PASSWORD in str(_sync_error(StockSaver.from_conn_string, dsn))
    ours = _sync_error(lambda d: PostgresSaver.from_conn_string(d, serde=SERDE), dsn)
    assert str(ours) == (
        "the connection string could not be parsed (libpq's message quotes it: not shown)"
    )


def test_refused_options_carry_no_password(postgres_server: PostgresServer) -> None:
    # Trust auth on the suite's server: the password is sent and ignored. The options are
    # refused before connecting (tests/savers/test_options_before_connect.py on a closed port).
    server = f"{postgres_server.host}:{postgres_server.port}"
    dsn = f"postgresql://{postgres_server.user}:{PASSWORD}@{server}/postgres?sslmode=disable"
    with (
        pytest.raises(ConfigurationError, match="both indexed and plaintext") as info,
        PostgresSaver.from_conn_string(
            dsn, serde=SERDE, plaintext_metadata=["tenant"], indexed_metadata=["tenant"]
        ),
    ):
        pass
    assert_no_secret_locals(info.value, PASSWORD)


@pytest.mark.parametrize("dsn", FAILING.values(), ids=FAILING.keys())
def test_the_dsn_repr_shows_nothing_of_it(dsn: str) -> None:
    assert repr(Dsn(dsn)) == "Dsn(<not shown>)"
    assert Dsn(dsn).text == dsn


def test_an_open_saver_shows_no_password(
    postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Trust auth on the suite's server: the password is sent and ignored.
    server = f"{postgres_server.host}:{postgres_server.port}"
    dsn = f"postgresql://{postgres_server.user}:{PASSWORD}@{server}/postgres?sslmode=disable"
    with caplog.at_level(logging.DEBUG), PostgresSaver.from_conn_string(dsn, serde=SERDE) as saver:
        saver.setup()
        config: Any = {"configurable": {"thread_id": "secrets", "checkpoint_ns": ""}}
        assert saver.get_tuple(config) is None
        assert isinstance(saver.inner, StockSaver)
        conn = saver.inner.conn
        shown = [repr(saver), repr(saver.inner), repr(conn), str(conn)]
    shown += [record.getMessage() for record in caplog.records]
    assert not [text for text in shown if PASSWORD in text]
