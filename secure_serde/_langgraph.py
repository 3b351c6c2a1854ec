"""Every private langgraph name secure_serde depends on, in one place.

tests/test_langgraph_private.py pins each of them, so an upgrade that
moves or changes one fails there, loudly, instead of silently losing the
msgpack allowlist or a delta snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

from langgraph.checkpoint.serde import _msgpack as _lg_msgpack
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_DELTA_SNAPSHOT,
    EXT_METHOD_SINGLE_ARG,
    EXT_NUMPY_ARRAY,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
    _msgpack_default,
    _option,
    _reconstruction_fallback,
    _send_from_args,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot

__all__ = [
    "EXT_CONSTRUCTOR_KW_ARGS",
    "EXT_CONSTRUCTOR_POS_ARGS",
    "EXT_CONSTRUCTOR_SINGLE_ARG",
    "EXT_DELTA_SNAPSHOT",
    "EXT_METHOD_SINGLE_ARG",
    "EXT_NUMPY_ARRAY",
    "EXT_PYDANTIC_V1",
    "EXT_PYDANTIC_V2",
    "MSGPACK_OPTION",
    "SAFE_MSGPACK_METHODS",
    "SAFE_MSGPACK_TYPES",
    "DeltaSnapshot",
    "msgpack_allowlist",
    "msgpack_default",
    "reconstruction_fallback",
    "register_allowlist_wrapper",
    "send_from_args",
    "sqlite_has_task_path",
    "unpack_ext_hook",
]

# The sealed savers subclass langgraph-checkpoint-postgres and -sqlite (both
# capped below their next major version in pyproject.toml). The private hooks
# they override or read, each pinned by a test:
#
# * PostgreSQL (tests/savers/test_postgres_savers.py::test_pin_stock_hooks_we_override):
#   ``_dump_blobs``, ``_dump_writes``, ``_load_checkpoint_tuple``,
#   ``_build_delta_channels_writes_history``, ``_search_where`` and ``_cursor``,
#   by overriding them in secure_serde/savers/postgres.py and _postgres_base.py.
# * SQLite (tests/savers/test_sqlite_pins.py): the ``_has_task_path`` flag
#   that ``setup`` sets on read-only pre-task_path databases, read below.

DeltaSnapshot = _DeltaSnapshot


def register_allowlist_wrapper(cls: type[Any]) -> None:
    """Let ``BaseCheckpointSaver.with_allowlist`` reach through our wrappers.

    langgraph's private ``_with_msgpack_allowlist`` only calls
    ``with_msgpack_allowlist`` on objects that pass
    ``isinstance(serde, JsonPlusSerializer)``; anything else is logged as
    "does not support msgpack allowlist" and strict msgpack is silently not
    enforced. ``JsonPlusSerializer`` is an ABC (through ``typing.Protocol``),
    so registering a virtual subclass makes that check pass without
    inheriting any of its encoding code. ``cls`` must implement
    ``with_msgpack_allowlist`` and apply it to the serializer it wraps.

    Why there is no narrower hook (checked against langgraph-checkpoint
    4.3): the stock savers users pass ``serde=`` to (InMemorySaver,
    SqliteSaver, PostgresSaver) all inherit ``with_allowlist`` from
    ``BaseCheckpointSaver``, and it dispatches only on
    ``isinstance(serde, JsonPlusSerializer)`` or on langgraph's own
    ``EncryptedSerializer``; there is no protocol or duck-typed method to
    implement instead. The alternatives are worse: inheriting from
    ``JsonPlusSerializer`` would inherit its encode/decode paths (and its
    pickle fallback) under our type; subclassing langgraph's
    ``EncryptedSerializer`` gets the wrapper rebuilt as the base class on
    every allowlist call, dropping our behaviour; overriding
    ``with_allowlist`` covers only our own savers. The cost of the
    registration is that ``isinstance(x, JsonPlusSerializer)`` is true for
    our wrappers process-wide; the only such checks in langgraph and
    langchain-core are the two in ``_with_msgpack_allowlist``
    (tests/test_langgraph_private.py pins that), which then call
    ``with_msgpack_allowlist``, the one method we guarantee.
    """
    JsonPlusSerializer.register(cls)


# --- JsonPlus's msgpack encoding, which the pickle fallback builds on ---------------------
# (secure_serde.pickling). The ext codes and payload layouts are pinned by
# tests/test_langgraph_private_pickle.py against JsonPlus's own output.

MSGPACK_OPTION: Final[int] = _option
SAFE_MSGPACK_TYPES: Final[frozenset[tuple[str, ...]]] = _lg_msgpack.SAFE_MSGPACK_TYPES
# (module, name, method) triples strict msgpack may call (``datetime.fromisoformat``);
# the strict decoder (secure_serde/_strict.py) admits exactly these.
SAFE_MSGPACK_METHODS: Final[frozenset[tuple[str, str, str]]] = _lg_msgpack.SAFE_MSGPACK_METHODS
msgpack_default: Final[Callable[[Any], Any]] = _msgpack_default
reconstruction_fallback: Final[Callable[[Any, Exception], Any]] = _reconstruction_fallback
send_from_args: Final[Callable[[Any], Any]] = _send_from_args


def unpack_ext_hook(serde: JsonPlusSerializer) -> Callable[[int, bytes], Any]:
    """The msgpack ext hook ``serde`` decodes with (its allowlist, or a custom hook)."""
    hook: Callable[[int, bytes], Any] = serde._unpack_ext_hook
    return hook


def msgpack_allowlist(serde: JsonPlusSerializer) -> set[tuple[str, ...]] | Literal[True] | None:
    """``serde``'s msgpack allowlist: a set of (module, name), ``True`` (all, warned) or None."""
    return serde._allowed_msgpack_modules


def sqlite_has_task_path(saver: Any) -> bool:
    """Whether a langgraph SQLite saver's ``writes`` table has ``task_path`` (private flag)."""
    return bool(getattr(saver, "_has_task_path", True))
