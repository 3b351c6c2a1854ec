"""The sealed PostgreSQL savers: `SealedSaver` around langgraph's stock ones (the thin
constructors of secure_serde/savers/__init__.py).

Both keep the stock ``prune``. Unlike the stock sync saver, ``from_conn_string``
takes ``serde`` (langgraph#8116). Needs only the ``postgres`` extra.

Example::

    from secure_serde import EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher
    from secure_serde.savers.postgres import PostgresSaver

    serde = EncryptedSerializer(EnvKeyCipher())
    with PostgresSaver.from_conn_string(DSN, serde=serde) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from typing import Any, Final

from secure_serde.sealing import PruningSealedSaver
from secure_serde.serde import EncryptedSerializer

_MISSING: Final = (
    "secure_serde.savers.postgres needs the postgres extra ({module} is not installed):"
    " pip install 'secure-serde[postgres]'"
)

try:
    from langgraph.checkpoint.postgres import Conn
    from langgraph.checkpoint.postgres import PostgresSaver as _StockPostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as _StockAsyncPostgresSaver
    from langgraph.checkpoint.postgres.aio import Conn as AsyncConn
    from psycopg import AsyncPipeline, Pipeline

    from secure_serde.savers._connect import Dsn, aconnect, connect
    from secure_serde.savers._options import checked_options
except ImportError as exc:
    raise ModuleNotFoundError(_MISSING.format(module=exc.name), name=exc.name) from None


__all__ = ["AsyncPostgresSaver", "PostgresSaver"]


class PostgresSaver(PruningSealedSaver):
    """`SealedSaver` around langgraph's ``PostgresSaver`` on ``conn``.

    Args:
        conn: a psycopg ``Connection`` (``autocommit=True``,
            ``row_factory=dict_row``) or a ``ConnectionPool`` of them, as for
            the stock saver.
        pipe: a pipeline on ``conn``, as for the stock saver.
        serde, indexed_metadata, plaintext_metadata: as for `SealedSaver`.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> PostgresSaver:
        return object.__new__(cls)

    def __init__(
        self,
        conn: Conn,
        pipe: Pipeline | None = None,
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
    ) -> None:
        super().__init__(
            _StockPostgresSaver(conn, pipe),
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
        pipeline: bool = False,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
    ) -> Iterator[PostgresSaver]:
        """A saver on a new connection, closed on exit, opened as the stock one opens it.

        The options are checked before connecting: a bad one raises
        `ConfigurationError` even when the store cannot be reached.
        """
        dsn = Dsn(conn_string)  # no frame below holds the password as text
        del conn_string
        checked = checked_options(serde, indexed_metadata, plaintext_metadata)
        with connect(dsn) as conn, conn.pipeline() if pipeline else nullcontext() as pipe:
            yield cls(conn, pipe, **checked)


class AsyncPostgresSaver(PruningSealedSaver):
    """`SealedSaver` around langgraph's ``AsyncPostgresSaver`` on ``conn``.

    Args:
        conn: a psycopg ``AsyncConnection`` or an ``AsyncConnectionPool``, as
            for the stock saver.
        pipe: an async pipeline on ``conn``, as for the stock saver.
        serde, indexed_metadata, plaintext_metadata: as for `SealedSaver`.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> AsyncPostgresSaver:
        return object.__new__(cls)

    def __init__(
        self,
        conn: AsyncConn,
        pipe: AsyncPipeline | None = None,
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
    ) -> None:
        super().__init__(
            _StockAsyncPostgresSaver(conn, pipe),
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
        pipeline: bool = False,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """As `PostgresSaver.from_conn_string`."""
        dsn = Dsn(conn_string)
        del conn_string
        checked = checked_options(serde, indexed_metadata, plaintext_metadata)
        async with (
            await aconnect(dsn) as conn,
            conn.pipeline() if pipeline else nullcontext() as pipe,
        ):
            yield cls(conn, pipe, **checked)
