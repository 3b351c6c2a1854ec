"""Savers that keep every state value behind the serde.

`secure_serde.savers.postgres` holds the PostgreSQL savers (it needs the
``postgres`` extra), `secure_serde.savers.sqlite` the SQLite ones. The
names below need no database driver until they are called:
`bind_postgres` and `bind_sqlite` bind the rows of an existing store (one
the stock saver or secure_serde 0.1 wrote) to where they live, in place.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde.savers._bind_in_place import BindReport, bind_postgres, bind_sqlite
    from secure_serde.savers._metadata import SEALED_METADATA_KEY, STRUCTURAL_METADATA_KEYS
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "BindReport": "secure_serde.savers._bind_in_place",
            "SEALED_METADATA_KEY": "secure_serde.savers._metadata",
            "STRUCTURAL_METADATA_KEYS": "secure_serde.savers._metadata",
            "bind_postgres": "secure_serde.savers._bind_in_place",
            "bind_sqlite": "secure_serde.savers._bind_in_place",
        },
    )

__all__ = [
    "SEALED_METADATA_KEY",
    "STRUCTURAL_METADATA_KEYS",
    "BindReport",
    "bind_postgres",
    "bind_sqlite",
]
