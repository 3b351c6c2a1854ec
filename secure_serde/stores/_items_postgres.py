"""`SealedItemsPostgresStore`: the ``store`` table langgraph's ``PostgresStore`` keeps, sealed.

The layout is described in secure_serde/stores/_items.py. A swap replaces
the sealed entry inside the ``value`` JSONB with ``jsonb_set`` on its one
key, while that key still holds the text read; nothing else of the row
changes (not ``updated_at`` either).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Final

from secure_serde.stores._base import StoreError, Swap, TableSpec
from secure_serde.stores._items import ITEM_KEY, ITEMS, SEALED_FIELD, ItemsLayout, check_swap
from secure_serde.stores._postgres import _COLUMNS_SQL, _LOCK_TIMEOUT, _reason, connect, display_url

with contextlib.suppress(ImportError):  # refused in __init__ without the extra
    import psycopg
    from psycopg import errors as pg_errors

__all__ = ["SealedItemsPostgresStore"]

_SELECT: Final = "SELECT prefix, key, value FROM store"
# Only the sealed entry changes, and only while it still holds the text read.
_SWAP: Final = (
    "UPDATE store SET value = jsonb_set(value, ARRAY[%s::text], to_jsonb(%s::text))"
    " WHERE prefix = %s AND key = %s AND value ->> %s::text = %s::text RETURNING 1"
)


class SealedItemsPostgresStore(ItemsLayout):
    """A PostgreSQL database whose ``store`` table langgraph's ``PostgresStore`` wrote.

    Autocommit reads, one statement per page; each `compare_and_swap` is one
    transaction under a short lock timeout (a lost lock: every swap of the
    batch reported not applied, and the loop retries them).
    """

    kind = "postgres"
    _FIRST = f"{_SELECT} ORDER BY prefix, key LIMIT %s"
    _PAGE = f"{_SELECT} WHERE (prefix, key) > (%s, %s) ORDER BY prefix, key LIMIT %s"
    _RELOAD = f"{_SELECT} WHERE prefix = %s AND key = %s"

    def __init__(self, url: str) -> None:
        self._url = url
        self._display = display_url(url)
        self._conn = connect(url, self._display)
        try:
            columns = {r[0] for r in self._conn.execute(_COLUMNS_SQL, (ITEMS,)).fetchall()}
            checkpoints = self._conn.execute(_COLUMNS_SQL, ("checkpoints",)).fetchone()
        except psycopg.Error as exc:
            self._conn.close()
            raise StoreError(f"cannot read the schema of {self._display}: {_reason(exc)}") from None
        self.holds_checkpoints = checkpoints is not None
        self.tables: tuple[TableSpec, ...] = ()
        if columns:
            if not {"prefix", "key", "value"} <= columns:
                self._conn.close()
                raise StoreError(f"the store table in {self._display} is not langgraph's")
            self.tables = (TableSpec(ITEMS, "value", "value", ITEM_KEY),)

    @property
    def display(self) -> str:
        return self._display

    @property
    def location(self) -> str:
        return self._url

    def close(self) -> None:
        self._conn.close()

    def compare_and_swap(self, swaps: Sequence[Swap]) -> list[bool]:
        for swap in swaps:
            check_swap(swap)
        problem = None
        try:
            return self._swap_once(swaps)
        except (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected):
            return [False] * len(swaps)
        except psycopg.Error as exc:
            problem = f"writing to {self._display} failed: {_reason(exc)}"
        raise StoreError(problem)

    def _swap_once(self, swaps: Sequence[Swap]) -> list[bool]:
        applied = []
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.execute(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'")
            for swap in swaps:
                cell = swap.cell
                data = cell.data or b""
                cur.execute(
                    _SWAP,
                    (
                        SEALED_FIELD,
                        swap.new_data.decode("utf-8"),
                        *cell.ref.key_values,
                        SEALED_FIELD,
                        data.decode("utf-8"),
                    ),
                )
                applied.append(cur.fetchone() is not None)
        return applied

    def _fetch(self, query: str, params: Sequence[object]) -> list[Any]:
        problem = None
        try:
            return list(self._conn.execute(query, params).fetchall())
        except psycopg.Error as exc:
            problem = f"reading {self._display} failed: {_reason(exc)}"
        raise StoreError(problem)
