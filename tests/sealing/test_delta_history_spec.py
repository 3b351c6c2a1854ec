"""The delta-history capability of the newer conformance spec, over every lane of the matrix.

Vendored from langchain-ai/langgraph, libs/checkpoint-conformance/langgraph/checkpoint/
conformance/spec/test_delta_channel_history.py and spec/_delta_fixtures.py (main, after
#8526 "collect writes at plain-value seed in delta channel history"), which the installed
langgraph-checkpoint-conformance 0.0.2 does not ship yet. The eight cases are kept as they
are there, as plain pytest over ``SealedSaver(inner)`` (sync lanes through `sync_driven`).
Once the installed suite has the ``delta_channel_history`` capability, delete this file:
test_conformance_matrix.py then runs the same cases.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance.test_utils import generate_metadata

from secure_serde.serde import langgraph_internals as lg
from tests.sealing.backends_support import (
    HEAVY_LANE_IDS,
    HEAVY_LANES,
    SEALED_WRAPPER,
    Lane,
    Stores,
    sync_driven,
)

pytestmark = pytest.mark.parametrize("lane", HEAVY_LANES, ids=HEAVY_LANE_IDS)


@pytest.fixture
async def saver(lane: Lane, stores: Stores) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    store = stores.new(lane.kind)
    async with store.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as opened:
        yield opened if lane.is_async else sync_driven(opened)


def _checkpoint(channel_values: dict[str, Any], channel_versions: dict[str, Any]) -> Checkpoint:
    return Checkpoint(
        v=1,
        id=str(uuid6(clock_seq=-1)),
        ts="",
        channel_values=channel_values,
        channel_versions=channel_versions,
        versions_seen={},
        updated_channels=None,
    )


def _child_config(tid: str, parent_cfg: RunnableConfig | None) -> RunnableConfig:
    config: RunnableConfig = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    if parent_cfg:
        config["configurable"]["checkpoint_id"] = parent_cfg["configurable"]["checkpoint_id"]
    return config


async def build_delta_chain(
    saver: BaseCheckpointSaver[Any],
    *,
    thread_id: str | None = None,
    channel: str = "messages",
    snapshots_at_steps: Sequence[int] = (0,),
    total_steps: int = 6,
) -> list[RunnableConfig]:
    """A parent chain with ``_DeltaSnapshot`` blobs at known steps (step 0 is the oldest), and
    a pending write of the step's index at every other step. Returns the stored configs."""
    tid = thread_id or str(uuid4())
    snapshot_set = set(snapshots_at_steps)
    stored: list[RunnableConfig] = []
    parent_cfg: RunnableConfig | None = None
    for step in range(total_steps):
        channel_values: dict[str, Any] = {}
        channel_versions: dict[str, Any] = {}
        if step in snapshot_set:
            channel_values[channel] = lg.DeltaSnapshot(step)
            channel_versions[channel] = step + 1
        parent_cfg = await saver.aput(
            _child_config(tid, parent_cfg),
            _checkpoint(channel_values, channel_versions),
            generate_metadata(step=step),
            dict(channel_versions),
        )
        stored.append(parent_cfg)
        if step not in snapshot_set:
            await saver.aput_writes(parent_cfg, [(channel, step)], str(uuid4()))
    return stored


def _values(writes: Sequence[tuple[str, str, Any]]) -> list[Any]:
    return [w[2] for w in writes]


async def test_history_returns_writes_oldest_first(saver: BaseCheckpointSaver[Any]) -> None:
    """Writes are returned oldest-to-newest."""
    configs = await build_delta_chain(saver, channel="ch", snapshots_at_steps=[0], total_steps=5)
    result = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert _values(result["ch"]["writes"]) == [1, 2, 3]


async def test_history_seed_is_nearest_snapshot(saver: BaseCheckpointSaver[Any]) -> None:
    """Seed is the value from the nearest ancestor with channel_values populated."""
    configs = await build_delta_chain(saver, channel="ch", snapshots_at_steps=[0, 3], total_steps=6)
    result = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert "seed" in result["ch"], "Expected seed from snapshot at step 3"
    seed = result["ch"]["seed"]
    assert type(seed) is lg.DeltaSnapshot
    assert seed.value == 3
    assert _values(result["ch"]["writes"]) == [4]


async def test_history_excludes_target_pending_writes(saver: BaseCheckpointSaver[Any]) -> None:
    """Target's own pending_writes are NOT included in the history."""
    configs = await build_delta_chain(saver, channel="ch", snapshots_at_steps=[0], total_steps=3)
    head = configs[-1]
    await saver.aput_writes(head, [("ch", "extra")], str(uuid4()))
    result = await saver.aget_delta_channel_history(config=head, channels=["ch"])
    values = _values(result["ch"]["writes"])
    assert "extra" not in values
    assert values == [1]


