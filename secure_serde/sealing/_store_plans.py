"""One plan per store operation: what `SealedStore` asks its inner store, and what it returns.

A plan is a generator that yields a list of the inner store's operations and
receives their results, so one plan serves ``batch`` and ``abatch``. `gather`
runs the plans of one batch side by side: each round of every plan goes to
the inner store in a single ``batch`` call, so a batch of gets and puts
still costs one inner call.

Searches and namespace listings hide the reserved namespace of the store
identity. When an operation could see it (an empty prefix, no prefix
condition), or when a filter names a sealed field the inner store cannot
match, the plan reads the inner store page by page and applies ``offset``
and ``limit`` itself, on the opened, matched items, in the inner store's
order; then it refreshes the TTL of the items it returns (when asked), as
the bare store would have.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, Final

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from secure_serde._errors import BindingError, ConfigurationError
from secure_serde.sealing._index import FilterPlan
from secure_serde.sealing._store_codec import ItemCodec
from secure_serde.sealing._store_identity import RESERVED_LABEL, RESERVED_NAMESPACE, Plan

__all__ = ["gather", "plan_for"]

_PAGE: Final = 100


def gather(plans: Sequence[Plan]) -> Generator[list[Op], list[Result], list[Any]]:
    """Run ``plans`` together: one inner ``batch`` per round, results in plan order."""
    results: list[Any] = [None] * len(plans)
    pending: dict[int, list[Op]] = {}
    for i, plan in enumerate(plans):
        try:
            pending[i] = next(plan)
        except StopIteration as done:
            results[i] = done.value
    while pending:
        asked = [op for ops in pending.values() for op in ops]
        got = yield asked
        if len(got) != len(asked):
            raise BindingError("the inner store returned a result count unlike its batch")
        position, following = 0, {}
        for i, ops in pending.items():
            part = list(got[position : position + len(ops)])
            position += len(ops)
            try:
                following[i] = plans[i].send(part)
            except StopIteration as done:
                results[i] = done.value
        pending = following
    return results


def plan_for(codec: ItemCodec, op: Op) -> Plan:
    if isinstance(op, GetOp):
        return _get(codec, op)
    if isinstance(op, PutOp):
        return _put(codec, op)
    if isinstance(op, SearchOp):
        return _search(codec, op)
    if isinstance(op, ListNamespacesOp):
        return _list_namespaces(op)
    raise ConfigurationError(f"SealedStore does not know the operation {type(op).__name__}")


def _refuse_reserved(namespace: Sequence[str]) -> None:
    if tuple(namespace[:1]) == RESERVED_NAMESPACE:
        raise ConfigurationError(
            f"the namespace label {RESERVED_LABEL!r} is reserved by secure_serde (the store"
            " identity lives there)"
        )


def _get(codec: ItemCodec, op: GetOp) -> Plan:
    _refuse_reserved(op.namespace)
    (found,) = yield [op]
    if found is None:
        return None
    if not isinstance(found, Item):
        raise BindingError("the inner store returned something other than an item")
    return codec.open(found)


def _put(codec: ItemCodec, op: PutOp) -> Plan:
    _refuse_reserved(op.namespace)
    yield [codec.seal_put(op)]


def _search(codec: ItemCodec, op: SearchOp) -> Plan:
    prefix = tuple(op.namespace_prefix)
    if prefix[:1] == RESERVED_NAMESPACE:
        return []
    if op.limit < 0 or op.offset < 0:
        raise ConfigurationError("search limit and offset are at least 0")
    plan = codec.plan_filter(op.filter)
    if prefix and not plan.residual:
        # The inner store matches everything asked: its own limit and offset hold.
        inner = SearchOp(prefix, plan.inner, op.limit, op.offset, op.query, op.refresh_ttl)
        (found,) = yield [inner]
        out = []
        for item in _items(found):
            opened = codec.open(item)
            codec.matches(opened, plan)
            out.append(opened)
        return out
    chosen = yield from _scan(codec, op, prefix, plan)
    if op.refresh_ttl and chosen:
        yield [GetOp(item.namespace, item.key, refresh_ttl=True) for item in chosen]
    return chosen


def _scan(
    codec: ItemCodec, op: SearchOp, prefix: tuple[str, ...], plan: FilterPlan
) -> Generator[list[Op], list[Result], list[Item]]:
    wanted = op.offset + op.limit
    page = max(wanted + 1, _PAGE)
    matched: list[Item] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    position = 0
    while len(matched) < wanted:
        (found,) = yield [SearchOp(prefix, plan.inner, page, position, op.query, False)]
        items = _items(found)
        for item in items:
            place = (tuple(item.namespace), item.key)
            if place[0][:1] == RESERVED_NAMESPACE or place in seen:
                continue
            seen.add(place)
            opened = codec.open(item)
            if codec.matches(opened, plan):
                matched.append(opened)
        if len(items) < page:
            break
        position += page
    return matched[op.offset : wanted]


def _list_namespaces(op: ListNamespacesOp) -> Plan:
    conditions = op.match_conditions or ()
    prefixes = [c.path for c in conditions if c.match_type == "prefix" and c.path]
    if any(path[0] == RESERVED_LABEL for path in prefixes):
        return []
    if any(path[0] != "*" for path in prefixes):
        (found,) = yield [op]
        return found
    if op.limit < 0 or op.offset < 0:
        raise ConfigurationError("list_namespaces limit and offset are at least 0")
    # The reserved namespace is one namespace: one more than asked covers it.
    inner = ListNamespacesOp(op.match_conditions, op.max_depth, op.offset + op.limit + 1, 0)
    (found,) = yield [inner]
    if not isinstance(found, list):
        raise BindingError("the inner store returned something other than a list of namespaces")
    kept = [
        ns for ns in found if not (isinstance(ns, Sequence) and tuple(ns[:1]) == RESERVED_NAMESPACE)
    ]
    return kept[op.offset : op.offset + op.limit]


def _items(found: Any) -> list[SearchItem]:
    if not isinstance(found, list) or not all(isinstance(i, Item) for i in found):
        raise BindingError("the inner store returned something other than a list of items")
    return found
