"""One tenant's scope inside a sealed store: its rows (`TenantInner`), its binding and keys.

The inner saver stores the tenant's thread ``t`` as ``"sst1:" + token + ":" + t``,
the token a keyed hash of the tenant id. `TenantSealer` seals under the tenant's keys
and binds every value to `tenant_store_id`.
"""

from __future__ import annotations

import string
import struct
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from secure_serde._errors import BindingError
from secure_serde.ciphers import SealingCipher
from secure_serde.sealing._codec import Sealer
from secure_serde.sealing._identity import StoreIdentity
from secure_serde.sealing._index import TOKEN_PREFIX, BlindIndex
from secure_serde.sealing._tenants import TenantKeys
from secure_serde.serde import EncryptedSerializer

__all__ = [
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
_TOKEN_ALPHABET: Final = frozenset(string.ascii_letters + string.digits + "-_")  # base64url


def tenant_store_id(store_id: bytes, tenant: str) -> bytes:
    """The store id a tenant's values are bound to: the store's, then the tenant (prefixed)."""
    raw = tenant.encode("utf-8", "surrogatepass")
    return store_id + struct.pack(">I", len(raw)) + raw


def tenant_prefix(index: BlindIndex, tenant: str) -> str:
    return _prefix(index.token(TENANT_TAG, tenant))


def _prefix(token: str) -> str:
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

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    def _tag(self, identity: StoreIdentity | None = None) -> str:
        """The tenant's token under the store identity's index key (computed once)."""
        if self._token is None:
            identity = identity or self._root._ready().identity
            self._token = identity.index.token(TENANT_TAG, self._tenant)
        return self._token

    async def _atag(self) -> str:
        if self._token is None:
            return self._tag((await self._root._aready()).identity)
        return self._token

    def own(self, found: CheckpointTuple) -> CheckpointTuple:
        """A row read from the inner saver directly, as this tenant sees it (audit).

        Raises:
            BindingError: the row is outside this tenant's threads.
        """
        return cast(CheckpointTuple, _outward("get_tuple", found, self._tag()))

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        token = self._tag()
        args, asked = _inward("list", token, (config,), kwargs)
        for found in self.inner.list(*args, **asked):
            yield _outward("get_tuple", found, token)

    async def alist(
        self, config: RunnableConfig | None, **kwargs: Any
    ) -> AsyncIterator[CheckpointTuple]:
        token = await self._atag()
        args, asked = _inward("list", token, (config,), kwargs)
        async for found in self.inner.alist(*args, **asked):
            yield _outward("get_tuple", found, token)


def _in(config: RunnableConfig | None, prefix: str) -> RunnableConfig | None:
    """``config`` with its thread id prefixed; None for one that names nothing."""
    configurable = dict((config or {}).get("configurable") or {})
    if not configurable:
        return None
    if "thread_id" in configurable:
        configurable["thread_id"] = prefix + str(configurable["thread_id"])
    return {**(config or {}), "configurable": configurable}


def _out(config: RunnableConfig, prefix: str) -> RunnableConfig:
    configurable = dict(config.get("configurable") or {})
    thread = str(configurable.get("thread_id", ""))
    if not thread.startswith(prefix):
        raise BindingError(
            "the inner saver returned a row outside this tenant's threads: it was planted,"
            " or moved from another tenant"
        )
    configurable["thread_id"] = thread[len(prefix) :]
    return {**config, "configurable": configurable}


def _inward(
    name: str, token: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The inner saver's arguments for ``name``: this tenant's threads, tagged."""
    prefix = _prefix(token)
    first, *rest = args
    if name == "put":
        rest[1] = {**rest[1], TENANT_TAG: token}
    if name == "delete_thread":
        first = prefix + str(first)
    elif name == "prune":
        first = [prefix + str(t) for t in first]
    elif name != "delete_for_runs":
        # Run-id tokens are the tenant's own (its blind-index key): no other tenant's match.
        first = _in(first, prefix)
    if name == "list":
        kwargs = {**kwargs, "before": _in(kwargs.get("before"), prefix)}
        if first is None:  # every thread: the tenant's own, by its tag
            kwargs["filter"] = {**(kwargs.get("filter") or {}), TENANT_TAG: token}
    return (first, *rest), kwargs


def _outward(name: str, result: Any, token: str) -> Any:
    """What the inner saver returned, as this tenant sees it; a row of another is refused."""
    if result is None or name not in ("get_tuple", "put"):
        return result
    if name == "put":
        return _out(result, _prefix(token))
    parent = result.parent_config
    return result._replace(
        config=_out(result.config, _prefix(token)),
        parent_config=None if parent is None else _out(parent, _prefix(token)),
    )


def _forwarded(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def call(self: TenantInner, *args: Any, **kwargs: Any) -> Any:
        token = self._tag()
        args, kwargs = _inward(name, token, args, kwargs)
        return _outward(name, getattr(self.inner, name)(*args, **kwargs), token)

    async def acall(self: TenantInner, *args: Any, **kwargs: Any) -> Any:
        token = await self._atag()
        args, kwargs = _inward(name, token, args, kwargs)
        return _outward(name, await getattr(self.inner, "a" + name)(*args, **kwargs), token)

    return call, acall


# ``prune`` and ``delete_for_runs`` are forwarded even where the inner saver lacks them: the
# scoped saver offers them only where it has them (SealedSaver's variants).
for _name in ("get_tuple", "put", "put_writes", "delete_thread", "prune", "delete_for_runs"):
    _call, _acall = _forwarded(_name)
    setattr(TenantInner, _name, _call)
    setattr(TenantInner, "a" + _name, _acall)
