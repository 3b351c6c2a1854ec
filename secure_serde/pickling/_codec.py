"""JsonPlus's msgpack encoding, with allowed values pickled one by one where they stand.

JsonPlus encodes a container's contents with its own hook, which knows
nothing of pickles, so its container types are laid out here in exactly its
ext codes and payloads. Ours are `EXT_PICKLE` (80), one pickle, and
`EXT_NESTED` (81): a container holding a pickle, as JsonPlus's code byte and
payload, rebuilt here as JsonPlus's hook would (allowlist, events, warnings
and fallbacks), since that hook cannot read the pickles. Every other code
decodes through JsonPlus; ``_DeltaSnapshot`` keeps its code 7.
tests/serde/test_langgraph_private_pickle.py pins both directions against
JsonPlus. A value holding a pickle is tagged `TAG`, which plain JsonPlus
refuses rather than reading the pickles as None.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import importlib
import ipaddress
import pathlib
import re
import uuid
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import ormsgpack
from langgraph.checkpoint.serde.types import SendProtocol
from langgraph.store.base import Item

from secure_serde._errors import (
    DecryptionError,
    ForbiddenGlobalError,
    PickleNotAllowedError,
    SecureSerdeError,
    UnsafePickleError,
)
from secure_serde.pickling import _unpickler
from secure_serde.pickling._scan import Admission
from secure_serde.pickling._verdicts import ScanVerdicts
from secure_serde.serde import CONSTRUCTORS
from secure_serde.serde import langgraph_internals as lg

EXT_PICKLE: Final = 80
EXT_NESTED: Final = 81
TAG: Final = "msgpack+pickle"
# Types JsonPlus encodes whole, whose contents cannot hold a pickle.
_LEAVES: Final = (pathlib.Path, re.Pattern, uuid.UUID, decimal.Decimal)
_LATE_LEAVES: Final = (
    ipaddress.IPv4Address, ipaddress.IPv4Interface, ipaddress.IPv4Network, ipaddress.IPv6Address,
    ipaddress.IPv6Interface, ipaddress.IPv6Network, datetime.datetime, datetime.timedelta,
    datetime.date,
)  # fmt: skip


@dataclass(frozen=True)
class Policy:
    """What may be pickled (``direct``: always; ``fallback``: when JsonPlus cannot) and read."""

    direct: frozenset[type]
    fallback: frozenset[type]
    admission: Admission
    prepare: dict[type, Callable[[Any], Any]] = field(default_factory=dict, compare=False)
    verdicts: ScanVerdicts = field(default_factory=ScanVerdicts, compare=False)


def _names(obj: Any) -> tuple[str, str]:
    return obj.__class__.__module__, obj.__class__.__name__


def container_payload(obj: Any) -> tuple[int, tuple[Any, ...]] | None:  # noqa: C901 - JsonPlus's _msgpack_default order, branch for branch (pinned by a test)
    """JsonPlus's ext code and payload for a container, or None for a leaf.

    In ``_msgpack_default``'s order, so a model that is also a dataclass takes the same branch.
    """
    # Messages are pydantic models, by far the most common container: no helper calls.
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump):
        cls = obj.__class__
        dumped = (cls.__module__, cls.__name__, model_dump(), "model_validate_json")
        return lg.EXT_PYDANTIC_V2, dumped
    if callable(getattr(obj, "get_secret_value", None)):
        return lg.EXT_CONSTRUCTOR_SINGLE_ARG, (*_names(obj), obj.get_secret_value())
    if callable(getattr(obj, "dict", None)):
        return lg.EXT_PYDANTIC_V1, (*_names(obj), obj.dict())
    if callable(getattr(obj, "_asdict", None)):
        return lg.EXT_CONSTRUCTOR_KW_ARGS, (*_names(obj), obj._asdict())
    if isinstance(obj, _LEAVES):
        return None
    if isinstance(obj, (set, frozenset, collections.deque)):
        return lg.EXT_CONSTRUCTOR_SINGLE_ARG, (*_names(obj), tuple(obj))
    if isinstance(obj, _LATE_LEAVES):
        return None
    if isinstance(obj, datetime.time):
        fields = ("hour", "minute", "second", "microsecond", "tzinfo", "fold")
        return lg.EXT_CONSTRUCTOR_KW_ARGS, (*_names(obj), {f: getattr(obj, f) for f in fields})
    if isinstance(obj, (datetime.timezone, zoneinfo.ZoneInfo)):
        return None
    if isinstance(obj, enum.Enum):
        return lg.EXT_CONSTRUCTOR_SINGLE_ARG, (*_names(obj), obj.value)
    if isinstance(obj, SendProtocol):
        timeout = getattr(obj, "timeout", None)
        args = (obj.node, obj.arg) if timeout is None else (obj.node, obj.arg, timeout)
        return lg.EXT_CONSTRUCTOR_POS_ARGS, (*_names(obj), args)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields_ = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return lg.EXT_CONSTRUCTOR_KW_ARGS, (*_names(obj), fields_)
    if isinstance(obj, Item):
        slots = {k: getattr(obj, k) for k in obj.__slots__}
        return lg.EXT_CONSTRUCTOR_KW_ARGS, (*_names(obj), slots)
    return None


def _not_allowed(cls: type, reason: str, how: str) -> PickleNotAllowedError:
    name = f"{cls.__module__}.{cls.__qualname__}"
    return PickleNotAllowedError(f"refusing to pickle {name}: {reason}. {how}", type_name=name)


class _Encoder:
    """One ``dumps``: ormsgpack drops whatever ``default`` raises, so the first error waits here."""

    __slots__ = ("_policy", "error", "pickles")

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self.error: BaseException | None = None
        self.pickles = 0

    def encode(self, obj: Any) -> bytes:
        return ormsgpack.packb(obj, default=self._default, option=lg.MSGPACK_OPTION)

    def _default(self, obj: Any) -> Any:
        try:
            cls = type(obj)
            if cls in self._policy.direct:
                return self._pickle(obj)
            if isinstance(obj, lg.DeltaSnapshot):
                return ormsgpack.Ext(lg.EXT_DELTA_SNAPSHOT, self.encode(obj.value))
            shape = container_payload(obj)
            if shape is not None:
                code, payload = shape
                before = self.pickles
                body = self.encode(payload)
                if self.pickles == before:
                    return ormsgpack.Ext(code, body)
                return ormsgpack.Ext(EXT_NESTED, bytes((code,)) + body)
            try:
                return lg.msgpack_default(obj)
            except TypeError:
                if cls in self._policy.fallback:
                    return self._pickle(obj)
            raise _not_allowed(
                cls,
                "msgpack cannot encode it and its type is not allowed",
                f"Allow it with PickleFallbackSerializer(allowed=[..., {cls.__module__}."
                f"{cls.__qualname__}]), or a preset (secure_serde.pickling.PANDAS, NUMPY).",
            )
        except BaseException as exc:
            if self.error is None:
                self.error = exc
            raise

    def _pickle(self, obj: Any) -> ormsgpack.Ext:
        prepare = self._policy.prepare.get(type(obj))
        try:
            data = _unpickler.dump(
                obj if prepare is None else prepare(obj),
                self._policy.admission,
                self._policy.verdicts,
            )
        except UnsafePickleError as exc:
            how = (
                f"Add ({exc.module!r}, {exc.name!r}) to allowed= (or allow the type that needs"
                " it) if you trust it."
                if isinstance(exc, ForbiddenGlobalError)
                else "This library does not write such pickles."
            )
            raise _not_allowed(
                type(obj), f"its pickle would be refused on read ({exc})", how
            ) from None
        except Exception as exc:
            raise _not_allowed(
                type(obj), f"pickle failed ({type(exc).__name__})", "Store it in another form."
            ) from exc
        self.pickles += 1
        return ormsgpack.Ext(EXT_PICKLE, data)


def encode(obj: Any, policy: Policy) -> tuple[str, bytes]:
    """Encode ``obj`` as JsonPlus would, pickling only the allowed values it cannot take."""
    encoder = _Encoder(policy)
    try:
        data = encoder.encode(obj)
    except TypeError:
        if encoder.error is not None:
            raise encoder.error from None
        raise
    return (TAG if encoder.pickles else "msgpack"), data


class _Decoder:
    """One ``loads``: pickles, snapshots and nested containers here, the rest to JsonPlus's hook."""

    __slots__ = ("_allowlist", "_inner_hook", "_policy", "error")

    def __init__(
        self, policy: Policy, inner_hook: Callable[[int, bytes], Any], allowlist: lg.Allowlist
    ) -> None:
        self._policy = policy
        self._inner_hook = inner_hook
        self._allowlist = allowlist
        self.error: BaseException | None = None

    def unpack(self, data: bytes) -> Any:
        return ormsgpack.unpackb(data, ext_hook=self._hook, option=ormsgpack.OPT_NON_STR_KEYS)

    def _hook(self, code: int, data: bytes) -> Any:
        try:
            if code == EXT_PICKLE:
                return _unpickler.load(data, self._policy.admission, self._policy.verdicts)
            if code == lg.EXT_DELTA_SNAPSHOT:
                return lg.DeltaSnapshot(self.unpack(data))
            if code == EXT_NESTED:
                if len(data) < 2 or data[0] not in CONSTRUCTORS:
                    raise DecryptionError("refusing a malformed nested value")
                return self._construct(data[0], self.unpack(data[1:]))
            return self._inner_hook(code, data)
        except BaseException as exc:
            if self.error is None:
                self.error = exc
            raise

    def _construct(self, code: int, tup: Any) -> Any:
        """Rebuild a container as JsonPlus's ext hook does, allowlist and fallbacks included."""
        if not (
            isinstance(tup, list) and len(tup) >= 3 and all(isinstance(p, str) for p in tup[:2])
        ):
            raise DecryptionError("refusing a malformed nested value")
        module, name, arg = tup[0], tup[1], tup[2]
        if not lg.msgpack_type_allowed(self._allowlist, module, name):
            return arg
        if code in (lg.EXT_PYDANTIC_V1, lg.EXT_PYDANTIC_V2):
            try:
                cls = getattr(importlib.import_module(module), name)
                try:
                    return cls(**arg)
                except Exception:  # noqa: BLE001 - JsonPlus's own fallback, mirrored exactly
                    fallback = "construct" if code == lg.EXT_PYDANTIC_V1 else "model_construct"
                    return getattr(cls, fallback)(**arg)
            except Exception:  # noqa: BLE001 - JsonPlus returns the kwargs here too (pinned)
                return arg
        try:
            if code == lg.EXT_CONSTRUCTOR_POS_ARGS and tup[:2] == ["langgraph.types", "Send"]:
                return lg.send_from_args(arg)
            cls = getattr(importlib.import_module(module), name)
            if code == lg.EXT_CONSTRUCTOR_SINGLE_ARG:
                return cls(arg)
            if code == lg.EXT_CONSTRUCTOR_POS_ARGS:
                return cls(*arg)
            return cls(**arg)
        except Exception as exc:  # noqa: BLE001 - langgraph's reconstruction_fallback decides
            return lg.reconstruction_fallback(tup, exc)


def decode(
    data: bytes, policy: Policy, inner_hook: Callable[[int, bytes], Any], allowlist: lg.Allowlist
) -> Any:
    """Decode a `TAG` payload written by `encode`, reading pickles as ``policy`` admits."""
    decoder = _Decoder(policy, inner_hook, allowlist)
    try:
        return decoder.unpack(data)
    except ValueError:
        # Our own refusals keep their type; anything else a hook raised (JsonPlus's
        # hook raises KeyError for some malformed ext payloads) is a malformed value.
        if isinstance(decoder.error, SecureSerdeError):
            raise decoder.error from None
        raise DecryptionError("refusing a malformed msgpack+pickle value") from None
