"""The sealed SQLite savers: `SealedSaver` around langgraph's stock ones (the thin
constructors of secure_serde/savers/__init__.py). Needs only the ``sqlite`` extra.

Example::

    from secure_serde import EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher
    from secure_serde.savers.sqlite import SqliteSaver

    serde = EncryptedSerializer(EnvKeyCipher())
    with SqliteSaver.from_conn_string("checkpoints.sqlite", serde=serde) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from typing import Final

from secure_serde.savers._options import checked_options
from secure_serde.sealing import SealedSaver
from secure_serde.serde import EncryptedSerializer

_MISSING: Final = (
    "secure_serde.savers.sqlite needs the sqlite extra ({module} is not installed):"
    " pip install 'secure-serde[sqlite]'"
)

try:
    import aiosqlite
    from langgraph.checkpoint.sqlite import SqliteSaver as _StockSqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as _StockAsyncSqliteSaver
except ImportError as exc:
    raise ModuleNotFoundError(_MISSING.format(module=exc.name), name=exc.name) from None


__all__ = ["AsyncSqliteSaver", "SqliteSaver"]


class SqliteSaver(SealedSaver):
    """`SealedSaver` around langgraph's ``SqliteSaver`` on ``conn`` (a ``sqlite3.Connection``).

    ``serde``, ``indexed_metadata`` and ``plaintext_metadata`` are as for `SealedSaver`.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
    ) -> None:
        super().__init__(
            _StockSqliteSaver(conn),
            serde=serde,
            indexed_metadata=indexed_metadata,
            plaintext_metadata=plaintext_metadata,
        )

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
    ) -> Iterator[SqliteSaver]:
        """A saver on a new connection (opened as the stock one opens it), closed on exit.

        The options are checked before connecting, so a bad one leaves no new
        file behind.
        """
        checked = checked_options(serde, indexed_metadata, plaintext_metadata)
        with closing(sqlite3.connect(conn_string, check_same_thread=False)) as conn:
            yield cls(conn, **checked)


class AsyncSqliteSaver(SealedSaver):
    """`SealedSaver` around langgraph's ``AsyncSqliteSaver`` on ``conn`` (``aiosqlite``).

    ``serde``, ``indexed_metadata`` and ``plaintext_metadata`` are as for `SealedSaver`.
    """

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
    ) -> None:
        super().__init__(
            _StockAsyncSqliteSaver(conn),
            serde=serde,
            indexed_metadata=indexed_metadata,
            plaintext_metadata=plaintext_metadata,
        )

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """As `SqliteSaver.from_conn_string`."""
        checked = checked_options(serde, indexed_metadata, plaintext_metadata)
        async with aiosqlite.connect(conn_string) as conn:
            yield cls(conn, **checked)
