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

import functools
import inspect
import threading
from collections import OrderedDict
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from secure_serde._errors import ConfigurationError, TenantRequiredError
from secure_serde.sealing._codec import Sealer
from secure_serde.sealing._identity import StoreIdentity
from secure_serde.sealing._saver import _VARIANTS, SealedSaver, register_tenant_variant
from secure_serde.sealing._tenant_inner import TenantInner, TenantSealer
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
        return f"SealedSaver({type(self._root.inner).__name__}, tenant={self._tenant!r})"

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
        sealer = self._sealer
        if sealer is None:
            sealer = self._sealer = self._sealer_for(self._root._ready().identity)
        return sealer

    async def _aready(self) -> Sealer:
        sealer = self._sealer
        if sealer is None:
            sealer = self._sealer = self._sealer_for((await self._root._aready()).identity)
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

    # Every call that carries a config checks it first: see _CONFIG_CALLS below.


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
        method = f"{name}(None)" if name.endswith("list") else name  # a list with no config
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
            scoped = self._scopes.get(tenant)
            if scoped is not None:
                self._scopes.move_to_end(tenant)
                return scoped
        key = (overrides(self.inner, "prune"), overrides(self.inner, "delete_for_runs"))
        adapter = TenantInner(self, tenant)
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

    # Calls with a config run on their tenant's saver (_CONFIG_CALLS below); the others
    # are refused (_refused below).


# SealedSaver's calls that carry a config, wrapped below for both savers of this module.
_CONFIG_CALLS: Final = (
    "get_tuple", "list", "put", "put_writes", "get_delta_channel_history",
    "aget_tuple", "alist", "aput", "aput_writes", "aget_delta_channel_history",
)  # fmt: skip


def _config_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return kwargs["config"] if "config" in kwargs else args[0]


def _per_tenant(name: str) -> Any:
    """SealedSaver's ``name``, run by the saver ``self._target`` picks for the call's config."""
    method = getattr(SealedSaver, name)
    if inspect.iscoroutinefunction(method):

        async def run_async(self: _Scoped | _Routing, *args: Any, **kwargs: Any) -> Any:
            return await self._target(_config_of(args, kwargs), name)(*args, **kwargs)

        return functools.wraps(method)(run_async)

    def run(self: _Scoped | _Routing, *args: Any, **kwargs: Any) -> Any:
        return self._target(_config_of(args, kwargs), name)(*args, **kwargs)

    return functools.wraps(method)(run)


for _call in _CONFIG_CALLS:
    setattr(_Scoped, _call, _per_tenant(_call))
    setattr(_Routing, _call, _per_tenant(_call))


def _refused(method: str) -> Any:
    """SealedSaver's ``method`` for the routing saver: no config names a tenant, so refused."""
    message = _NO_CONFIG.format(method=method.lstrip("_"))
    if method.lstrip("_").startswith("a"):

        async def refused_async(self: _Routing, *args: Any, **kwargs: Any) -> None:
            raise TenantRequiredError(message)

        return refused_async

    def refused(self: _Routing, *args: Any, **kwargs: Any) -> None:
        raise TenantRequiredError(message)

    return refused


for _call in (
    "delete_thread", "adelete_thread", "copy_thread", "acopy_thread",
    "_prune", "_aprune", "_delete_for_runs", "_adelete_for_runs",
):  # fmt: skip
    setattr(_Routing, _call, _refused(_call))


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
    return _ROUTING_VARIANTS[(overrides(inner, "prune"), overrides(inner, "delete_for_runs"))]


register_tenant_variant(tenant_variant)
