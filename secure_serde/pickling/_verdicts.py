"""Remembering which pickles passed the static scan, by admission and SHA-256 digest.

The scan walks every opcode in Python, and an unchanged DataFrame pickles to
the same bytes at every checkpoint, as does a value read back by the process
that wrote it. Only passes are remembered, each with its `Layout`, and the
run-time checks run on every load regardless; SECURITY.md says why this is safe.
"""

from __future__ import annotations

import threading
from typing import Final

from cryptography.hazmat.primitives import hashes

from secure_serde.pickling._scan import Admission, Layout, scan

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
        """`scan` ``data`` under ``admission``, unless these exact bytes already passed it."""
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
