"""Every private langgraph name secure_serde depends on, in one place.

tests/test_langgraph_private.py pins each of them, so an upgrade that
moves or changes one fails there, loudly, instead of silently losing the
msgpack allowlist or a delta snapshot.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.jsonplus import EXT_DELTA_SNAPSHOT, JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot

__all__ = [
    "EXT_DELTA_SNAPSHOT",
    "DeltaSnapshot",
    "register_allowlist_wrapper",
]

DeltaSnapshot = _DeltaSnapshot


def register_allowlist_wrapper(cls: type[Any]) -> None:
    """Let ``BaseCheckpointSaver.with_allowlist`` reach through our wrappers.

    langgraph's private ``_with_msgpack_allowlist`` only calls
    ``with_msgpack_allowlist`` on objects that pass
    ``isinstance(serde, JsonPlusSerializer)``; anything else is logged as
    "does not support msgpack allowlist" and strict msgpack is silently not
    enforced. ``JsonPlusSerializer`` is an ABC (through ``typing.Protocol``),
    so registering a virtual subclass makes that check pass without
    inheriting any of its encoding code. ``cls`` must implement
    ``with_msgpack_allowlist`` and apply it to the serializer it wraps.
    """
    JsonPlusSerializer.register(cls)
