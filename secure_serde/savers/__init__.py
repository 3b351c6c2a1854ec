"""Savers that keep every state value behind the serde.

`secure_serde.savers.postgres` holds the PostgreSQL savers (it needs the
``postgres`` extra). The metadata names below need no database driver.
"""

from secure_serde.savers._metadata import SEALED_METADATA_KEY, STRUCTURAL_METADATA_KEYS

__all__ = ["SEALED_METADATA_KEY", "STRUCTURAL_METADATA_KEYS"]
