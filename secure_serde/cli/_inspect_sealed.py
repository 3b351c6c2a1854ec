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
from typing import Final

from secure_serde import EncryptedSerializer, SecureSerdeError
from secure_serde.cli._inspect_read import CheckpointEntry, config_for, read_deltas
from secure_serde.cli._next import derive_next
from secure_serde.sealing import SealedSaver

__all__ = ["SealedReader", "open_sealed"]

_POSTGRES: Final = ("postgresql://", "postgres://")


@contextmanager
def open_sealed(location: str, serde: EncryptedSerializer) -> Iterator[SealedSaver]:
    """The app's own sealed saver on a SQLite path or a PostgreSQL URL."""
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
        self.saver = self._stack.enter_context(open_sealed(location, serde))

    def _ids(self, thread_id: str) -> list[tuple[str, str]]:
        """(namespace, checkpoint id) of each of the thread's raw rows."""
        rows = self.saver.inner.list({"configurable": {"thread_id": thread_id}})
        return [
            (str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"]))
            for c in (t.config["configurable"] for t in rows)
        ]

    def namespaces(self, thread_id: str) -> list[tuple[str, int]]:
        return sorted(Counter(ns for ns, _ in self._ids(thread_id)).items())

    def checkpoint_ids(self, thread_id: str, checkpoint_ns: str, limit: int | None) -> list[str]:
        ids = [i for ns, i in self._ids(thread_id) if ns == checkpoint_ns]
        return sorted(ids, reverse=True)[:limit]

    def binding_store(self) -> bool:
        return True

    def read(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> CheckpointEntry | None:
        try:
            saved = self.saver.get_tuple(config_for(thread_id, checkpoint_ns, checkpoint_id))
        except SecureSerdeError as exc:
            return CheckpointEntry(checkpoint_id, error=f"{type(exc).__name__}: {exc}")
        if saved is None:
            return None
        next_tasks = derive_next(saved.checkpoint)
        try:
            deltas = read_deltas(self.saver, saved)
        except SecureSerdeError as exc:
            error = f"{type(exc).__name__}: {exc}"
            return CheckpointEntry(checkpoint_id, saved, error, next_tasks)
        return CheckpointEntry(checkpoint_id, saved, None, next_tasks, deltas)

    def close(self) -> None:
        self._stack.close()
