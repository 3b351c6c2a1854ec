"""The shapes every store hands out, and the `Store` contract itself.

See the package docstring for how the pieces fit together; this module only
defines them.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final

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
    records (secure_serde/stores/_sealed.py); ``name`` is then
    ``"<table>.<column>"``.
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


class Store(abc.ABC):
    """A LangGraph checkpoint store, seen as cells of serialized values.

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
    def count(self, table: TableSpec, thread_range: ThreadRange = ALL_THREADS) -> int:
        """Rows of ``table`` in ``thread_range``, for progress reporting."""

    @abc.abstractmethod
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

    @abc.abstractmethod
    def reload(self, ref: RowRef) -> Cell | None:
        """The cell as it is now, or ``None`` if the row is gone."""

    @abc.abstractmethod
    def compare_and_swap(self, swaps: Sequence[Swap]) -> list[bool]:
        """Apply every swap whose row still holds exactly ``swap.cell``'s value.

        All swaps run in one transaction. The result says, per swap, whether
        it was applied; ``False`` means the row was changed or deleted since
        it was read, and it was left as it is.
        """

    @abc.abstractmethod
    def thread_ranges(self, parts: int) -> list[ThreadRange]:
        """Split all thread ids into at most ``parts`` ranges of similar row counts."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def thread_ids(self) -> list[str]:
        """Every thread id of the ``checkpoints`` table (ids only, read without a key)."""

    @abc.abstractmethod
    def holds_thread(self, thread_id: str) -> bool:
        """Whether the ``checkpoints`` table has a row of ``thread_id``."""

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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.display}>"


def check_batch_size(batch_size: int) -> None:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise StoreError(f"batch_size must be a positive integer, got {batch_size!r}")
