"""The read paths made cheaper (issue 21's benchmark) keep every check.

Canonical JSON of scalars without the encoder, and cached index tokens: each gives what the
slow path gave.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

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
