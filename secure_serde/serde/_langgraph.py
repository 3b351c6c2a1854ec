"""Every private langgraph name secure_serde depends on, in one place.

One package is touched, langgraph-checkpoint, capped below its next major
version in pyproject.toml (tests/serde/test_langgraph_private.py checks the cap):
JsonPlus's msgpack internals (ext codes, the encoder's default hook, the
reconstruction fallback, its once-per-type warning sets), ``_DeltaSnapshot``,
and the virtual-subclass registration that lets
``BaseCheckpointSaver.with_allowlist`` reach our wrappers. The savers are
wrapped through langgraph's public API only.

Code elsewhere reaches these names only through this module.
tests/serde/test_langgraph_private*.py pin each name (it exists and behaves as we
assume), so an upgrade that moves or changes one fails there, loudly,
instead of silently losing the msgpack allowlist or a delta snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

from langgraph.checkpoint.serde import _msgpack as _lg_msgpack
from langgraph.checkpoint.serde import jsonplus as _jsonplus
from langgraph.checkpoint.serde.event_hooks import emit_serde_event
from langgraph.checkpoint.serde.jsonplus import (
    JsonPlusSerializer,
    _msgpack_default,
    _option,
    _reconstruction_fallback,
    _send_from_args,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot

DeltaSnapshot = _DeltaSnapshot
EXT_CONSTRUCTOR_KW_ARGS: Final[int] = _jsonplus.EXT_CONSTRUCTOR_KW_ARGS
EXT_CONSTRUCTOR_POS_ARGS: Final[int] = _jsonplus.EXT_CONSTRUCTOR_POS_ARGS
EXT_CONSTRUCTOR_SINGLE_ARG: Final[int] = _jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG
EXT_DELTA_SNAPSHOT: Final[int] = _jsonplus.EXT_DELTA_SNAPSHOT
EXT_METHOD_SINGLE_ARG: Final[int] = _jsonplus.EXT_METHOD_SINGLE_ARG
EXT_NUMPY_ARRAY: Final[int] = _jsonplus.EXT_NUMPY_ARRAY
EXT_PYDANTIC_V1: Final[int] = _jsonplus.EXT_PYDANTIC_V1
EXT_PYDANTIC_V2: Final[int] = _jsonplus.EXT_PYDANTIC_V2


# --- the allowlist dispatch of BaseCheckpointSaver.with_allowlist ---------------------------


def register_allowlist_wrapper(cls: type[Any]) -> None:
    """Let ``BaseCheckpointSaver.with_allowlist`` reach through our wrappers.

    Under ``LANGGRAPH_STRICT_MSGPACK``, compiling a graph derives a msgpack
    allowlist from the state schema and hands it, through
    ``_internal._serde.apply_checkpointer_allowlist``, to the checkpointer's
    ``with_allowlist``. Its private ``_with_msgpack_allowlist`` calls
    ``with_msgpack_allowlist`` only on an ``isinstance(serde,
    JsonPlusSerializer)`` or on langgraph's own ``EncryptedSerializer``
    (rebuilt as that base class); anything else is logged as "does not
    support msgpack allowlist" and the graph's types go silently unenforced.
    ``JsonPlusSerializer`` is an ABC (through ``typing.Protocol``), so a
    registered virtual subclass passes that check without inheriting any of
    its code. ``cls`` must implement ``with_msgpack_allowlist`` and apply it
    to the serializer it wraps.

    No narrower hook exists (langgraph 1.2, langgraph-checkpoint 4.3): every
    stock saver inherits ``with_allowlist`` and those two checks. The
    alternatives are worse: inheriting JsonPlus inherits its encode/decode
    paths and whole-object pickle fallback; subclassing langgraph's
    ``EncryptedSerializer`` gets us rebuilt as the base class on every call;
    overriding ``with_allowlist`` covers only our own savers; ``abc`` cannot
    undo a registration, so none can be scoped; a custom ``__class__`` or
    metaclass would fool every other type check too. The cost is that
    ``isinstance(x, JsonPlusSerializer)`` is true for our wrappers
    process-wide; the only such checks in the installed langgraph and
    langchain are the two above, and tests/serde/test_langgraph_private.py
    parses every installed module that names ``JsonPlusSerializer`` and
    fails on a new one.
    """
    JsonPlusSerializer.register(cls)


# --- JsonPlus's msgpack encoding, which the pickle fallback builds on -----------------------
# (secure_serde.pickling). The ext codes and payload layouts are pinned by
# tests/serde/test_langgraph_private_pickle.py against JsonPlus's own output.

MSGPACK_OPTION: Final[int] = _option
SAFE_MSGPACK_TYPES: Final[frozenset[tuple[str, ...]]] = _lg_msgpack.SAFE_MSGPACK_TYPES
# (module, name, method) triples strict msgpack may call (``datetime.fromisoformat``);
# the strict decoder (secure_serde/serde/_strict.py) admits exactly these.
SAFE_MSGPACK_METHODS: Final[frozenset[tuple[str, str, str]]] = _lg_msgpack.SAFE_MSGPACK_METHODS
msgpack_default: Final[Callable[[Any], Any]] = _msgpack_default
reconstruction_fallback: Final[Callable[[Any, Exception], Any]] = _reconstruction_fallback
send_from_args: Final[Callable[[Any], Any]] = _send_from_args

Allowlist = set[tuple[str, ...]] | Literal[True] | None


def unpack_ext_hook(serde: JsonPlusSerializer) -> Callable[[int, bytes], Any]:
    """The msgpack ext hook ``serde`` decodes with (its allowlist, or a custom hook)."""
    hook: Callable[[int, bytes], Any] = serde._unpack_ext_hook
    return hook


def msgpack_allowlist(serde: JsonPlusSerializer) -> Allowlist:
    """``serde``'s msgpack allowlist: a set of (module, name), ``True`` (all, warned) or None."""
    return serde._allowed_msgpack_modules


