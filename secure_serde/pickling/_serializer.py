"""`PickleFallbackSerializer`: JsonPlus msgpack, with allowed values pickled one by one."""

from __future__ import annotations

import copy
import importlib
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde._errors import ConfigurationError, PickleRefusedError
from secure_serde.pickling import _codec
from secure_serde.pickling._presets import Preset, Rule, rules_for
from secure_serde.pickling._scan import Admission
from secure_serde.serde import is_authenticated, unvouched
from secure_serde.serde import langgraph_internals as lg

__all__ = ["PickleFallbackSerializer"]

logger = logging.getLogger("secure_serde")

_WHOLE_PICKLE: Final = "pickle"


def _kinds(
    pairs: Iterable[tuple[str, str]],
) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]:
    """The admitted globals that resolve here to data (``pandas.NA``), and to dict types."""
    data = set()
    mappings = set()
    with warnings.catch_warnings():
        # numpy 1's module names (numpy.core) still resolve, with a DeprecationWarning.
        warnings.simplefilter("ignore", DeprecationWarning)
        for module, name in pairs:
            try:
                target = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError):
                continue
            if not callable(target):
                data.add((module, name))
            elif isinstance(target, type) and issubclass(target, Mapping):
                mappings.add((module, name))
    return frozenset(data), frozenset(mappings)


def _policy(rules: Iterable[Rule]) -> _codec.Policy:
    direct: set[type] = set()
    fallback: set[type] = set()
    globals_: set[tuple[str, str]] = set()
    methods: set[tuple[str, str, str]] = set()
    uncallable: set[tuple[str, str]] = set()
    prepare: dict[type, Callable[[Any], Any]] = {}
    for rule in rules:
        (direct if rule.direct else fallback).update(rule.types)
        if rule.prepare is not None:
            prepare.update(dict.fromkeys(rule.types, rule.prepare))
        globals_ |= rule.globals
        methods |= rule.methods
        uncallable |= rule.uncallable
    return _codec.Policy(
        frozenset(direct),
        frozenset(fallback - direct),
        Admission(
            frozenset(globals_), frozenset(methods), frozenset(uncallable), *_kinds(globals_)
        ),
        prepare,
    )


class PickleFallbackSerializer:
    """JsonPlus's msgpack encoding; values it cannot encode are pickled on their own, if allowed.

    A value msgpack cannot encode is pickled by itself and embedded where it
    stands (msgpack ext code 80); the rest of the checkpoint stays msgpack,
    byte for byte what JsonPlus writes. A value whose type is not allowed
    raises `PickleNotAllowedError` and nothing is written. Pickles are read
    back with a restricted unpickler that resolves only the globals the
    allowed types need, and refuses anything else (`UnsafePickleError`,
    `ForbiddenGlobalError`) before any of it runs.

    Use it inside `EncryptedSerializer`: values holding a pickle get the type
    tag ``msgpack+pickle``, and are read only after the cipher authenticated
    that tag and the bytes. Anything else is refused with
    `PickleRefusedError` unless ``allow_unauthenticated=True``.

    Args:
        serde: the ``JsonPlusSerializer`` to build on (its decoding and msgpack
            allowlist); ``None`` means a fresh ``JsonPlusSerializer()``. It
            must not have ``pickle_fallback=True``.
        allowed: what may be pickled: `PANDAS` (DataFrame, Series, every
            Index, extension arrays, pandas scalars, and numpy), `NUMPY`
            (arrays of any dtype, scalars, dtypes), single types (a pandas or
            numpy type admits exactly the helpers its pickles need; any
            other type admits itself), and ``("module", "name")`` pairs
            admitting one more global. numpy arrays and pandas timestamps,
            which JsonPlus encodes lossily, are always pickled when allowed.
        allow_unauthenticated: read ``msgpack+pickle`` values without an
            authenticating layer around this serializer. Anyone who can write
            to the store can then make this process unpickle their bytes;
            the allowlist limits which code can run, not how much memory
            numpy may be asked to allocate. Only for stores nobody else can
            write.
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
        self._policy = _policy(rule for entry in entries for rule in rules_for(entry))
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
        if type_tag == _WHOLE_PICKLE:
            raise PickleRefusedError(
                "refusing a whole-value pickle row (JsonPlusSerializer(pickle_fallback=True));"
                " PickleFallbackSerializer reads only its own msgpack+pickle values"
            )
        return self._serde.loads_typed(data)

    def with_msgpack_allowlist(
        self, extra_allowlist: Iterable[tuple[str, ...] | type]
    ) -> PickleFallbackSerializer:
        """Apply a compiled graph's msgpack allowlist to the inner JsonPlusSerializer.

        Pickled values are governed by ``allowed=`` alone; returns ``self``
        when the inner serializer does not change.
        """
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
