"""The reader ``inspect`` uses on a store SealedSaver sealed: the app's own saver, read only.

Same interface as `CheckpointReader` (secure_serde/cli/_inspect_read.py):
namespaces and ids come from the inner saver's raw rows (nothing decrypted),
each checkpoint is read with ``SealedSaver.get_tuple``, every check of the
application's reads included, and a checkpoint that does not open is shown
with its error in its place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Final

from langgraph.checkpoint.base import CheckpointTuple

from secure_serde import EncryptedSerializer, SecureSerdeError
from secure_serde import _langgraph as lg
from secure_serde.cli._inspect_read import CheckpointEntry, DeltaValue
from secure_serde.cli._next import derive_next
from secure_serde.sealing import SealedSaver

__all__ = ["SealedReader"]

_POSTGRES: Final = ("postgresql://", "postgres://")
_DELTA_COUNTERS: Final = "counters_since_delta_snapshot"


@contextmanager
def _open(location: str, serde: EncryptedSerializer) -> Iterator[SealedSaver]:
    if location.startswith(_POSTGRES):
        from secure_serde.savers.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(location, serde=serde) as saver:
            yield saver
    else:
        from secure_serde.savers.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(location, serde=serde) as saver:
            yield saver


class SealedReader:
    """`CheckpointReader`'s interface over a `SealedSaver` on the store."""

    def __init__(self, location: str, serde: EncryptedSerializer) -> None:
        self._stack = ExitStack()
        self.saver = self._stack.enter_context(_open(location, serde))

    def _rows(self, thread_id: str) -> list[CheckpointTuple]:
        return list(self.saver.inner.list({"configurable": {"thread_id": thread_id}}))

    def namespaces(self, thread_id: str) -> list[tuple[str, int]]:
        counts = Counter(
            str(t.config["configurable"].get("checkpoint_ns", "")) for t in self._rows(thread_id)
        )
        return sorted(counts.items())

    def checkpoint_ids(self, thread_id: str, checkpoint_ns: str, limit: int | None) -> list[str]:
        ids = sorted(
            (
                str(t.config["configurable"]["checkpoint_id"])
                for t in self._rows(thread_id)
                if str(t.config["configurable"].get("checkpoint_ns", "")) == checkpoint_ns
            ),
            reverse=True,
        )
        return ids if limit is None else ids[:limit]

    def binding_store(self) -> bool:
        return True

    def read(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> CheckpointEntry | None:
        config: Any = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        try:
            saved = self.saver.get_tuple(config)
        except SecureSerdeError as exc:
            return CheckpointEntry(checkpoint_id, error=f"{type(exc).__name__}: {exc}")
        if saved is None:
            return None
        next_tasks = derive_next(saved.checkpoint)
        try:
            deltas = self._deltas(saved)
        except SecureSerdeError as exc:
            error = f"{type(exc).__name__}: {exc}"
            return CheckpointEntry(checkpoint_id, saved, error, next_tasks)
        return CheckpointEntry(checkpoint_id, saved, None, next_tasks, deltas)

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
        self._stack.close()
