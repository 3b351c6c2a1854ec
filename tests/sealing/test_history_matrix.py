"""History is complete or it is an error, and rows from another store are refused, for every
inner saver kind: the storage is tampered with below the wrapper (SQL, DynamoDB items,
InMemorySaver's dicts, through `Store`'s raw helpers) and the sealed saver must refuse, on
every read (tests/sealing/tamper_support.py). The bare inner saver accepts every one of these
tamperings silently (a shorter history, a different state): each test fails with the wrapper
off.
"""

from __future__ import annotations

import pytest

from secure_serde import HistoryError, StoreIdentityError
from tests.sealing.backends_support import (
    HEAVY_LANE_IDS,
    HEAVY_LANES,
    SEALED_WRAPPER,
    STORE_THREAD,
    Lane,
    Stores,
)
from tests.sealing.tamper_support import (
    FULL_LOG,
    READS,
    STEPS,
    THREAD,
    copy_thread_rows,
    outcomes,
    read,
    written,
)

pytestmark = pytest.mark.parametrize("lane", HEAVY_LANES, ids=HEAVY_LANE_IDS)


async def test_cut_parent_is_refused(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)
    rows = await written(store, lane)
    store.set_parent(rows[3], None)
    assert await outcomes(store, lane) == dict.fromkeys(READS, HistoryError.__name__)


async def test_deleted_ancestor_is_refused(lane: Lane, stores: Stores) -> None:
    store = stores.new(lane.kind)
    rows = await written(store, lane)
    store.delete_checkpoint(rows[3])
    assert await outcomes(store, lane) == dict.fromkeys(READS, HistoryError.__name__)


async def test_repointed_parent_is_refused(lane: Lane, stores: Stores) -> None:
    """A parent pointer moved to an older checkpoint of the same thread (skipping one)."""
    store = stores.new(lane.kind)
    rows = await written(store, lane)
    store.set_parent(rows[4], rows[2].checkpoint_id)
    refused = await outcomes(store, lane)
    assert "ok" not in refused.values(), refused


async def test_untouched_history_reads_back(lane: Lane, stores: Stores) -> None:
    """The control: without tampering, every read succeeds, with the whole history."""
    store = stores.new(lane.kind)
    await written(store, lane)
    assert await outcomes(store, lane) == dict.fromkeys(READS, "ok")
    async with store.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async) as saver:
        assert len(await read("history", saver, lane)) == STEPS + 2
        assert await read("state", saver, lane) == FULL_LOG


async def test_transplant_between_stores_is_refused(lane: Lane, stores: Stores) -> None:
    """A thread copied row for row into another store that uses the same key."""
    source, target = stores.new(lane.kind), stores.new(lane.kind)
    await written(source, lane)
    async with target.saver(sealed=SEALED_WRAPPER, is_async=lane.is_async):
        pass  # the target store exists (and has its own identity) before the copy
    await copy_thread_rows(source, target, THREAD, THREAD)
    assert len(target.checkpoints(THREAD)) == STEPS + 2
    # Refused by every read. SECURITY.md: "Rows copied from another store, even one under the
    # same key: BindingError (the store id is in every AAD)".
    refused = await outcomes(target, lane)
    assert "ok" not in refused.values(), refused


# Savers that list one thread at a time (DynamoDBSaver.list(None) raises): SealedSaver cannot
# tell an empty store there, so a deleted identity is replaced, with a warning, and the rows
# sealed under the old one are refused (secure_serde/sealing/_identity.py, SECURITY.md).
UNENUMERABLE = ("dynamodb",)


async def test_deleted_store_identity_is_refused(lane: Lane, stores: Stores) -> None:
    """The identity record deleted: the store is refused, and its rows are never read."""
    store = stores.new(lane.kind)
    await written(store, lane)
    identity = store.checkpoints(STORE_THREAD)
    assert identity
    for row in identity:
        store.delete_checkpoint(row)
    try:
        found = await outcomes(store, lane)
    except StoreIdentityError:
        found = dict.fromkeys(READS, StoreIdentityError.__name__)
    if lane.kind in UNENUMERABLE:
        assert "ok" not in found.values(), found
        assert store.checkpoints(STORE_THREAD)  # a new identity replaced the deleted one
    else:
        assert found == dict.fromkeys(READS, StoreIdentityError.__name__)
        assert store.checkpoints(STORE_THREAD) == []  # no new identity over the old rows
