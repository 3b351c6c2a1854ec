"""langgraph-checkpoint-conformance over ``SealedSaver(inner)``, for every inner saver kind.

Each lane runs the whole suite (every base capability and each extended one detected) and
requires 0 failures. Sync-only inner savers (SqliteSaver, PostgresSaver), and the sync lanes
of the savers that have both APIs, are driven through `sync_driven`: the suite is async-only,
so each async method calls the sync one, and what the suite tests is the sync code.

The wrapper keeps each inner saver's capabilities (``prune`` and ``delete_for_runs`` exist
where the inner saver has them) and adds ``copy_thread`` everywhere; the bare savers' own sets
are pinned, which keeps the harness honest while the wrapper is switched off. Afterwards every
row the suite left is checked below the wrapper: sealed values, sealed metadata, and configs
reduced to their ids.

The newer spec's delta-history tests (not in the installed 0.0.2) are in
test_delta_history_spec.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES

from tests.sealing.backends_support import (
    HEAVY_LANE_IDS,
    HEAVY_LANES,
    SEALED_WRAPPER,
    STORE_THREAD,
    Lane,
    Stores,
    bare_tuples,
    sealed_shape_problems,
    sync_driven,
)

BASE = sorted(c.value for c in BASE_CAPABILITIES)
# What each bare inner saver implements of the extended capabilities (langgraph 1.2,
# langgraph-checkpoint-postgres 3.2, langgraph-checkpoint-aws 1.2).
BARE_EXTENDED = {
    "memory": [],
    "sqlite": [],
    "aiosqlite": [],
    "postgres": ["prune"],
    "apostgres": ["prune"],
    "dynamodb": [],
}

pytestmark = pytest.mark.parametrize("lane", HEAVY_LANES, ids=HEAVY_LANE_IDS)


async def test_conformance(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)

    async def factory() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with store.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
            yield saver if lane.is_async else sync_driven(saver)

    registered = checkpointer_test(name=f"sealing-{lane.id}")(factory)
    report = await validate(registered)

    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert failures == {}
    assert report.passed_all_base()
    assert report.passed_all()
    detected = sorted(cap for cap, r in report.results.items() if r.detected)
    # The wrapper keeps the inner saver's capabilities and adds copy_thread (issue 21).
    sealed_extra = ["copy_thread"] if SEALED_WRAPPER else []
    assert detected == sorted([*BASE, *BARE_EXTENDED[lane.kind], *sealed_extra])

    # What the suite left below the wrapper: all sealed (and there is plenty of it).
    threads = sorted(store.thread_ids() - {STORE_THREAD})
    assert len(threads) > 20
    stored = await bare_tuples(store, threads)
    assert len(stored) > 40
    assert sealed_shape_problems(stored) == []
