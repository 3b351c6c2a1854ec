"""Rewrap: move every stored value under the current primary key, without deserializing it."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde._rewrap._api import rewrap
    from secure_serde._rewrap._plan import CURRENT, Planner, Unreadable
    from secure_serde._rewrap._report import (
        MAX_LISTED_FAILURES,
        RewrapProgress,
        RewrapReport,
        RowFailure,
    )
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "CURRENT": "secure_serde._rewrap._plan",
            "MAX_LISTED_FAILURES": "secure_serde._rewrap._report",
            "Planner": "secure_serde._rewrap._plan",
            "RewrapProgress": "secure_serde._rewrap._report",
            "RewrapReport": "secure_serde._rewrap._report",
            "RowFailure": "secure_serde._rewrap._report",
            "Unreadable": "secure_serde._rewrap._plan",
            "rewrap": "secure_serde._rewrap._api",
        },
    )

__all__ = [
    "CURRENT",
    "MAX_LISTED_FAILURES",
    "Planner",
    "RewrapProgress",
    "RewrapReport",
    "RowFailure",
    "Unreadable",
    "rewrap",
]
