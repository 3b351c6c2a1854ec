"""Rewrap: move every stored value under the current primary key, without deserializing it."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde.passes._plan import CURRENT, Planner, Unreadable
    from secure_serde.passes._report import (
        MAX_LISTED_FAILURES,
        RewrapProgress,
        RewrapReport,
        RowFailure,
    )
    from secure_serde.passes._rewrap import rewrap
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "CURRENT": "secure_serde.passes._plan",
            "MAX_LISTED_FAILURES": "secure_serde.passes._report",
            "Planner": "secure_serde.passes._plan",
            "RewrapProgress": "secure_serde.passes._report",
            "RewrapReport": "secure_serde.passes._report",
            "RowFailure": "secure_serde.passes._report",
            "Unreadable": "secure_serde.passes._plan",
            "rewrap": "secure_serde.passes._rewrap",
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
