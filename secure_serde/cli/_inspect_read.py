"""The app's own sealed saver for ``secure-serde inspect``, ``audit`` and ``adopt``.

`SealedReader` reads a store SealedSaver sealed through the application's own saver, every check
included; its namespaces and ids come from the inner saver's raw rows, nothing decrypted. The
reading itself is `secure_serde.stores.CheckpointReader`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from secure_serde import EncryptedSerializer
from secure_serde.sealing import SealedSaver
from secure_serde.stores import CheckpointReader

__all__ = ["SealedReader", "open_sealed"]


@contextmanager
def open_sealed(location: str, serde: EncryptedSerializer) -> Iterator[SealedSaver]:
    """The app's own sealed saver on a SQLite path or a PostgreSQL URL."""
    if location.startswith(("postgresql://", "postgres://")):
        from secure_serde.savers.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(location, serde=serde) as saver:
            yield saver
    else:
        from secure_serde.savers.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(location, serde=serde) as saver:
            yield saver


class SealedReader(CheckpointReader):
    """`CheckpointReader` over the `SealedSaver` of a store it sealed: every row binds."""

    def __init__(self, location: str, serde: EncryptedSerializer) -> None:  # not super()'s
        self._stack = ExitStack()
        self._sealed = self._stack.enter_context(open_sealed(location, serde))
        self.saver = self._bound = self._sealed
        self._binding_store = True
        self._driver_error = ()  # the saver's own errors are SecureSerdeErrors

    def _ids(self, thread_id: str) -> list[tuple[str, str]]:
        rows = self._sealed.inner.list({"configurable": {"thread_id": thread_id}})
        return [
            (str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"]))
            for c in (t.config["configurable"] for t in rows)
        ]

    def namespaces(self, thread_id: str) -> list[tuple[str, int]]:
        return sorted(Counter(ns for ns, _ in self._ids(thread_id)).items())

    def checkpoint_ids(self, thread_id: str, checkpoint_ns: str, limit: int | None) -> list[str]:
        ids = [i for ns, i in self._ids(thread_id) if ns == checkpoint_ns]
        return sorted(ids, reverse=True)[:limit]

    def close(self) -> None:
        self._stack.close()
