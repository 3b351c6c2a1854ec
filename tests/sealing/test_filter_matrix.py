"""``list(filter=...)`` through ``SealedSaver(inner)`` gives what the bare inner saver gives, per
inner saver kind: on indexed keys (``score``, and langgraph's own ``source`` and ``step``),
on a key nobody indexed, on both at once, and with ``limit`` and ``before``.

The same checkpoints (same ids, same metadata) are put into a sealed store and a bare one,
and every listing must return the same checkpoint ids with the same metadata, in the same
order. (Issue 21: a filter on any other key gives the same results or raises a clear error
naming ``indexed_metadata``, never different results; here it must give the same.)
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from tests.sealing.backends_support import (
    HEAVY_LANE_IDS,
    HEAVY_LANES,
    SEALED_WRAPPER,
    Lane,
    Stores,
)

pytestmark = pytest.mark.parametrize("lane", HEAVY_LANES, ids=HEAVY_LANE_IDS)

THREAD = "filters"
COUNT = 9


def checkpoints() -> list[tuple[Any, Any]]:
    """A chain of checkpoints with varied metadata (fixed ids, so both stores share them)."""
    chain = []
    for step in range(COUNT):
        checkpoint = generate_checkpoint(channel_values={"n": step}, channel_versions={"n": 1})
        metadata = generate_metadata(
            source="loop" if step % 2 else "input",
            step=step,
            score=step % 3,
            tag="x" if step < 5 else "y",
        )
        chain.append((checkpoint, metadata))
    return chain


FILTERS: list[dict[str, Any]] = [
    {"score": 1},
    {"source": "input"},
    {"step": 4},
    {"tag": "y"},
    {"score": 2, "tag": "x"},
    {"score": 0, "source": "input"},
    {"score": 7},
]


async def listing(
    saver: BaseCheckpointSaver[Any], lane: Lane, chain: list[tuple[Any, Any]]
) -> dict[str, Any]:
    parent: RunnableConfig = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
    for checkpoint, metadata in chain:
        if lane.is_async:
            parent = await saver.aput(parent, checkpoint, metadata, {"n": 1})
        else:
            parent = saver.put(parent, checkpoint, metadata, {"n": 1})
    config: RunnableConfig = {"configurable": {"thread_id": THREAD}}
    before: RunnableConfig = {
        "configurable": {"thread_id": THREAD, "checkpoint_id": chain[6][0]["id"]}
    }
    queries: list[dict[str, Any]] = [
        *({"filter": f} for f in FILTERS),
        {"filter": {"score": 1}, "limit": 2},
        {"filter": {"tag": "x"}, "limit": 3},
        {"filter": {"source": "loop"}, "before": before},
    ]
    found: dict[str, Any] = {}
    for query in queries:
        if lane.is_async:
            tuples = [t async for t in saver.alist(config, **query)]
        else:
            tuples = list(saver.list(config, **query))
        found[repr(query)] = [
            (t.config["configurable"]["checkpoint_id"], dict(t.metadata)) for t in tuples
        ]
    return found


async def test_filters_match_bare_saver(lane: Lane, stores: Stores) -> None:
    chain = checkpoints()
    async with stores.new(lane.kind).saver(sealed=False) as bare:
        expected = await listing(bare, lane, chain)
    assert sum(len(v) for v in expected.values()) > 15  # not vacuous
    async with stores.new(lane.kind).saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
        actual = await listing(saver, lane, chain)
    differing = {q: (actual[q], expected[q]) for q in expected if actual[q] != expected[q]}
    assert differing == {}
