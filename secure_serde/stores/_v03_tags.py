"""`checkpoint_tags`: what each checkpoint of a store holds, by stored type tag, decrypting nothing.

`secure_serde.savers.adopt` decides from these which rows it cannot vouch
for before it reads a single value: a tag with no cipher is plaintext, a
``+aes`` tag is langgraph's legacy format (its tag is not authenticated).
It works on any store of langgraph's SQLite or PostgreSQL schema, stock or
0.3's, with the ids and type tags only:

* SQLite: the ``checkpoints`` row's tag (the whole checkpoint is one value),
  labelled ``"checkpoint"``;
* PostgreSQL: the blob of each channel at the version the checkpoint JSON
  names (as the stock saver joins them; ``"empty"`` rows hold no value),
  labelled ``"value <channel>"``, and each channel value kept inline in
  the checkpoint JSON (tag ``None``: never encrypted), blobs winning over
  inline entries, in the stock reader's order;
* both: each pending write as ``(task id, channel, tag)``, in
  ``writes_sort_key`` order (the order every saver returns them in).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from langgraph.checkpoint.base import writes_sort_key

from secure_serde.stores._history import CheckpointId, HistoryView

__all__ = ["CheckpointTags", "checkpoint_tags"]

_SQLITE_CHECKPOINTS: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type"
    " FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id"
)
_SQLITE_WRITES: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, {path}, idx, channel, type"
    " FROM writes"
)
_PG_CHECKPOINTS: Final = """
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
    CASE WHEN jsonb_typeof(checkpoint -> 'channel_values') = 'object' THEN
        ARRAY(SELECT jsonb_object_keys(checkpoint -> 'channel_values'))
    END,
    CASE WHEN jsonb_typeof(checkpoint -> 'channel_versions') = 'object' THEN
        ARRAY(
            SELECT array[bl.channel, bl.type]
            FROM jsonb_each_text(checkpoint -> 'channel_versions') v
            INNER JOIN checkpoint_blobs bl
                ON bl.thread_id = checkpoints.thread_id
                AND bl.checkpoint_ns = checkpoints.checkpoint_ns
                AND bl.channel = v.key
                AND bl.version = v.value
        )
    END
FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id
"""
_PG_WRITES: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type"
    " FROM checkpoint_writes"
)
_EMPTY: Final = "empty"


@dataclass(frozen=True)
class CheckpointTags:
    """One checkpoint's ids, parent, and the stored type tag of each value and write."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    # (row label, type tag); None: kept inline in the plaintext JSON.
    values: tuple[tuple[str, str | None], ...]
    # (task id, channel, type tag), in writes_sort_key order.
    writes: tuple[tuple[str, str, str | None], ...]


def checkpoint_tags(view: HistoryView) -> list[CheckpointTags]:
    """Every checkpoint of the store, by thread, namespace and id (oldest first)."""
    if not view.has_checkpoints:
        return []
    if view.kind == "postgres":
        writes = _writes(view.query("", _PG_WRITES, ()))
        return [
            _tags(row[:4], _postgres_values(row[4], row[5]), writes)
            for row in view.query("", _PG_CHECKPOINTS, ())
        ]
    writes = _writes(view.query(_SQLITE_WRITES.format(path=view.task_path_column()), "", ()))
    return [
        _tags(row[:4], (("checkpoint", row[4]),), writes)
        for row in view.query(_SQLITE_CHECKPOINTS, "", ())
    ]


_Writes = dict[CheckpointId, list[tuple[Any, ...]]]


def _writes(rows: Sequence[Sequence[Any]]) -> _Writes:
    by_checkpoint: _Writes = defaultdict(list)
    for thread_id, ns, checkpoint_id, task_id, task_path, idx, channel, type_tag in rows:
        by_checkpoint[(str(thread_id), str(ns), str(checkpoint_id))].append(
            (str(task_path), str(task_id), int(idx), str(channel), type_tag)
        )
    return by_checkpoint


def _tags(
    ids: Sequence[Any], values: tuple[tuple[str, str | None], ...], writes: _Writes
) -> CheckpointTags:
    thread_id, ns, checkpoint_id, parent_id = (str(ids[0]), str(ids[1]), str(ids[2]), ids[3])
    own = sorted(
        writes.get((thread_id, ns, checkpoint_id), ()), key=lambda w: writes_sort_key(*w[:3])
    )
    return CheckpointTags(
        thread_id,
        ns,
        checkpoint_id,
        None if parent_id is None else str(parent_id),
        values,
        tuple((w[1], w[3], w[4]) for w in own),
    )


def _postgres_values(
    inline: Sequence[str] | None, blobs: Sequence[Sequence[str]] | None
) -> tuple[tuple[str, str | None], ...]:
    values: dict[str, str | None] = dict.fromkeys(inline or ())
    for channel, type_tag in blobs or ():
        if type_tag != _EMPTY:
            values[channel] = type_tag
    return tuple((f"value {channel}", tag) for channel, tag in values.items())
