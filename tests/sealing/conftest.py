"""Fixtures of the sealing matrix: a lane per inner saver kind, and fresh stores for a test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sealing.backends_support import LANE_IDS, LANES, Lane, Stores


@pytest.fixture(params=LANES, ids=LANE_IDS)
def lane(request: pytest.FixtureRequest) -> Lane:
    """One inner saver kind, driven through its sync or its async API."""
    chosen: Lane = request.param
    return chosen


@pytest.fixture
def stores(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stores]:
    """Makes fresh stores (a SQLite file, a PostgreSQL database, a DynamoDB table, ...)."""
    made = Stores(tmp_path, request)
    try:
        yield made
    finally:
        made.close()
