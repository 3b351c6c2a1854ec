"""A long-term memory store's identity: created once per store, kept sealed in it.

`SealedStore` seals every item at a location that starts with the store id
of the store that holds it (the same store identity as `SealedSaver`'s,
secure_serde/sealing/_identity.py: a random store id and a random index
key). The identity is kept in the inner store itself, as the one item of
the reserved namespace `RESERVED_NAMESPACE`, key `IDENTITY_ITEM_KEY`, whose value is::

    {"__secure_serde__": <base64 cell of kind 4 (identity), _cell.py>}

sealed by the serializer at ``Location.item(RESERVED_NAMESPACE,
IDENTITY_ITEM_KEY)`` without a store (kind 6, version 0x01 of
secure_serde/crypto/_binding.py), so that a saver's store identity does not open
here. It is put with ``index=False`` and no TTL.

It is created only in a store that holds no item. A store that holds items
but no identity is refused: its identity was deleted (restore it from a
backup), or something else wrote the store.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Final

from langgraph.store.base import GetOp, Item, ListNamespacesOp, Op, PutOp, Result

from secure_serde._errors import StoreIdentityError
from secure_serde.crypto import Location
from secure_serde.sealing import _cell
from secure_serde.sealing._identity import StoreIdentity, new_record, open_record, parse_record
from secure_serde.sealing._store_codec import SEALED_FIELD
from secure_serde.serde import EncryptedSerializer

__all__ = ["IDENTITY_ITEM_KEY", "RESERVED_LABEL", "RESERVED_NAMESPACE", "Plan", "identity_plan"]

RESERVED_LABEL: Final = "__secure_serde_store__"
RESERVED_NAMESPACE: Final = (RESERVED_LABEL,)
IDENTITY_ITEM_KEY: Final = "identity"
_LOCATION: Final = Location.item(RESERVED_NAMESPACE, IDENTITY_ITEM_KEY)
_UNEMPTY: Final = (
    "this store holds items but no store identity. If secure_serde sealed it, its store"
    " identity was deleted: restore the item {key!r} of the namespace {namespace!r} from a"
    " backup. If a bare store wrote it, copy its items through a new SealedStore"
)

Plan = Generator[list[Op], list[Result], Any]


def identity_plan(serde: EncryptedSerializer) -> Generator[list[Op], list[Result], StoreIdentity]:
    read = GetOp(RESERVED_NAMESPACE, IDENTITY_ITEM_KEY, refresh_ttl=False)
    (found,) = yield [read]
    if found is None:
        (namespaces,) = yield [ListNamespacesOp(limit=2)]
        if not isinstance(namespaces, list) or any(
            not isinstance(ns, (tuple, list)) or tuple(ns) != RESERVED_NAMESPACE
            for ns in namespaces
        ):
            raise StoreIdentityError(
                _UNEMPTY.format(key=IDENTITY_ITEM_KEY, namespace=RESERVED_NAMESPACE)
            )
        type_tag, ciphertext = serde.dumps_typed_at(new_record(), _LOCATION)
        value = {SEALED_FIELD: _cell.to_text(_cell.pack(_cell.IDENTITY, type_tag, ciphertext))}
        yield [PutOp(RESERVED_NAMESPACE, IDENTITY_ITEM_KEY, value, index=False, ttl=None)]
        # Read back: if two processes raced to create it, both use the one kept.
        (found,) = yield [read]
        if found is None:
            raise StoreIdentityError("the inner store did not keep the store identity")
    if not isinstance(found, Item):
        raise StoreIdentityError("the inner store returned no item for the store identity")
    return parse_record(open_record(found.value, SEALED_FIELD, _LOCATION, serde))
