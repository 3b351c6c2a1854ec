"""Reading checkpoints for ``secure-serde inspect`` through LangGraph's saver API, read only.

`CheckpointReader` reads with `V03Reader` on a read-only `HistoryView`:
each checkpoint bound first, then unbound (marked, with a warning when the store binds;
docs/cli.md); a sealed value is authenticated either way. Each is loaded on its own, so one
that cannot be decrypted is reported and the rest of the history is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from secure_serde._errors import (
    ConfigurationError,
    MetadataMovedError,
    SecureSerdeError,
    UnboundValueError,
)
from secure_serde.serde import EncryptedSerializer, Migration
from secure_serde.serde import langgraph_internals as lg
from secure_serde.stores._base import Store, StoreError
from secure_serde.stores._history import HistoryView
from secure_serde.stores._next import derive_next
from secure_serde.stores._v03 import V03Reader, written_by_v03

__all__ = ["CheckpointEntry", "CheckpointReader"]

_DELTA_COUNTERS: Final = "counters_since_delta_snapshot"
_WHERE: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")
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
# What 0.3's savers raise for a row with no binding (a value, a record,
# or a sealed-metadata entry that names no row): read it again unbound.
_UNBOUND_ERRORS: Final = (UnboundValueError, MetadataMovedError)


@dataclass(frozen=True)
class CheckpointEntry:
    """One checkpoint as read, or the error that kept it from being read."""

    checkpoint_id: str
    saved: CheckpointTuple | None = None
    error: str | None = None
    next: tuple[str, ...] = ()
    deltas: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Read only under Migration(unbound=True): some value or the record
    # itself carries no binding to its row.
    unbound: bool = False


class CheckpointReader:
    """Read-only LangGraph savers on an open store: one reading bound, one also unbound."""

    def __init__(
        self,
        store: Store,
        serde: EncryptedSerializer,
        *,
        migration: Migration | None = None,
    ) -> None:
        resolved = Migration.resolve(migration)
        if resolved.inline_values and store.kind != "postgres":
            raise ConfigurationError("--allow-inline-values applies to PostgreSQL stores only")
        self._view = HistoryView(store)
        self._driver_error: Any = self._view.driver_error
        try:
            if not self._view.has_history():
                raise StoreError(
                    "this database has ShallowPostgresSaver's schema, which keeps no history;"
                    " inspect reads PostgresSaver stores (secure-serde audit reads both)"
                )
            # Viewers, not writers: they unseal whatever is sealed and enforce no metadata
            # policy (which keys a deployment seals is not known here).
            self._bound: BaseCheckpointSaver[Any]
            self.saver: BaseCheckpointSaver[Any]
            self._bound, self.saver = (
                V03Reader(self._view, serde=serde, migration=m, seal_metadata=False)
                for m in (replace(resolved, unbound=False), replace(resolved, unbound=True))
            )
        except BaseException:
            self._view.close()
            raise
        self._binding_store: bool | None = None
        self._serde = serde
        self._migration = resolved

    def namespaces(self, thread_id: str) -> list[tuple[str, int]]:
        return self._view.namespaces(thread_id)

    def checkpoint_ids(self, thread_id: str, checkpoint_ns: str, limit: int | None) -> list[str]:
        return self._view.checkpoint_ids(thread_id, checkpoint_ns, limit)

    def binding_store(self) -> bool:
        """Whether 0.3's savers wrote this store (`secure_serde.stores.written_by_v03`)."""
        if self._binding_store is None:
            self._binding_store = written_by_v03(self._view, self._serde, self._migration)
        return self._binding_store

    def read(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> CheckpointEntry | None:
        """The checkpoint, decrypted; ``None`` if there is no such checkpoint."""
        config = config_for(thread_id, checkpoint_ns, checkpoint_id)
        unbound = False
        try:
            try:
                saved = self._bound.get_tuple(config)
            except _UNBOUND_ERRORS:
                unbound = True
                saved = self.saver.get_tuple(config)
        except StoreError:
            raise  # the database, not this checkpoint
        except _READ_ERRORS as exc:
            return CheckpointEntry(checkpoint_id, error=_describe(exc))
        except self._driver_error as exc:
            raise StoreError(f"reading the store failed: {type(exc).__name__}") from None
        if saved is None:
            return None
        if not unbound:
            self._binding_store = True
        next_tasks, deltas, error = derive_next(saved.checkpoint), {}, None
        try:
            deltas = read_deltas(self.saver, saved)
        except _READ_ERRORS as exc:
            error = _describe(exc)
        return CheckpointEntry(checkpoint_id, saved, error, next_tasks, deltas, unbound)

    def close(self) -> None:
        self._view.close()


def config_for(*where: str) -> Any:
    """The config of a checkpoint, by thread id, namespace and checkpoint id."""
    return {"configurable": dict(zip(_WHERE, where, strict=True))}


def read_deltas(
    saver: BaseCheckpointSaver[Any], saved: CheckpointTuple
) -> dict[str, dict[str, Any]]:
    """The ``DeltaChannel`` values missing from ``channel_values``, as stored: the nearest
    snapshot (``seed``, if any: ``has_seed``) and the ``writes`` since."""
    values = saved.checkpoint.get("channel_values") or {}
    counters = (saved.metadata or {}).get(_DELTA_COUNTERS) or {}
    missing = sorted(ch for ch in counters if ch not in values)
    if not missing:
        return {}
    history = saver.get_delta_channel_history(config=saved.config, channels=missing)
    found = {}
    for channel in missing:
        entry = history.get(channel)
        if entry is None:
            continue
        seed = entry.get("seed")
        found[channel] = {
            "seed": seed.value if isinstance(seed, lg.DeltaSnapshot) else seed,
            "has_seed": "seed" in entry,
            "writes": [write[2] for write in entry["writes"]],
        }
    return found


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, NotImplementedError) and _PICKLE_TAG in str(exc):
        text += " (written through PickleFallbackSerializer: see --pickle)"
    return text
