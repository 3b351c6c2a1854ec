"""`PostgresStore`: the schema of langgraph-checkpoint-postgres (``PostgresSaver``, async, shallow).

Serialized values live in ``checkpoint_blobs(type, blob)`` and
``checkpoint_writes(type, blob)``. ``checkpoints.checkpoint`` is JSONB built
by the saver itself (the primitives it inlines there never pass through the
serializer), and the metadata is plain JSONB, so neither is a cell. Primary
keys are read from the catalog, which is how the shallow saver's
``checkpoint_blobs`` (no ``version`` column) is handled by the same code.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from secure_serde.stores._base import Store, StoreError, Swap, TableSpec, ThreadRange, quote
from secure_serde.stores._dsn import redact
from secure_serde.stores._items import ItemsLayout
from secure_serde.stores._sealed import CHECKPOINT_KEY, RECORDS_SPEC, SealedLayout

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.conninfo import conninfo_to_dict

    _HAVE_PSYCOPG = True
except ImportError:  # pragma: no cover - exercised only without the postgres extra
    _HAVE_PSYCOPG = False

__all__ = ["PostgresStore", "SealedItemsPostgresStore", "SealedPostgresStore"]

# Give up a row lock quickly, well before PostgreSQL's 1 s deadlock check
# could pick the application's transaction as the victim: the batch is
# rolled back, every swap in it reported as not applied, and retried.
_LOCK_TIMEOUT: Final = "300ms"
_LOCK_RETRIES: Final = 3

_PK_SQL: Final = """
SELECT a.attname
FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE i.indrelid = to_regclass(%s) AND i.indisprimary
ORDER BY array_position(i.indkey::int2[], a.attnum)
"""
_COLUMNS_SQL: Final = """
SELECT attname FROM pg_attribute
WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped
"""


def display_url(url: str) -> str:
    """``url`` without its password or options, for messages."""
    if not _HAVE_PSYCOPG:
        return "postgresql://..."
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://<unparseable URL>"
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or "")
    port = f":{params['port']}" if params.get("port") else ""
    dbname = str(params.get("dbname") or "")
    return f"postgresql://{user}{host}{port}/{dbname}"


def connect(url: str, display: str, *, read_only: bool = False, **options: Any) -> Any:
    """An autocommit connection to ``url``; ``display`` names it in errors.

    ``read_only``: every transaction of the session is read only (belt and braces for
    a reader: nothing writes, and then nothing can).
    """
    if not _HAVE_PSYCOPG:
        raise StoreError("PostgreSQL stores need psycopg: pip install 'secure-serde[postgres]'")
    try:
        conn = psycopg.connect(url, autocommit=True, **options)
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
        return conn
    except psycopg.Error as exc:
        problem = f"cannot connect to {display}: {_reason(exc)}"
    # Raised outside the handler: libpq's error, which may quote the DSN,
    # must not stay reachable as __context__.
    raise StoreError(problem)


class PostgresStore(Store):
    """A PostgreSQL database holding the stock langgraph tables, via psycopg 3.

    Pages are read in autocommit mode, one statement each, so no snapshot is
    held for the length of a run. Each `compare_and_swap` is one
    transaction sent as a pipeline of single-row ``UPDATE ... RETURNING``.
    A JSON entry is swapped with ``jsonb_set`` on its one key, while that key
    still holds the text read; nothing else of the row changes.
    """

    kind = "postgres"
    _MARK, _TRUE, _SAME, _RETURNING = "%s", "TRUE", "IS NOT DISTINCT FROM", " RETURNING 1"
    _WANTED: ClassVar[tuple[TableSpec, ...]] = (
        TableSpec("checkpoint_blobs", "type", "blob", ()),
        TableSpec("checkpoint_writes", "type", "blob", ()),
    )

    def __init__(self, url: str) -> None:
        self._url = url
        self._display = display_url(url)
        self._conn = connect(url, self._display)
        problem = None
        try:
            self.tables = self._discover()
        except psycopg.Error as exc:
            problem = f"cannot read the schema of {self._display}: {_reason(exc)}"
        except BaseException:
            self.close()
            raise
        if problem is not None:
            self.close()
            raise StoreError(problem)
        self._sql = {spec.name: self._statements(spec) for spec in self.tables}

    def _catalog(self, relation: str) -> tuple[set[str], tuple[str, ...]]:
        columns = {r[0] for r in self._conn.execute(_COLUMNS_SQL, (relation,)).fetchall()}
        key = tuple(r[0] for r in self._conn.execute(_PK_SQL, (relation,)).fetchall())
        return columns, key

    def _entry_swap(self, table: str, column: str, where_key: str) -> str:
        return (
            f"UPDATE {table} SET {column} = jsonb_set({column}, ARRAY[%s::text],"  # noqa: S608
            f" to_jsonb(%s::text)) WHERE {where_key} AND {column} ->> %s::text = %s::text"
            " RETURNING 1"
        )

    @staticmethod
    def _json(raw: object) -> object:
        return raw

    @property
    def display(self) -> str:
        return self._display

    @property
    def location(self) -> str:
        return self._url

    def compare_and_swap(self, swaps: Sequence[Swap]) -> list[bool]:
        if not swaps:
            return []
        problem = None
        for attempt in range(_LOCK_RETRIES):
            try:
                return self._swap_once(swaps)
            except (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected):
                time.sleep(0.05 * (attempt + 1))
            except psycopg.Error as exc:
                problem = f"writing to {self._display} failed: {_reason(exc)}"
                break
        if problem is not None:
            raise StoreError(problem)
        return [False] * len(swaps)

    def _swap_once(self, swaps: Sequence[Swap]) -> list[bool]:
        applied = [False] * len(swaps)
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.execute(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'")
            for table_name, group in _group_by_table(swaps):
                params = [self._swap_params(s) for _, s in group]
                cur.executemany(self._sql[table_name].swap, params, returning=True)
                results = iter(group)
                applied[next(results)[0]] = cur.fetchone() is not None
                for index, _ in results:
                    if not cur.nextset():
                        raise StoreError(f"{self._display} returned fewer results than updates")
                    applied[index] = cur.fetchone() is not None
        return applied

    def thread_ranges(self, parts: int) -> list[ThreadRange]:
        if parts <= 1:
            return super().thread_ranges(parts)
        relations = dict.fromkeys(quote(t.relation) for t in self.tables)
        union = " UNION ALL ".join(f"SELECT thread_id FROM {r}" for r in relations)  # noqa: S608
        # Percentiles over rows, not distinct threads, so a few huge threads
        # do not leave one worker with most of the work.
        query = (
            "SELECT DISTINCT unnest(percentile_disc(%s::float8[])"  # noqa: S608
            f" WITHIN GROUP (ORDER BY thread_id)) AS bound FROM ({union}) AS t ORDER BY 1"
        )
        fractions = [i / parts for i in range(1, parts)]
        bounds = [str(r[0]) for r in self._fetch(query, [fractions]) if r[0] is not None]
        lows: list[str | None] = [None, *bounds]
        highs: list[str | None] = [*bounds, None]
        return [ThreadRange(low, high) for low, high in zip(lows, highs, strict=True)]

    def _fetch(self, query: str, params: Sequence[Any]) -> list[Any]:
        problem = None
        try:
            return list(self._conn.execute(query, params).fetchall())
        except psycopg.Error as exc:
            problem = f"reading {self._display} failed: {_reason(exc)}"
        raise StoreError(problem)


class SealedPostgresStore(SealedLayout, PostgresStore):
    """A PostgreSQL database `SealedSaver` over langgraph's ``PostgresSaver`` wrote.

    The shallow saver's layout (no ``version`` in the blobs' key) is not read here.
    """

    _WANTED = (
        TableSpec("checkpoint_blobs", "type", "blob", (*CHECKPOINT_KEY[:2], "channel", "version")),
        TableSpec(
            "checkpoint_writes",
            "type",
            "blob",
            (*CHECKPOINT_KEY, "task_id", "idx"),
            extra_columns=("channel",),
        ),
        RECORDS_SPEC,
    )


class SealedItemsPostgresStore(ItemsLayout, PostgresStore):
    """A PostgreSQL database whose ``store`` table langgraph's ``PostgresStore`` wrote."""


def _group_by_table(swaps: Sequence[Swap]) -> list[tuple[str, list[tuple[int, Swap]]]]:
    groups: dict[str, list[tuple[int, Swap]]] = {}
    for index, swap in enumerate(swaps):
        groups.setdefault(swap.cell.ref.table, []).append((index, swap))
    return list(groups.items())


def _reason(exc: BaseException) -> str:
    if _HAVE_PSYCOPG and isinstance(exc, psycopg.ProgrammingError):
        # libpq's parse errors quote the connection string around the fault,
        # and the fault is often an unquoted or unencoded password.
        return "the connection string could not be parsed (libpq's message quotes it: not shown)"
    # psycopg's first line names the failure; later lines may quote SQL.
    return redact(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__
