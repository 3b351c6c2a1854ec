"""The shapes every store hands out, the `Store` contract, and its statements written once
for SQLite and PostgreSQL.

A store knows its tables from the catalog (`TableSpec` templates in ``_WANTED``)
and builds its statements from them with its driver's placeholder and casts:
keyset-paginated pages, a reload by key, a count, and a compare-and-swap
``UPDATE``. A table is either two columns (type tag and bytes) or one key of
a JSON column (`TableSpec`), whose swap replaces that key only, while it still
holds the text read. Names in the statements are fixed constants or catalog
column names, all quoted; every value is bound (hence S608).
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final

from secure_serde._errors import SecureSerdeError
from secure_serde._rows import RowRef
from secure_serde.stores._dsn import redact

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "Cell",
    "RowRef",
    "Store",
    "StoreError",
    "Swap",
    "TableSpec",
    "ThreadRange",
]

DEFAULT_BATCH_SIZE: Final = 500

# The reserved thread of SealedSaver's store identity (secure_serde/sealing/_identity.py).
SEALED_STORE_THREAD: Final = "__secure_serde_store__"
SEALED_STORE_REFUSAL: Final = (
    "is sealed by secure_serde.SealedSaver (it holds a store identity): this command reads"
    " the stock savers' row layout and does not apply to it. Open it with SealedSaver"
)


class StoreError(SecureSerdeError):
    """A store could not be opened, read or written (not a per-row decryption problem).

    The message goes through `redact` first: whatever a message quotes (a
    path that was really a DSN, a driver's text), no DSN password survives.
    """

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


@dataclass(frozen=True)
class TableSpec:
    """One table holding serialized values: where the type tag and the bytes live.

    ``key_columns`` is the table's primary key, in index order, as read from
    the database catalog; it starts with ``thread_id`` in every stock schema.

    With ``envelope_key`` set, the cell is not two columns but the text under
    that key of a JSON column (``data_column``), as `SealedSaver` keeps its
    records (secure_serde/stores/_sealed.py; ``name`` is then
    ``"<table>.<column>"``) and `SealedStore` its items (_items.py).
    """

    name: str
    type_column: str
    data_column: str
    key_columns: tuple[str, ...]
    envelope_key: str | None = None
    # Further columns a store selects after the value (a write's channel);
    # never part of the key or the compare-and-swap.
    extra_columns: tuple[str, ...] = ()

    @property
    def relation(self) -> str:
        """The SQL table the cells live in."""
        return self.name if self.envelope_key is None else self.name.partition(".")[0]


@dataclass(frozen=True, slots=True)
class Cell:
    """One serialized value as stored: ``(type_tag, data)`` and where it lives.

    ``data`` is ``None`` for rows that hold no serialized value (PostgreSQL
    writes ``("empty", NULL)`` blob rows for channels without a value);
    ``type_tag`` is ``None`` only in hand-edited or damaged rows.
    """

    ref: RowRef
    type_tag: str | None
    data: bytes | None


@dataclass(frozen=True, slots=True)
class Swap:
    """Replace ``cell``'s value with ``(new_type, new_data)``, if it is still ``cell``'s."""

    cell: Cell
    new_type: str
    new_data: bytes


@dataclass(frozen=True)
class ThreadRange:
    """Thread ids ``low <= thread_id < high``; ``None`` leaves that end open.

    The ranges `Store.thread_ranges` returns cover every possible id, ids
    created after the split included, and never overlap.
    """

    low: str | None = None
    high: str | None = None

    def __str__(self) -> str:
        low = "-inf" if self.low is None else repr(self.low)
        high = "+inf" if self.high is None else repr(self.high)
        return f"[{low}, {high})"


ALL_THREADS: Final = ThreadRange()


def check_batch_size(batch_size: int) -> None:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise StoreError(f"batch_size must be a positive integer, got {batch_size!r}")


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def entry_data(value: object, field: str) -> bytes | None:
    entry = value.get(field) if isinstance(value, dict) else None
    return entry.encode("utf-8") if isinstance(entry, str) else None


def json_or_none(text: object) -> object:
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Statements:
    """One table's SQL; ``first``, ``page`` and ``count`` take the thread range as ``{range}``."""

    first: str
    page: str
    reload: str
    swap: str
    count: str


class Store(abc.ABC):
    """A LangGraph checkpoint store, seen as cells of serialized values: tables keyed by
    ``thread_id`` first, read and swapped by primary key.

    Reads are keyset-paginated in primary-key order, each page its own
    short statement, so no snapshot or lock is held between pages and
    memory does not grow with the store. Writes go through
    `compare_and_swap` only.
    """

    kind: str
    tables: tuple[TableSpec, ...]

    @property
    @abc.abstractmethod
    def display(self) -> str:
        """Where the store is, safe to print (no password)."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """What `open_store` needs to open this store again (may hold a password)."""

    @abc.abstractmethod
    def compare_and_swap(self, swaps: Sequence[Swap]) -> list[bool]:
        """Apply every swap whose row still holds exactly ``swap.cell``'s value.

        All swaps run in one transaction. The result says, per swap, whether
        it was applied; ``False`` means the row was changed or deleted since
        it was read, and it was left as it is.
        """

    def sealed_by_saver(self) -> bool:
        """Whether `secure_serde.SealedSaver` keeps its store identity here.

        Such a store holds only cells, in a layout the passes over this table
        layout (rewrap, audit, inspect) do not read. They refuse it rather
        than take its cells for unbound values.
        """
        return self.holds_thread(SEALED_STORE_THREAD)

    def iter_cells(
        self, batch_size: int = DEFAULT_BATCH_SIZE, thread_range: ThreadRange = ALL_THREADS
    ) -> Iterator[Cell]:
        """Every cell of every table, one at a time (still read in batches)."""
        for table in self.tables:
            for batch in self.iter_batches(table, batch_size, thread_range):
                yield from batch

    def count_all(self, thread_range: ThreadRange = ALL_THREADS) -> int:
        return sum(self.count(table, thread_range) for table in self.tables)

    def table(self, name: str) -> TableSpec:
        for spec in self.tables:
            if spec.name == name:
                return spec
        raise StoreError(f"{self.display} has no table {name!r}")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.display}>"

    _MARK: ClassVar[str]  # parameter placeholder
    _TRUE: ClassVar[str]
    _TEXT: ClassVar[str] = "{}"  # how the type and data columns are read and compared
    _BLOB: ClassVar[str] = "{}"
    _SAME: ClassVar[str]  # null-safe equality
    _RETURNING: ClassVar[str] = ""
    # The tables looked for, in visiting order; an empty key: any key starting with thread_id.
    _WANTED: ClassVar[tuple[TableSpec, ...]]
    # Whether every table of _WANTED must be there (a sealed layout) or any one of them.
    _ALL_NEEDED: ClassVar[bool] = False
    _conn: Any
    _sql: dict[str, Statements]

    # The driver's two reads (not abstract: a Store of another kind overrides what it reads).
    def _catalog(self, relation: str) -> tuple[set[str], tuple[str, ...]]:
        """The columns of ``relation`` and its primary key, in index order (empty: no table)."""
        raise NotImplementedError

    def _fetch(self, query: str, params: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def _discover(self) -> tuple[TableSpec, ...]:
        found = []
        for want in self._WANTED:
            columns, key = self._catalog(want.relation)
            if not columns and not self._ALL_NEEDED:
                continue
            needed = [want.type_column, want.data_column, "thread_id", *want.extra_columns]
            if not set(needed) <= columns:
                raise StoreError(
                    f"table {want.relation} in {self.display} lacks the stock columns"
                    f" {', '.join(dict.fromkeys(needed))}"
                )
            if key != want.key_columns if want.key_columns else key[:1] != ("thread_id",):
                raise StoreError(
                    f"table {want.relation} in {self.display} is not keyed as langgraph's saver"
                    f" keys it ({', '.join(want.key_columns or ('thread_id', '...'))})"
                )
            found.append(replace(want, key_columns=key))
        if not found:
            names = ", ".join(w.relation for w in self._WANTED)
            raise StoreError(f"{self.display} holds no langgraph checkpoint tables ({names})")
        return tuple(found)

    def _statements(self, spec: TableSpec) -> Statements:
        mark, table = self._MARK, quote(spec.relation)
        cols = ", ".join(quote(c) for c in spec.key_columns)
        marks = ", ".join(mark for _ in spec.key_columns)
        where_key = " AND ".join(f"{quote(c)} = {mark}" for c in spec.key_columns)
        type_col, data_col = quote(spec.type_column), quote(spec.data_column)
        if spec.envelope_key is None:
            old_type, old_data = self._TEXT.format(type_col), self._BLOB.format(data_col)
            value = ", ".join([old_type, old_data, *(quote(c) for c in spec.extra_columns)])
            swap = (
                f"UPDATE {table} SET {type_col} = {mark}, {data_col} = {mark} WHERE {where_key}"  # noqa: S608
                f" AND {old_type} {self._SAME} {mark} AND {old_data} {self._SAME} {mark}"
                + self._RETURNING
            )
        else:
            value, swap = data_col, self._entry_swap(table, data_col, where_key)
        select = f"SELECT {cols}, {value} FROM {table}"  # noqa: S608
        return Statements(
            first=f"{select} WHERE {{range}} ORDER BY {cols} LIMIT {mark}",
            page=f"{select} WHERE ({cols}) > ({marks}) AND {{range}} ORDER BY {cols} LIMIT {mark}",
            reload=f"{select} WHERE {where_key}",
            swap=swap,
            count=f"SELECT count(*) FROM {table} WHERE {{range}}",  # noqa: S608
        )

    def _entry_swap(self, table: str, column: str, where_key: str) -> str:
        """The ``UPDATE`` of one JSON entry: whole-column compare-and-swap by default."""
        mark = self._MARK
        return f"UPDATE {table} SET {column} = {mark} WHERE {where_key} AND {column} IS {mark}"  # noqa: S608

    def _range(self, thread_range: ThreadRange) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if thread_range.low is not None:
            clauses.append(f"thread_id >= {self._MARK}")
            params.append(thread_range.low)
        if thread_range.high is not None:
            clauses.append(f"thread_id < {self._MARK}")
            params.append(thread_range.high)
        return (" AND ".join(clauses) or self._TRUE), params

    def count(self, table: TableSpec, thread_range: ThreadRange = ALL_THREADS) -> int:
        """Rows of ``table`` in ``thread_range``, for progress reporting."""
        where, params = self._range(thread_range)
        return int(self._fetch(self._sql[table.name].count.format(range=where), params)[0][0])

    def iter_batches(
        self,
        table: TableSpec,
        batch_size: int = DEFAULT_BATCH_SIZE,
        thread_range: ThreadRange = ALL_THREADS,
    ) -> Iterator[list[Cell]]:
        """Every cell of ``table`` in ``thread_range``, ``batch_size`` at a time, by key.

        Rows inserted behind the cursor while it runs are not seen; rows
        inserted ahead of it are.
        """
        check_batch_size(batch_size)
        statements = self._sql[table.name]
        where, range_params = self._range(thread_range)
        nkey = len(table.key_columns)
        rows = self._fetch(statements.first.format(range=where), [*range_params, batch_size])
        while rows:
            yield [self._cell(table, row) for row in rows]
            if len(rows) < batch_size:
                return
            after = list(rows[-1][:nkey])
            page = statements.page.format(range=where)
            rows = self._fetch(page, [*after, *range_params, batch_size])

    def _cell(self, table: TableSpec, row: Sequence[Any]) -> Cell:
        nkey = len(table.key_columns)
        ref = RowRef(table.name, tuple(zip(table.key_columns, row[:nkey], strict=True)))
        if table.envelope_key is not None:
            key = self._entry_key(ref, table)
            return Cell(ref, key, entry_data(self._json(row[nkey]), key))
        data = row[nkey + 1]
        return Cell(ref, row[nkey], None if data is None else bytes(data))

    @staticmethod
    def _json(raw: object) -> object:
        """A JSON column's value decoded (PostgreSQL's driver already decodes it)."""
        return json_or_none(raw)

    def _entry_key(self, ref: RowRef, table: TableSpec) -> str:
        return str(table.envelope_key)

    def _checked_key(self, swap: Swap) -> str:
        """The entry key a swap of an envelope cell replaces, if the swap is one it may make."""
        cell = swap.cell
        key = self._entry_key(cell.ref, self.table(cell.ref.table))
        if cell.data is None or cell.type_tag != key or swap.new_type != key:
            raise StoreError(f"{cell.ref} holds no sealed text to replace")
        return key

    def _swap_params(self, swap: Swap) -> tuple[Any, ...]:
        cell = swap.cell
        keys = cell.ref.key_values
        if self.table(cell.ref.table).envelope_key is None:
            return (swap.new_type, swap.new_data, *keys, cell.type_tag, cell.data)
        key = self._checked_key(swap)
        return (key, swap.new_data.decode("utf-8"), *keys, key, (cell.data or b"").decode("utf-8"))

    def reload(self, ref: RowRef) -> Cell | None:
        """The cell as it is now, or ``None`` if the row is gone."""
        table = self.table(ref.table)
        rows = self._fetch(self._sql[table.name].reload, list(ref.key_values))
        return self._cell(table, rows[0]) if rows else None

    def thread_ranges(self, parts: int) -> list[ThreadRange]:
        """Split all thread ids into at most ``parts`` ranges of similar row counts."""
        return [ALL_THREADS]  # one writer at a time (SQLite): splitting buys nothing

    def thread_ids(self) -> list[str]:
        """Every thread id of the ``checkpoints`` table (ids only, read without a key)."""
        query = "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
        return [str(row[0]) for row in self._fetch(query, [])]

    def holds_thread(self, thread_id: str) -> bool:
        """Whether the ``checkpoints`` table has a row of ``thread_id``."""
        query = f"SELECT 1 FROM checkpoints WHERE thread_id = {self._MARK} LIMIT 1"  # noqa: S608
        return bool(self._fetch(query, [thread_id]))

    def close(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
