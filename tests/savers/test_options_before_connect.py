"""The thin constructors' ``from_conn_string`` refuse a bad option before connecting.

A bad option is `ConfigurationError` whatever the connection string: on a
DSN nothing listens on (where connecting first raised psycopg's
``OperationalError``), with no password in the message or a frame local, and
on a SQLite path, with no file created there.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from secure_serde import ConfigurationError, EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers.postgres import AsyncPostgresSaver, PostgresSaver
from secure_serde.savers.sqlite import AsyncSqliteSaver, SqliteSaver
from tests.secrets_support import assert_no_secret_locals

PASSWORD = "hunter2-S3cret"
SERDE = EncryptedSerializer(EnvKeyCipher(key=b"s" * 32))

# Each refused by SealedSaver's own checks; the message part names the check.
BAD: dict[str, tuple[dict[str, Any], str]] = {
    "indexed-and-plaintext": (
        {"serde": SERDE, "indexed_metadata": ["tenant"], "plaintext_metadata": ["tenant"]},
        "both indexed and plaintext",
    ),
    "one-string": ({"serde": SERDE, "indexed_metadata": "tenant"}, "not one string"),
    "reserved-key": ({"serde": SERDE, "plaintext_metadata": ["parents"]}, "reserved keys"),
    "not-a-key-name": ({"serde": SERDE, "indexed_metadata": [""]}, "not a key name"),
    "serde-that-cannot-seal": ({"serde": object()}, "SealedSaver needs serde="),
}


@pytest.fixture(scope="module")
def closed_dsn() -> str:
    """A DSN with a password, on a local port that was free a moment ago: connecting is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql://app:{PASSWORD}@127.0.0.1:{port}/db?connect_timeout=2"


def test_the_dsn_is_unreachable(closed_dsn: str) -> None:
    # Without the early check, this is what a bad option on this DSN raised.
    with (
        pytest.raises(psycopg.OperationalError),
        PostgresSaver.from_conn_string(closed_dsn, serde=SERDE),
    ):
        pass


@pytest.mark.parametrize(("options", "message"), BAD.values(), ids=BAD.keys())
def test_postgres_refuses_a_bad_option_before_connecting(
    closed_dsn: str, options: dict[str, Any], message: str
) -> None:
    with (
        pytest.raises(ConfigurationError, match=message) as info,
        PostgresSaver.from_conn_string(closed_dsn, **options),
    ):
        pytest.fail("opened a saver with a bad option")
    assert PASSWORD not in str(info.value)
    assert_no_secret_locals(info.value, PASSWORD)


@pytest.mark.parametrize(("options", "message"), BAD.values(), ids=BAD.keys())
async def test_async_postgres_refuses_a_bad_option_before_connecting(
    closed_dsn: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        async with AsyncPostgresSaver.from_conn_string(closed_dsn, **options):
            pytest.fail("opened a saver with a bad option")
    assert PASSWORD not in str(info.value)
    assert_no_secret_locals(info.value, PASSWORD)


@pytest.mark.parametrize(("options", "message"), BAD.values(), ids=BAD.keys())
def test_sqlite_refuses_a_bad_option_before_creating_the_file(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    path = tmp_path / "checkpoints.sqlite"
    with (
        pytest.raises(ConfigurationError, match=message),
        SqliteSaver.from_conn_string(str(path), **options),
    ):
        pytest.fail("opened a saver with a bad option")
    assert not path.exists()


@pytest.mark.parametrize(("options", "message"), BAD.values(), ids=BAD.keys())
async def test_async_sqlite_refuses_a_bad_option_before_creating_the_file(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    path = tmp_path / "checkpoints.sqlite"
    with pytest.raises(ConfigurationError, match=message):
        async with AsyncSqliteSaver.from_conn_string(str(path), **options):
            pytest.fail("opened a saver with a bad option")
    assert not path.exists()


def test_indexed_keys_from_a_generator_are_indexed(tmp_path: Path) -> None:
    # The options are read once before connecting and handed over again: a generator
    # must not arrive empty the second time.
    keys = (key for key in ["user"])
    metadata: Any = {"source": "input", "step": -1, "user": "alice"}
    path = str(tmp_path / "checkpoints.sqlite")
    with SqliteSaver.from_conn_string(path, serde=SERDE, indexed_metadata=keys) as saver:
        saver.setup()
        config = saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            empty_checkpoint(),
            metadata,
            {},
        )
        stored = saver.inner.get_tuple(config)
    assert stored is not None
    stored_metadata: Any = stored.metadata
    assert str(stored_metadata["user"]).startswith("ssix")


THIN: dict[str, Any] = {
    "SqliteSaver": SqliteSaver,
    "AsyncSqliteSaver": AsyncSqliteSaver,
    "PostgresSaver": PostgresSaver,
    "AsyncPostgresSaver": AsyncPostgresSaver,
}


@pytest.mark.parametrize("name", sorted(THIN))
def test_each_constructor_lists_its_options(name: str) -> None:
    # help() and an IDE show what a thin constructor takes, as SealedSaver's own signature does.
    import inspect

    for method in (THIN[name].__init__, THIN[name].from_conn_string):
        params = inspect.signature(method).parameters
        for option in ("serde", "indexed_metadata", "plaintext_metadata"):
            assert params[option].kind is inspect.Parameter.KEYWORD_ONLY, (method, option)
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def test_a_missing_serde_or_a_misspelled_option_names_the_constructor(tmp_path: Path) -> None:
    path = tmp_path / "never.sqlite"
    with pytest.raises(TypeError, match="from_conn_string"):
        SqliteSaver.from_conn_string(str(path)).__enter__()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"from_conn_string.*serd"):
        SqliteSaver.from_conn_string(str(path), serd=SERDE).__enter__()  # type: ignore[call-arg]
    assert not path.exists()
