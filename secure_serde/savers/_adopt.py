"""`adopt`: the one explicit, logged step that takes an older store's rows into a `SealedSaver`.

A store written by secure_serde 0.3's sealed savers, or by a stock saver
(with secure_serde's serde or in plaintext), holds no store identity, so a
`SealedSaver` refuses it (`StoreIdentityError`). ``adopt`` copies every
thread of it into a new sealed store through langgraph's public API: each
thread's checkpoints are listed and put oldest first per namespace, each
with its pending writes, so the target seals and binds every value where it
lands.

The source is read by `secure_serde.stores.V03Reader` for a store 0.3's
sealed savers wrote (read only, checked as 0.3 checked it), or by a stock
langgraph saver for a stock store. Before anything is written, every
source row is classified:

* its stored type tag, read from the database by the stores layer
  (`secure_serde.stores.checkpoint_tags`; nothing is decrypted), so it
  works on any SQLite or PostgreSQL store: a tag with no cipher, or a value
  kept inline in PostgreSQL's checkpoint JSON, is **plaintext**, and a
  ``+aes`` tag (langgraph's built-in format, whose tag nothing
  authenticates) is **legacy**: it could have been relabelled;
* then the checkpoint is read through ``source`` as configured (the 0.3
  reader refuses what is not bound to its location by default): a row that fails
  there is **unauthenticated** if ``lenient`` (a reader of the same store
  under a `Migration`) reads it, and **misplaced** if even that refuses it.

Every such row is listed in the report (a `secure_serde.passes.PassReport`
named ``"adopt"``; ``AdoptReport`` is its deprecated alias), and by default refused: a
refused write is left out, a refused checkpoint is not copied and neither
are its descendants (its history would not be complete). Copying
plaintext, legacy and unauthenticated rows takes ``accept_unvouched=True``
(and ``lenient``); misplaced rows are never copied. The run is logged.

The classification is a planner on the pass engine (secure_serde/passes/_adopt.py);
copies go through the target's public ``put`` and ``put_writes``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Final

from langgraph.checkpoint.base import BaseCheckpointSaver

from secure_serde._errors import ConfigurationError
from secure_serde.passes import (
    AdoptPlanner,
    PassReport,
    SaverApplier,
    Unvouched,
    run_batches,
    stored_checkpoints,
)
from secure_serde.sealing import SealedSaver
from secure_serde.stores import Store

__all__ = ["AdoptReport", "Unvouched", "adopt"]

_log = logging.getLogger("secure_serde.adopt")
# Checkpoints planned between two progress points; each is put on its own.
_BATCH: Final = 100

# Deprecated alias (0.4.0): adopt returns the one report type of every pass.
AdoptReport = PassReport


def adopt(  # noqa: PLR0913 - the source, the target, and keyword-only switches
    source: BaseCheckpointSaver[Any],
    target: SealedSaver,
    *,
    lenient: BaseCheckpointSaver[Any] | None = None,
    dry_run: bool = False,
    accept_unvouched: bool = False,
    store: str | os.PathLike[str] | Store | None = None,
) -> PassReport:
    """Copy every thread of ``source`` into ``target``; see the module docstring.

    Args:
        source: the older store's reader, configured to read strictly: a
            `secure_serde.stores.V03Reader` for a store 0.3's sealed savers
            wrote, or a stock langgraph saver (with `EncryptedSerializer`,
            or none) for a stock store; sync API.
        target: a set-up `SealedSaver` on a new store.
        lenient: the same store read under a `Migration` (``unbound``,
            ``plaintext``...): what copies accepted rows, and what tells an
            unbound row from a misplaced one. Required with ``accept_unvouched``.
        dry_run: classify and report; write nothing.
        accept_unvouched: copy plaintext, legacy and unauthenticated rows too
            (each listed, and logged).
        store: where the source's rows are (a SQLite path, a
            ``postgresql://`` URL or a `Store`), read for their type tags;
            needed only for a stock PostgreSQL saver (a `V03Reader` and a
            stock SQLite saver know their database).

    Returns a `PassReport` named ``"adopt"``: ``checkpoints`` (``changed``),
    ``threads`` and ``writes`` copied (or, in a dry run, that would be),
    ``unvouched`` (every listed row, in order) and ``refused`` (those not copied).

    Raises:
        ConfigurationError: the target is not a `SealedSaver`, the source
            is one, or its store cannot be told.
        StoreError: the store cannot be read.
    """
    if not isinstance(target, SealedSaver):
        raise ConfigurationError("adopt copies into a SealedSaver; wrap the target saver first")
    if accept_unvouched and lenient is None:
        raise ConfigurationError(
            "accept_unvouched=True needs lenient=: a saver reading the source under a Migration"
        )
    started = time.monotonic()
    rows = stored_checkpoints(source, store)
    _log.warning(
        "secure_serde adopt: %s %d checkpoint(s) of an unsealed store into a sealed one",
        "dry run over" if dry_run else "taking in",
        len(rows),
    )
    planner = AdoptPlanner(source, lenient, accept=accept_unvouched)
    batches = (rows[i : i + _BATCH] for i in range(0, len(rows), _BATCH))
    tally = run_batches(batches, planner, SaverApplier(target, planner.ref), dry_run=dry_run)
    planner.count_into(tally)
    report = tally.report("adopt", dry_run=dry_run, elapsed=time.monotonic() - started)
    for line in report.lines():
        _log.warning("secure_serde adopt: %s", line.strip())
    return report
