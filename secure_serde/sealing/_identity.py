"""The store identity: a random id and index key, created once per store and kept sealed in it.

Every value `SealedSaver` writes is bound to the store id, so rows copied
from another store (even one under the same data key) do not authenticate.
The identity lives in the inner saver itself, as a checkpoint of the
reserved thread `IDENTITY_THREAD`, whose metadata holds one sealed cell
(secure_serde/sealing/_cell.py, kind 4) of::

    {"format": 1, "store": <16 random bytes>, "index_key": <32 random bytes>,
     "created": <ISO 8601 time>}

sealed by the serializer at `Location.identity`. It is created only in a
store that holds no checkpoint at all. A store that holds checkpoints but no
identity is refused: either its identity record was deleted (restore it from
a backup), or it was written by something else (adopt it explicitly).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple

from secure_serde._binding import Location
from secure_serde._errors import DecryptionError, StoreIdentityError
from secure_serde._scrub import scrubbed
from secure_serde._serializer import EncryptedSerializer
from secure_serde.sealing import _cell
from secure_serde.sealing._index import INDEX_KEY_SIZE, BlindIndex

__all__ = [
    "IDENTITY_CHECKPOINT_ID",
    "IDENTITY_KEY",
    "IDENTITY_THREAD",
    "StoreIdentity",
    "identity_config",
    "new_identity_put",
    "new_record",
    "open_identity",
    "parse_record",
    "refuse_unempty",
    "unenumerable",
]

logger = logging.getLogger("secure_serde")

IDENTITY_THREAD: Final = "__secure_serde_store__"
# Sorts before every uuid6 checkpoint id; the record is the thread's only checkpoint.
IDENTITY_CHECKPOINT_ID: Final = "00000000-0000-0000-0000-000000000000"
IDENTITY_KEY: Final = "__secure_serde_store__"
_FORMAT: Final = 1
_STORE_ID_SIZE: Final = 16
_LOCATION: Final = Location.identity(IDENTITY_THREAD)
_UNEMPTY: Final = (
    "this store holds checkpoints but no store identity. If secure_serde sealed it, its"
    " identity record was deleted: restore the thread {thread!r} from a backup. If a stock"
    " saver or secure_serde 0.3 wrote it, copy it into a new sealed store with"
    " `secure_serde.savers.adopt(source, target)` (docs/upgrading.md)"
)


@dataclass(frozen=True)
class StoreIdentity:
    """One store's id, and the blind index keyed by its index key."""

    store_id: bytes
    index: BlindIndex = field(repr=False)

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
    """The identity in ``found`` (the reserved thread's checkpoint), authenticated."""
    if not isinstance(found.metadata, Mapping):
        raise StoreIdentityError("this store's identity record is not one secure_serde wrote")
    cell = _cell.from_text(found.metadata.get(IDENTITY_KEY), _cell.IDENTITY)
    try:
        record = serde.loads_typed_at((cell.type_tag, cell.ciphertext), _LOCATION)
    except DecryptionError:
        record = None
    if record is None:
        raise StoreIdentityError(
            "this store's identity record does not open under the configured keys: it was"
            " forged, or the store is sealed under other keys"
        )
    if not isinstance(record, dict):
        raise StoreIdentityError("this store's identity record is not one secure_serde wrote")
    return _parse(record)


@scrubbed
def parse_record(record: object) -> StoreIdentity:
    """The identity in an opened identity record, or `StoreIdentityError`."""
    if not isinstance(record, dict):
        raise StoreIdentityError("this store's identity record is not one secure_serde wrote")
    return _parse(record)


def new_record() -> dict[str, Any]:
    """A fresh identity record: a random store id and a random index key."""
    return {
        "format": _FORMAT,
        "store": os.urandom(_STORE_ID_SIZE),
        "index_key": os.urandom(INDEX_KEY_SIZE),
        "created": datetime.now(UTC).isoformat(),
    }


def _parse(record: dict[str, Any]) -> StoreIdentity:
    store_id, index_key = record.get("store"), record.get("index_key")
    if (
        record.get("format") != _FORMAT
        or not isinstance(store_id, bytes)
        or len(store_id) != _STORE_ID_SIZE
        or not isinstance(index_key, bytes)
        or len(index_key) != INDEX_KEY_SIZE
    ):
        raise StoreIdentityError("this store's identity record is not one secure_serde wrote")
    return StoreIdentity(store_id, BlindIndex(index_key))


@scrubbed
def new_identity_put(
    serde: EncryptedSerializer,
) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata]:
    """The ``put`` arguments that create a fresh identity (random id and index key)."""
    record = new_record()
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


def unenumerable(inner: object) -> None:
    """Log that ``inner`` cannot say whether the store is empty; the identity is created anyway.

    Some savers list one thread at a time only (``DynamoDBSaver.list(None)``
    raises ``ValueError``). There, an identity deleted by an attacker is
    replaced instead of refused: the rows sealed under the old one are then
    refused (`BindingError`), never read (SECURITY.md).
    """
    logger.warning(
        "secure_serde: %s cannot list every thread, so SealedSaver cannot check that the store"
        " is empty before creating its identity",
        type(inner).__name__,
    )


def refuse_unempty() -> StoreIdentityError:
    return StoreIdentityError(_UNEMPTY.format(thread=IDENTITY_THREAD))