async def test_history_multi_channel(saver: BaseCheckpointSaver[Any]) -> None:
    """Multiple channels have independent walk termination."""
    tid = str(uuid4())
    configs: list[RunnableConfig] = []
    parent_cfg: RunnableConfig | None = None
    for step in range(5):
        cv: dict[str, Any] = {}
        cvs: dict[str, Any] = {}
        if step == 1:
            cv["a"] = lg.DeltaSnapshot("snap_a")
            cvs["a"] = step + 1
        if step == 3:
            cv["b"] = lg.DeltaSnapshot("snap_b")
            cvs["b"] = step + 1
        parent_cfg = await saver.aput(
            _child_config(tid, parent_cfg), _checkpoint(cv, cvs), generate_metadata(step=step), cvs
        )
        configs.append(parent_cfg)
        await saver.aput_writes(parent_cfg, [("a", step), ("b", step)], str(uuid4()))

    result = await saver.aget_delta_channel_history(config=configs[-1], channels=["a", "b"])
    assert _values(result["a"]["writes"]) == [1, 2, 3]
    assert _values(result["b"]["writes"]) == [3]


async def test_history_empty_channels_returns_empty(saver: BaseCheckpointSaver[Any]) -> None:
    """Empty channels list returns empty mapping."""
    configs = await build_delta_chain(saver, channel="ch", snapshots_at_steps=[0], total_steps=3)
    result = await saver.aget_delta_channel_history(config=configs[-1], channels=[])
    assert result == {}


async def test_history_walk_to_root_no_seed(saver: BaseCheckpointSaver[Any]) -> None:
    """Walk reaches root without finding seed: no 'seed' key in result."""
    configs = await build_delta_chain(saver, channel="ch", snapshots_at_steps=[], total_steps=4)
    result = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert "seed" not in result["ch"], f"Expected no seed, got {result['ch']}"
    assert _values(result["ch"]["writes"]) == [0, 1, 2]


async def test_history_migration_plain_value_as_seed(saver: BaseCheckpointSaver[Any]) -> None:
    """Pre-delta plain value in channel_values acts as seed (migration case)."""
    tid = str(uuid4())
    configs: list[RunnableConfig] = []
    parent_cfg: RunnableConfig | None = None
    for step in range(4):
        cv: dict[str, Any] = {}
        cvs: dict[str, Any] = {}
        if step == 1:
            cv["ch"] = [10, 20, 30]
            cvs["ch"] = step + 1
        parent_cfg = await saver.aput(
            _child_config(tid, parent_cfg), _checkpoint(cv, cvs), generate_metadata(step=step), cvs
        )
        configs.append(parent_cfg)
        if step != 1:
            await saver.aput_writes(parent_cfg, [("ch", step)], str(uuid4()))

    result = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert "seed" in result["ch"], "Expected seed from migration plain value at step 1"
    assert result["ch"]["seed"] == [10, 20, 30]
    assert _values(result["ch"]["writes"]) == [2]


async def test_history_seed_ancestor_own_writes_are_replayed(
    saver: BaseCheckpointSaver[Any],
) -> None:
    """Writes stored AT the seed ancestor are included in ``writes``; older ones are not."""
    tid = str(uuid4())
    configs: list[RunnableConfig] = []
    parent_cfg: RunnableConfig | None = None
    writes_by_step = {
        0: "older-than-seed",  # subsumed by the value stored at step 1
        1: "at-seed",  # the seed's own write, produced step 2
        2: "after-seed",  # delta-era write on the path to the head
        3: "pending-at-head",  # pending for the next step, never replayed
    }
    values_by_step = {0: [10], 1: [10, 20]}
    for step in range(4):
        cv: dict[str, Any] = {}
        cvs: dict[str, Any] = {}
        if step in values_by_step:
            cv["ch"] = values_by_step[step]
            cvs["ch"] = step + 1
        parent_cfg = await saver.aput(
            _child_config(tid, parent_cfg), _checkpoint(cv, cvs), generate_metadata(step=step), cvs
        )
        configs.append(parent_cfg)
        await saver.aput_writes(parent_cfg, [("ch", writes_by_step[step])], str(uuid4()))

    result = await saver.aget_delta_channel_history(config=configs[-1], channels=["ch"])
    assert "seed" in result["ch"], "Expected seed from plain value at step 1"
    assert result["ch"]["seed"] == [10, 20]
    assert _values(result["ch"]["writes"]) == ["at-seed", "after-seed"]
