"""`SealedSaver(inner, serde=..., tenant_keys=...)`: each call routed to its tenant's scope.

With ``tenant_keys``, `SealedSaver` builds the routing saver defined here.
Each call resolves its tenant from the config (``configurable.tenant_id``,
or the ``tenant=`` callable) and runs on ``saver.for_tenant(tenant)``, a
`SealedSaver` bound to that tenant: its own rows (`TenantInner`), its own
binding and its own keys (`TenantSealer`), as docs/tenants.md ("What each
tenant gets") describes. Calls that carry no config (``delete_thread``,
``copy_thread``, ``prune``, ``delete_for_runs``, ``list(None)``) are refused
with `TenantRequiredError` on the routing saver: make them on
``for_tenant(tenant_id)``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from secure_serde._errors import ConfigurationError, TenantRequiredError
from secure_serde._serializer import EncryptedSerializer
from secure_serde.sealing._codec import Sealer
from secure_serde.sealing._identity import StoreIdentity
from secure_serde.sealing._saver import _VARIANTS, SealedSaver, register_tenant_variant
from secure_serde.sealing._tenant_inner import INNER_VARIANTS, TenantSealer
from secure_serde.sealing._tenants import TenantKeys, check_tenant_id
from secure_serde.sealing._walks import overrides

__all__ = ["tenant_variant"]


_MAX_SCOPES: Final = 256


def _resolved(value: Any, how: str) -> str:
    if value is None or value == "":
        raise TenantRequiredError(
            f"this saver keys every checkpoint by tenant, and {how} names none: pass"
            ' config["configurable"]["tenant_id"] (or the tenant= callable\'s input), or'
            " call saver.for_tenant(tenant_id)"
        )
    if not isinstance(value, str):
        raise TenantRequiredError(f"a tenant id is a str, not {type(value).__name__}")
    return check_tenant_id(value)


# -- one tenant's saver ----------------------------------------------------------------------


class _Scoped(SealedSaver):
    """A `SealedSaver` bound to one tenant (``for_tenant``); a config naming another is refused."""

    _root: _Routing
    _tenant: str

    def __repr__(self) -> str:
        return f"SealedSaver({type(self._root.inner).__name__}, tenant={self._tenant!r})"

    @property
    def tenant_id(self) -> str:
        return self._tenant

    def for_tenant(self, tenant_id: str) -> SealedSaver:
        return self._root.for_tenant(tenant_id)

    def _check(self, config: RunnableConfig | None) -> None:
        if config is None:
            return
        named = self._root._tenant_named(config)
        if named is not None and named != self._tenant:
            raise TenantRequiredError(
                f"a config naming tenant {named!r} was passed to the saver of tenant"
                f" {self._tenant!r}"
            )

    def _ready(self) -> Sealer:
        sealer = self._sealer
        if sealer is None:
            identity = self._root._ready().identity
            sealer = self._sealer = self._sealer_for(identity)
        return sealer

    async def _aready(self) -> Sealer:
        sealer = self._sealer
        if sealer is None:
            identity = (await self._root._aready()).identity
            sealer = self._sealer = self._sealer_for(identity)
        return sealer

    def _sealer_for(self, identity: StoreIdentity) -> Sealer:
        return TenantSealer(
            self._encrypting,
            identity,
            self._indexed,
            self._plaintext,
            self._root._keys,
            self._tenant,
        )

    def setup(self) -> None:
        self._root.setup()

    async def asetup(self) -> None:
        await self._root.asetup()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._check(config)
        return super().get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        self._check(config)
        return super().list(config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._check(config)
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._check(config)
        super().put_writes(config, writes, task_id, task_path)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        self._check(config)
        return super().get_delta_channel_history(config=config, channels=channels)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._check(config)
        return await super().aget_tuple(config)

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        self._check(config)
        return super().alist(config, filter=filter, before=before, limit=limit)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._check(config)
        return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._check(config)
        await super().aput_writes(config, writes, task_id, task_path)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        self._check(config)
        return await super().aget_delta_channel_history(config=config, channels=channels)


# -- the routing saver -------------------------------------------------------------------------

_NO_CONFIG: Final = (
    "{method} carries no config, so no tenant: call it on saver.for_tenant(tenant_id)"
)


class _Routing(SealedSaver):
    """What ``SealedSaver(inner, serde=..., tenant_keys=...)`` is: every call, to its tenant."""

    TENANT_ROUTING: Final = True

    _keys: TenantKeys
    _scopes: OrderedDict[str, SealedSaver]
    _scopes_lock: threading.Lock

    def __init__(  # noqa: PLR0913 - SealedSaver's public constructor
        self,
        inner: BaseCheckpointSaver[Any],
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Any = (),
        plaintext_metadata: Any = (),
        tenant_keys: Any = None,
        tenant: Callable[[RunnableConfig], Any] | None = None,
    ) -> None:
        if not isinstance(tenant_keys, TenantKeys):
            raise ConfigurationError(
                "tenant_keys= takes secure_serde.TenantKeys.open(LOCATION), not"
                f" {type(tenant_keys).__name__}"
            )
        if tenant is not None and not callable(tenant):
            raise ConfigurationError("tenant= takes a callable from the config to a tenant id")
        super().__init__(
            inner,
            serde=serde,
            indexed_metadata=indexed_metadata,
            plaintext_metadata=plaintext_metadata,
            tenant_keys=tenant_keys,
            tenant=tenant,
        )
        self._keys = tenant_keys
        self._scopes = OrderedDict()
        self._scopes_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"SealedSaver({type(self.inner).__name__}, serde={self._encrypting!r},"
            f" tenant_keys={self._keys!r})"
        )

    @property
    def tenant_keys(self) -> TenantKeys:
        return self._keys

    def _tenant_named(self, config: RunnableConfig) -> str | None:
        """The tenant a config names, or ``None`` when it names none."""
        if self._tenant_of is not None:
            value = self._tenant_of(config)
        else:
            value = (config.get("configurable") or {}).get("tenant_id")
        if value is None or value == "":
            return None
        return _resolved(value, "the config")

    def _tenant_for(self, config: RunnableConfig | None, method: str) -> SealedSaver:
        if config is None:
            raise TenantRequiredError(_NO_CONFIG.format(method=method))
        named = self._tenant_named(config)
        if named is None:
            _resolved(None, f"the config passed to {method}")
        return self.for_tenant(cast(str, named))

    def for_tenant(self, tenant_id: str) -> SealedSaver:
        """This saver, bound to one tenant: every method, including those without a config."""
        tenant = _resolved(tenant_id, "for_tenant's argument")
        with self._scopes_lock:
            scoped = self._scopes.get(tenant)
            if scoped is not None:
                self._scopes.move_to_end(tenant)
                return scoped
        key = (overrides(self.inner, "prune"), overrides(self.inner, "delete_for_runs"))
        adapter = INNER_VARIANTS[key](self, tenant)
        made = _SCOPED_VARIANTS[key](
            adapter,
            serde=self._encrypting,
            indexed_metadata=self._indexed,
            plaintext_metadata=self._plaintext,
        )
        made._root = self
        made._tenant = tenant
        with self._scopes_lock:
            scoped = self._scopes.setdefault(tenant, made)
            while len(self._scopes) > _MAX_SCOPES:
                self._scopes.popitem(last=False)
        return scoped

    def with_allowlist(self, extra_allowlist: Any) -> SealedSaver:
        clone = super().with_allowlist(extra_allowlist)
        if clone is not self and isinstance(clone, _Routing):
            clone._scopes = OrderedDict()
            clone._scopes_lock = threading.Lock()
        return clone

    # -- calls with a config: routed -------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._tenant_for(config, "get_tuple").get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        scoped = self._tenant_for(config, "list(None)")
        return scoped.list(config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._tenant_for(config, "put").put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._tenant_for(config, "put_writes").put_writes(config, writes, task_id, task_path)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        scoped = self._tenant_for(config, "get_delta_channel_history")
        return scoped.get_delta_channel_history(config=config, channels=channels)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._tenant_for(config, "aget_tuple").aget_tuple(config)

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        scoped = self._tenant_for(config, "alist(None)")
        return scoped.alist(config, filter=filter, before=before, limit=limit)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        scoped = self._tenant_for(config, "aput")
        return await scoped.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        scoped = self._tenant_for(config, "aput_writes")
        await scoped.aput_writes(config, writes, task_id, task_path)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        scoped = self._tenant_for(config, "aget_delta_channel_history")
        return await scoped.aget_delta_channel_history(config=config, channels=channels)

    # -- calls without a config: refused here ----------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        raise TenantRequiredError(_NO_CONFIG.format(method="delete_thread"))

    async def adelete_thread(self, thread_id: str) -> None:
        raise TenantRequiredError(_NO_CONFIG.format(method="adelete_thread"))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        raise TenantRequiredError(_NO_CONFIG.format(method="copy_thread"))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        raise TenantRequiredError(_NO_CONFIG.format(method="acopy_thread"))

    def _prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        raise TenantRequiredError(_NO_CONFIG.format(method="prune"))

    async def _aprune(self, thread_ids: Sequence[str], strategy: str) -> None:
        raise TenantRequiredError(_NO_CONFIG.format(method="aprune"))

    def _delete_for_runs(self, run_ids: Sequence[str]) -> None:
        raise TenantRequiredError(_NO_CONFIG.format(method="delete_for_runs"))

    async def _adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        raise TenantRequiredError(_NO_CONFIG.format(method="adelete_for_runs"))


def _named(cls: type[SealedSaver]) -> type[SealedSaver]:
    cls.__name__ = cls.__qualname__ = "SealedSaver"
    return cls


_ROUTING_VARIANTS: Final[dict[tuple[bool, bool], type[SealedSaver]]] = {
    key: _named(type("SealedSaver", (_Routing, base), {})) for key, base in _VARIANTS.items()
}
_SCOPED_VARIANTS: Final[dict[tuple[bool, bool], type[_Scoped]]] = {
    key: cast(type[_Scoped], _named(type("SealedSaver", (_Scoped, base), {})))
    for key, base in _VARIANTS.items()
}


def tenant_variant(inner: BaseCheckpointSaver[Any]) -> type[SealedSaver]:
    """The routing saver's class for ``inner`` (``prune``/``delete_for_runs`` where it has them)."""
    return _ROUTING_VARIANTS[(overrides(inner, "prune"), overrides(inner, "delete_for_runs"))]


register_tenant_variant(tenant_variant)
