"""The read paths made cheaper (issue 21's benchmark) keep every check.

Canonical JSON of scalars without the encoder, cached index tokens, and the DeltaChannel
history walk fetching ancestors by pages of the inner saver's ``list``: each gives what the
slow path gave, a forged row is refused the same way, and an inner saver that lists in
another order, or without writes, is still walked correctly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

from secure_serde import EncryptedSerializer, HistoryError, SealedSaver
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.sealing import _index

KEY = b"read-paths-key-0123456789abcdefg"


@pytest.mark.parametrize(
    "value",
    ["", "plain", "\u00e9\u4e2d", 'q"u\\o\nte\x00\x1f', "\ud800", 0, -7, 2**70, True, False, None],
)
def test_canonical_scalars_are_the_json_encoders_text(value: Any) -> None:
    assert _index.canonical(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def test_cached_tokens_are_the_computed_ones_and_never_shared_across_types() -> None:
    keyed = _index.BlindIndex(bytes(range(32)))
    generation = _index.IndexGeneration(keyed, keyed.key_id(), legacy=False)
    fresh = _index.IndexGeneration(keyed, keyed.key_id(), legacy=False)
    for value in ("alice", 1, True, None, "x" * 300, 1.0, [1]):
        first = generation.token("k", value)
        assert generation.token("k", value) == first == fresh.token("k", value)
        assert first == f"ssix2:{keyed.key_id()}:{keyed.digest('k', value)}"
    # 1, True and 1.0 hash alike in Python; their JSON differs for True.
    assert generation.token("k", True) != generation.token("k", 1)
    assert generation.token("k", 1) == generation.token("k", 1.0)
    assert generation.token("j", 1) != generation.token("k", 1)


def test_a_subclassed_index_is_asked_for_every_token() -> None:
    """A tenant's index refuses tokens once shredded: a cache must never answer for it."""

    class Counting(_index.BlindIndex):
        calls = 0

        def token(self, key: str, value: Any) -> str:
            Counting.calls += 1
            return super().token(key, value)

    generation = _index.IndexGeneration(Counting(bytes(32)), "", legacy=True)
    for _ in range(3):
        generation.token("k", "v")
    assert Counting.calls == 3
    plain = _index.BlindIndex(bytes(32))
    cached = _index.IndexGeneration(plain, "", legacy=True)
    assert cached.token("k", "v") == cached.token("k", "v") == plain.token("k", "v")


# -- the DeltaChannel history walk, by pages ---------------------------------------------------


class Counting(InMemorySaver):
    """InMemorySaver counting the reads a history walk makes; it may list oldest first, or
    without the pending writes."""

    def __init__(self, *, reverse: bool = False, no_writes: bool = False) -> None:
        super().__init__()
        self.reverse = reverse
        self.no_writes = no_writes
        self.gets = 0
        self.lists = 0

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self.gets += 1
        return super().get_tuple(config)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        self.lists += 1
        if self.reverse:  # oldest first, then the limit: a page far from the cursor
            limit = kwargs.pop("limit", None)
            rows = list(reversed(list(super().list(config, **kwargs))))[:limit]
        else:
            rows = list(super().list(config, **kwargs))
        return iter([row._replace(pending_writes=None) if self.no_writes else row for row in rows])


def cid(n: int) -> str:
    return f"1f0d0000-0000-6000-8000-{n:012d}"


def _chain(saver: Any, steps: int) -> RunnableConfig:
    """A chain whose channel ``log`` is stored only at the first checkpoint, then only written."""
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for n in range(1, steps + 1):
        values: dict[str, Any] = {"log": ["seed"]} if n == 1 else {}
        checkpoint = Checkpoint(
            v=4,
            id=cid(n),
            ts="2026-12-03T00:00:00+00:00",
            channel_values={**values, "n": n},
            # The parent's write to ``log`` gives it a new version at every step, as in a graph.
            channel_versions={"log": n, "n": n},
            versions_seen={},
            updated_channels=None,
        )
        metadata = cast(CheckpointMetadata, {"source": "loop", "step": n})
        config = saver.put(config, checkpoint, metadata, {"log": n, "n": n})
        saver.put_writes(config, [("log", [f"e{n}"]), ("other", n)], f"task-{n}")
    return config


