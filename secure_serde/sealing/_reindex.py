"""The re-index pass's bookkeeping, shared by `SealedSaver.reindex` and ``areindex``; no I/O here.

A re-index rotates the store's blind-index key (secure_serde/sealing/_index.py):

1. **Begin.** Unless a pass is in progress already (the identity holds more
   than one index key), a new random index key becomes the current one; the
   old keys stay in the identity, for reading. Every process that opens the
   store from then on writes tokens under the new key, and a filter asks the
   inner saver once per key the identity holds.
2. **Move.** Every checkpoint whose tokens are under another key is read,
   checked (its record opens; no value is decrypted), and re-put
   through the inner saver's ``put`` with the same cells and a record and
   tokens under the current key. Rows under the current key are skipped, so
   an interrupted pass resumes where it stopped and a finished one writes
   nothing. A row whose tokens name a key the identity no longer holds is
   re-tokenized the same way: its sealed metadata vouches for the values.
3. **Drop.** Once a scan finds no row under an older key (and none it could
   not read), the older keys are dropped from the identity.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from secure_serde._errors import (
    BlindIndexError,
    ConfigurationError,
    SecureSerdeError,
    StoreIdentityError,
)
from secure_serde._report import MAX_LISTED_FAILURES, Detail, PassReport, Tally
from secure_serde._rows import CheckpointRow, RowFailure
from secure_serde.sealing._codec import Sealer
from secure_serde.sealing._identity import IDENTITY_THREAD
from secure_serde.sealing._walks import key_of

__all__ = [
    "MAX_ROUNDS",
    "ReindexReport",
    "ReindexScan",
    "ReindexTally",
    "check_max_rows",
    "claim_reindex",
    "concurrent",
    "merged",
    "release_reindex",
    "row_config",
    "unenumerable_store",
]

# Inner savers (by id) with a re-index running in this process: a second one is refused.
_REINDEXING: set[int] = set()
_REINDEXING_LOCK: Final = threading.Lock()

# Scans before a pass gives up on rows that keep arriving under an old key (writers that
# opened the store before the pass began).
MAX_ROUNDS: Final = 3


def claim_reindex(inner: object) -> None:
    with _REINDEXING_LOCK:
        if id(inner) in _REINDEXING:
            raise StoreIdentityError(
                "a re-index of this store is already running in this process: let it finish"
            )
        _REINDEXING.add(id(inner))


def release_reindex(inner: object) -> None:
    with _REINDEXING_LOCK:
        _REINDEXING.discard(id(inner))


@dataclass
class ReindexTally:
    """What one `SealedSaver.reindex` call did (or, with ``dry_run``, would do), as it runs.

    `report` freezes it into the `PassReport` (named ``"reindex"``) the call
    returns. ``key_id``: the current index key's id after the call (on a dry
    run that would rotate, ``None``: the key does not exist yet).
    ``rewritten``: rows re-put (a dry run: rows it would re-put). ``current``:
    rows already under the current key, skipped. ``refused``: rows that did
    not open (typed errors; each listed as a failure); while any is left the
    old keys are kept. ``remaining``: rows still under an older key when the
    call stopped (``max_rows``). ``dropped``: ids of the index keys removed
    from the identity. ``complete``: the store holds one index key and every
    row is under it.
    """

    key_id: str | None
    dry_run: bool
    rotated: bool = False
    rewritten: int = 0
    current: int = 0
    refused: int = 0
    remaining: int = 0
    dropped: tuple[str, ...] = ()
    complete: bool = False
    failures: list[RowFailure] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def refuse(self, key: tuple[str, str, str], error: type[SecureSerdeError]) -> None:
        self.refused += 1
        if len(self.failures) < MAX_LISTED_FAILURES:
            reason = f"{error.__name__}: the checkpoint's record does not open; left as it is"
            self.failures.append(RowFailure(CheckpointRow.at(*key), reason, error))

    def report(self) -> PassReport:
        tally = Tally(
            scanned=self.current + self.rewritten + self.refused + self.remaining,
            changed=self.rewritten,
            failure_count=self.refused,
            failures=list(self.failures),
        )
        tally.skipped["current"] = self.current
        tally.counts["remaining"] = self.remaining
        details: dict[str, Detail] = {
            "key_id": self.key_id,
            "rotated": self.rotated,
            "dropped": self.dropped,
            "complete": self.complete,
        }
        elapsed = time.monotonic() - self.started
        return tally.report("reindex", dry_run=self.dry_run, elapsed=elapsed, details=details)


# Deprecated alias (0.4.0): reindex returns the one report type of every pass.
ReindexReport = PassReport


class ReindexScan:
    """One scan of every checkpoint: which rows are not under the current index key."""

    def __init__(self, sealer: Sealer, *, rotating: bool) -> None:
        self.sealer = sealer
        # A dry run before the new key exists: every row with a token would move.
        self.rotating = rotating
        self.todo: list[tuple[str, str, str]] = []
        self.current = 0

    def see(self, found: CheckpointTuple) -> None:
        configurable = found.config.get("configurable") or {}
        if str(configurable.get("thread_id")) == IDENTITY_THREAD:
            return
        try:
            generation = self.sealer.row_generation(found.metadata)
        except BlindIndexError:
            # A key the identity no longer holds (or a hostile token): re-tokenized from the
            # sealed metadata if the record opens, refused otherwise.
            self.todo.append(key_of(found))
            return
        if generation is None or (
            not self.rotating and generation is self.sealer.index_keys.current
        ):
            self.current += 1
        else:
            self.todo.append(key_of(found))

    def is_current(self, found: CheckpointTuple) -> bool:
        """Whether a row read back for moving is under the current key already (moved since)."""
        try:
            generation = self.sealer.row_generation(found.metadata)
        except BlindIndexError:
            return False
        return generation is None or generation is self.sealer.index_keys.current


def row_config(key: tuple[str, str, str]) -> RunnableConfig:
    thread, ns, checkpoint_id = key
    return {
        "configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
    }


def merged(rows: Iterable[CheckpointTuple]) -> list[CheckpointTuple]:
    """Rows of one filter asked once per index key: each once, newest checkpoint id first."""
    seen: dict[tuple[str, str, str], CheckpointTuple] = {}
    for found in rows:
        seen.setdefault(key_of(found), found)
    return [seen[key] for key in sorted(seen, key=lambda k: (k[2], k[0], k[1]), reverse=True)]


def check_max_rows(max_rows: int | None) -> None:
    if max_rows is not None and (
        not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 0
    ):
        raise ConfigurationError("reindex(max_rows=) takes a count of rows, 0 or more")


def concurrent() -> StoreIdentityError:
    return StoreIdentityError(
        "the store's index keys changed while this re-index ran: another re-index runs at the"
        " same time. Let it finish, then run reindex() again (it resumes; nothing is lost)"
    )


def unenumerable_store(inner: object) -> ConfigurationError:
    return ConfigurationError(
        f"{type(inner).__name__} cannot list every thread, so reindex() cannot find every"
        " checkpoint to move: the store keeps its index keys"
    )
