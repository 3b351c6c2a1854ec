"""Rewrap: move every stored value under the current primary key, without deserializing it."""

from secure_serde._rewrap._api import rewrap
from secure_serde._rewrap._report import (
    MAX_LISTED_FAILURES,
    RewrapProgress,
    RewrapReport,
    RowFailure,
)

__all__ = ["MAX_LISTED_FAILURES", "RewrapProgress", "RewrapReport", "RowFailure", "rewrap"]
