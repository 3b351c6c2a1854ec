"""Reading checkpoints for ``secure-serde inspect`` through LangGraph's own savers, read only.

SQLite is opened with ``mode=ro`` and read by our sealed ``SqliteSaver``
(the stock one when the serializer cannot bind values to rows); PostgreSQL
by our `PostgresSaver` (the stock one's reads, plus sealed metadata, the
inline-values switch and row binding) on a session whose transactions are
all read only. Both read under ``Migration(unbound=True)``: a value bound
to its row is still authenticated there (one moved from another row is
refused), and a store a stock saver wrote, with no bindings, is shown too.
Each checkpoint is loaded on its own with ``get_tuple``, so one that
cannot be decrypted is reported and the rest of the history is
still shown. ``DeltaChannel`` values stored as a snapshot plus later writes
are fetched with ``get_delta_channel_history``: combining them takes the
channel's reducer, which only the graph has.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from secure_serde import _langgraph as lg
from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde._migration import Migration
from secure_serde.cli._audit_json import first_line
from secure_serde.cli._next import derive_next
from secure_serde.stores import StoreError
from secure_serde.stores._open import POSTGRES_SCHEMES

__all__ = ["CheckpointEntry", "CheckpointReader", "DeltaValue"]

_IDS_SQL: Final = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = {p}"
    " ORDER BY checkpoint_id DESC LIMIT {p}"
)
_NS_SQL: Final = (
    "SELECT checkpoint_ns, count(*) FROM checkpoints WHERE thread_id = {p}"
    " GROUP BY checkpoint_ns ORDER BY checkpoint_ns"
)
_HAS_HISTORY_SQL: Final = """
SELECT count(*) FROM pg_attribute
WHERE attrelid = to_regclass('checkpoints') AND attname = 'checkpoint_id' AND NOT attisdropped
"""
_DELTA_COUNTERS: Final = "counters_since_delta_snapshot"
# Errors a stored value can raise while being decrypted or decoded; each is
# shown in place of that checkpoint. JsonPlus raises NotImplementedError for
# an inner type tag it does not know; the stock saver's json.loads of the
# metadata column raises RecursionError for nesting deeper than the stack.
_READ_ERRORS: Final = (
    SecureSerdeError,
    ValueError,
    TypeError,
    NotImplementedError,
    RecursionError,
)
_PICKLE_TAG: Final = "msgpack+pickle"


@dataclass(frozen=True)
class DeltaValue:
    """A ``DeltaChannel`` value as stored: the nearest snapshot (if any) and the writes since."""

    has_seed: bool
    seed: Any
    writes: tuple[Any, ...]


@dataclass(frozen=True)
class CheckpointEntry:
    """One checkpoint as read, or the error that kept it from being read."""

    checkpoint_id: str
    saved: CheckpointTuple | None = None
    error: str | None = None
    next: tuple[str, ...] = ()
    deltas: dict[str, DeltaValue] = field(default_factory=dict)


class CheckpointReader:
    """A read-only LangGraph saver on a SQLite file or a ``postgresql://`` URL."""

    def __init__(
        self,
        location: str,
        serde: SerializerProtocol,
        *,
        migration: Migration | None = None,
        allow_inline_values: bool = False,
    ) -> None:
        self._conn: Any
        self.saver: BaseCheckpointSaver[Any]
        resolved = replace(
            Migration.resolve(migration, allow_inline_values=allow_inline_values), unbound=True
        )
        if location.startswith(POSTGRES_SCHEMES):
            self._open_postgres(location, serde, resolved)
        else:
            if resolved.inline_values:
                raise ConfigurationError("--allow-inline-values applies to PostgreSQL stores only")
            self._open_sqlite(location, serde, resolved)

    def _open_sqlite(self, location: str, serde: SerializerProtocol, migration: Migration) -> None:
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver

            from secure_serde.savers._bound import binder_for
            from secure_serde.savers.sqlite import SqliteSaver as SealedSqliteSaver
        except ImportError:
            raise ConfigurationError(
                "inspecting SQLite stores needs langgraph-checkpoint-sqlite:"
                " pip install 'secure-serde[sqlite]'"
            ) from None
        uri = f"{Path(location).resolve().as_uri()}?mode=ro"
        try:
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {location}: {exc}") from None
        saver: SqliteSaver
        if binder_for(serde, migration) is not None:
            # A viewer: it unseals whatever is sealed, enforcing no metadata policy.
            saver = SealedSqliteSaver(
                self._conn, serde=serde, migration=migration, seal_metadata=False
            )
        else:
            saver = SqliteSaver(self._conn, serde=serde)
        # setup() would switch the journal mode and create tables: the store
        # exists already (open_store checked), and this connection cannot write.
        saver.is_setup = True
        self.saver = saver
        self._mark = "?"
        self._driver_error: type[Exception] = sqlite3.Error

    def _open_postgres(
        self, location: str, serde: SerializerProtocol, migration: Migration
    ) -> None:
        import psycopg
        from psycopg.rows import dict_row

        from secure_serde.savers.postgres import PostgresSaver

        try:
            self._conn = psycopg.Connection.connect(
                location, autocommit=True, prepare_threshold=0, row_factory=dict_row
            )
            self._conn.execute("SET default_transaction_read_only = on")
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect: {first_line(exc)}") from None
        # A viewer, not a writer: it unseals whatever is sealed and enforces no
        # metadata policy (which keys a deployment seals is not known here).
        self.saver = PostgresSaver(
            self._conn, serde=serde, migration=migration, seal_metadata=False
        )
        self._mark = "%s"
        self._driver_error = psycopg.Error
        if not self._rows(_HAS_HISTORY_SQL, ())[0][0]:
            self._conn.close()
            raise StoreError(
                "this database has ShallowPostgresSaver's schema, which keeps no history;"
                " inspect reads PostgresSaver stores (secure-serde audit reads both)"
            )

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            cursor = self._conn.execute(sql.format(p=self._mark), params)
            return [tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in cursor]
        except self._driver_error as exc:
            raise StoreError(f"reading the store failed: {type(exc).__name__}") from None

    def namespaces(self, thread_id: str) -> list[tuple[str, int]]:
        """Every checkpoint namespace of a thread (``""`` is the root graph) and its size."""
        return [(str(ns), int(n)) for ns, n in self._rows(_NS_SQL, (thread_id,))]

    def checkpoint_ids(self, thread_id: str, checkpoint_ns: str, limit: int | None) -> list[str]:
        """Ids newest first, the order of ``list()`` and ``get_state_history()``."""
        # SQLite reads LIMIT -1 as no limit, PostgreSQL reads LIMIT NULL so.
        bound: int | None = limit if limit is not None else (-1 if self._mark == "?" else None)
        return [str(r[0]) for r in self._rows(_IDS_SQL, (thread_id, checkpoint_ns, bound))]

    def read(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> CheckpointEntry | None:
        """The checkpoint, decrypted; ``None`` if there is no such checkpoint."""
        config: Any = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        try:
            saved = self.saver.get_tuple(config)
        except _READ_ERRORS as exc:
            return CheckpointEntry(checkpoint_id, error=_describe(exc))
        except self._driver_error as exc:
            raise StoreError(f"reading the store failed: {type(exc).__name__}") from None
        if saved is None:
            return None
        try:
            deltas = self._deltas(saved)
        except _READ_ERRORS as exc:
            return CheckpointEntry(
                checkpoint_id, saved, _describe(exc), derive_next(saved.checkpoint)
            )
        return CheckpointEntry(checkpoint_id, saved, None, derive_next(saved.checkpoint), deltas)

    def _deltas(self, saved: CheckpointTuple) -> dict[str, DeltaValue]:
        values = saved.checkpoint.get("channel_values") or {}
        counters = (saved.metadata or {}).get(_DELTA_COUNTERS) or {}
        missing = sorted(ch for ch in counters if ch not in values)
        if not missing:
            return {}
        history = self.saver.get_delta_channel_history(config=saved.config, channels=missing)
        found = {}
        for channel in missing:
            entry = history.get(channel)
            if entry is None:
                continue
            seed = entry.get("seed")
            found[channel] = DeltaValue(
                has_seed="seed" in entry,
                seed=seed.value if isinstance(seed, lg.DeltaSnapshot) else seed,
                writes=tuple(write[2] for write in entry["writes"]),
            )
        return found

    def close(self) -> None:
        self._conn.close()


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, NotImplementedError) and _PICKLE_TAG in str(exc):
        text += " (written through PickleFallbackSerializer: see --pickle)"
    return text
