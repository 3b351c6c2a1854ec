"""How the tests build serializers and savers, in one place (services: fixtures_services.py).

Each test module keeps its own key, so that a row one module writes never opens under
another's; what is shared is how a serializer or a saver is built from a key. Every saver
comes set up, on a connection of its own that is closed when the block ends.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver

from secure_serde import EncryptedSerializer, SealedSaver
from secure_serde.ciphers import EnvKeyCipher
from tests.fixtures_services import saver_connection

__all__ = [
    "dropin_serde",
    "env_serde",
    "sealed_sqlite",
    "stock_postgres",
    "stock_sqlite",
    "thin_postgres",
    "thin_sqlite",
]


def env_serde(
    key: bytes | str, inner: SerializerProtocol | None = None, **options: Any
) -> EncryptedSerializer:
    """``EncryptedSerializer(EnvKeyCipher(key), inner, **options)``: secure_serde's rows only."""
    return EncryptedSerializer(EnvKeyCipher(key), inner, **options)


def dropin_serde(key: bytes | str, **options: Any) -> EncryptedSerializer:
    """``EncryptedSerializer.from_pycryptodome_aes(key=key)``: also reads langgraph's EAX rows."""
    return EncryptedSerializer.from_pycryptodome_aes(key=key, **options)


@contextmanager
def stock_sqlite(path: Path, serde: SerializerProtocol | None = None) -> Iterator[StockSqliteSaver]:
    """langgraph's own SqliteSaver on the file at ``path``."""
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = StockSqliteSaver(conn, serde=serde)
        saver.setup()
        yield saver


@contextmanager
def sealed_sqlite(path: Path, serde: EncryptedSerializer, **options: Any) -> Iterator[SealedSaver]:
    """``SealedSaver(SqliteSaver(conn), serde=serde, **options)`` on the file at ``path``."""
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = SealedSaver(StockSqliteSaver(conn), serde=serde, **options)
        saver.setup()
        yield saver


@contextmanager
def thin_sqlite(path: Path, serde: EncryptedSerializer) -> Iterator[SealedSaver]:
    """secure_serde's thin constructor `secure_serde.savers.sqlite.SqliteSaver` (sealed)."""
    from secure_serde.savers.sqlite import SqliteSaver

    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn, serde=serde)
        saver.setup()
        yield saver


@contextmanager
def stock_postgres(
    url: str, serde: SerializerProtocol | None = None
) -> Iterator[StockPostgresSaver]:
    """langgraph's own PostgresSaver on the database at ``url``."""
    with saver_connection(url) as conn:
        saver = StockPostgresSaver(conn, serde=serde)
        saver.setup()
        yield saver


@contextmanager
def thin_postgres(url: str, serde: EncryptedSerializer) -> Iterator[SealedSaver]:
    """secure_serde's thin constructor `secure_serde.savers.postgres.PostgresSaver` (sealed)."""
    from secure_serde.savers.postgres import PostgresSaver

    with saver_connection(url) as conn:
        saver = PostgresSaver(conn, serde=serde)
        saver.setup()
        yield saver
