"""`PostgresStore`: the schema of langgraph-checkpoint-postgres (``PostgresSaver``, async, shallow).

Serialized values live in ``checkpoint_blobs(type, blob)`` and
``checkpoint_writes(type, blob)``. ``checkpoints.checkpoint`` is JSONB built
by the saver itself (the primitives it inlines there never pass through the
serializer), and the metadata is plain JSONB, so neither is a cell. A store
secure_serde 0.3's savers wrote is not read here (`secure_serde.stores.V03Reader`
reads it for ``adopt``). Primary keys are read from the catalog, which is how
the shallow saver's ``checkpoint_blobs`` (no ``version`` column) is handled
by the same code.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, Final

from secure_serde.stores._base import (
    ALL_THREADS,
    DEFAULT_BATCH_SIZE,
    Cell,
    RowRef,
    Store,
    StoreError,
    Swap,
    TableSpec,
    ThreadRange,
    check_batch_size,
)
from secure_serde.stores._dsn import redact

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    _HAVE_PSYCOPG = True
except ImportError:  # pragma: no cover - exercised only without the postgres extra
    _HAVE_PSYCOPG = False

__all__ = ["POSTGRES_TABLES", "PostgresStore"]

POSTGRES_TABLES: Final = (
    ("checkpoint_blobs", "type", "blob"),
    ("checkpoint_writes", "type", "blob"),
)
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


def connect(url: str, display: str) -> Any:
    """An autocommit connection to ``url``; ``display`` names it in errors."""
    if not _HAVE_PSYCOPG:
        raise StoreError("PostgreSQL stores need psycopg: pip install 'secure-serde[postgres]'")
    try:
        return psycopg.connect(url, autocommit=True)
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
    """

    kind = "postgres"

    def __init__(self, url: str) -> None:
        self._url = url
        self._display = display_url(url)
        self._conn = connect(url, self._display)
        try:
            self.tables = self._discover()
        except psycopg.Error as exc:
            self._conn.close()
            raise StoreError(f"cannot read the schema of {self._display}: {_reason(exc)}") from None
        if not self.tables:
            self._conn.close()
            raise StoreError(
                f"{self._display} holds no langgraph checkpoint tables"
                " (checkpoint_blobs, checkpoint_writes)"
            )
        self._sql = {spec.name: _Statements(spec) for spec in self.tables}

    def _discover(self) -> tuple[TableSpec, ...]:
        found = []
        for name, type_col, data_col in POSTGRES_TABLES:
            columns = {r[0] for r in self._conn.execute(_COLUMNS_SQL, (name,)).fetchall()}
            if not columns:
                continue
            if not {type_col, data_col, "thread_id"} <= columns:
                raise StoreError(
                    f"table {name} in {self._display} lacks the stock columns"
                    f" thread_id, {type_col}, {data_col}"
                )
            key = tuple(r[0] for r in self._conn.execute(_PK_SQL, (name,)).fetchall())
            if not key or key[0] != "thread_id":
                raise StoreError(f"table {name} in {self._display} is not keyed by thread_id first")
            found.append(TableSpec(name, type_col, data_col, key))
        return tuple(found)

    @property
    def display(self) -> str:
        return self._display

    @property
    def location(self) -> str:
        return self._url

    def count(self, table: TableSpec, thread_range: ThreadRange = ALL_THREADS) -> int:
        where, params = _range_sql(thread_range)
        query = sql.SQL("SELECT count(*) FROM {} WHERE {} AND {}").format(
            sql.Identifier(table.relation), self._sql[table.name].only, where
        )
        row = self._fetch(query, params, one=True)
        return int(row[0][0]) if row else 0

    def iter_batches(
        self,
        table: TableSpec,
        batch_size: int = DEFAULT_BATCH_SIZE,
        thread_range: ThreadRange = ALL_THREADS,
    ) -> Iterator[list[Cell]]:
        check_batch_size(batch_size)
        statements = self._sql[table.name]
        where, range_params = _range_sql(thread_range)
        nkey = len(table.key_columns)
        rows = self._fetch(statements.first(where), [*range_params, batch_size])
        while rows:
            yield [self._cell(table, row, nkey) for row in rows]
            if len(rows) < batch_size:
                return
            after = list(rows[-1][:nkey])
            rows = self._fetch(statements.page(where), [*after, *range_params, batch_size])

    @staticmethod
    def _cell(table: TableSpec, row: Sequence[Any], nkey: int) -> Cell:
        ref = RowRef(table.name, tuple(zip(table.key_columns, row[:nkey], strict=True)))
        data = row[nkey + 1]
        return Cell(ref, row[nkey], None if data is None else bytes(data))

    def reload(self, ref: RowRef) -> Cell | None:
        table = self.table(ref.table)
        rows = self._fetch(self._sql[table.name].reload, list(ref.key_values))
        return self._cell(table, rows[0], len(table.key_columns)) if rows else None

    def compare_and_swap(self, swaps: Sequence[Swap]) -> list[bool]:
        if not swaps:
            return []
        for attempt in range(_LOCK_RETRIES):
            try:
                return self._swap_once(swaps)
            except (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected):
                time.sleep(0.05 * (attempt + 1))
            except psycopg.Error as exc:
                raise StoreError(f"writing to {self._display} failed: {_reason(exc)}") from None
        return [False] * len(swaps)

    def _swap_once(self, swaps: Sequence[Swap]) -> list[bool]:
        applied = [False] * len(swaps)
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(_LOCK_TIMEOUT)))
            for table_name, group in _group_by_table(swaps):
                statements = self._sql[table_name]
                cur.executemany(
                    statements.swap, [statements.swap_params(s) for _, s in group], returning=True
                )
                results = iter(group)
                applied[next(results)[0]] = cur.fetchone() is not None
                for index, _ in results:
                    if not cur.nextset():
                        raise StoreError(f"{self._display} returned fewer results than updates")
                    applied[index] = cur.fetchone() is not None
        return applied

    def thread_ranges(self, parts: int) -> list[ThreadRange]:
        if parts <= 1:
            return [ALL_THREADS]
        union = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT thread_id FROM {} WHERE {}").format(
                sql.Identifier(t.relation), self._sql[t.name].only
            )
            for t in self.tables
        )
        # Percentiles over rows, not distinct threads, so a few huge threads
        # do not leave one worker with most of the work.
        query = sql.SQL(
            "SELECT DISTINCT unnest(percentile_disc(%s::float8[])"
            " WITHIN GROUP (ORDER BY thread_id)) AS bound FROM ({}) AS t ORDER BY 1"
        ).format(union)
        fractions = [i / parts for i in range(1, parts)]
        bounds = [str(r[0]) for r in self._fetch(query, [fractions]) if r[0] is not None]
        lows: list[str | None] = [None, *bounds]
        highs: list[str | None] = [*bounds, None]
        return [ThreadRange(low, high) for low, high in zip(lows, highs, strict=True)]

    def thread_ids(self) -> list[str]:
        query = sql.SQL("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")
        return [str(row[0]) for row in self._fetch(query, [])]

    def holds_thread(self, thread_id: str) -> bool:
        query = sql.SQL("SELECT 1 FROM checkpoints WHERE thread_id = %s LIMIT 1")
        return bool(self._fetch(query, [thread_id]))

    def _fetch(self, query: Any, params: Sequence[Any], *, one: bool = False) -> list[Any]:
        try:
            cursor = self._conn.execute(query, params)
            return [cursor.fetchone()] if one else cursor.fetchall()
        except psycopg.Error as exc:
            raise StoreError(f"reading {self._display} failed: {_reason(exc)}") from None

    def close(self) -> None:
        self._conn.close()


