"""SealedStore's refusals: bad arguments, filters it cannot answer alike, the reserved namespace.

Each is a typed error under SecureSerdeError that says what to do instead; no key is shown.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.memory import InMemoryStore

import secure_serde
from secure_serde import ConfigurationError, EncryptedSerializer, SecureSerdeError
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.sealing import SealedStore
from tests.sealing.store_support import KEY, RESERVED
from tests.serdes_support import env_serde


def _store(**kwargs: Any) -> SealedStore:
    store = SealedStore(InMemoryStore(), serde=env_serde(KEY), **kwargs)
    store.put(("n",), "k", {"kind": "a", "topic": "t", "score": 3})
    return store


def test_exported_from_the_package() -> None:
    assert secure_serde.SealedStore is SealedStore
    assert "SealedStore" in secure_serde.__all__


@pytest.mark.parametrize(
    "kwargs",
    [
        {"serde": JsonPlusSerializer()},
        {"serde": env_serde(KEY), "indexed_fields": "kind"},
        {"serde": env_serde(KEY), "indexed_fields": ("a.b",)},
        {"serde": env_serde(KEY), "searchable_fields": ("a[0]",)},
        {"serde": env_serde(KEY), "indexed_fields": ("__secure_serde__",)},
        {"serde": env_serde(KEY), "indexed_fields": ("x",), "searchable_fields": ("x",)},
        {"serde": env_serde(KEY), "indexed_fields": ("",)},
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        SealedStore(InMemoryStore(), **kwargs)


def test_only_a_base_store_once() -> None:
    with pytest.raises(ConfigurationError):
        SealedStore(object(), serde=env_serde(KEY))  # type: ignore[arg-type]
    sealed = SealedStore(InMemoryStore(), serde=env_serde(KEY))
    with pytest.raises(ConfigurationError, match="once"):
        SealedStore(sealed, serde=env_serde(KEY))


@pytest.mark.parametrize(
    "flt",
    [
        {"topic": {"$ne": "t"}},
        {"kind": {"$gt": "a"}},
        {"topic": {"nested": 1}},
        {"kind": {"$eq": "a", "$ne": "b"}},
    ],
)
def test_operator_filters_on_sealed_fields_are_refused(flt: dict[str, Any]) -> None:
    store = _store(indexed_fields=("kind",), searchable_fields=("score",))
    with pytest.raises(ConfigurationError) as raised:
        store.search(("n",), filter=flt)
    assert "indexed_fields" in str(raised.value)
    assert "searchable_fields" in str(raised.value)


def test_operators_work_on_searchable_fields_and_eq_everywhere() -> None:
    store = _store(indexed_fields=("kind",), searchable_fields=("score",))
    assert [i.key for i in store.search(("n",), filter={"score": {"$gte": 3}})] == ["k"]
    assert [i.key for i in store.search(("n",), filter={"score": {"$lt": 3}})] == []
    assert [i.key for i in store.search(("n",), filter={"topic": {"$eq": "t"}})] == ["k"]
    assert [i.key for i in store.search(("n",), filter={"kind": {"$eq": "a"}})] == ["k"]


def test_the_reserved_namespace_is_hidden_and_refused() -> None:
    store = _store()
    with pytest.raises(ConfigurationError, match="reserved"):
        store.put(RESERVED, "x", {"a": 1})
    with pytest.raises(ConfigurationError, match="reserved"):
        store.get(RESERVED, "identity")
    with pytest.raises(ConfigurationError, match="reserved"):
        store.delete((*RESERVED, "deeper"), "identity")
    assert store.search(RESERVED) == []
    assert store.list_namespaces(prefix=RESERVED) == []
    assert store.list_namespaces() == [("n",)]
    assert [i.key for i in store.search(())] == ["k"]
    assert store.inner.list_namespaces() == [RESERVED, ("n",)]


def test_negative_pages_and_non_json_fields_are_refused() -> None:
    store = _store(indexed_fields=("kind",))
    with pytest.raises(ConfigurationError):
        store.search((), limit=-1)
    with pytest.raises(ConfigurationError, match="not JSON"):
        store.put(("n",), "bad", {"kind": object()})
    with pytest.raises(ConfigurationError, match="not a JSON value"):
        store.search(("n",), filter={"kind": object()})


def test_values_json_cannot_hold_round_trip_sealed() -> None:
    from datetime import UTC, datetime

    store = _store()
    value = {"when": datetime(2026, 1, 2, tzinfo=UTC), "raw": b"\x00\x01", "t": (1, 2)}
    store.put(("n",), "rich", value)
    item = store.get(("n",), "rich")
    assert item is not None
    assert item.value["when"] == value["when"]
    assert item.value["raw"] == value["raw"]


def test_no_key_in_repr_or_errors() -> None:
    store = _store(indexed_fields=("kind",))
    shown = repr(store)
    assert "InMemoryStore" in shown
    assert "kind" in shown
    for secret in (KEY, KEY.hex().encode(), KEY[:8]):
        assert secret.decode("latin-1") not in shown
    with pytest.raises(SecureSerdeError) as refused:
        store.search(("n",), filter={"topic": {"$gt": 1}})
    assert KEY.decode("latin-1") not in str(refused.value)
    other = SealedStore(store.inner, serde=EncryptedSerializer(EnvKeyCipher(b"x" * 32)))
    with pytest.raises(secure_serde.StoreIdentityError) as raised:
        other.get(("n",), "k")
    assert "x" * 32 not in str(raised.value)
