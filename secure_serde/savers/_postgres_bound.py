"""How the sealed PostgreSQL savers bind their rows (see `_bound` for the scheme).

Every value is written and read at its `Location`:

* ``checkpoint_blobs``: ``Location.blob(thread, ns, channel, version)``,
  where on read the version is the one the *authenticated* record's
  ``channel_versions`` names, so a re-pointed record fails its seal and a
  blob moved under another version fails its own tag;
* ``checkpoint_writes``: ``Location.write(thread, ns, checkpoint id, task id,
  task path, idx, channel)``;
* the sealed-metadata envelope: ``Location.metadata(thread, ns, checkpoint id)``;
* the record (``checkpoint`` JSON minus its seal, ``metadata`` JSON, ids
  and parent): sealed under ``RECORD_KEY`` in the ``checkpoint`` JSON.

The functions here take the stock saver's own row shapes, so the savers'
overrides stay one line each.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)

from secure_serde._binding import Location
from secure_serde._errors import BindingError
from secure_serde._langgraph import DeltaSnapshot, delta_row_is_write
from secure_serde.savers._bound import RECORD_KEY, Binder, metadata_record

__all__ = [
    "CHAIN_SQL",
    "DeltaRead",
    "bound_delta_history",
    "dump_bound_blobs",
    "dump_bound_writes",
    "load_bound_tuple",
    "seal_put",
    "verify_chain",
]

# The records of the ancestors a delta-history walk went through.
CHAIN_SQL: Final = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata"
    " FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)"
)

_ID_KEYS: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")
_EMPTY: Final = "empty"
_SNAPSHOT: Final = cast(type, DeltaSnapshot)

_BlobRow = tuple[str, str, str, str, str, bytes | None]
_WriteRow = tuple[str, str, str, str, str, int, str, str, bytes]


def _json(value: Any) -> Any:
    # What jsonb will hand back, near enough for `canonical`: tuples become
    # lists, keys become strings. Costs microseconds on a record of ids.
    return json.loads(json.dumps(value))


def seal_put(
    binder: Binder,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata]:
    """The config, checkpoint and metadata to give the stock ``put``, the record sealed.

    The metadata is computed here, as the stock ``put`` would, and the
    config returned carries only the ids, so the stock ``put`` stores
    exactly the metadata the seal covers.
    """
    configurable = config["configurable"]
    stored_metadata = get_serializable_checkpoint_metadata(config, metadata)
    ids_only: RunnableConfig = {
        "configurable": {k: configurable[k] for k in _ID_KEYS if k in configurable}
    }
    # The checkpoint JSON the stock put writes: every value goes to a blob
    # (primitives are boxed by route_primitives_to_blobs), and a DeltaChannel
    # snapshot leaves a `true` marker behind.
    stored = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    stored["channel_values"] = {
        k: True for k, v in checkpoint["channel_values"].items() if isinstance(v, _SNAPSHOT)
    }
    seal = seal_stored_record(
        binder,
        configurable["thread_id"],
        configurable.get("checkpoint_ns", ""),
        checkpoint["id"],
        configurable.get("checkpoint_id"),
        stored,
        stored_metadata,
    )
    sealed = cast(Checkpoint, {**checkpoint, RECORD_KEY: seal})
    return ids_only, sealed, stored_metadata


def seal_stored_record(  # noqa: PLR0913 - a record is named by its ids and parent
    binder: Binder,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_id: str | None,
    stored: Mapping[str, Any],
    stored_metadata: Any,
) -> dict[str, str | None]:
    """The seal of a row's record: its ``checkpoint`` JSON (no seal in it) and ``metadata`` JSON.

    What ``put`` stores under `RECORD_KEY`; the binding pass seals the rows
    of a stock store with it too, so both write the same seal.
    """
    return binder.seal_record(
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        parent_id,
        _json([stored, metadata_record(stored_metadata)]),
    )


def dump_bound_blobs(
    binder: Binder,
    thread_id: str,
    checkpoint_ns: str,
    values: Mapping[str, Any],
    versions: ChannelVersions,
) -> list[_BlobRow]:
    """The stock ``_dump_blobs`` rows, each value bound to its channel and version."""
    rows: list[_BlobRow] = []
    for channel, version in versions.items():
        if channel in values:
            location = Location.blob(thread_id, checkpoint_ns, channel, version)
            type_tag, data = binder.dump(values[channel], location)
            rows.append((thread_id, checkpoint_ns, channel, cast(str, version), type_tag, data))
        else:
            rows.append((thread_id, checkpoint_ns, channel, cast(str, version), _EMPTY, None))
    return rows


def dump_bound_writes(  # noqa: PLR0913 - the stock _dump_writes arguments plus the binder
    binder: Binder,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[tuple[str, Any]],
) -> list[_WriteRow]:
    """The stock ``_dump_writes`` rows, each value bound to its task, index and channel."""
    rows: list[_WriteRow] = []
    for position, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, position)
        location = Location.write(
            thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel
        )
        type_tag, data = binder.dump(value, location)
        rows.append(
            (
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                task_id,
                task_path,
                idx,
                channel,
                type_tag,
                data,
            )
        )
    return rows


def load_bound_tuple(binder: Binder, value: Mapping[str, Any]) -> CheckpointTuple:
    """The stock ``_load_checkpoint_tuple``, with the record and every value authenticated.

    Raises:
        BindingError: the record or a value does not authenticate here.
        UnboundValueError: an unbound record or value, outside migration.
    """
    thread_id, checkpoint_ns = value["thread_id"], value["checkpoint_ns"]
    checkpoint_id, parent_id = value["checkpoint_id"], value["parent_checkpoint_id"]
    stored: Mapping[str, Any] = value["checkpoint"]
    record = {k: v for k, v in stored.items() if k != RECORD_KEY}
    binder.check_record(
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        parent_id,
        [record, metadata_record(value["metadata"])],
        stored.get(RECORD_KEY),
    )
    versions: Mapping[str, Any] = record.get("channel_versions") or {}
    channel_values = dict(record.get("channel_values") or {})
    for raw_channel, raw_type, blob in value["channel_values"] or ():
        channel, type_tag = bytes(raw_channel).decode(), bytes(raw_type).decode()
        if type_tag == _EMPTY:
            continue
        if channel not in versions:
            raise BindingError(f"blob of channel {channel!r} has no version in its record")
        location = Location.blob(thread_id, checkpoint_ns, channel, versions[channel])
        channel_values[channel] = binder.load((type_tag, blob), location)
    writes: list[PendingWrite] = []
    for task_id, channel, type_tag, blob, task_path, idx in sorted(
        value["pending_writes"] or (),
        key=lambda w: writes_sort_key(w[4].decode(), w[0].decode(), int(w[5])),
    ):
        location = Location.write(
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            task_id.decode(),
            task_path.decode(),
            int(idx),
            channel.decode(),
        )
        writes.append(
            (task_id.decode(), channel.decode(), binder.load((type_tag.decode(), blob), location))
        )
    # The metadata is returned as stored: the saver opens it (MetadataOpener).
    metadata = value["metadata"]
    ids = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    return CheckpointTuple(
        {"configurable": {**ids, "checkpoint_id": checkpoint_id}},
        cast(Checkpoint, {**record, "channel_values": channel_values}),
        metadata,
        {"configurable": {**ids, "checkpoint_id": parent_id}} if parent_id else None,
        writes,
    )


@dataclass
class DeltaRead:
    """One delta-history read: where, and the ancestor chains its walk followed."""

    thread_id: str
    checkpoint_ns: str
    chains: list[list[str]] = field(default_factory=list)

    def chain_params(self) -> tuple[str, str, list[str]]:
        ids = sorted({cid for chain in self.chains for cid in chain})
        return self.thread_id, self.checkpoint_ns, ids


def verify_chain(binder: Binder, read: DeltaRead, rows: Sequence[Mapping[str, Any]]) -> None:
    """Authenticate every ancestor record a delta walk used, and the links between them.

    The stock walk follows ``parent_checkpoint_id`` columns it reads without
    the records; a re-parented ancestor would splice another branch's writes
    into the history. Each write is bound to its own checkpoint, so what was
    decoded is genuine, but the assembly is refused before it is returned.

    Raises:
        BindingError: an ancestor is missing, or its record or link does not verify.
    """
    parents: dict[str, str | None] = {}
    for row in rows:
        stored: Mapping[str, Any] = row["checkpoint"]
        record = {k: v for k, v in stored.items() if k != RECORD_KEY}
        binder.check_record(
            row["thread_id"],
            row["checkpoint_ns"],
            row["checkpoint_id"],
            row["parent_checkpoint_id"],
            [record, metadata_record(row["metadata"])],
            stored.get(RECORD_KEY),
        )
        parents[row["checkpoint_id"]] = row["parent_checkpoint_id"]
    for chain in read.chains:
        for position, child in enumerate(chain):
            parent = chain[position + 1] if position + 1 < len(chain) else None
            if child not in parents:
                raise BindingError(f"delta history ancestor {child!r} has no record")
            if parent is not None and parents[child] != parent:
                raise BindingError(f"delta history ancestor {child!r} was re-parented")


def bound_delta_history(  # noqa: PLR0913 - the stock delta hook's arguments plus where
    binder: Binder,
    thread_id: str,
    checkpoint_ns: str,
    *,
    channels: Sequence[str],
    chain_by_ch: Mapping[str, list[str]],
    seed_ver_by_ch: Mapping[str, str | None],
    seed_inline_by_ch: Mapping[str, Any],
    stage2_rows: Sequence[Any],
) -> dict[str, DeltaChannelHistory]:
    """The stock ``_build_delta_channels_writes_history``, every value read at its location."""
    writes_by: dict[str, dict[str, list[tuple[str, bytes, str, int, str]]]] = {
        ch: {} for ch in channels
    }
    seeds: dict[tuple[str, str], tuple[str, bytes]] = {}
    for row in stage2_rows:
        channel = row["channel"]
        if delta_row_is_write(row):
            writes_by.setdefault(channel, {}).setdefault(row["checkpoint_id"], []).append(
                (row["type"], row["blob"], row["task_id"], row["idx"], row["task_path"])
            )
        else:
            seeds[(channel, row["version"])] = (row["type"], row["blob"])
    result: dict[str, DeltaChannelHistory] = {}
    for channel in channels:
        collected: list[PendingWrite] = []
        by_checkpoint = writes_by.get(channel, {})
        for checkpoint_id in chain_by_ch.get(channel, []):
            found = sorted(
                by_checkpoint.get(checkpoint_id, []),
                key=lambda w: writes_sort_key(w[4], w[2], w[3]),
                reverse=True,
            )
            for type_tag, blob, task_id, idx, task_path in found:
                location = Location.write(
                    thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel
                )
                collected.append((task_id, channel, binder.load((type_tag, blob), location)))
        collected.reverse()
        entry: DeltaChannelHistory = {"writes": collected}
        version = seed_ver_by_ch.get(channel)
        if version is not None:
            seed = seeds.get((channel, version))
            if seed is not None and seed[0] != _EMPTY:
                location = Location.blob(thread_id, checkpoint_ns, channel, version)
                entry["seed"] = binder.load(seed, location)
            elif channel in seed_inline_by_ch:
                entry["seed"] = seed_inline_by_ch[channel]
        result[channel] = entry
    return result