class _Statements:
    """The SQL for one `TableSpec` of two columns (type and bytes)."""

    def __init__(self, spec: TableSpec) -> None:
        table = sql.Identifier(spec.relation)
        keys = [sql.Identifier(c) for c in spec.key_columns]
        cols = sql.SQL(", ").join(keys)
        marks = sql.SQL(", ").join(sql.Placeholder() for _ in keys)
        where_key = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(k) for k in keys)
        type_col, data_col = sql.Identifier(spec.type_column), sql.Identifier(spec.data_column)
        self.only: sql.Composable = sql.SQL("TRUE")
        values = sql.SQL("{}, {}").format(type_col, data_col)
        self.swap = sql.SQL(
            "UPDATE {} SET {} = %s, {} = %s WHERE {}"
            " AND {} IS NOT DISTINCT FROM %s AND {} IS NOT DISTINCT FROM %s RETURNING 1"
        ).format(table, type_col, data_col, where_key, type_col, data_col)
        for extra in spec.extra_columns:
            values = sql.SQL("{}, {}").format(values, sql.Identifier(extra))
        self._select = sql.SQL("SELECT {}, {} FROM {}").format(cols, values, table)
        self._cols = cols
        self._marks = marks
        self.reload = sql.SQL("{} WHERE {} AND {}").format(self._select, where_key, self.only)

    def swap_params(self, swap: Swap) -> tuple[Any, ...]:
        cell = swap.cell
        return (swap.new_type, swap.new_data, *cell.ref.key_values, cell.type_tag, cell.data)

    def first(self, where: sql.Composable) -> sql.Composed:
        return sql.SQL("{} WHERE {} AND {} ORDER BY {} LIMIT %s").format(
            self._select, self.only, where, self._cols
        )

    def page(self, where: sql.Composable) -> sql.Composed:
        return sql.SQL("{} WHERE ({}) > ({}) AND {} AND {} ORDER BY {} LIMIT %s").format(
            self._select, self._cols, self._marks, self.only, where, self._cols
        )


def _range_sql(thread_range: ThreadRange) -> tuple[sql.Composable, list[Any]]:
    clauses: list[sql.Composable] = []
    params: list[Any] = []
    if thread_range.low is not None:
        clauses.append(sql.SQL("thread_id >= %s"))
        params.append(thread_range.low)
    if thread_range.high is not None:
        clauses.append(sql.SQL("thread_id < %s"))
        params.append(thread_range.high)
    return (sql.SQL(" AND ").join(clauses) if clauses else sql.SQL("TRUE")), params


def _group_by_table(swaps: Sequence[Swap]) -> list[tuple[str, list[tuple[int, Swap]]]]:
    """Swaps per table, each with its position in ``swaps``."""
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