def _serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY))


@pytest.mark.parametrize("steps", [2, 9, 30, 300])
def test_history_by_pages_is_the_walks_and_asks_by_id_only_for_the_target(steps: int) -> None:
    bare = InMemorySaver(serde=_serde())
    head = _chain(bare, steps)
    inner = Counting()
    saver = SealedSaver(inner, serde=_serde())
    saver.setup()
    _chain(saver, steps)
    inner.gets = inner.lists = 0
    expected = bare.get_delta_channel_history(config=head, channels=["log", "n", "gone"])
    got = saver.get_delta_channel_history(config=head, channels=["log", "n", "gone"])
    assert got == expected
    assert got["log"]["writes"][0] == ("task-1", "log", ["e1"])  # the whole chain, oldest first
    assert len(got["log"]["writes"]) == steps - 1
    assert inner.gets == 1  # the target; every ancestor came from a page
    assert inner.lists <= max(1, (steps // 8).bit_length() + 1)


@pytest.mark.parametrize("misbehaving", [{"reverse": True}, {"no_writes": True}])
def test_an_inner_saver_listing_otherwise_is_walked_by_id(misbehaving: dict[str, bool]) -> None:
    bare = InMemorySaver(serde=_serde())
    head = _chain(bare, 12)
    inner = Counting(**misbehaving)
    saver = SealedSaver(inner, serde=_serde())
    _chain(saver, 12)
    inner.gets = inner.lists = 0
    assert saver.get_delta_channel_history(config=head, channels=["log"]) == (
        bare.get_delta_channel_history(config=head, channels=["log"])
    )
    assert inner.lists == 1  # one page, not used: then by id
    assert inner.gets == 12


def test_a_cut_history_is_refused_whether_its_rows_came_by_page_or_by_id() -> None:
    inner = Counting()
    saver = SealedSaver(inner, serde=_serde())
    head = _chain(saver, 20)
    del inner.storage["t"][""][cid(5)]
    with pytest.raises(HistoryError, match="missing"):
        saver.get_delta_channel_history(config=head, channels=["log"])
    inner = Counting()
    saver = SealedSaver(inner, serde=_serde())
    head = _chain(saver, 20)
    checkpoint, metadata, _ = inner.storage["t"][""][cid(14)]
    inner.storage["t"][""][cid(14)] = (checkpoint, metadata, None)  # a cut parent pointer
    with pytest.raises(HistoryError, match="lost its parent pointer"):
        saver.get_delta_channel_history(config=head, channels=["log"])


def test_a_page_hint_comes_from_the_sealed_counters() -> None:
    inner = Counting()
    saver = SealedSaver(inner, serde=_serde())
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for n in range(1, 41):
        checkpoint = Checkpoint(
            v=4,
            id=cid(n),
            ts="2026-12-03T00:00:00+00:00",
            channel_values={"log": ["seed"]} if n == 1 else {},
            channel_versions={"log": n},
            versions_seen={},
            updated_channels=None,
        )
        counters = {"counters_since_delta_snapshot": {"log": (n - 1, n - 1)}} if n > 1 else {}
        metadata = cast(CheckpointMetadata, {"source": "loop", "step": n, **counters})
        config = saver.put(config, checkpoint, metadata, {"log": n})
    inner.lists = 0
    history = saver.get_delta_channel_history(config=config, channels=["log"])["log"]
    assert (history["writes"], history.get("seed")) == ([], ["seed"])
    assert inner.lists == 1  # 39 ancestors, one page sized by the counters
