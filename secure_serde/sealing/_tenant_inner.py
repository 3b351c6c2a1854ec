"""One tenant's scope inside a sealed store: its rows, its binding and its keys.

`TenantInner` is the inner saver as one tenant sees it: thread ``t`` is
stored as ``"sst1:" + token + ":" + t`` (the token a keyed hash of the
tenant id), and a row that comes back without the tenant's prefix is
refused. `TenantSealer` seals under the tenant's keys and binds every value
to `tenant_store_id`. The routing saver that picks a tenant per call is in
``_tenant_saver``.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointTuple,
)

from secure_serde._errors import BindingError
from secure_serde.ciphers import SealingCipher
from secure_serde.sealing._codec import Sealer
from secure_serde.sealing._identity import StoreIdentity
from secure_serde.sealing._index import TOKEN_PREFIX, BlindIndex
from secure_serde.sealing._tenants import TenantKeys
from secure_serde.serde import EncryptedSerializer

__all__ = [
    "TENANT_TAG",
    "TenantInner",
    "TenantSealer",
    "tenant_prefix",
    "tenant_store_id",
    "tenant_thread_prefix",
]

if TYPE_CHECKING:
    from secure_serde.sealing._saver import SealedSaver


TENANT_TAG: Final = "__secure_serde_tenant__"
_THREAD_PREFIX: Final = "sst1:"
_MAX_SERDES: Final = 1024
_TOKEN_CHARS: Final = 22  # 16 bytes of blind-index token, unpadded base64url
_TOKEN_ALPHABET: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)


def tenant_store_id(store_id: bytes, tenant: str) -> bytes:
    """The store id a tenant's values are bound to: the store's, then the tenant (prefixed)."""
    raw = tenant.encode("utf-8", "surrogatepass")
    return store_id + struct.pack(">I", len(raw)) + raw


def tenant_prefix(index: BlindIndex, tenant: str) -> str:
    token = index.token(TENANT_TAG, tenant)
    return f"{_THREAD_PREFIX}{token[len(TOKEN_PREFIX) :]}:"


def tenant_thread_prefix(thread_id: str) -> str | None:
    """The ``sst1:<token>:`` prefix of an inner thread id shaped as a tenant's, else ``None``.

    The shape alone does not make a row a tenant's (an application may name a
    thread so): only a prefix that `tenant_prefix` gives for a tenant of the
    key store does.
    """
    if not thread_id.startswith(_THREAD_PREFIX):
        return None
    body, sep, _ = thread_id[len(_THREAD_PREFIX) :].partition(":")
    if not sep or len(body) != _TOKEN_CHARS or not _TOKEN_ALPHABET.issuperset(body):
        return None
    return f"{_THREAD_PREFIX}{body}:"


class _TenantIndex(BlindIndex):
    """The tenant's blind index, keyed from its tenant key (fetched, or created, on first use)."""

    __slots__ = ("_keys", "_primary", "_tenant")

    def __init__(self, keys: TenantKeys, tenant: str, primary: EncryptedSerializer) -> None:
        self._keys = keys
        self._tenant = tenant
        self._primary = primary

    def token(self, key: str, value: Any) -> str:
        return self._keys.tenant_index(self._tenant, self._primary).token(key, value)

    def __repr__(self) -> str:
        return "<BlindIndex of a tenant>"


class TenantSealer(Sealer):
    """A `Sealer` whose every thread is sealed under that thread's own key."""

    __slots__ = ("_keys", "_serdes", "_tenant")

    def __init__(  # noqa: PLR0913 - the sealer's own arguments, and whose keys
        self,
        serde: EncryptedSerializer,
        identity: StoreIdentity,
        indexed: Collection[str],
        plaintext: Collection[str],
        keys: TenantKeys,
        tenant: str,
    ) -> None:
        scoped = StoreIdentity(
            tenant_store_id(identity.store_id, tenant), _TenantIndex(keys, tenant, serde)
        )
        super().__init__(serde, scoped, indexed, plaintext)
        self._keys = keys
        self._tenant = tenant
        self._serdes: OrderedDict[str, tuple[SealingCipher, EncryptedSerializer]] = OrderedDict()

    def _crypto(self, thread: str, *, writing: bool) -> tuple[EncryptedSerializer, SealingCipher]:
        primary = self._serde
        cipher = cast(
            SealingCipher, self._keys.thread_cipher(self._tenant, thread, primary, create=writing)
        )
        hit = self._serdes.get(thread)
        if hit is not None and hit[0] is cipher:
            return hit[1], cipher
        serde = EncryptedSerializer(cipher, serde=primary.serde)
        self._serdes[thread] = (cipher, serde)
        while len(self._serdes) > _MAX_SERDES:
            self._serdes.popitem(last=False)
        return serde, cipher


