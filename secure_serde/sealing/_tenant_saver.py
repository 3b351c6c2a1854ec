"""`SealedSaver(inner, serde=..., tenant_keys=...)`: each call run by its tenant's saver.

A call's tenant comes from its config (``configurable.tenant_id``, or the
``tenant=`` callable); ``saver.for_tenant(tenant)`` runs it: a `SealedSaver`
whose asks of the inner saver its `TenantSealer` translates to the tenant's
rows, and which seals under the tenant's binding and keys. Calls that carry
no config are refused on the routing saver (docs/tenants.md).
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections import OrderedDict
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from secure_serde._errors import ConfigurationError, TenantRequiredError
from secure_serde.sealing import _saver_plans as plans
from secure_serde.sealing._codec import Sealer
from secure_serde.sealing._identity import StoreIdentity
from secure_serde.sealing._saver import _VARIANTS, SealedSaver, register_tenant_variant
from secure_serde.sealing._tenant_inner import TenantSealer
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


class _Scoped(SealedSaver):
    """A `SealedSaver` bound to one tenant (``for_tenant``); a config naming another is refused."""

    _root: _Routing
    _tenant: str

    def __repr__(self) -> str:
        return f"SealedSaver({type(self.inner).__name__}, tenant={self._tenant!r})"

    @property
    def tenant_id(self) -> str:
        return self._tenant

    def for_tenant(self, tenant_id: str) -> SealedSaver:
        return self._root.for_tenant(tenant_id)

    def _target(self, config: RunnableConfig | None, name: str) -> Any:
        """SealedSaver's own ``name`` on this saver, once ``config`` names no other tenant."""
        named = None if config is None else self._root._tenant_named(config)
        if named is not None and named != self._tenant:
            raise TenantRequiredError(
                f"a config naming tenant {named!r} was passed to the saver of tenant"
                f" {self._tenant!r}"
            )
        return getattr(SealedSaver, name).__get__(self)

    def _ready(self) -> Sealer:
        if self._sealer is None:
            self._sealer = self._sealer_for(self._root._ready().identity)
        return self._sealer

    async def _aready(self) -> Sealer:
        if self._sealer is None:
            self._sealer = self._sealer_for((await self._root._aready()).identity)
        return self._sealer

    def _sealer_for(self, identity: StoreIdentity) -> Sealer:
        sealing = (self._encrypting, identity, self._indexed, self._plaintext)
        return TenantSealer(*sealing, self._root._keys, self._tenant)

    def _answer(self, ask: tuple[Any, ...]) -> Any:
        if ask == plans.READY:
            return self._ready()
        sealer = cast(TenantSealer, self._ready())
        return plans.answered(ask, sealer.outward(ask, super()._answer(sealer.inward(ask))))

    async def _aanswer(self, ask: tuple[Any, ...]) -> Any:
        if ask == plans.READY:
            return await self._aready()
        sealer = cast(TenantSealer, await self._aready())
        answer = await super()._aanswer(sealer.inward(ask))
        return plans.answered(ask, sealer.outward(ask, answer))


_NO_CONFIG: Final = (
    "{method} carries no config, so no tenant: call it on saver.for_tenant(tenant_id)"
)


