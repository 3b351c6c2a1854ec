"""`open_store`: from what a user types (a path or a URL) to a `Store`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from secure_serde.stores._base import Store, StoreError

__all__ = ["POSTGRES_SCHEMES", "open_store"]

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")


def open_store(location: str | os.PathLike[str] | Store) -> Store:
    """Open the checkpoint store at ``location``.

    A ``postgresql://`` (or ``postgres://``) URL opens a PostgreSQL store
    (needs the ``postgres`` extra); anything else is the path of an existing
    SQLite file, which is never created. A `Store` is returned as it is.
    Raises `StoreError` when the store cannot be opened or holds no
    langgraph checkpoint tables.
    """
    if isinstance(location, Store):
        return location
    if isinstance(location, str) and location.startswith(POSTGRES_SCHEMES):
        from secure_serde.stores._postgres import PostgresStore

        return PostgresStore(location)
    if not isinstance(location, (str, os.PathLike)):
        raise StoreError(f"a store is a path or a postgresql:// URL, not {type(location).__name__}")
    from secure_serde.stores._sqlite import SqliteStore

    return SqliteStore(Path(location))
