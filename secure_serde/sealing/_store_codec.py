"""What `SealedStore` hands its inner store for one item, and how it reads it back; no I/O here.

Every item value reaches the inner ``BaseStore`` as a JSON object (what every
store keeps)::

    {"__secure_serde__": <base64 of a cell of kind 5, secure_serde/sealing/_cell.py>,
     <each indexed field present in the value>: "ssix1:<token>",
     <each searchable field present in the value>: <its value, in plaintext>}

The cell holds the whole value, sealed by the serializer at
``Location.item(namespace, key).in_store(store id)`` (kind 6 of
secure_serde/crypto/_binding.py): a value read under any other namespace or key, or
in another store, does not authenticate. Tokens are the blind index of
secure_serde/sealing/_index.py, keyed by the store identity's index key
(field name and canonical JSON of the value). Searchable fields are the
only plaintext, named one by one by the application, so that the inner
store's embedding index can read them; every read checks them against the
sealed value. Namespaces, keys, timestamps and TTLs are the inner store's
own columns and stay readable.

A read returns the sealed value only, never the inner store's copy of a
field.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from langgraph.store.base import Item, PutOp, SearchItem

from secure_serde._errors import BindingError, BlindIndexError, ConfigurationError
from secure_serde.crypto import Location
from secure_serde.sealing import _cell
from secure_serde.sealing._identity import StoreIdentity
from secure_serde.sealing._index import FilterPlan, canonical, plan_filter
from secure_serde.serde import EncryptedSerializer

__all__ = ["SEALED_FIELD", "ItemCodec", "check_fields"]

SEALED_FIELD: Final = "__secure_serde__"
_EQ: Final = "$eq"
_NOT_JSON: Final = "the indexed or searchable field {!r} holds a value that is not JSON"


def check_fields(indexed: Collection[str], searchable: Collection[str]) -> None:
    """Refuse field names a sealed item cannot carry (typed, at construction)."""
    for name in (*indexed, *searchable):
        if not isinstance(name, str) or not name or "." in name or "[" in name:
            raise ConfigurationError(
                f"indexed_fields and searchable_fields name top-level fields of a value; {name!r}"
                " is not one"
            )
        if name == SEALED_FIELD:
            raise ConfigurationError(f"the field name {SEALED_FIELD!r} is reserved by secure_serde")
    both = set(indexed) & set(searchable)
    if both:
        raise ConfigurationError(f"fields {sorted(both)} are both indexed and searchable")


class ItemCodec:
    __slots__ = ("_default_index", "_identity", "_indexed", "_searchable", "_serde")

    def __init__(
        self,
        serde: EncryptedSerializer,
        identity: StoreIdentity,
        indexed: Collection[str],
        searchable: Collection[str],
        inner_fields: Sequence[str] | None = None,
    ) -> None:
        self._serde = serde
        self._identity = identity
        self._indexed = tuple(indexed)
        self._searchable = tuple(searchable)
        # ``put(index=None)``: the inner store's own fields when it embeds only searchable
        # ones (exactly what the bare store embeds), else the searchable fields by name.
        own = bool(inner_fields) and all(_root(f) in self._searchable for f in inner_fields or ())
        self._default_index: list[str] | None = None if own else list(self._searchable)

    def _location(self, namespace: Sequence[str], key: str) -> Location:
        return Location.item(namespace, key).in_store(self._identity.store_id)

    def seal_put(self, op: PutOp) -> PutOp:
        """The inner store's ``PutOp`` for ``op`` (a delete passes as it is)."""
        if op.value is None:
            return PutOp(op.namespace, op.key, None, index=op.index, ttl=op.ttl)
        if not isinstance(op.value, Mapping):
            raise ConfigurationError(f"a store value is a mapping, not {type(op.value).__name__}")
        value = dict(op.value)
        visible: dict[str, Any] = {}
        index = self._identity.index
        for name in self._indexed:
            if name in value:
                _json(value[name], _NOT_JSON.format(name))
                visible[name] = index.token(name, value[name])
        for name in self._searchable:
            if name in value:
                _json(value[name], _NOT_JSON.format(name))
                visible[name] = value[name]
        location = self._location(op.namespace, op.key)
        type_tag, ciphertext = self._serde.dumps_typed_at(value, location)
        inner = {SEALED_FIELD: _cell.to_text(_cell.pack(_cell.ITEM, type_tag, ciphertext))}
        inner.update(visible)
        return PutOp(op.namespace, op.key, inner, index=self._inner_index(op.index), ttl=op.ttl)

    def _inner_index(self, index: Any) -> Any:
        """What the inner store may embed: only searchable fields, ever."""
        if index is False or not self._searchable:
            return False
        if index is None:
            return self._default_index
        refused = [path for path in index if _root(path) not in self._searchable]
        if refused:
            raise ConfigurationError(
                f"put(index={refused!r}) would embed fields that are sealed: only"
                f" searchable_fields {list(self._searchable)!r} reach the inner store's index"
            )
        return list(index)

    def plan_filter(self, wanted: Mapping[str, Any] | None) -> FilterPlan:
        # Searchable fields go to the inner store as given (operators too), and only there.
        given = dict(wanted or {})
        searchable = {name: given.pop(name) for name in self._searchable if name in given}
        sealed = {name: self._equality(name, value) for name, value in given.items()}
        plan = plan_filter(sealed, self._identity.index, self._indexed, ())
        return FilterPlan({**(plan.inner or {}), **searchable} or None, plan.checked, plan.residual)

    def _equality(self, name: str, given: Any) -> Any:
        if isinstance(given, Mapping):
            if len(given) == 1 and _EQ in given:
                return given[_EQ]
            raise ConfigurationError(
                f"the filter on {name!r} is not an equality: the field is sealed, so the store"
                " matches it only by equality (a value, or {'$eq': value}). Operators ($gt, $ne,"
                " ...) and nested objects work on searchable_fields"
                f" {list(self._searchable)!r}; equality filters on indexed_fields"
                f" {list(self._indexed)!r} run in the inner store"
            )
        _json(given, f"the filter on {name!r} is not a JSON value")
        return given

    def open(self, found: Item) -> Item:
        stored = found.value
        if not isinstance(stored, Mapping):
            raise BindingError("the inner store returned an item whose value is not an object")
        cell = _cell.from_text(stored.get(SEALED_FIELD), _cell.ITEM)
        value = self._serde.loads_typed_at(
            (cell.type_tag, cell.ciphertext), self._location(found.namespace, found.key)
        )
        if not isinstance(value, dict):
            raise BindingError("a sealed store item is not one secure_serde wrote")
        for name in self._searchable:
            if (name in stored) != (name in value) or (
                name in value and canonical(stored[name]) != canonical(value[name])
            ):
                raise BindingError(
                    f"the searchable field {name!r} of item {found.key!r} differs from its sealed"
                    " value: the inner store's copy was rewritten"
                )
        if isinstance(found, SearchItem):
            return SearchItem(
                found.namespace, found.key, value, found.created_at, found.updated_at, found.score
            )
        return Item(
            value=value,
            key=found.key,
            namespace=found.namespace,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )

    @staticmethod
    def matches(opened: Item, plan: FilterPlan) -> bool:
        """Whether an opened item passes the filter; a moved token is a typed refusal."""
        value = opened.value
        for name, wanted in plan.checked.items():
            if name not in value or canonical(value[name]) != canonical(wanted):
                raise BlindIndexError(
                    "the store returned an item for an indexed filter that its sealed value does"
                    " not satisfy: an index token was moved or rewritten",
                    key=name,
                )
        return all(
            name in value and _equal(value[name], wanted) for name, wanted in plan.residual.items()
        )


def _equal(stored: Any, wanted: Any) -> bool:
    try:
        return canonical(stored) == canonical(wanted)
    except (TypeError, ValueError):
        return False


def _json(value: Any, refusal: str) -> None:
    try:
        canonical(value)
    except (TypeError, ValueError):
        raise ConfigurationError(refusal) from None


def _root(path: str) -> str:
    """The top-level field of a langgraph index path (``a.b``, ``a[0]``, ``a[*].b``)."""
    return re.split(r"[.\[]", path, maxsplit=1)[0]