class _Routing(SealedSaver):
    """What ``SealedSaver(inner, serde=..., tenant_keys=...)`` is: every call, to its tenant."""

    TENANT_ROUTING: Final = True

    _keys: TenantKeys
    _scopes: OrderedDict[str, SealedSaver]
    _scopes_lock: threading.Lock

    def __init__(self, inner: BaseCheckpointSaver[Any], **kwargs: Any) -> None:
        keys, tenant = kwargs.get("tenant_keys"), kwargs.get("tenant")
        if not isinstance(keys, TenantKeys):
            raise ConfigurationError(
                "tenant_keys= takes secure_serde.TenantKeys.open(LOCATION), not"
                f" {type(keys).__name__}"
            )
        if tenant is not None and not callable(tenant):
            raise ConfigurationError("tenant= takes a callable from the config to a tenant id")
        super().__init__(inner, **kwargs)
        self._keys = keys
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
        if self._tenant_of is not None:
            value = self._tenant_of(config)
        else:
            value = (config.get("configurable") or {}).get("tenant_id")
        if value is None or value == "":
            return None
        return _resolved(value, "the config")

    def _target(self, config: RunnableConfig | None, name: str) -> Any:
        method = name.lstrip("_") + ("(None)" if name.endswith("list") else "")
        if config is None:
            raise TenantRequiredError(_NO_CONFIG.format(method=method))
        named = self._tenant_named(config)
        if named is None:
            _resolved(None, f"the config passed to {method}")
        return getattr(self.for_tenant(cast(str, named)), name)

    def for_tenant(self, tenant_id: str) -> SealedSaver:
        """This saver, bound to one tenant: every method, including those without a config."""
        tenant = _resolved(tenant_id, "for_tenant's argument")
        with self._scopes_lock:
            scoped = self._scopes.pop(tenant, None)
            if scoped is None:
                key = (overrides(self.inner, "prune"), overrides(self.inner, "delete_for_runs"))
                scoped = _SCOPED_VARIANTS[key](
                    self.inner,
                    serde=self._encrypting,
                    indexed_metadata=self._indexed,
                    plaintext_metadata=self._plaintext,
                )
                # The tenant's saver holds the same keys: whatever refuses a tenant-keyed
                # saver (reindex) refuses it too.
                scoped._root, scoped._tenant, scoped._tenant_keys = self, tenant, self._keys
            self._scopes[tenant] = scoped  # now the most recently used
            while len(self._scopes) > _MAX_SCOPES:
                self._scopes.popitem(last=False)
        return scoped

    def with_allowlist(self, extra_allowlist: Any) -> SealedSaver:
        clone = super().with_allowlist(extra_allowlist)
        if clone is not self and isinstance(clone, _Routing):
            clone._scopes = OrderedDict()
            clone._scopes_lock = threading.Lock()
        return clone


# SealedSaver's calls that carry a config run on the saver ``_target`` picks for it; on the
# routing saver, those that carry none are refused (``_target`` given no config).
_CONFIG_CALLS: Final = (
    "get_tuple", "list", "put", "put_writes", "get_delta_channel_history",
    "aget_tuple", "alist", "aput", "aput_writes", "aget_delta_channel_history",
)  # fmt: skip
_NO_CONFIG_CALLS: Final = (
    "delete_thread", "adelete_thread", "copy_thread", "acopy_thread",
    "_prune", "_aprune", "_delete_for_runs", "_adelete_for_runs",
)  # fmt: skip


def _per_tenant(name: str) -> Any:
    method = getattr(SealedSaver, name)
    with_config = name in _CONFIG_CALLS

    def config_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not with_config:
            return None
        return kwargs["config"] if "config" in kwargs else args[0]

    if inspect.iscoroutinefunction(method):

        async def run_async(self: _Scoped | _Routing, *args: Any, **kwargs: Any) -> Any:
            return await self._target(config_of(args, kwargs), name)(*args, **kwargs)

        return functools.wraps(method)(run_async)

    def run(self: _Scoped | _Routing, *args: Any, **kwargs: Any) -> Any:
        return self._target(config_of(args, kwargs), name)(*args, **kwargs)

    return functools.wraps(method)(run)


for _call in (*_CONFIG_CALLS, *_NO_CONFIG_CALLS):
    setattr(_Routing, _call, _per_tenant(_call))
    if _call in _CONFIG_CALLS:
        setattr(_Scoped, _call, _per_tenant(_call))

_ROUTING_VARIANTS: Final = {
    key: cast(type[SealedSaver], type("SealedSaver", (_Routing, base), {}))
    for key, base in _VARIANTS.items()
}
_SCOPED_VARIANTS: Final = {
    key: cast(type[_Scoped], type("SealedSaver", (_Scoped, base), {}))
    for key, base in _VARIANTS.items()
}


def tenant_variant(inner: BaseCheckpointSaver[Any]) -> type[SealedSaver]:
    return _ROUTING_VARIANTS[(overrides(inner, "prune"), overrides(inner, "delete_for_runs"))]


register_tenant_variant(tenant_variant)
