"""The record: the one cell per checkpoint that `SealedSaver` seals, and what it holds; no I/O.

The record cell seals, at (store, thread, namespace, checkpoint id), the
msgpack (langgraph's JsonPlus encoding) of::

    {"c": the checkpoint without its values, "m": the full metadata,
     "p": the parent id or None, "vals": the channels holding a value,
     "det": True when the parent may be gone (prune, delete_for_runs),
     "iv": {channel: value} for the channels whose value is inline}

``"iv"`` is written only when some value is inline, and a record without it
(every record before 0.4's inline layout) has every value of ``"vals"`` as
a cell. A value is inline, in the record, when it is None, a bool, a float,
an int of at most 64 bits or a str of at most 1024 characters that is valid
UTF-8, each of exactly that type (what the stock PostgresSaver keeps inline
in its JSONB): it then has no cell and no blob row of its own, is bound to
its checkpoint by the record's seal, and the inner saver's ``new_versions``
omit its channel. Every other value is a cell. ``"vals"`` names both kinds,
so a reader that does not know ``"iv"`` refuses the record (a value it
cannot find), and never returns a checkpoint without its inline values.
"""

from __future__ import annotations

from typing import Any, Final

from langgraph.checkpoint.base import ChannelVersions, Checkpoint

from secure_serde._errors import BindingError

__all__ = ["inline_of", "inlined", "new_versions_of", "parse_record"]

_INLINE_CHARS: Final = 1024
_INT_LOW: Final = -(2**63)
_INT_HIGH: Final = 2**64  # msgpack's integers: int64 and uint64


def inlined(value: Any) -> bool:
    kind = type(value)
    if kind is str:
        if len(value) > _INLINE_CHARS:
            return False
        if value.isascii():
            return True
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: msgpack has no such str
            return False
        return True
    if kind is int:
        return bool(_INT_LOW <= value < _INT_HIGH)
    return kind is float or kind is bool or value is None


def parse_record(
    record: Any,
) -> tuple[dict[str, Any], dict[str, Any], str | None, bool, list[str]]:
    """(structure, metadata, parent, detached, the channels holding a value); see `inline_of`."""
    if not isinstance(record, dict):
        raise BindingError("a sealed record is not one secure_serde wrote")
    structure, metadata = record.get("c"), record.get("m")
    parent, detached, with_values = record.get("p"), record.get("det"), record.get("vals")
    if (
        not isinstance(structure, dict)
        or not isinstance(metadata, dict)
        or not (parent is None or isinstance(parent, str))
        or not isinstance(detached, bool)
        or not isinstance(with_values, list)
        or not all(isinstance(c, str) for c in with_values)
    ):
        raise BindingError("a sealed record is not one secure_serde wrote")
    return structure, metadata, parent, detached, with_values


def inline_of(record: dict[str, Any]) -> dict[str, Any]:
    """The inline values of a record `parse_record` accepted: channels it names, inline types."""
    if "iv" not in record:
        return {}
    inline, named = record["iv"], record["vals"]
    if (
        not isinstance(inline, dict)
        or not inline
        or not all(c in named and inlined(v) for c, v in inline.items())
    ):
        raise BindingError("a sealed record is not one secure_serde wrote")
    return inline


def new_versions_of(checkpoint: Checkpoint) -> ChannelVersions:
    """Versions of the channels holding a value: what a re-put must write blobs for."""
    versions = checkpoint.get("channel_versions") or {}
    return {ch: versions[ch] for ch in checkpoint.get("channel_values") or {} if ch in versions}