def msgpack_type_allowed(allowlist: Allowlist, module: str, name: str) -> bool:
    """JsonPlus's check before it rebuilds ``module.name`` on read, with its events and warnings.

    JsonPlus's own check is ``_check_allowed``, a closure inside the private
    ``_create_msgpack_ext_hook`` that nothing outside can call, so this is
    its copy, kept to the decision alone. What it reports is langgraph's,
    not a copy: the serde events go through the public ``emit_serde_event``,
    the warnings through JsonPlus's own ``_warn_once``, its once-per-type sets
    and its logger, so a type JsonPlus already warned about is not warned
    about again. tests/serde/test_langgraph_private_pickle.py decodes the same values
    through both and compares events, warnings and results.
    """
    key = (module, name)
    if key in SAFE_MSGPACK_TYPES:
        return True
    if allowlist is True:
        emit_serde_event({"kind": "msgpack_unregistered_allowed", "module": module, "name": name})
        _jsonplus._warn_once(
            _jsonplus._warned_unregistered_types,
            key,
            "Deserializing unregistered type %s.%s from checkpoint. "
            "This will be blocked in a future version. "
            "Set LANGGRAPH_STRICT_MSGPACK=true to block now, or add "
            "to allowed_msgpack_modules to allow explicitly: [(%r, %r)]",
            *key,
            *key,
        )
        return True
    if allowlist is not None and key in allowlist:
        return True
    emit_serde_event({"kind": "msgpack_blocked", "module": module, "name": name})
    _jsonplus._warn_once(
        _jsonplus._warned_blocked_types,
        key,
        "Blocked deserialization of %s.%s - not in allowed_msgpack_modules. "
        "Add to allowed_msgpack_modules to allow: [(%r, %r)]",
        *key,
        *key,
    )
    return False
