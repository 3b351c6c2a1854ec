"""`open_store`: from what a user types (a path or a URL) to a `Store`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from secure_serde._scrub import scrubbed
from secure_serde.stores._base import SEALED_STORE_REFUSAL, Store, StoreError
from secure_serde.stores._dsn import looks_like_conninfo, url_scheme
from secure_serde.stores._items import ItemsLayout, identity_item_ref
from secure_serde.stores._sealed import is_sealed_layout
from secure_serde.stores._sqlite import SealedItemsSqliteStore, SealedSqliteStore, SqliteStore

__all__ = [
    "POSTGRES_SCHEMES",
    "open_items",
    "open_layout",
    "open_sealed",
    "open_store",
    "sealed_items_at",
    "sealed_store_display",
    "store_thread_ids",
]

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
_T = TypeVar("_T")
_SUPPORTED: Final = (
    "a store is a postgresql:// (or postgres://) URL, or the path of an existing SQLite file"
)


@scrubbed  # a DSN may hold a password: no error leaves it in a frame local
def open_store(location: str | os.PathLike[str] | Store) -> Store:
    """Open the checkpoint store at ``location``.

    A ``postgresql://`` (or ``postgres://``) URL opens a PostgreSQL store
    (needs the ``postgres`` extra); anything else is the path of an existing
    SQLite file, which is never created. A `Store` is returned as it is.
    Other URL schemes (``mysql://``) and libpq ``key=value`` strings are
    refused by what they are, never echoed: they may hold a password.
    Raises `StoreError` when the store cannot be opened, holds no
    langgraph checkpoint tables, or is sealed by `secure_serde.SealedSaver`
    (whose layout the passes over this one do not read).
    """
    if isinstance(location, Store):
        return location
    store = _raw_store(location)
    if _asked(store, store.sealed_by_saver):
        store.close()
        raise StoreError(f"{store.display} {SEALED_STORE_REFUSAL}")
    return store


@scrubbed
def sealed_store_display(location: str | os.PathLike[str]) -> str | None:
    """Where the store is (safe to print) if `secure_serde.SealedSaver` sealed it, else ``None``.

    Raises `StoreError` as `open_store` does for a store that cannot be opened.
    A database holding only a `secure_serde.SealedStore`'s ``store`` table
    (no checkpoint tables) is sealed too (secure_serde/stores/_items.py).
    """
    items = open_items(location)
    if items is not None:
        with items:
            if not items.holds_checkpoints:
                return items.display
    with _raw_store(location) as store:
        return store.display if store.sealed_by_saver() else None


@scrubbed
def store_thread_ids(location: str | os.PathLike[str]) -> list[str]:
    """Every thread id of a store's ``checkpoints`` table, read with no key and no saver."""
    with _raw_store(location) as store:
        return store.thread_ids()


def _raw_store(location: str | os.PathLike[str]) -> Store:
    """The store at a path or URL, in the stock savers' row layout, whatever its rows are."""
    if _is_url(location):
        from secure_serde.stores._postgres import PostgresStore

        return PostgresStore(str(location))
    if not isinstance(location, (str, os.PathLike)):
        raise StoreError(f"a store is a path or a postgresql:// URL, not {type(location).__name__}")
    if isinstance(location, str) and not Path(location).exists():
        _refuse_other_forms(location)
    return SqliteStore(Path(location))


@scrubbed
def open_layout(location: str | os.PathLike[str] | Store) -> Store:
    """As `open_store`, but a store `secure_serde.SealedSaver` sealed opens as its sealed rows.

    Rotation reads both layouts: the stock one (`open_store`'s stores) and
    the sealed one (secure_serde/stores/_sealed.py, `is_sealed_layout`).
    A `Store` of the stock layout over a sealed store gives a new sealed
    store at the same place, which the caller closes.
    """
    if isinstance(location, Store):
        if is_sealed_layout(location) or not location.sealed_by_saver():
            return location
        return open_sealed(location.location)
    store = _raw_store(location)
    if not _asked(store, store.sealed_by_saver):
        return store
    store.close()
    return open_sealed(location)


def _asked(store: Store, question: Callable[[], _T]) -> _T:
    """The answer to ``question``, with ``store`` closed if asking it fails."""
    try:
        return question()
    except BaseException:
        store.close()
        raise


def _refuse_other_forms(location: str) -> None:
    scheme = url_scheme(location)
    if scheme is not None and f"{scheme}://" in POSTGRES_SCHEMES:
        raise StoreError(f"write the URL scheme in lower case ({scheme}://): {_SUPPORTED}")
    if scheme is not None:
        raise StoreError(f"{scheme}:// stores are not supported: {_SUPPORTED}")
    if looks_like_conninfo(location):
        raise StoreError(
            "this looks like a libpq key=value connection string (not shown: it may hold"
            f" a password), which is not supported: {_SUPPORTED}. Keep the password out of"
            " the URL with PGPASSWORD, a password file (PGPASSFILE) or a service file"
        )


# The PostgreSQL classes are imported only for a postgresql:// location: the
# driver is an extra, and SQLite users never load it.
def _is_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def open_sealed(location: str | os.PathLike[str]) -> Store:
    """The store at ``location`` (a SQLite path or a ``postgresql://`` URL), as sealed rows."""
    if _is_url(location):
        from secure_serde.stores._postgres import SealedPostgresStore

        return SealedPostgresStore(str(location))
    return SealedSqliteStore(Path(location))


def open_items(location: str | os.PathLike[str]) -> ItemsLayout | None:
    """The sealed items at ``location`` (SQLite path or ``postgresql://`` URL), or ``None``.

    ``None`` when the database has no ``store`` table, or one without the
    store identity item (a bare store: not this layout). Raises `StoreError`
    when the database cannot be opened.
    """
    store: ItemsLayout
    if _is_url(location):
        from secure_serde.stores._postgres import SealedItemsPostgresStore

        store = SealedItemsPostgresStore(str(location))
    else:
        if not Path(location).is_file():
            return None
        store = SealedItemsSqliteStore(Path(location))
    if _asked(store, lambda: store.reload(identity_item_ref())) is None:
        store.close()
        return None
    return store


def sealed_items_at(location: str | os.PathLike[str]) -> bool | None:
    """``None`` when the database at ``location`` holds no SealedStore ``store`` table; else
    whether it also holds checkpoint tables (one application, one database)."""
    items = open_items(location)
    if items is None:
        return None
    with items:
        return items.holds_checkpoints
