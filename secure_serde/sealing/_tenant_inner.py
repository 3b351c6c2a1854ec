"""One tenant's scope inside a sealed store: its rows, its binding and its keys (`TenantSealer`).

The inner saver stores the tenant's thread ``t`` as ``"sst1:" + token + ":" + t``,
the token a keyed hash of the tenant id. `TenantSealer` seals under the tenant's keys
and binds every value to `tenant_store_id`.
"""

from __future__ import annotations

import string
import struct
from collections import OrderedDict
from collections.abc import Collection
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from secure_serde._errors import BindingError
from secure_serde.ciphers import SealingCipher
from secure_serde.sealing._codec import Sealer
from secure_serde.sealing._identity import StoreIdentity
from secure_serde.sealing._index import TOKEN_PREFIX, BlindIndex
from secure_serde.sealing._saver_plans import Ask, inner_call
from secure_serde.sealing._tenants import TenantKeys
from secure_serde.serde import EncryptedSerializer

__all__ = ["TenantSealer", "tenant_prefix", "tenant_store_id", "tenant_thread_prefix"]


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
    """A `Sealer` whose every thread is sealed under that thread's own key.

    It also translates a `SealedSaver` plan's asks of the inner saver
    (``inward``) and their answers (``outward``) to this tenant's threads: ids
    prefixed on the way in, checked and stripped on the way out.
    """

    __slots__ = ("_keys", "_serdes", "_tenant", "prefix", "token")

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
        self.token = identity.index.token(TENANT_TAG, tenant)  # under the store's index key
        self.prefix = _prefix(self.token)
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

    def own(self, found: CheckpointTuple) -> CheckpointTuple:
        """A row read from the inner saver, as this tenant sees it.

        Raises:
            BindingError: the row is outside this tenant's threads.
        """
        parent = found.parent_config
        return found._replace(
            config=_out(found.config, self.prefix),
            parent_config=None if parent is None else _out(parent, self.prefix),
        )

    def inward(self, ask: Ask) -> Ask:
        """A plan's ask of the inner saver, for this tenant's threads only (tagged)."""
        _, name, args, kwargs = inner_call(ask)
        first, *rest = args
        if name == "put":
            rest[1] = {**rest[1], TENANT_TAG: self.token}
        if name == "delete_thread":
            first = self.prefix + str(first)
        elif name == "prune":
            first = [self.prefix + str(t) for t in first]
        elif name != "delete_for_runs":
            # Run-id tokens are the tenant's own (its blind-index key): no other tenant's match.
            first = _in(first, self.prefix)
        if name == "list":
            kwargs = {**kwargs, "before": _in(kwargs.get("before"), self.prefix)}
            if first is None:  # every thread: the tenant's own, by its tag
                kwargs["filter"] = {**(kwargs.get("filter") or {}), TENANT_TAG: self.token}
        # A read and a listing stay what they are: their decode failures are typed.
        if ask[0] == "read":
            return ("read", first)
        if ask[0] == "rows":
            return ("rows", first, kwargs)
        return ("call", name, (first, *rest), kwargs)

    def outward(self, ask: Ask, answer: Any) -> Any:
        """The inner saver's answer as this tenant sees it; a row of another is refused."""
        name = inner_call(ask)[1]
        if answer is None:
            return None
        if name == "list":
            return [self.own(found) for found in answer]
        if name == "get_tuple":
            return self.own(answer)
        return _out(answer, self.prefix) if name == "put" else answer


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
