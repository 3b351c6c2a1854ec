"""What `SealedSaver` hands its inner saver, and how it reads it back; no I/O here.

A checkpoint reaches the inner saver as:

* each channel value that is not inline in the record (_record.py): a value
  cell bound to (store, thread, namespace, channel, version), or the marker
  cell (`MARKER_CHANNEL`) when there is none;
* each pending write: a write cell bound to (store, thread, namespace,
  checkpoint id, task id, task path, index, channel);
* the metadata: ``{RECORD_KEY: <record cell>}``, plus a blind-index token for
  each indexed key (_index.py), the value of each key named plaintext, and
  ``parents`` (checkpoint ids only, which stock ``prune`` reads);
* the config: the three ids, so no saver can copy ``configurable`` anywhere;
* the checkpoint's structure (versions, ``versions_seen``, ``ts``), which
  savers need to find blobs, plus ``{RECORD_KEY: "SSC1"}``: a stock saver
  given secure_serde's serializer (SQLite stores the whole checkpoint as one
  value) then refuses it naming SealedSaver, not as a plaintext row.

A read returns the record's checkpoint and metadata, never the inner
saver's copy, and checks everything the inner saver returns against it. The
record is sealed uncompressed (its metadata mixes ``configurable`` values,
which may be secret, with caller-chosen ones; an inline value never shares a
compressed unit with another channel's).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde._errors import (
    BindingError,
    BlindIndexError,
    ConfigurationError,
    HistoryError,
    MetadataDowngradeError,
    UnserializableValueError,
)
from secure_serde.ciphers import SealingCipher, is_sealing
from secure_serde.crypto import Location
from secure_serde.sealing import _cell
from secure_serde.sealing._identity import IDENTITY_THREAD, StoreIdentity
from secure_serde.sealing._index import IndexGeneration, canonical, matches
from secure_serde.sealing._record import inline_of, inlined, parse_record
from secure_serde.serde import EncryptedSerializer

__all__ = [
    "MARKER_CHANNEL",
    "PARENTS",
    "RECORD_KEY",
    "Opened",
    "Sealer",
    "ids",
    "reduced",
]

RECORD_KEY: Final = "__secure_serde__"
PARENTS: Final = "parents"
_RECORD_TAG: Final = "msgpack"
# A checkpoint whose values are all inline would hand the inner saver no cell, and a
# stock PostgresSaver keeps no blob row for it: given secure_serde's serializer by
# mistake, it would return the checkpoint with no values instead of refusing it. So such
# a checkpoint carries one value cell of None under this channel, at one constant version
# (stored once per thread and namespace), which that serializer refuses naming
# SealedSaver. Reads never look at it: the record names the channels holding a value.
MARKER_CHANNEL: Final = RECORD_KEY
_MARKER: Final = "0"
_MAX_CACHED: Final = 4096
# Keys a routing layer under the sealer adds for its own filters (per-tenant sealing's tag,
# secure_serde/sealing/_tenant_inner.py); checked there, allowed here.
_ROUTING_KEYS: Final = frozenset({"__secure_serde_tenant__"})


def ids(config: RunnableConfig) -> tuple[str, str, str | None]:
    """(thread id, namespace, checkpoint id) of a config; refuses the reserved thread."""
    configurable = config.get("configurable") or {}
    if "thread_id" not in configurable:
        raise ConfigurationError("a checkpoint config needs configurable.thread_id")
    thread = str(configurable["thread_id"])
    if thread == IDENTITY_THREAD:
        raise ConfigurationError(f"the thread id {IDENTITY_THREAD!r} is reserved by secure_serde")
    ns = configurable.get("checkpoint_ns", "")
    checkpoint_id = configurable.get("checkpoint_id")
    return thread, str(ns), None if checkpoint_id is None else str(checkpoint_id)


def reduced(config: RunnableConfig) -> RunnableConfig:
    configurable = config.get("configurable") or {}
    kept = {
        k: configurable[k]
        for k in ("thread_id", "checkpoint_ns", "checkpoint_id")
        if configurable.get(k) is not None
    }
    if "thread_id" in kept:
        kept["thread_id"] = str(kept["thread_id"])
    return {"configurable": kept}


@dataclass(slots=True)
class Opened:
    """A checkpoint tuple read back, with the record it was checked against.

    ``with_values``: the channels whose value is a cell in the inner saver;
    ``inline``: the values the record itself holds (every one, whichever
    channels were opened).
    """

    tuple: CheckpointTuple
    parent_id: str | None
    detached: bool
    with_values: list[str]
    inline: dict[str, Any] = field(default_factory=dict)


class Sealer:
    __slots__ = (
        "_cache",
        "_cipher",
        "_indexed",
        "_plaintext",
        "_records",
        "_serde",
        "_store",
        "identity",
        "index_keys",
    )

    def __init__(
        self,
        serde: EncryptedSerializer,
        identity: StoreIdentity,
        indexed: Collection[str],
        plaintext: Collection[str],
    ) -> None:
        self._serde = serde
        self._cipher = cast(SealingCipher, serde.cipher)
        self.identity = identity
        self.index_keys = identity.index_keys
        self._store = identity.store_id
        self._indexed = frozenset(indexed)
        self._plaintext = frozenset(plaintext)
        self._records = JsonPlusSerializer()
        self._cache: dict[tuple[str, str, str, str], tuple[Any, bytes]] = {}

    def _crypto(self, thread: str, *, writing: bool) -> tuple[EncryptedSerializer, SealingCipher]:
        """The serializer and cipher for one thread's rows (one pair per store here).

        A hook: per-tenant sealing (secure_serde/sealing/_tenant_inner.py)
        returns the thread's own key there. ``writing`` says whether a key
        may be created for it.
        """
        return self._serde, self._cipher

    def put_args(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]:
        """The inner ``put``'s arguments: an inline value's channel has no blob to write."""
        inner_config, inner_checkpoint, inner_metadata = self.seal_checkpoint(
            config, checkpoint, metadata
        )
        values = checkpoint.get("channel_values") or {}
        cells = inner_checkpoint["channel_values"]
        versions = {k: v for k, v in new_versions.items() if k in cells or k not in values}
        if MARKER_CHANNEL in cells and MARKER_CHANNEL not in values:
            versions[MARKER_CHANNEL] = _MARKER
        return inner_config, inner_checkpoint, inner_metadata, versions

    def seal_checkpoint(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        *,
        detached: bool = False,
        cells: Mapping[str, Any] | None = None,
    ) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata]:
        """The inner ``put``'s config, checkpoint and metadata for this checkpoint.

        ``cells``: a record being resealed or copied; these values are cells
        already, kept as they are, and the checkpoint's values are its inline
        ones.
        """
        thread, ns, parent = ids(config)
        full = dict(get_checkpoint_metadata(config, metadata))
        structure: dict[str, Any] = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        values: dict[str, Any] = checkpoint.get("channel_values") or {}
        versions: dict[str, Any] = structure.get("channel_versions") or {}
        checkpoint_id = str(checkpoint["id"])
        if cells is None:
            inline = {ch: v for ch, v in values.items() if inlined(v)}
            cells = {
                ch: self._value_cell(thread, ns, ch, versions.get(ch), v)
                for ch, v in values.items()
                if ch not in inline
            }
        else:
            inline = dict(values)
            cells = dict(cells)
        record: dict[str, Any] = {
            "c": structure,
            "m": full,
            "p": parent,
            "vals": sorted([*cells, *inline]),
            "det": detached,
        }
        if inline:
            record["iv"] = inline
        inner_structure = {k: v for k, v in structure.items() if k != "pending_sends"}
        version = inner_structure.get("v")
        if not isinstance(version, int) or version < 4:
            # v < 4 rebuilds pending sends from the parent's writes: done here, on
            # opened values, never by the inner saver on cells.
            inner_structure["v"] = 4
        inner_structure[RECORD_KEY] = _cell.MAGIC.decode("ascii")
        if not cells:
            cells = {MARKER_CHANNEL: self._value_cell(thread, ns, MARKER_CHANNEL, _MARKER, None)}
            inner_structure["channel_versions"] = {**versions, MARKER_CHANNEL: _MARKER}
        inner_checkpoint = cast(Checkpoint, {**inner_structure, "channel_values": cells})
        location = Location.checkpoint(thread, ns, checkpoint_id, None, b"", self._store)
        inner_metadata = self._inner_metadata(full)
        inner_metadata[RECORD_KEY] = _cell.to_text(self._seal_raw(_cell.RECORD, record, location))
        inner_config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        if parent is not None:
            inner_config["configurable"]["checkpoint_id"] = parent
        return inner_config, inner_checkpoint, cast(CheckpointMetadata, inner_metadata)

    def seal_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> tuple[RunnableConfig, list[tuple[str, Any]]]:
        thread, ns, checkpoint_id = ids(config)
        if checkpoint_id is None:
            raise ConfigurationError("put_writes needs configurable.checkpoint_id")
        sealed: list[tuple[str, Any]] = []
        serde, _ = self._crypto(thread, writing=True)
        for idx, (channel, value) in enumerate(writes):
            position = WRITES_IDX_MAP.get(channel, idx)
            location = Location.write(
                thread, ns, checkpoint_id, task_id, task_path, position, channel, self._store
            )
            type_tag, ciphertext = serde.dumps_typed_at(value, location)
            sealed.append((channel, _cell.pack_write(type_tag, task_path, position, ciphertext)))
        return reduced(config), sealed

    def tokens(self, key: str, value: Any) -> list[str]:
        return [generation.token(key, value) for generation in self.index_keys.generations]

    def row_generation(self, stored: Mapping[str, Any]) -> IndexGeneration | None:
        """The index key a row's stored tokens are under (None: the row holds no token).

        Every token of one row is under one key (one ``put`` wrote them all); a
        row mixing keys, or naming a key the identity does not hold, is a
        `BlindIndexError`. The tokens themselves are checked on open.
        """
        found: IndexGeneration | None = None
        for key in sorted(self._indexed):
            if key not in stored:
                continue
            generation = self.index_keys.generation_of(key, stored[key])
            if found is not None and generation is not found:
                raise BlindIndexError(
                    "the stored metadata holds index tokens under two index keys: one put"
                    " writes them all under one",
                    key=key,
                )
            found = generation
        return found

    def _inner_metadata(
        self, full: dict[str, Any], generation: IndexGeneration | None = None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        index = self.index_keys.current if generation is None else generation
        for key, value in full.items():
            if key in self._plaintext or (key == PARENTS and _ids_only(value)):
                out[key] = value
            elif key in self._indexed:
                out[key] = index.token(key, value)
        return out

    def _value_cell(self, thread: str, ns: str, channel: str, version: Any, value: Any) -> bytes:
        key = (thread, ns, channel, str(version))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is value:
            return hit[1]
        location = Location.blob(thread, ns, channel, version, self._store)
        serde, _ = self._crypto(thread, writing=True)
        type_tag, ciphertext = serde.dumps_typed_at(value, location)
        cell = _cell.pack(_cell.VALUE, type_tag, ciphertext)
        if len(self._cache) >= _MAX_CACHED:
            # The cache only spares re-encrypting unchanged channels on the next put (a hit
            # needs the very same object at the same version). Emptied when full: no
            # eviction order to keep consistent across threads putting at once.
            self._cache.clear()
        self._cache[key] = (value, cell)
        return cell

    def _seal_raw(self, kind: int, obj: Any, location: Location) -> bytes:
        try:
            _, data = self._records.dumps_typed(obj)
        except TypeError as exc:
            # Metadata or an inline value of a type msgpack lacks; the message names the type.
            raise UnserializableValueError(f"the checkpoint cannot be serialized: {exc}") from exc
        _, sealing = self._crypto(location.thread_id, writing=True)
        cipher_name, ciphertext = sealing.encrypt_at(data, _RECORD_TAG, location.encode())
        return _cell.pack(kind, f"{_RECORD_TAG}+{cipher_name}", ciphertext)

    def _open_raw(self, cell: _cell.Cell, location: Location) -> Any:
        if cell.type_tag.rpartition("+")[0] != _RECORD_TAG:
            raise BindingError("a sealed record has a type tag secure_serde does not write")
        serde, _ = self._crypto(location.thread_id, writing=False)
        _, plaintext = _decrypted(serde, cell, location.encode(), "record")
        return self._records.loads_typed((_RECORD_TAG, plaintext))

    def open(
        self,
        found: CheckpointTuple,
        *,
        channels: Iterable[str] | None = None,
        retoken: bool = False,
    ) -> Opened:
        """``found`` as the application wrote it, or a typed refusal.

        ``channels``: open only these channels' values and writes (a history
        walk); ``None`` opens everything. ``retoken`` (the re-index pass only,
        which rewrites the tokens from the sealed metadata): the index tokens
        may be under any key, even one the identity no longer holds.
        """
        thread, ns, checkpoint_id = ids(found.config)
        if checkpoint_id is None:
            raise BindingError("the inner saver returned a checkpoint without its id")
        _check_shape(found)
        location = Location.checkpoint(thread, ns, checkpoint_id, None, b"", self._store)
        record = self._open_raw(
            _cell.from_text(found.metadata.get(RECORD_KEY), _cell.RECORD), location
        )
        structure, metadata, parent, detached, with_values = parse_record(record)
        inline = inline_of(record)
        if inline:
            with_values = [c for c in with_values if c not in inline]
        inner_parent = _parent_id(found)
        if inner_parent is None and parent is not None and not detached:
            raise HistoryError(
                f"checkpoint {checkpoint_id!r} lost its parent pointer in the store (sealed"
                f" parent {parent!r}): its history would end early"
            )
        if inner_parent != parent and not (inner_parent is None and detached):
            raise BindingError(
                f"checkpoint {checkpoint_id!r} was re-parented in the store (sealed parent"
                f" {parent!r}, stored {inner_parent!r})"
            )
        self._check_plaintext(found.metadata, metadata, retoken=retoken)
        wanted = None if channels is None else frozenset(channels)
        checkpoint = cast(Checkpoint, dict(structure))
        values = self._open_values(found, thread, ns, structure, with_values, wanted)
        for channel, value in inline.items():
            if wanted is None or channel in wanted:
                values[channel] = value
        checkpoint["channel_values"] = values
        writes = self._open_writes(found, thread, ns, checkpoint_id, wanted)
        opened = CheckpointTuple(
            found.config,
            checkpoint,
            cast(CheckpointMetadata, metadata),
            found.parent_config,
            writes,
        )
        return Opened(opened, inner_parent, detached, with_values, inline)

    def check_filter(self, opened: CheckpointTuple, checked: dict[str, Any]) -> None:
        """A row the inner saver matched by token must hold the value in its sealed metadata."""
        if checked and not matches(opened.metadata, checked):
            raise BlindIndexError(
                "the store returned a checkpoint for an indexed filter that its sealed metadata"
                " does not satisfy: an index token was moved or rewritten",
                key=", ".join(sorted(checked)),
            )

    def _check_plaintext(self, stored: Any, sealed: dict[str, Any], *, retoken: bool) -> None:
        """The stored metadata is exactly what `_inner_metadata` writes for the sealed one.

        Plaintext keys and ``parents`` must equal their sealed values, every index token
        must be the one the sealed value gives under the index key its id names, and no
        other key may be there: a filter then reads what the seal vouches for (a moved
        token, an added key, a changed plaintext value or an unknown key id are refused,
        not read).
        """
        expected = self._inner_metadata(sealed)
        for key in (*self._plaintext, PARENTS):
            # Canonically: the store's JSON gives back a tuple as a list, 1.0 as 1.
            if key in expected and (
                key not in stored or canonical(stored[key]) != canonical(expected[key])
            ):
                raise MetadataDowngradeError(
                    f"the plaintext metadata key {key!r} differs from its sealed value",
                    keys=(key,),
                )
        extra = sorted(set(stored) - set(expected) - _ROUTING_KEYS - {RECORD_KEY})
        missing = sorted(set(expected) - set(stored))
        if extra or missing:
            raise MetadataDowngradeError(
                "the stored metadata holds keys the saver did not write, or lacks some it did",
                keys=tuple(str(k) for k in (*extra, *missing)),
            )
        if retoken:
            return
        if all(stored[k] == v for k, v in expected.items() if k in self._indexed):
            return  # every token is the current key's, for its sealed value
        generation = self.row_generation(stored)
        if generation is not None and generation is not self.index_keys.current:
            expected = self._inner_metadata(sealed, generation)
        for key, value in expected.items():
            if key in self._indexed and stored[key] != value:
                raise BlindIndexError(
                    f"the index token of {key!r} is not the one its sealed value gives: it was"
                    " moved or rewritten",
                    key=key,
                )

    def _open_values(  # noqa: PLR0913 - the row, its place, and what to open
        self,
        found: CheckpointTuple,
        thread: str,
        ns: str,
        structure: dict[str, Any],
        with_values: list[str],
        wanted: frozenset[str] | None,
    ) -> dict[str, Any]:
        stored = found.checkpoint.get("channel_values") or {}
        versions = structure.get("channel_versions") or {}
        values: dict[str, Any] = {}
        serde, _ = self._crypto(thread, writing=False)
        for channel in with_values:
            if wanted is not None and channel not in wanted:
                continue
            if channel not in stored:
                raise BindingError(f"the value of channel {channel!r} is missing from the store")
            cell = _cell.unpack(stored[channel], _cell.VALUE)
            location = Location.blob(thread, ns, channel, versions.get(channel), self._store)
            values[channel] = serde.loads_typed_at((cell.type_tag, cell.ciphertext), location)
        return values

    def _open_writes(
        self,
        found: CheckpointTuple,
        thread: str,
        ns: str,
        checkpoint_id: str,
        wanted: frozenset[str] | None,
    ) -> list[tuple[str, str, Any]]:
        keyed: list[tuple[tuple[str, str, int], tuple[str, str, Any]]] = []
        seen: set[tuple[str, int]] = set()
        serde, _ = self._crypto(thread, writing=False)
        for task_id, channel, raw in found.pending_writes or ():
            cell = _cell.unpack(raw, _cell.WRITE)
            if (task_id, cell.idx) in seen:
                raise BindingError("two pending writes claim the same task and index")
            seen.add((task_id, cell.idx))
            if wanted is not None and channel not in wanted:
                continue
            location = Location.write(
                thread, ns, checkpoint_id, task_id, cell.task_path, cell.idx, channel, self._store
            )
            value = serde.loads_typed_at((cell.type_tag, cell.ciphertext), location)
            keyed.append(
                (writes_sort_key(cell.task_path, task_id, cell.idx), (task_id, channel, value))
            )
        keyed.sort(key=lambda item: item[0])
        return [write for _, write in keyed]

    # -- moving, at the cipher level (nothing is deserialized) -----------------------------

    def rebind(self, raw: Any, kind: int, source: Location, target: Location) -> bytes:
        cell = _cell.unpack(raw, kind)
        source_serde, _ = self._crypto(source.thread_id, writing=False)
        _, target_cipher = self._crypto(target.thread_id, writing=True)
        aad = source.in_store(self._store).encode()
        inner, plaintext = _decrypted(source_serde, cell, aad, "cell")
        name, ciphertext = target_cipher.encrypt_at(
            plaintext, inner, target.in_store(self._store).encode()
        )
        tag = f"{inner}+{name}"
        if kind == _cell.WRITE:
            return _cell.pack_write(tag, cell.task_path, cell.idx, ciphertext)
        return _cell.pack(kind, tag, ciphertext)


def _decrypted(
    serde: EncryptedSerializer, cell: _cell.Cell, aad: bytes, what: str
) -> tuple[str, bytes]:
    route = serde.read_rule.route(cell.type_tag)
    cipher = route.cipher
    if cipher is None or not is_sealing(cipher):
        raise BindingError(f"a sealed {what} is not under a cipher that binds its place")
    sealing = cast(SealingCipher, cipher)
    return route.inner, sealing.decrypt_at(route.cipher_name, cell.ciphertext, route.inner, aad)


def _check_shape(found: CheckpointTuple) -> None:
    if not isinstance(found.metadata, Mapping):
        raise BindingError(f"the stored metadata is {type(found.metadata).__name__}, not a mapping")
    if not isinstance(found.checkpoint, Mapping) or not isinstance(
        found.checkpoint.get("channel_values") or {}, Mapping
    ):
        raise BindingError("the stored checkpoint is not a mapping of channel values")
    writes = found.pending_writes or ()
    if not isinstance(writes, (list, tuple)) or not all(
        isinstance(w, (list, tuple)) and len(w) == 3 for w in writes
    ):
        raise BindingError("the stored pending writes are not (task, channel, value) triples")


def _parent_id(found: CheckpointTuple) -> str | None:
    parent = found.parent_config
    if not parent:
        return None
    checkpoint_id = (parent.get("configurable") or {}).get("checkpoint_id")
    return None if checkpoint_id is None else str(checkpoint_id)


def _ids_only(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )
