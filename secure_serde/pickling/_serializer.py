"""`PickleFallbackSerializer`: JsonPlus msgpack, with allowed values pickled one by one."""

from __future__ import annotations

import copy
import importlib
import logging
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde._errors import ConfigurationError, PickleRefusedError
from secure_serde.pickling import _codec
from secure_serde.pickling._presets import Preset, Rule, rules_for
from secure_serde.pickling._scan import Admission
from secure_serde.serde import is_authenticated, unvouched
from secure_serde.serde import langgraph_internals as lg

logger = logging.getLogger("secure_serde")


def _policy(rules: tuple[Rule, ...]) -> _codec.Policy:
    direct = frozenset(t for rule in rules if rule.direct for t in rule.types)
    globals_ = frozenset(g for rule in rules for g in rule.globals)
    # The scan needs to know which admitted globals are data (pandas.NA) and which dict types.
    data, mappings = set(), set()
    with warnings.catch_warnings():
        # numpy 1's module names (numpy.core) still resolve, with a DeprecationWarning.
        warnings.simplefilter("ignore", DeprecationWarning)
        for module, name in globals_:
            try:
                target = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError):
                continue
            if not callable(target):
                data.add((module, name))
            elif isinstance(target, type) and issubclass(target, Mapping):
                mappings.add((module, name))
    admission = Admission(
        globals_,
        frozenset(m for rule in rules for m in rule.methods),
        frozenset(u for rule in rules for u in rule.uncallable),
        frozenset(data),
        frozenset(mappings),
    )
    fallback = frozenset(t for rule in rules for t in rule.types) - direct
    prepare = {t: rule.prepare for rule in rules if rule.prepare is not None for t in rule.types}
    return _codec.Policy(direct, fallback, admission, prepare)


class PickleFallbackSerializer:
    """JsonPlus's msgpack encoding; values it cannot encode are pickled on their own, if allowed.

    Each such value is pickled alone and embedded where it stands; the rest
    stays byte for byte what JsonPlus writes. A type not allowed raises
    `PickleNotAllowedError` and nothing is written. A value holding a pickle
    is tagged ``msgpack+pickle``, and read only after `EncryptedSerializer`'s
    cipher authenticated its tag and bytes, through the pickle scan and a
    restricted unpickler (docs/pickle.md, SECURITY.md).

    Args:
        serde: the ``JsonPlusSerializer`` to build on (its decoding and msgpack
            allowlist), not one with ``pickle_fallback=True``; ``None``: a new one.
        allowed: what may be pickled: `PANDAS` (pandas and numpy), `NUMPY`,
            single types (a pandas or numpy type admits exactly the helpers
            its pickles need, any other type itself), and ``("module",
            "name")`` pairs admitting one more global. Allowed numpy arrays and
            pandas timestamps, which JsonPlus encodes lossily, are always pickled.
        allow_unauthenticated: read ``msgpack+pickle`` values with no
            authenticating layer. Anyone who can write to the store can then
            make this process unpickle their bytes: the allowlist limits which
            code runs, not how much memory it asks for. Only for stores nobody
            else can write.
    """

    __slots__ = (
        "_allow_unauthenticated",
        "_allowed",
        "_allowlist",
        "_inner_hook",
        "_policy",
        "_serde",
    )

    def __init__(
        self,
        serde: JsonPlusSerializer | None = None,
        *,
        allowed: Iterable[type | Preset | tuple[str, str]] | Preset | type,
        allow_unauthenticated: bool = False,
    ) -> None:
        if serde is None:
            serde = JsonPlusSerializer()
        if JsonPlusSerializer not in type(serde).__mro__:
            raise ConfigurationError(
                f"PickleFallbackSerializer builds on a JsonPlusSerializer, not"
                f" {type(serde).__name__}; wrap it in EncryptedSerializer instead"
            )
        if serde.pickle_fallback:
            raise ConfigurationError(
                "the inner JsonPlusSerializer has pickle_fallback=True, which pickles whole"
                " checkpoints; pass one without it"
            )
        if isinstance(allowed, (Preset, type)):
            allowed = (allowed,)
        elif isinstance(allowed, (str, bytes)) or (
            isinstance(allowed, tuple) and len(allowed) == 2 and isinstance(allowed[0], str)
        ):
            raise ConfigurationError("allowed= takes a list, e.g. allowed=[PANDAS]")
        entries = tuple(allowed)
        self._policy = _policy(tuple(rule for entry in entries for rule in rules_for(entry)))
        self._allowed = entries
        self._serde = serde
        self._inner_hook = lg.unpack_ext_hook(serde)
        self._allowlist = lg.msgpack_allowlist(serde)
        self._allow_unauthenticated = allow_unauthenticated
        if allow_unauthenticated:
            logger.warning(
                "PickleFallbackSerializer(allow_unauthenticated=True): pickles are read from the"
                " store without authentication"
            )

    @property
    def serde(self) -> JsonPlusSerializer:
        return self._serde

    @property
    def admitted_globals(self) -> frozenset[tuple[str, str]]:
        """Every (module, name) a stored pickle may name."""
        return self._policy.admission.globals

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None or (
            isinstance(obj, (bytes, bytearray)) and type(obj) not in self._policy.direct
        ):
            return self._serde.dumps_typed(obj)
        return _codec.encode(obj, self._policy)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, payload = data
        if type_tag == _codec.TAG:
            if not (self._allow_unauthenticated or is_authenticated()):
                raise PickleRefusedError(
                    "refusing a msgpack+pickle value that no cipher authenticated: wrap this"
                    " serializer in secure_serde.EncryptedSerializer"
                    " (or pass allow_unauthenticated=True)"
                )
            return unvouched(
                _codec.decode, payload, self._policy, self._inner_hook, self._allowlist
            )
        if type_tag == "pickle":
            raise PickleRefusedError(
                "refusing a whole-value pickle row (JsonPlusSerializer(pickle_fallback=True));"
                " PickleFallbackSerializer reads only its own msgpack+pickle values"
            )
        return self._serde.loads_typed(data)

    def with_msgpack_allowlist(
        self, extra_allowlist: Iterable[tuple[str, ...] | type]
    ) -> PickleFallbackSerializer:
        """Apply a compiled graph's msgpack allowlist to the inner serializer (not to pickles)."""
        inner = self._serde.with_msgpack_allowlist(extra_allowlist)
        if inner is self._serde:
            return self
        clone = copy.copy(self)
        clone._serde = inner
        clone._inner_hook = lg.unpack_ext_hook(inner)
        clone._allowlist = lg.msgpack_allowlist(inner)
        return clone

    def __repr__(self) -> str:
        names = ", ".join(
            entry.name.upper()
            if isinstance(entry, Preset)
            else f"{entry.__module__}.{entry.__qualname__}"
            if isinstance(entry, type)
            else repr(entry)
            for entry in self._allowed
        )
        return f"PickleFallbackSerializer(allowed=[{names}])"


lg.register_allowlist_wrapper(PickleFallbackSerializer)
