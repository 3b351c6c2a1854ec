"""A value the serializer cannot encode is refused with a typed error, and nothing is written.

langgraph's own serializer raises a bare ``TypeError`` for these (a numpy scalar is the
common case); `UnserializableValueError` is one of ours and still a ``TypeError``.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from secure_serde import EncryptionError, SealedSaver, UnserializableValueError
from tests.serdes_support import env_serde

KEY = b"unserializable-test-key-01234567"
CONFIG: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


class Opaque:
    """No msgpack encoding, no JSON one, and no pickle fallback configured."""


def saver() -> SealedSaver:
    sealed = SealedSaver(InMemorySaver(), serde=env_serde(KEY), indexed_metadata=["score"])
    sealed.setup()
    return sealed


@pytest.mark.parametrize(
    ("values", "metadata"),
    [
        ({"a": Opaque()}, {}),  # a channel value: its own cell
        ({}, {"note": Opaque()}),  # metadata: sealed in the record
        ({}, {"score": Opaque()}),  # an indexed key: its token too
    ],
    ids=["value", "metadata", "indexed-metadata"],
)
def test_put_refuses_with_a_typed_error_and_writes_nothing(
    values: dict[str, Any], metadata: dict[str, Any]
) -> None:
    sealed = saver()
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = dict.fromkeys(values, 1)
    with pytest.raises(UnserializableValueError, match="Opaque") as refused:
        sealed.put(CONFIG, checkpoint, cast(CheckpointMetadata, metadata), dict.fromkeys(values, 1))
    assert isinstance(refused.value, TypeError)
    assert isinstance(refused.value, EncryptionError)
    assert sealed.get_tuple(CONFIG) is None
    assert list(sealed.list(None)) == []


def test_the_serializer_alone_refuses_with_the_same_error() -> None:
    with pytest.raises(UnserializableValueError, match="Opaque"):
        env_serde(KEY).dumps_typed({"a": Opaque()})
