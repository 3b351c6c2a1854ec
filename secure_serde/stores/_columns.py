"""The plaintext JSON columns of ``checkpoints``, counted by the database, for ``audit``.

`Store` deliberately leaves these out (the serializer never sees them):
``checkpoints.metadata`` in both stores, and, in PostgreSQL,
``checkpoints.checkpoint``, the JSONB where the stock saver inlines
``None``/``str``/``int``/``float``/``bool`` channel values. Key names and
channel names are counted by the database itself (``GROUP BY``), so memory
does not grow with the store and no value ever reaches this process.

A value inline in ``channel_values`` is a leak unless a non-empty blob of
the same channel and version backs it: that is the ``true`` marker the stock
saver writes beside a ``DeltaChannel`` snapshot, and the test is the one
langgraph's own prune SQL uses to recognise such snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from secure_serde.stores._history import HistoryView

__all__ = [
    "MAX_NAMES",
    "InlineChannel",
    "JsonColumnScan",
    "MetadataKeys",
    "scan_json_columns",
]

# Distinct metadata keys and inline channels listed; one more is fetched to
# tell whether there were more.
MAX_NAMES: Final = 1000

_SQLITE_METADATA_ROWS: Final = """
SELECT count(*),
       coalesce(sum(CASE WHEN json_valid(CAST(metadata AS TEXT))
                          AND json_type(CAST(metadata AS TEXT)) = 'object' THEN 0 ELSE 1 END), 0)
FROM checkpoints
"""
_SQLITE_METADATA_KEYS: Final = """
SELECT j.key, count(*)
FROM (SELECT CAST(metadata AS TEXT) AS m FROM checkpoints
      WHERE json_valid(CAST(metadata AS TEXT)) AND json_type(CAST(metadata AS TEXT)) = 'object'
     ) AS c, json_each(c.m) AS j
GROUP BY j.key ORDER BY j.key LIMIT ?
"""
_PG_METADATA_ROWS: Final = """
SELECT count(*),
       count(*) FILTER (WHERE metadata IS NULL OR jsonb_typeof(metadata) <> 'object')
FROM checkpoints
"""
_PG_METADATA_KEYS: Final = """
SELECT k, count(*)
FROM checkpoints AS c
CROSS JOIN LATERAL jsonb_object_keys(
    CASE WHEN jsonb_typeof(c.metadata) = 'object' THEN c.metadata ELSE '{}'::jsonb END) AS k
GROUP BY k ORDER BY k LIMIT %s
"""
# Three literal forms of one query: no blobs table, the shallow saver's blobs
# (one per channel, no version column), and versioned blobs. A non-empty
# blob of the same channel (and version, where blobs have one) backs a value.
_PG_INLINE_FROM: Final = """
SELECT v.key, array_agg(DISTINCT jsonb_typeof(v.value)), count(*), count(DISTINCT c.thread_id)
FROM checkpoints AS c
CROSS JOIN LATERAL jsonb_each(
    CASE WHEN jsonb_typeof(c.checkpoint -> 'channel_values') = 'object'
         THEN c.checkpoint -> 'channel_values' ELSE '{}'::jsonb END) AS v
"""
_PG_NOT_BACKED: Final = """WHERE NOT EXISTS (
    SELECT 1 FROM checkpoint_blobs AS b
    WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
      AND b.channel = v.key AND b.type <> 'empty'"""
_PG_INLINE_GROUP: Final = "GROUP BY 1 ORDER BY 1 LIMIT %s\n"
_PG_INLINE: Final = _PG_INLINE_FROM + _PG_INLINE_GROUP
_PG_INLINE_BACKED: Final = _PG_INLINE_FROM + _PG_NOT_BACKED + ")\n" + _PG_INLINE_GROUP
_PG_INLINE_BACKED_VERSION: Final = (
    _PG_INLINE_FROM
    + _PG_NOT_BACKED
    + "\n      AND b.version = c.checkpoint -> 'channel_versions' ->> v.key)\n"
    + _PG_INLINE_GROUP
)


@dataclass(frozen=True)
class MetadataKeys:
    """Key names of the metadata JSON and in how many checkpoints each appears."""

    checkpoints: int
    not_objects: int
    counts: dict[str, int]
    truncated: bool = False


@dataclass(frozen=True)
class InlineChannel:
    """A channel with values inline in the checkpoint JSONB: counts and JSON types, no values."""

    channel: str
    checkpoints: int
    threads: int
    json_types: tuple[str, ...]


@dataclass(frozen=True)
class JsonColumnScan:
    """What `scan_json_columns` found; ``inline`` is ``None`` for SQLite."""

    metadata: MetadataKeys
    inline: list[InlineChannel] | None


def scan_json_columns(view: HistoryView) -> JsonColumnScan:
    """Metadata key names and inline channel values of the store of ``view``."""
    return JsonColumnScan(_metadata_keys(view), _inline_channels(view))


def _metadata_keys(view: HistoryView) -> MetadataKeys:
    if not view.has_checkpoints:
        return MetadataKeys(0, 0, {})
    limit = MAX_NAMES + 1
    total, not_objects = view.query(_SQLITE_METADATA_ROWS, _PG_METADATA_ROWS, ())[0]
    rows = view.query(_SQLITE_METADATA_KEYS, _PG_METADATA_KEYS, (limit,))
    counts = {str(k): int(n) for k, n in rows[:MAX_NAMES]}
    return MetadataKeys(int(total), int(not_objects), counts, len(rows) > MAX_NAMES)


def _inline_channels(view: HistoryView) -> list[InlineChannel] | None:
    """Channels with unbacked values inline in the checkpoint JSON; ``None`` for SQLite."""
    if view.kind != "postgres":
        return None
    if not view.has_checkpoints:
        return []
    blobs = next((t for t in view.tables if t.name == "checkpoint_blobs"), None)
    if blobs is None:
        sql = _PG_INLINE
    elif "version" in blobs.key_columns:
        sql = _PG_INLINE_BACKED_VERSION
    else:
        sql = _PG_INLINE_BACKED
    return [
        InlineChannel(str(channel), int(checkpoints), int(threads), tuple(sorted(types)))
        for channel, types, checkpoints, threads in view.query("", sql, (MAX_NAMES + 1,))[
            :MAX_NAMES
        ]
    ]
