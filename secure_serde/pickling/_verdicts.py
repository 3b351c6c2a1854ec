"""Remembering which pickles already passed the static scan, by SHA-256 digest and admission.

The scan walks every opcode in Python, which costs far more than the C
pickler and the hash together. A checkpointed DataFrame that did not change
between steps pickles to the same bytes at every step, and a value read back
in the process that wrote it has the same bytes as when it was written, so
each of those passes the scan once. The key is the admission (what the
pickle may name) together with the SHA-256 digest of the exact bytes: a
pickle that passed under a broad allowlist is scanned again under a narrower
one, and a pickle differing in one byte has a different digest (finding one
that matches a passed pickle is a SHA-256 second preimage). Only passes are
remembered; a refused pickle is scanned, and refused, every time.

The restricted unpickler still checks everything at run time: the cache
spares the static proof, never the run-time layer. With each pass the cache
keeps the pickle's `Layout` (where its BUILD opcodes are), which the
unpickler needs to route every BUILD to its run-time check; an entry without
one makes the unpickler find them again (`_scan.locate`).
"""

from __future__ import annotations

import threading
from typing import Final

from cryptography.hazmat.primitives import hashes

from secure_serde.pickling._scan import Admission, Layout, scan

__all__ = ["MAX_ENTRIES", "ScanVerdicts"]

# Digests are 32 bytes: 1,024 entries per serializer policy stay under 200 KB.
MAX_ENTRIES: Final = 1024


def _digest(data: bytes) -> bytes:
    hasher = hashes.Hash(hashes.SHA256())
    hasher.update(data)
    return hasher.finalize()


class ScanVerdicts:
    """A bounded, thread-safe set of (admission, digest) pairs that passed `scan`."""

    __slots__ = ("_lock", "_max", "_passed")

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._passed: dict[tuple[Admission, bytes], Layout | None] = {}
        self._lock = threading.Lock()
        self._max = max_entries

    def scan(self, data: bytes, admission: Admission) -> Layout | None:
        """`scan` ``data`` under ``admission``, unless these exact bytes already passed it.

        Returns the pickle's `Layout`, or ``None`` for a pass remembered without one.
        """
        key = (admission, _digest(data))
        with self._lock:
            if key in self._passed:
                # Most recently used last, so eviction drops the stalest pass.
                layout = self._passed[key] = self._passed.pop(key)
                return layout
        layout = scan(data, admission)
        with self._lock:
            self._passed[key] = layout
            while len(self._passed) > self._max:
                del self._passed[next(iter(self._passed))]
        return layout

    def __len__(self) -> int:
        return len(self._passed)
