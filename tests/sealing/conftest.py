"""Fixtures of the sealing matrix: a lane per inner saver kind, and fresh stores for a test."""

from __future__ import annotations

import logging
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


@pytest.fixture(autouse=True)
def _quiet_moto_server() -> Iterator[None]:
    """The moto server's request log (one INFO line per HTTP call) is not captured here: with
    thousands of DynamoDB calls per test, capturing it costs more than the calls."""
    werkzeug = logging.getLogger("werkzeug")
    level = werkzeug.level
    werkzeug.setLevel(logging.WARNING)
    try:
        yield
    finally:
        werkzeug.setLevel(level)
