"""Rotation of a `secure_serde.SealedStore`'s items: each item cell re-encrypted where it lies.

The rows come from secure_serde/stores/_items.py (langgraph's ``store``
table, SQLite or PostgreSQL); the cells inside them are laid out by
secure_serde/sealing/_cell.py and _store_codec.py; each is re-encrypted at
its location as in _sealed.py, whose code this reuses.

================  ====================================================================
cell              location
================  ====================================================================
item              ``Location.item(namespace, key).in_store(store id)``, the namespace
                  being the row's ``prefix`` split at ``"."``
store identity    ``Location.item(("__secure_serde_store__",), "identity")``, no store
================  ====================================================================

The store id comes from the identity item, opened first (`identify`); a
table whose identity does not open is refused as a whole. Only the sealed
entry of each value changes: index tokens and searchable fields are left
as they are (they do not depend on the cipher's keys).

As in _sealed.py, an item that holds no cell or whose cell does not open
at its location is a failure, listed by prefix and key and left as it is.
"""

from __future__ import annotations

import os
from typing import Final

from secure_serde._engine import Planned, Skip, Unreadable
from secure_serde._errors import BindingError
from secure_serde.crypto import Location
from secure_serde.passes._sealed import SealedPlanner
from secure_serde.sealing import IDENTITY_ITEM_KEY, RESERVED_NAMESPACE
from secure_serde.sealing import cell_layout as _cell
from secure_serde.stores import (
    IDENTITY_PREFIX,
    SEALED_FIELD,
    Cell,
    ItemsLayout,
    Store,
    is_items_layout,
    namespace_of,
    open_items,
)

__all__ = ["ItemsPlanner", "open_items_at"]

_IDENTITY_AT: Final = Location.item(RESERVED_NAMESPACE, IDENTITY_ITEM_KEY)
_NOT_A_CELL: Final = "this store is sealed: an item without a sealed cell is refused, never sealed"


class ItemsPlanner(SealedPlanner):
    """Turns the items of a SealedStore table into swaps under the primary cipher.

    Same contract as `SealedPlanner` (the batch loop and the report are
    shared); `identify` must run first.
    """

    _identity_at = _IDENTITY_AT
    _identity_tag = None
    _identity_name = "this store's identity item"
    _no_identity = (
        "this store table has no readable store identity item: it cannot be rewrapped"
        f" (restore the item {IDENTITY_ITEM_KEY!r} of the namespace"
        f" {RESERVED_NAMESPACE!r} from a backup)"
    )

    def _plan(self, cell: Cell) -> Skip | Unreadable | Planned:
        # Run by SealedPlanner.plan: an item has no thread id, so no tenant's prefix either.
        if cell.data is None or cell.type_tag != SEALED_FIELD:
            return Unreadable.of(
                BindingError, f"the item's value holds no {SEALED_FIELD!r} text: {_NOT_A_CELL}"
            )
        try:
            text = cell.data.decode("utf-8")
        except UnicodeDecodeError:
            return Unreadable.of(BindingError, "the item's sealed entry is not text")
        ref = cell.ref
        if ref.get("prefix") == IDENTITY_PREFIX:
            if ref.get("key") != IDENTITY_ITEM_KEY:
                return Unreadable.of(
                    BindingError, "the reserved namespace holds an item that is not the identity"
                )
            kind, at = _cell.IDENTITY, _IDENTITY_AT
        else:
            kind = _cell.ITEM
            at = self._in_store(Location.item(namespace_of(ref), str(ref.get("key"))))
        return self._rekey_text(cell, text, kind, at, SEALED_FIELD)


def open_items_at(store: Store | str | os.PathLike[str]) -> ItemsLayout | None:
    if isinstance(store, Store):
        return None if is_items_layout(store) else open_items(store.location)
    return open_items(store)
