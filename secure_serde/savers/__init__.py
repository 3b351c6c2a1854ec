"""Savers that keep every state value behind the serde.

`secure_serde.savers.postgres` holds the PostgreSQL savers (it needs the
``postgres`` extra). The metadata names below need no database driver.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde.savers._metadata import SEALED_METADATA_KEY, STRUCTURAL_METADATA_KEYS
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "SEALED_METADATA_KEY": "secure_serde.savers._metadata",
            "STRUCTURAL_METADATA_KEYS": "secure_serde.savers._metadata",
        },
    )

__all__ = ["SEALED_METADATA_KEY", "STRUCTURAL_METADATA_KEYS"]
