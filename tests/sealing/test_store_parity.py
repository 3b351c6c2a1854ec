"""SealedStore behaves as the bare store it wraps: the same script gives the same results.

Over InMemoryStore, SqliteStore (a file), PostgresStore and AsyncPostgresStore (async helpers):
get, put, overwrite, delete, search with prefixes, limits and offsets (also the empty prefix,
where the store identity must stay hidden), equality filters on an indexed field (tokens), on
sealed fields (matched after opening), on a searchable field with operators (the inner store),
list_namespaces with every condition, and TTL (the same ttl_minutes at rest, swept alike).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sealing.store_support import LANES, EnvFactory, StoreEnv, comparable, envs

ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("users", "u1", "memories"), "m1", {"kind": "pref", "topic": "tea", "score": 3}),
    (("users", "u1", "memories"), "m2", {"kind": "fact", "topic": "birth", "score": 7}),
    (
        ("users", "u1", "profile"),
        "p",
        {"kind": "profile", "name": "Ada", "tags": ["a", "b"], "score": 1},
    ),
    (("users", "u2", "memories"), "m1", {"kind": "pref", "topic": "coffee", "score": 5}),
    (("users", "u2", "memories"), "m3", {"kind": "pref", "topic": "tea", "score": 5.0}),
    (("docs",), "d1", {"kind": "doc", "topic": "manual", "nested": {"a": 1}}),
]
INDEXED = ("kind",)
SEARCHABLE = ("score",)

SEARCHES: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("users",), {}),
    (("users", "u1"), {}),
    ((), {}),
    ((), {"limit": 2, "offset": 1}),
    ((), {"limit": 1, "offset": 5}),
    (("users",), {"limit": 2}),
    (("users",), {"limit": 2, "offset": 2}),
    (("users",), {"filter": {"kind": "pref"}}),
    (("users",), {"filter": {"kind": "pref"}, "limit": 1, "offset": 1}),
    (("users",), {"filter": {"kind": "nothing"}}),
    (("users",), {"filter": {"topic": "tea"}}),
    (("users",), {"filter": {"topic": "tea"}, "limit": 1, "offset": 1}),
    ((), {"filter": {"kind": "pref", "topic": "coffee"}}),
    (("users",), {"filter": {"tags": ["a", "b"]}}),
    (("users",), {"filter": {"name": "Ada", "kind": "profile"}}),
    (("users",), {"filter": {"score": 5}}),
    (("users",), {"filter": {"score": {"$gt": 4}}}),
    (("users",), {"filter": {"score": {"$lte": 5}, "kind": "pref"}}),
    (("users",), {"filter": {"kind": {"$eq": "fact"}}}),
    (("nothing",), {}),
]
LISTINGS: list[dict[str, Any]] = [
    {},
    {"prefix": ("users",)},
    {"suffix": ("memories",)},
    {"prefix": ("users",), "suffix": ("memories",)},
    {"max_depth": 1},
    {"max_depth": 2},
    {"limit": 2},
    {"limit": 2, "offset": 1},
    {"offset": 3},
    {"prefix": ("*", "u1")},
    {"suffix": ("*", "memories")},
    {"prefix": ("users", "u1"), "max_depth": 3},
]


@pytest.fixture(params=LANES)
def make_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvFactory]:
    with envs(request.param, tmp_path, request) as make:
        yield make


def _by_place(found: list[Any]) -> list[Any]:
    # Dicts compare by content: PostgreSQL's JSONB reorders keys, the sealed value does not.
    return sorted(found, key=lambda t: (t[0], t[1]))


def _page_of(
    env: StoreEnv, store: Any, prefix: tuple[str, ...], kwargs: dict[str, Any], found: list[Any]
) -> Any:
    """What a search found, comparable across two separate stores.

    A page (limit or offset) depends on the order of ties: SQLite's store orders by
    ``updated_at`` kept to the second, so two stores filled in two runs can tie differently.
    A page is compared as what it must be in its own store, the slice of the full result at
    its offset, and by the set of items that full result holds.
    """
    if "limit" not in kwargs and "offset" not in kwargs:
        return _by_place(found)
    rest = {k: v for k, v in kwargs.items() if k not in ("limit", "offset")}
    full = comparable(env.call(store, "search", prefix, limit=100, **rest))
    offset = kwargs.get("offset", 0)
    page = full[offset : offset + kwargs.get("limit", 10)]
    return ("page", found == page, _by_place(full))


def script(env: StoreEnv, sealed: bool) -> list[Any]:
    store = env.store(sealed=sealed, indexed=INDEXED, searchable=SEARCHABLE)
    out: list[Any] = []
    for namespace, key, value in ITEMS:
        env.call(store, "put", namespace, key, value)
    for namespace, key, _ in ITEMS:
        out.append(comparable(env.call(store, "get", namespace, key)))
    out.append(comparable(env.call(store, "get", ("users", "u1", "memories"), "missing")))
    for prefix, kwargs in SEARCHES:
        found = comparable(env.call(store, "search", prefix, **kwargs))
        out.append((prefix, kwargs, _page_of(env, store, prefix, kwargs, found), len(found)))
    for kwargs in LISTINGS:
        out.append((kwargs, sorted(env.call(store, "list_namespaces", **kwargs))))
    out.append(len(env.call(store, "list_namespaces", limit=3, offset=1)))
    env.call(
        store,
        "put",
        ("users", "u1", "profile"),
        "p",
        {"kind": "profile", "name": "Bea", "score": 2},
    )
    out.append(comparable(env.call(store, "get", ("users", "u1", "profile"), "p")))
    out.append(comparable(env.call(store, "search", ("users",), filter={"name": "Ada"})))
    env.call(store, "delete", ("users", "u1", "memories"), "m1")
    env.call(store, "delete", ("users", "u9"), "never-there")
    out.append(env.call(store, "get", ("users", "u1", "memories"), "m1"))
    out.append(_by_place(comparable(env.call(store, "search", ("users",), limit=20))))
    out.append(sorted(env.call(store, "list_namespaces")))
    return out


def test_the_same_script_gives_the_same_results(make_env: EnvFactory) -> None:
    bare = script(make_env(), sealed=False)
    sealed = script(make_env(), sealed=True)
    for step, (want, got) in enumerate(zip(bare, sealed, strict=True)):
        assert got == want, f"step {step}"


def test_searches_keep_the_inner_store_order(make_env: EnvFactory) -> None:
    """Pages come in the inner store's order: the same keys at the same positions.

    Compared with the inner store under the sealed one, on the same rows: SQLite's store
    orders by ``updated_at``, kept to the second, so two separate runs can order their
    ties differently when one straddles a second and the other does not.
    """
    env = make_env()
    store = env.store(sealed=True, indexed=INDEXED)
    for i in (3, 0, 6, 1, 5, 2, 4):  # neither key order nor its reverse, whatever the clock
        env.call(store, "put", ("log",), f"k{i}", {"kind": "even" if i % 2 else "odd", "i": i})
    order = [item.key for item in env.call(env.inner, "search", ("log",), limit=10)]
    assert sorted(order) == [f"k{i}" for i in range(7)]
    pages = [
        [item.key for item in env.call(store, "search", ("log",), limit=3, offset=o)]
        for o in (0, 3, 6)
    ]
    assert pages == [order[0:3], order[3:6], order[6:9]]
    odd = [item.key for item in env.call(store, "search", ("log",), filter={"kind": "odd"})]
    assert odd == [key for key in order if int(key[1:]) % 2 == 0]
    assert [item.key for item in env.call(store, "search", ("log",), filter={"i": 4})] == ["k4"]


def test_ttl_is_carried_through(make_env: EnvFactory) -> None:
    outcomes: list[Any] = []
    for sealed in (False, True):
        env = make_env()
        store = env.store(sealed=sealed, indexed=INDEXED)
        if env.lane == "memory":
            # InMemoryStore has no TTL: both refuse it the same way.
            with pytest.raises(NotImplementedError):
                env.call(store, "put", ("t",), "k", {"kind": "x"}, ttl=5)
            outcomes.append(store.supports_ttl)
            continue
        assert store.supports_ttl
        env.call(store, "put", ("t",), "short", {"kind": "x"}, ttl=5)
        env.call(store, "put", ("t",), "forever", {"kind": "y"})
        env.call(store, "put", ("t",), "never", {"kind": "z"}, ttl=None)
        at_rest = env.ttl_rows()
        item = env.call(store, "get", ("t",), "short", refresh_ttl=True)
        env.expire_all()
        swept = env.sweep()
        left = sorted(i.key for i in env.call(store, "search", ("t",)))
        # The sealed store still opens (its identity has no TTL and survives the sweep).
        env.call(store, "put", ("t",), "after", {"kind": "w"})
        outcomes.append(
            (at_rest, item.value, swept, left, env.call(store, "get", ("t",), "after").value)
        )
    assert outcomes[1] == outcomes[0]


def test_put_with_index_false_and_batches_of_mixed_ops(make_env: EnvFactory) -> None:
    from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, SearchOp

    results = []
    for sealed in (False, True):
        env = make_env()
        store = env.store(sealed=sealed, indexed=INDEXED)
        env.call(store, "put", ("a",), "x", {"kind": "k", "v": 1}, index=False)
        ops: list[Op] = [
            PutOp(("a",), "y", {"kind": "k", "v": 2}),
            GetOp(("a",), "x"),
            SearchOp(("a",), {"kind": "k"}),
            ListNamespacesOp(),
            SearchOp((), {"v": 1}),
        ]
        got = env.run(store.abatch(ops)) if env.lane == "apostgres" else store.batch(ops)
        results.append([comparable(r) for r in got])
    assert results[1] == results[0]
