"""`SealedStore`: LangGraph long-term memory (any ``BaseStore``), sealed for its location.

Only the inner store's public ``batch`` and ``abatch`` are used, so any ``BaseStore``
works; the helpers (``get``, ``put``, ``search``...) come from ``BaseStore`` on top.
The at-rest layout is in _store_codec.py and _store_identity.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import BaseStore, Op, Result

from secure_serde._errors import ConfigurationError
from secure_serde.sealing._store_codec import ItemCodec, check_fields
from secure_serde.sealing._store_identity import Plan, identity_plan
from secure_serde.sealing._store_plans import gather, plan_for
from secure_serde.serde import EncryptedSerializer

__all__ = ["SealedStore"]


class SealedStore(BaseStore):
    """Wraps any LangGraph ``BaseStore`` so that it keeps only items sealed for their location.

    Args:
        inner: the store that keeps the items (InMemoryStore, SqliteStore,
            PostgresStore, AsyncPostgresStore, any ``BaseStore``), set up.
        serde: an `EncryptedSerializer` whose cipher seals values for their
            location (every cipher in `secure_serde.ciphers`).
        indexed_fields: top-level fields of a value that ``search(filter=)``
            matches by equality in the inner store, through keyed blind-index
            tokens. A filter on any other sealed field is matched here, on
            the authenticated value.
        searchable_fields: top-level fields left in plaintext for the inner
            store's embedding index (``search(query=)``) and its filters.
            Nothing else is ever embedded. They are readable at rest, and
            their embeddings leak their meaning: name them one by one.

    Every value reaches the inner store sealed for its location: this
    store's id, its namespace and its key; reads return only what this
    application wrote there, and refuse anything else (`BindingError`,
    `StoreIdentityError`, `BlindIndexError`) before deserializing it.
    Namespaces, keys, timestamps and TTLs stay the inner store's, readable.
    """

    def __init__(
        self,
        inner: BaseStore,
        *,
        serde: EncryptedSerializer,
        indexed_fields: Iterable[str] = (),
        searchable_fields: Iterable[str] = (),
    ) -> None:
        if not isinstance(inner, BaseStore):
            raise ConfigurationError(
                f"SealedStore wraps a langgraph BaseStore, not {type(inner).__name__}"
            )
        if isinstance(inner, SealedStore):
            raise ConfigurationError("this store is sealed already; wrap the inner store once")
        if not isinstance(serde, EncryptedSerializer) or not serde.seals_locations:
            raise ConfigurationError(
                "SealedStore needs serde=secure_serde.EncryptedSerializer(cipher) with a cipher"
                " that seals values for their location (EnvKeyCipher, KeyRotationCipher,"
                " KmsEnvelopeCipher); nothing was written"
            )
        indexed = tuple(dict.fromkeys(_names(indexed_fields, "indexed_fields")))
        searchable = tuple(dict.fromkeys(_names(searchable_fields, "searchable_fields")))
        check_fields(indexed, searchable)
        self.inner = inner
        self.indexed_fields = indexed
        self.searchable_fields = searchable
        self.supports_ttl = inner.supports_ttl
        self.ttl_config = inner.ttl_config
        self._serde = serde
        self._codec: ItemCodec | None = None
        self._lock = threading.Lock()
        self._async_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return (
            f"SealedStore({type(self.inner).__name__}, serde={self._serde!r},"
            f" indexed_fields={list(self.indexed_fields)!r},"
            f" searchable_fields={list(self.searchable_fields)!r})"
        )

    def setup(self) -> None:
        """Set up the inner store (where it has a sync ``setup``) and this store's identity."""
        inner_setup = getattr(self.inner, "setup", None)
        if callable(inner_setup) and not asyncio.iscoroutinefunction(inner_setup):
            inner_setup()
        self._ready()

    async def asetup(self) -> None:
        """`setup` for an async inner store (``await inner.setup()`` where it is a coroutine)."""
        inner_setup = getattr(self.inner, "setup", None)
        if callable(inner_setup):
            done = inner_setup()
            if asyncio.iscoroutine(done):
                await done
        await self._aready()

    def _codec_for(self, identity: Any) -> ItemCodec:
        return ItemCodec(
            self._serde,
            identity,
            self.indexed_fields,
            self.searchable_fields,
            _embedded_fields(self.inner),
        )

    def _ready(self) -> ItemCodec:
        codec = self._codec
        if codec is not None:
            return codec
        with self._lock:
            if self._codec is None:
                self._codec = self._codec_for(self._run(identity_plan(self._serde)))
            return self._codec

    async def _aready(self) -> ItemCodec:
        codec = self._codec
        if codec is not None:
            return codec
        async with self._async_lock:
            if self._codec is None:
                identity = await self._arun(identity_plan(self._serde))
                self._codec = self._codec_for(identity)
            return self._codec

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        codec = self._ready()
        results: list[Result] = self._run(gather([plan_for(codec, op) for op in ops]))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        codec = await self._aready()
        results: list[Result] = await self._arun(gather([plan_for(codec, op) for op in ops]))
        return results

    def _run(self, plan: Plan) -> Any:
        try:
            asked = next(plan)
            while True:
                asked = plan.send(self.inner.batch(asked))
        except StopIteration as done:
            return done.value

    async def _arun(self, plan: Plan) -> Any:
        try:
            asked = next(plan)
            while True:
                asked = plan.send(await self.inner.abatch(asked))
        except StopIteration as done:
            return done.value


def _embedded_fields(inner: BaseStore) -> list[str] | None:
    config = getattr(inner, "index_config", None)
    if not isinstance(config, dict):
        return None
    # "fields" in InMemoryStore and PostgresStore, "text_fields" in SqliteStore.
    fields = config.get("fields") or config.get("text_fields")
    if isinstance(fields, str):
        fields = [fields]
    if isinstance(fields, (list, tuple)) and all(isinstance(f, str) for f in fields):
        return list(fields)
    return None


def _names(names: Iterable[str], argument: str) -> list[str]:
    if isinstance(names, str):
        raise ConfigurationError(f"{argument} is a collection of field names, not one string")
    return list(names)
