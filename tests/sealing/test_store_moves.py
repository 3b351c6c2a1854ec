"""The move matrix over raw rows: a sealed item read anywhere but where it was written is refused.

Rows are rewritten below any store (SQL on the SQLite file and PostgreSQL, the in-memory
store's dicts), then read through SealedStore: a value moved to another key or namespace,
swapped, copied from another store, planted in plaintext, truncated, an index token moved,
a searchable field rewritten, or the store identity deleted, forged or copied. Each is a typed
error, on every read path (get, search, filtered search), before any value is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from secure_serde import (
    BindingError,
    BlindIndexError,
    SecureSerdeError,
    StoreIdentityError,
)
from tests.sealing.store_support import (
    LANES,
    OTHER_KEY,
    RESERVED,
    EnvFactory,
    StoreEnv,
    envs,
)

NS = ("users", "u1")
OTHER_NS = ("users", "u2")
INDEXED = ("kind",)
SEARCHABLE = ("text",)
A = {"kind": "pref", "text": "likes tea", "secret": "a"}
B = {"kind": "fact", "text": "born 1980", "secret": "b"}


@pytest.fixture(params=LANES)
def make_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvFactory]:
    with envs(request.param, tmp_path, request) as make:
        yield make


def _filled(make_env: EnvFactory) -> tuple[StoreEnv, Any]:
    env = make_env()
    store = env.store(sealed=True, indexed=INDEXED, searchable=SEARCHABLE)
    env.call(store, "put", NS, "a", A)
    env.call(store, "put", NS, "b", B)
    env.call(store, "put", OTHER_NS, "a", {"kind": "pref", "text": "other", "secret": "c"})
    return env, store


def _reads(env: StoreEnv, store: Any, namespace: tuple[str, ...], key: str) -> list[Any]:
    return [
        lambda: env.call(store, "get", namespace, key),
        lambda: env.call(store, "search", namespace[:1]),
        lambda: env.call(store, "search", (), filter={"secret": "zzz"}),
    ]


def _refused(reads: list[Callable[[], Any]], error: type[SecureSerdeError]) -> None:
    for read in reads:
        with pytest.raises(error):
            read()


def test_the_untouched_store_reads_back(make_env: EnvFactory) -> None:
    env, store = _filled(make_env)
    assert env.call(store, "get", NS, "a").value == A
    assert [i.key for i in env.call(store, "search", NS, filter={"kind": "fact"})] == ["b"]


MOVES: dict[str, Callable[[StoreEnv], tuple[tuple[str, ...], str]]] = {}


def _move(name: str) -> Callable[[Any], Any]:
    def register(fn: Any) -> Any:
        MOVES[name] = fn
        return fn

    return register


@_move("to another key")
def _to_key(env: StoreEnv) -> tuple[tuple[str, ...], str]:
    env.write_row(NS, "b", env.rows()[(NS, "a")])
    return NS, "b"


@_move("to a new key")
def _to_new_key(env: StoreEnv) -> tuple[tuple[str, ...], str]:
    env.write_row(NS, "z", env.rows()[(NS, "a")])
    return NS, "z"


@_move("to another namespace")
def _to_namespace(env: StoreEnv) -> tuple[tuple[str, ...], str]:
    env.write_row(OTHER_NS, "a", env.rows()[(NS, "a")])
    return OTHER_NS, "a"


@_move("to a deeper namespace")
def _to_deeper(env: StoreEnv) -> tuple[tuple[str, ...], str]:
    env.write_row((*NS, "x"), "a", env.rows()[(NS, "a")])
    return (*NS, "x"), "a"


@_move("swapped")
def _swapped(env: StoreEnv) -> tuple[tuple[str, ...], str]:
    rows = env.rows()
    env.write_row(NS, "a", rows[(NS, "b")])
    env.write_row(NS, "b", rows[(NS, "a")])
    return NS, "a"


@_move("planted plaintext")
def _plaintext(env: StoreEnv) -> tuple[tuple[str, ...], str]:
    env.write_row(NS, "a", {"kind": "pref", "text": "likes tea", "secret": "planted"})
    return NS, "a"


@_move("truncated cell")
def _truncated(env: StoreEnv) -> tuple[tuple[str, ...], str]:
    row = dict(env.rows()[(NS, "a")])
    row["__secure_serde__"] = row["__secure_serde__"][:-8]
    env.write_row(NS, "a", row)
    return NS, "a"


@_move("identity cell as an item")
def _identity_cell(env: StoreEnv) -> tuple[tuple[str, ...], str]:
    env.write_row(NS, "a", env.rows()[(RESERVED, "identity")])
    return NS, "a"


@pytest.mark.parametrize("move", sorted(MOVES))
def test_a_moved_value_is_refused(make_env: EnvFactory, move: str) -> None:
    env, store = _filled(make_env)
    namespace, key = MOVES[move](env)
    _refused(_reads(env, store, namespace, key), BindingError)
    # A fresh SealedStore on the same rows refuses too (nothing is cached).
    _refused(_reads(env, env.store(sealed=True, indexed=INDEXED), namespace, key), BindingError)


def test_a_value_copied_from_another_store_is_refused(make_env: EnvFactory) -> None:
    env, store = _filled(make_env)
    other, other_store = _filled(make_env)
    # Same key, same namespace, same data key: only the store identity differs.
    env.write_row(NS, "a", other.rows()[(NS, "a")])
    _refused(_reads(env, store, NS, "a"), BindingError)
    assert env.call(other_store, "get", NS, "a").value == A


def test_another_stores_identity_makes_every_item_unreadable(make_env: EnvFactory) -> None:
    env, _ = _filled(make_env)
    other, _ = _filled(make_env)
    env.write_row(RESERVED, "identity", other.rows()[(RESERVED, "identity")])
    store = env.store(sealed=True, indexed=INDEXED)
    _refused(_reads(env, store, NS, "a"), BindingError)


def test_an_index_token_moved_is_refused_on_filtered_reads(make_env: EnvFactory) -> None:
    env, store = _filled(make_env)
    row = dict(env.rows()[(NS, "b")])
    row["kind"] = env.rows()[(NS, "a")]["kind"]  # b now claims a's token (kind "pref")
    env.write_row(NS, "b", row)
    with pytest.raises(BlindIndexError):
        env.call(store, "search", NS, filter={"kind": "pref"})
    with pytest.raises(BlindIndexError):
        env.call(store, "search", (), filter={"kind": "pref"})
    # Reads that do not filter on it still return the sealed value, not the token.
    assert env.call(store, "get", NS, "b").value == B


def test_a_rewritten_searchable_field_is_refused(make_env: EnvFactory) -> None:
    env, store = _filled(make_env)
    row = dict(env.rows()[(NS, "a")])
    row["text"] = "likes coffee"
    env.write_row(NS, "a", row)
    _refused(_reads(env, store, NS, "a"), BindingError)
    row.pop("text")
    env.write_row(NS, "a", row)
    _refused(_reads(env, store, NS, "a"), BindingError)


def test_a_deleted_identity_is_refused_not_recreated(make_env: EnvFactory) -> None:
    env, _ = _filled(make_env)
    env.delete_row(RESERVED, "identity")
    store = env.store(sealed=True, indexed=INDEXED)
    with pytest.raises(StoreIdentityError, match="restore"):
        env.call(store, "get", NS, "a")
    with pytest.raises(StoreIdentityError):
        env.call(store, "put", NS, "new", A)
    assert (RESERVED, "identity") not in env.rows()


@pytest.mark.parametrize("forgery", ["plaintext", "other key", "not an object"])
def test_a_forged_identity_is_refused(make_env: EnvFactory, forgery: str) -> None:
    env, _ = _filled(make_env)
    if forgery == "other key":
        store = env.store(sealed=True, key=OTHER_KEY)
    else:
        value: dict[str, Any] = (
            {"store": "00" * 16, "index_key": "00" * 32}
            if forgery == "plaintext"
            else {"__secure_serde__": ["not", "text"]}
        )
        env.write_row(RESERVED, "identity", value)
        store = env.store(sealed=True)
    with pytest.raises(StoreIdentityError):
        env.call(store, "get", NS, "a")


def test_a_bare_store_with_items_is_refused(make_env: EnvFactory) -> None:
    env = make_env()
    bare = env.store(sealed=False)
    env.call(bare, "put", NS, "a", A)
    with pytest.raises(StoreIdentityError):
        env.call(env.store(sealed=True), "search", NS)
    assert (RESERVED, "identity") not in env.rows()
