"""Nothing secret is readable at rest below ``SealedSaver(inner)``, for every inner saver kind.

The canary graph of tests/canary_support.py (a canary in every channel type, the subgraph's
state, a DeltaChannel, the ``interrupt()`` value and the resume value) runs with more canaries
in ``config["configurable"]`` and ``config["metadata"]``, which langgraph copies into
checkpoint metadata. Then the raw storage is scanned: ``pg_dump`` (text, and the hex it writes
for bytea), the SQLite file with its -wal and -shm (read while the saver is open, and again
after), every item of the DynamoDB table, InMemorySaver's dicts. No canary may show. Each kind
also runs the same graph on the bare inner saver, where the same scan must find them: the
scan can fail.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from tests import canary_support as canary
from tests.graphs_support import Driver
from tests.sealing.backends_support import (
    KINDS,
    LANES,
    SEALED_VALUE_PREFIX,
    SEALED_WRAPPER,
    STORE_THREAD,
    Lane,
    SqliteStore,
    Store,
    Stores,
    bare_tuples,
    sealed_shape_problems,
)

THREAD = "at-rest"
EMAIL = "canary-email-5e1d7a@example.invalid"
NOTE = "CANARY-config-metadata-note-0b93f4"
CONFIG_CANARIES = {
    "configurable.api_key": [canary.API_KEY.encode()],
    "configurable.user_email": [EMAIL.encode()],
    "metadata.run_id": [canary.RUN_ID.encode()],
    "metadata.note": [NOTE.encode()],
}
CANARIES = {**canary.state_canaries(), **canary.inline_json_patterns(), **CONFIG_CANARIES}
# The first lane of each kind: the bare twin's scan depends on the storage, not on the API.
KIND_LANES = [next(lane for lane in LANES if lane.kind == kind) for kind in KINDS]


def canary_config() -> RunnableConfig:
    config = canary.canary_config(THREAD)
    config["configurable"]["user_email"] = EMAIL
    config.setdefault("metadata", {})["note"] = NOTE
    return config


async def run_canary_graph(saver: BaseCheckpointSaver[Any], is_async: bool) -> None:
    """Run to the interrupt, resume it, and check the final state."""
    graph = Driver(canary.build_canary_graph(saver), is_async)
    config = canary_config()
    first = await graph.invoke(canary.FIRST_INPUT, config)
    assert [i.value for i in first["__interrupt__"]] == [canary.INTERRUPT]
    await graph.resume(canary.RESUME, config)
    canary.check_final_state((await graph.state(config)).values)


async def scanned_run(store: Store, lane: Lane, *, sealed: bool) -> list[bytes]:
    """Run the canary graph on ``store``; its raw bytes while the saver is open, and after."""
    async with store.saver(sealed=sealed, is_async=lane.is_async) as saver:
        await run_canary_graph(saver, lane.is_async)
        while_open = store.dump()
        if isinstance(store, SqliteStore):
            assert store.wal_present()  # the write-ahead log is scanned too
    return [while_open, store.dump()]


def sealed_values_in(raw: bytes) -> int:
    return raw.count(SEALED_VALUE_PREFIX) + raw.count(SEALED_VALUE_PREFIX.hex().encode())


async def test_no_canary_readable_at_rest(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)
    for raw in await scanned_run(store, lane, sealed=SEALED_WRAPPER):
        assert canary.leaks(raw, CANARIES, hex_too=True) == set()
        assert sealed_values_in(raw) >= 40  # not a trivially empty store

    # Below the wrapper: the subgraph's namespace is there, and every row is sealed.
    assert store.thread_ids() - {STORE_THREAD} == {THREAD}
    rows = store.checkpoints(THREAD)
    assert any(row.checkpoint_ns.startswith("child:") for row in rows)
    stored = await bare_tuples(store, [THREAD])
    assert len(stored) == len(rows) >= 8
    assert sum(len(t.pending_writes or ()) for t in stored) >= 4
    assert sealed_shape_problems(stored) == []


# What each bare inner saver shows of the config canaries (the state canaries all show).
BARE_CONFIG_LEAKS = {
    "memory": set(CONFIG_CANARIES),
    "sqlite": set(CONFIG_CANARIES),
    "aiosqlite": set(CONFIG_CANARIES),
    "postgres": set(CONFIG_CANARIES),
    "apostgres": set(CONFIG_CANARIES),
    # DynamoDBSaver copies config["metadata"] into metadata, but not config["configurable"].
    "dynamodb": {"metadata.run_id", "metadata.note"},
}
# The stock PostgreSQL savers keep primitive channel values inline, as JSONB text.
BARE_INLINE_LEAKS = {
    "postgres": set(canary.inline_json_patterns()),
    "apostgres": set(canary.inline_json_patterns()),
}


@pytest.mark.parametrize("lane", KIND_LANES, ids=[lane.id for lane in KIND_LANES])
async def test_bare_inner_saver_shows_canaries(lane: Lane, stores: Stores) -> None:
    """The same run and scan on the bare inner saver: every canary that it stores shows."""
    store = stores.new(lane.kind)
    expected = {
        *canary.state_canaries(),
        *BARE_CONFIG_LEAKS[lane.kind],
        *BARE_INLINE_LEAKS.get(lane.kind, set()),
    }
    for raw in await scanned_run(store, lane, sealed=False):
        assert canary.leaks(raw, CANARIES, hex_too=True) == expected
    assert sealed_shape_problems(await bare_tuples(store, [THREAD])) != []
