"""The key, options and configs of the frozen stores secure_serde 0.3's sealed savers wrote.

tests/vectors/v03_postgres_store.sql (tests/stores/test_v03_postgres_vector.py) was written
under `KEY` with ``indexed_metadata=INDEXED``; each run's config put ``user_id`` (indexed) and
``api_key`` in ``configurable``, and ``{"writes": ..., "team": "blue"}`` in ``metadata`` (0.3
dropped a key named ``writes`` and sealed ``team``). This module also held ``config`` and
the writers ``v03_sqlite``, ``v03_postgres`` and ``write_scenario``, which drove real graphs
through 0.3's savers for the comparison tests (tests/stores/test_v03_equivalence.py); they ran
last at commit b2e8dcec8947834760da4032f4fac020b2fc3ed7 and went with those savers
(``git show b2e8dcec8947834760da4032f4fac020b2fc3ed7:tests/stores/v03_support.py``).
"""

from __future__ import annotations

from typing import Final

from secure_serde import EncryptedSerializer, Migration
from secure_serde.ciphers import EnvKeyCipher

# A test key, committed with the stores it opens; never a real one.
KEY: Final = b"secure-serde-0.3-reader-test-key"
INDEXED: Final = ("user_id",)


def serde(migration: Migration | None = None) -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY), migration=migration)
