"""Offline passes over a store, on one engine with one report type.

`rewrap` moves every stored value under the current primary key, without
deserializing it (its planners: `Planner` for a stock saver's store,
``SealedPlanner`` for a store `SealedSaver` sealed, ``ItemsPlanner`` for a
`SealedStore`'s items); `audit_store` checks every row with `Planner`, writing nothing.
The batch loop (secure_serde/_engine.py) and `PassReport`
(secure_serde/_report.py) are shared by every pass: rewrap,
``secure_serde.savers.adopt``, ``SealedSaver.reindex``, the sealed audits, and
`copy_thread`.
"""

from secure_serde._engine import CURRENT, Planned, Skip, Unreadable, run_batches
from secure_serde._report import (
    MAX_LISTED_FAILURES,
    PassProgress,
    PassReport,
    RewrapProgress,
    RewrapReport,
)
from secure_serde._rows import CheckpointRow, RowFailure, Unvouched
from secure_serde.passes._adopt import AdoptPlanner, SaverApplier, stored_checkpoints
from secure_serde.passes._audit import (
    LANGGRAPH_METADATA_KEYS,
    STATE_METADATA_KEYS,
    AuditReport,
    CipherGroup,
    Listed,
    audit_store,
)
from secure_serde.passes._copy import copy_thread
from secure_serde.passes._plan import Planner
from secure_serde.passes._rewrap import rewrap

__all__ = [
    "CURRENT",
    "LANGGRAPH_METADATA_KEYS",
    "MAX_LISTED_FAILURES",
    "STATE_METADATA_KEYS",
    "AdoptPlanner",
    "AuditReport",
    "CheckpointRow",
    "CipherGroup",
    "Listed",
    "PassProgress",
    "PassReport",
    "Planned",
    "Planner",
    "RewrapProgress",
    "RewrapReport",
    "RowFailure",
    "SaverApplier",
    "Skip",
    "Unreadable",
    "Unvouched",
    "audit_store",
    "copy_thread",
    "rewrap",
    "run_batches",
    "stored_checkpoints",
]
