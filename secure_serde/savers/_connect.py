"""The sealed PostgreSQL savers' own connection, opened without the DSN's password escaping.

``from_conn_string`` takes a DSN that may hold a password, and a failed
connect would carry it off in two places: psycopg's message (libpq's parse
errors quote the string around the fault, which is often an unquoted
password) and the locals of every frame the error passed through, which
error trackers that capture locals (Sentry's default) send off the host.

So the DSN travels as a `Dsn`, whose repr does not show it, and a failed connect
is raised again as the same psycopg error class (callers' ``except
psycopg.OperationalError`` still works) with a redacted message, from a
frame that holds no DSN text, and with no chained context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import psycopg
from psycopg import AsyncConnection, Connection
from psycopg.rows import DictRow, dict_row

from secure_serde.stores import redact

__all__ = ["Dsn", "aconnect", "connect"]

_UNPARSED: Final = (
    "the connection string could not be parsed (libpq's message quotes it: not shown)"
)


@dataclass(frozen=True)
class Dsn:
    """A connection string that its repr does not show.

    Not even redacted: `redact` finds a password where libpq would, and a
    malformed string (an unquoted space in the password) is exactly the one
    where the rest of the password is somewhere else.
    """

    text: str = field(repr=False)

    def __repr__(self) -> str:
        return "Dsn(<not shown>)"


def _redacted(exc: psycopg.Error) -> psycopg.Error:
    if isinstance(exc, psycopg.ProgrammingError):
        return type(exc)(_UNPARSED)
    return type(exc)(redact(str(exc).strip()) or type(exc).__name__)


def connect(dsn: Dsn) -> Connection[DictRow]:
    """A connection opened as the stock ``from_conn_string`` opens it."""
    try:
        return Connection.connect(
            dsn.text, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
    except psycopg.Error as exc:
        error = _redacted(exc)
    # Raised outside the handler: psycopg's error, and its frames, stay unreachable.
    raise error from None


async def aconnect(dsn: Dsn) -> AsyncConnection[DictRow]:
    try:
        return await AsyncConnection.connect(
            dsn.text, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
    except psycopg.Error as exc:
        error = _redacted(exc)
    raise error from None
