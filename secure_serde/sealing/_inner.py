"""Reads of the inner saver that a hostile cell can break, turned into one typed error.

The inner saver decodes its rows before `SealedSaver` sees them: a metadata
cell nested past the recursion limit, text that is not UTF-8, or JSON the
database's own functions refuse makes that decoding fail inside the inner
saver, with the driver's error. Those failures become `UnreadableRowError`
(a `DecryptionError`), whose message names only the saver and the error
class, never the row: drivers quote the text they could not decode.
"""

from __future__ import annotations

import json
import sys

from secure_serde._errors import UnreadableRowError

__all__ = ["read_errors", "unreadable"]


def read_errors() -> tuple[type[BaseException], ...]:
    """The errors a stored row's content can raise in a stock saver's read.

    The drivers' own classes are looked up only if the driver is loaded, so
    neither driver is imported here. sqlite3 raises ``OperationalError`` for
    text it cannot decode and for JSON its ``json_extract`` refuses;
    psycopg raises ``DataError`` for values it cannot load.
    """
    errors: list[type[BaseException]] = [RecursionError, UnicodeError, json.JSONDecodeError]
    sqlite = sys.modules.get("sqlite3")
    if sqlite is not None:
        errors.append(sqlite.DatabaseError)
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        errors.append(psycopg.DataError)
    return tuple(errors)


def unreadable(inner: object, error: BaseException) -> UnreadableRowError:
    return UnreadableRowError(
        f"the inner {type(inner).__name__} could not read a stored row"
        f" ({type(error).__name__}): the row is damaged or hostile; `secure-serde audit`"
        " lists such rows"
    )
