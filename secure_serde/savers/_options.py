"""The thin constructors' options, refused before ``from_conn_string`` connects.

A bad option must fail with `ConfigurationError` whatever the connection
string: not with the driver's connection error when the store is
unreachable, and not after SQLite has created an empty file at the path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from secure_serde.sealing import SealedSaver

__all__ = ["checked_options"]


def _listed(keys: Iterable[str]) -> Iterable[str]:
    # A str is left whole so that SealedSaver refuses it instead of taking its letters for keys;
    # anything else is read once here, since it is then handed over twice.
    return keys if isinstance(keys, str) else tuple(keys)


def checked_options(
    serde: Any, indexed_metadata: Iterable[str] = (), plaintext_metadata: Iterable[str] = ()
) -> dict[str, Any]:
    """``serde``, ``indexed_metadata`` and ``plaintext_metadata`` for the constructor, checked.

    The checks are `SealedSaver`'s own, run on an inner saver that holds
    nothing and is dropped at once, so they cannot drift from the ones the
    constructor runs again once connected.
    """
    options: dict[str, Any] = {
        "serde": serde,
        "indexed_metadata": _listed(indexed_metadata),
        "plaintext_metadata": _listed(plaintext_metadata),
    }
    SealedSaver(InMemorySaver(), **options)
    return options