class TenantInner(BaseCheckpointSaver[Any]):
    """The inner saver, holding one tenant's threads only, under their own ids.

    Thread ids are prefixed on the way in and stripped on the way out; a
    row that comes back without the tenant's prefix is refused.
    """

    def __init__(self, root: SealedSaver, tenant: str) -> None:
        super().__init__()
        self._root = root
        self.inner = root.inner
        self._tenant = tenant
        self._token: str | None = None

    def __repr__(self) -> str:
        return f"TenantInner({type(self.inner).__name__})"

    @property
    def config_specs(self) -> list[Any]:
        return list(self.inner.config_specs)

    def _known(self, identity: StoreIdentity) -> str:
        if self._token is None:
            self._token = identity.index.token(TENANT_TAG, self._tenant)
        return self._token

    def _tag(self) -> str:
        return self._token if self._token is not None else self._known(self._root._ready().identity)

    async def _atag(self) -> str:
        if self._token is not None:
            return self._token
        return self._known((await self._root._aready()).identity)

    def own(self, found: CheckpointTuple) -> CheckpointTuple:
        """A row read from the inner saver directly, as this tenant sees it (audit).

        Raises:
            BindingError: the row is outside this tenant's threads.
        """
        return cast(CheckpointTuple, self._out(found, self._tag()))

    @staticmethod
    def _prefix(token: str) -> str:
        return f"{_THREAD_PREFIX}{token[len(TOKEN_PREFIX) :]}:"

    def _in(self, config: RunnableConfig | None, token: str) -> RunnableConfig | None:
        if config is None:
            return None
        configurable = dict(config.get("configurable") or {})
        if "thread_id" not in configurable:
            return None if not configurable else {**config, "configurable": configurable}
        configurable["thread_id"] = self._prefix(token) + str(configurable["thread_id"])
        return {**config, "configurable": configurable}

    def _out_config(self, config: RunnableConfig, token: str) -> RunnableConfig:
        configurable = dict(config.get("configurable") or {})
        thread = str(configurable.get("thread_id", ""))
        prefix = self._prefix(token)
        if not thread.startswith(prefix):
            raise BindingError(
                "the inner saver returned a row outside this tenant's threads: it was planted,"
                " or moved from another tenant"
            )
        configurable["thread_id"] = thread[len(prefix) :]
        return {**config, "configurable": configurable}

    def _out(self, found: CheckpointTuple | None, token: str) -> CheckpointTuple | None:
        if found is None:
            return None
        return found._replace(
            config=self._out_config(found.config, token),
            parent_config=None
            if found.parent_config is None
            else self._out_config(found.parent_config, token),
        )

    def _filter(
        self, config: RunnableConfig | None, filter: dict[str, Any] | None, token: str
    ) -> dict[str, Any] | None:
        if config is not None:
            return filter
        return {**(filter or {}), TENANT_TAG: token}

    def _inward(self, name: str, token: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        first, *rest = args
        if name == "put":
            rest[1] = {**rest[1], TENANT_TAG: token}
        if name == "delete_thread":
            first = self._prefix(token) + str(first)
        elif name == "prune":
            first = [self._prefix(token) + str(t) for t in first]
        elif name != "delete_for_runs":
            # Run-id tokens are the tenant's own (its blind-index key): no other tenant's match.
            first = self._in(first, token)
        return (first, *rest)

    def _outward(self, name: str, token: str, result: Any) -> Any:
        if name == "get_tuple":
            return self._out(result, token)
        return self._out_config(result, token) if name == "put" else result

    def _listed(
        self, config: RunnableConfig | None, token: str, kwargs: dict[str, Any]
    ) -> tuple[RunnableConfig | None, dict[str, Any]]:
        inner_config = self._in(config, token)
        filter = self._filter(inner_config, kwargs.get("filter"), token)
        return inner_config, {
            **kwargs,
            "filter": filter,
            "before": self._in(kwargs.get("before"), token),
        }

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        token = self._tag()
        inner_config, asked = self._listed(config, token, kwargs)
        for found in self.inner.list(inner_config, **asked):
            yield cast(CheckpointTuple, self._out(found, token))

    async def alist(
        self, config: RunnableConfig | None, **kwargs: Any
    ) -> AsyncIterator[CheckpointTuple]:
        token = await self._atag()
        inner_config, asked = self._listed(config, token, kwargs)
        async for found in self.inner.alist(inner_config, **asked):
            yield cast(CheckpointTuple, self._out(found, token))

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)


def _forwarded(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:

    def call(self: TenantInner, *args: Any, **kwargs: Any) -> Any:
        token = self._tag()
        result = getattr(self.inner, name)(*self._inward(name, token, args), **kwargs)
        return self._outward(name, token, result)

    async def acall(self: TenantInner, *args: Any, **kwargs: Any) -> Any:
        token = await self._atag()
        result = await getattr(self.inner, "a" + name)(*self._inward(name, token, args), **kwargs)
        return self._outward(name, token, result)

    return call, acall


# ``prune`` and ``delete_for_runs`` are forwarded even where the inner saver lacks them: the
# scoped saver offers them only where it has them (SealedSaver's variants).
for _name in ("get_tuple", "put", "put_writes", "delete_thread", "prune", "delete_for_runs"):
    _call, _acall = _forwarded(_name)
    setattr(TenantInner, _name, _call)
    setattr(TenantInner, "a" + _name, _acall)
