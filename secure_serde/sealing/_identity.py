"""The store identity: a random id and index key, created once per store and kept sealed in it.

Every value `SealedSaver` writes is bound to the store id, so rows copied
from another store (even one under the same data key) do not authenticate.
The identity lives in the inner saver itself, as a checkpoint of the
reserved thread `IDENTITY_THREAD`, whose metadata holds one sealed cell
(secure_serde/sealing/_cell.py, kind 4) of::

    {"format": 2, "store": <16 random bytes>,
     "index_keys": [{"key": <32 random bytes>, "ssix1": <bool>}, ...],
     "created": <ISO 8601 time>}

sealed by the serializer at `Location.identity`. The first index key is the
current one (every token is written under it); the others are kept for
reading while a re-index (`SealedSaver.reindex`) moves rows off them, then
dropped. ``ssix1`` marks the key of a format-1 identity, whose tokens carry
no key id. Format 1 (0.4 and before) is still read::

    {"format": 1, "store": <16 random bytes>, "index_key": <32 random bytes>,
     "created": <ISO 8601 time>}

its one key is the current one and keeps writing format-1 tokens until the
store is re-indexed, which writes the record as format 2. It is created only in a
store that holds no checkpoint at all. A store that holds checkpoints but no
identity is refused: either its store identity was deleted (restore it from
a backup), or it was written by something else (adopt it explicitly).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple

from secure_serde._errors import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    StoreIdentityError,
)
from secure_serde._scrub import scrubbed
from secure_serde.crypto import Location
from secure_serde.sealing import _cell
from secure_serde.sealing._index import INDEX_KEY_SIZE, BlindIndex, IndexGeneration, IndexKeys
from secure_serde.serde import EncryptedSerializer

__all__ = [
    "IDENTITY_CHECKPOINT_ID",
    "IDENTITY_KEY",
    "IDENTITY_THREAD",
    "StoreIdentity",
    "drop_put",
    "identity_config",
    "identity_plan",
    "new_identity_put",
    "new_record",
    "open_identity",
    "open_record",
    "parse_record",
    "refuse_unempty",
    "rotate_put",
]

logger = logging.getLogger("secure_serde")

IDENTITY_THREAD: Final = "__secure_serde_store__"
# Sorts before every uuid6 checkpoint id; the record is the thread's only checkpoint.
IDENTITY_CHECKPOINT_ID: Final = "00000000-0000-0000-0000-000000000000"
IDENTITY_KEY: Final = "__secure_serde_store__"
_FORMAT: Final = 2
_FORMAT_1: Final = 1
_MAX_INDEX_KEYS: Final = 8
_STORE_ID_SIZE: Final = 16
_LOCATION: Final = Location.identity(IDENTITY_THREAD)
_UNEMPTY: Final = (
    "this store holds checkpoints but no store identity. If secure_serde sealed it, its"
    " store identity was deleted: restore the thread {thread!r} from a backup. If a stock"
    " saver or secure_serde 0.3 wrote it, copy it into a new sealed store with"
    " `secure_serde.savers.adopt(source, target)` (docs/upgrading.md)"
)


@dataclass(frozen=True)
class StoreIdentity:
    """One store's id, and its index keys.

    ``index`` is the current key alone (format-1 tokens: per-tenant sealing
    keys its own); ``keys`` holds every index key of the identity, the
    current one first, or None where ``index`` is the only one.
    """

    store_id: bytes
    index: BlindIndex = field(repr=False)
    keys: IndexKeys | None = field(default=None, repr=False)

    @property
    def index_keys(self) -> IndexKeys:
        return self.keys if self.keys is not None else IndexKeys.single(self.index)

    def __repr__(self) -> str:
        return f"StoreIdentity({self.store_id.hex()})"


def identity_config() -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": IDENTITY_THREAD,
            "checkpoint_ns": "",
            "checkpoint_id": IDENTITY_CHECKPOINT_ID,
        }
    }


@scrubbed  # the opened record holds the index key: no error leaves it in a frame local
def open_identity(found: CheckpointTuple, serde: EncryptedSerializer) -> StoreIdentity:
    record = open_record(found.metadata, IDENTITY_KEY, _LOCATION, serde)
    return _parse(record)


@scrubbed
def open_record(
    holder: object, key: str, location: Location, serde: EncryptedSerializer
) -> dict[str, Any]:
    """The record in the identity cell ``holder[key]``, sealed at ``location``.

    The holder is a saver's identity metadata, or a store's identity item
    (_store_identity.py).
    """
    if not isinstance(holder, Mapping):
        raise _not_ours()
    try:
        cell = _cell.from_text(holder.get(key), _cell.IDENTITY)
    except BindingError as exc:
        # A damaged cell is not a key problem: say what is wrong with it, not "other keys".
        raise StoreIdentityError(f"this store identity is malformed: {exc}") from None
    try:
        record = serde.loads_typed_at((cell.type_tag, cell.ciphertext), location)
    except DecryptionError:
        record = None
    if record is None:
        raise StoreIdentityError(
            "this store identity does not open under the configured keys: it was"
            " forged, or the store is sealed under other keys"
        )
    if not isinstance(record, dict):
        raise _not_ours()
    return record


@scrubbed
def parse_record(record: object) -> StoreIdentity:
    if not isinstance(record, dict):
        raise _not_ours()
    return _parse(record)


def new_record() -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "store": os.urandom(_STORE_ID_SIZE),
        "index_keys": [{"key": os.urandom(INDEX_KEY_SIZE), "ssix1": False}],
        "created": datetime.now(UTC).isoformat(),
    }


def _not_ours() -> StoreIdentityError:
    return StoreIdentityError("this store identity is not one secure_serde wrote")


@scrubbed
def _key_entries(record: dict[str, Any]) -> list[tuple[bytes, bool]]:
    if record.get("format") == _FORMAT_1:
        index_key = record.get("index_key")
        if not isinstance(index_key, bytes):
            raise _not_ours()
        return [(index_key, True)]
    entries = record.get("index_keys")
    if (
        record.get("format") != _FORMAT
        or not isinstance(entries, list)
        or not 0 < len(entries) <= _MAX_INDEX_KEYS
    ):
        raise _not_ours()
    out: list[tuple[bytes, bool]] = []
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != {"key", "ssix1"}:
            raise _not_ours()
        key, legacy = entry["key"], entry["ssix1"]
        if not isinstance(key, bytes) or not isinstance(legacy, bool):
            raise _not_ours()
        out.append((key, legacy))
    return out


@scrubbed
def _parse(record: dict[str, Any]) -> StoreIdentity:
    store_id = record.get("store")
    if not isinstance(store_id, bytes) or len(store_id) != _STORE_ID_SIZE:
        raise _not_ours()
    generations = []
    for key, legacy in _key_entries(record):
        if len(key) != INDEX_KEY_SIZE:
            raise _not_ours()
        index = BlindIndex(key)
        generations.append(IndexGeneration(index, index.key_id(), legacy=legacy))
    try:
        keys = IndexKeys(generations)
    except ConfigurationError:
        raise _not_ours() from None
    return StoreIdentity(store_id, keys.current.index, keys)


@scrubbed
def rotate_put(
    found: CheckpointTuple, serde: EncryptedSerializer
) -> tuple[tuple[RunnableConfig, Checkpoint, CheckpointMetadata], str]:
    """The ``put`` arguments of ``found``'s identity with a new random current index key.

    The keys it held are kept, for reading, after it; the record is written
    as format 2. Returns the arguments and the new key's id.
    """
    record = open_record(found.metadata, IDENTITY_KEY, _LOCATION, serde)
    _parse(record)
    held = _key_entries(record)
    if len(held) >= _MAX_INDEX_KEYS:
        raise StoreIdentityError(
            "this store's identity holds too many index keys: finish the re-index in progress"
        )
    ids = {BlindIndex(key).key_id() for key, _ in held}
    fresh = os.urandom(INDEX_KEY_SIZE)
    while BlindIndex(fresh).key_id() in ids:  # a 32-bit id: a clash is rare, never kept
        fresh = os.urandom(INDEX_KEY_SIZE)
    new_id = BlindIndex(fresh).key_id()
    return _rekeyed_put(serde, record, [(fresh, False), *held]), new_id


@scrubbed
def drop_put(
    found: CheckpointTuple, serde: EncryptedSerializer
) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata]:
    record = open_record(found.metadata, IDENTITY_KEY, _LOCATION, serde)
    _parse(record)
    return _rekeyed_put(serde, record, _key_entries(record)[:1])


@scrubbed
def _rekeyed_put(
    serde: EncryptedSerializer, record: dict[str, Any], keys: list[tuple[bytes, bool]]
) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata]:
    """``put`` arguments of ``record`` holding ``keys`` instead of its own, as format 2."""
    rekeyed = {
        "format": _FORMAT,
        "store": record["store"],
        "index_keys": [{"key": key, "ssix1": legacy} for key, legacy in keys],
        "created": record.get("created", ""),
    }
    del record, keys
    return _identity_put(serde, rekeyed)


@scrubbed
def new_identity_put(
    serde: EncryptedSerializer,
) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata]:
    return _identity_put(serde, new_record())


@scrubbed
def _identity_put(
    serde: EncryptedSerializer, record: dict[str, Any]
) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata]:
    type_tag, ciphertext = serde.dumps_typed_at(record, _LOCATION)
    del record
    checkpoint = Checkpoint(
        v=4,
        id=IDENTITY_CHECKPOINT_ID,
        ts="",
        channel_values={},
        channel_versions={},
        versions_seen={},
        updated_channels=None,
    )
    config: RunnableConfig = {"configurable": {"thread_id": IDENTITY_THREAD, "checkpoint_ns": ""}}
    metadata = {IDENTITY_KEY: _cell.to_text(_cell.pack(_cell.IDENTITY, type_tag, ciphertext))}
    return config, checkpoint, cast(CheckpointMetadata, metadata)


def identity_plan(inner: object, serde: EncryptedSerializer) -> Generator[Any, Any, StoreIdentity]:
    """This store's identity, created (and read back) in a store that holds no checkpoint."""
    found = yield ("call", "get_tuple", (identity_config(),), {})
    if found is None:
        try:
            rows = yield ("call", "list", (None,), {"limit": 2})
            threads = {str(t.config["configurable"].get("thread_id")) for t in rows}
            holds_checkpoints = bool(threads - {IDENTITY_THREAD})
        except ValueError:
            # Some savers list one thread at a time only (``DynamoDBSaver.list(None)``).
            # There, an identity deleted by an attacker is replaced instead of refused:
            # the rows sealed under the old one are then refused, never read (SECURITY.md).
            logger.warning(
                "secure_serde: %s cannot list every thread, so SealedSaver cannot check that"
                " the store is empty before creating its identity",
                type(inner).__name__,
            )
            holds_checkpoints = False
        except Exception:  # noqa: BLE001 - rows the inner serde cannot read are still rows
            holds_checkpoints = True
        if holds_checkpoints:
            raise refuse_unempty()
        yield ("call", "put", (*new_identity_put(serde), {}), {})
        # Read back: if two processes raced to create it, both use the one kept.
        found = yield ("call", "get_tuple", (identity_config(),), {})
        if found is None:
            raise StoreIdentityError("the inner saver did not keep the store identity")
    return open_identity(found, serde)


def refuse_unempty() -> StoreIdentityError:
    return StoreIdentityError(_UNEMPTY.format(thread=IDENTITY_THREAD))
