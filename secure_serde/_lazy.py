"""PEP 562 lazy attributes for the package ``__init__`` modules.

``import secure_serde`` should cost little more than langgraph's own
serializer module: a user of the serializer on SQLite never needs psycopg,
boto3 or the rewrap engine. Each package therefore names its public
attributes and the private module defining each, and imports that module on
first access. Type checkers see ordinary imports under ``TYPE_CHECKING``, and
the package installs the two functions below only at run time, so that mypy
does not widen every unknown attribute of the package to ``Any``.

A renamed attribute keeps its old spelling for one minor version through
``deprecated``: each access warns (`DeprecationWarning`, naming the new
spelling) and returns the very object the new name does. The old name is
never cached in the namespace, so every access warns, and the package's own
code, which uses only the new names, never makes a user see one.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str,
    sources: Mapping[str, str],
    deprecated: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` for ``package``.

    ``sources`` maps each lazy attribute to the module that defines it. The
    attribute is cached in the package namespace on first use, so later
    accesses are plain dictionary lookups. ``deprecated`` maps an old name to
    (its new name, the version that removes it).
    """
    namespace = importlib.import_module(package).__dict__
    renamed = {} if deprecated is None else dict(deprecated)

    def __getattr__(name: str) -> Any:
        if name in renamed:
            new, until = renamed[name]
            warnings.warn(
                f"{package}.{name} is deprecated: use {package}.{new} (the old name goes in"
                f" {until})",
                DeprecationWarning,
                stacklevel=2,
            )
            return namespace[new] if new in namespace else __getattr__(new)
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *sources})

    return __getattr__, __dir__
