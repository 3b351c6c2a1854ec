"""The import layering of secure_serde, read from the source (AST), pinned.

Layers, bottom to top; a module imports only from its own layer or lower ones:

0. core: the helpers at the top of the package (``_errors``, the pass report ``_report``
   and its row records ``_rows``, the pass engine's loop ``_engine``, ``_lazy``,
   ``_scrub``, ``_ratelog``, ``_version``);
1. ``crypto``: primitives, the ciphertext formats, locations, keys;
2. ``ciphers``;
3. ``serde``: the serializer, the read rule, strict decoding, compression, the
   private langgraph names;
4. ``pickling``: the controlled pickle fallback, a serializer built on ``serde``'s;
5. ``stores``: the database layout and access, keyless; beside it, ``sealing``
   (`SealedSaver`, on langgraph's public API only); neither imports the other;
6. ``passes``: the pass engine and its planners (rewrap, adopt's classification);
7. ``savers`` (`SealedSaver`'s constructors, and ``adopt``, which runs its planner on the
   engine) and ``config``, side by side: neither imports the other;
8. ``cli``, which imports only public names: never a ``_``-prefixed module
   inside another subpackage (``secure_serde.stores._open``), never a
   ``_``-prefixed name, and from a package ``__init__`` only names in its
   ``__all__``. The single modules at the top of the package (``_errors``,
   ``_report``...) are the package's shared core, which every layer builds on,
   so the rule is about subpackages' insides.

Imports inside functions and under ``TYPE_CHECKING`` count like any other.
A name imported from a package ``__init__`` is judged by the module that
defines it (the package's ``TYPE_CHECKING`` imports say which).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parent.parent / "secure_serde"
PACKAGE: Final = "secure_serde"

CORE: Final = frozenset(
    {"_engine", "_errors", "_lazy", "_ratelog", "_report", "_rows", "_scrub", "_version"}
)
# layer name -> rank; equal ranks are siblings that must not import each other.
RANKS: Final = {
    "core": 0,
    "crypto": 1,
    "ciphers": 2,
    "serde": 3,
    "pickling": 4,
    "stores": 5,
    "sealing": 5,
    "passes": 6,
    "savers": 7,
    "config": 7,
    "cli": 8,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str | None:
    """The layer of a ``secure_serde`` module; ``None`` for the package facade."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    top = parts[1]
    if top in CORE:
        return "core"
    if top in RANKS:
        return top
    raise AssertionError(f"{module} is in no layer: add it to tests/test_layers.py")


def _is_package(module: str) -> bool:
    return (ROOT.parent / module.replace(".", "/") / "__init__.py").is_file()


def _is_module(module: str) -> bool:
    path = ROOT.parent / module.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@dataclass(frozen=True)
class Package:
    """What a package ``__init__`` exports, and which module defines each name."""

    exported: frozenset[str]
    sources: dict[str, str]


def package_info(module: str) -> Package:
    tree = ast.parse((ROOT.parent / module.replace(".", "/") / "__init__.py").read_text())
    exported: set[str] = set()
    sources: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            exported |= {ast.literal_eval(e) for e in getattr(node.value, "elts", [])}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sources[alias.asname or alias.name] = node.module
    return Package(frozenset(exported), sources)


@dataclass(frozen=True)
class Import:
    """One import: ``name`` from ``module``, or the module itself (``name`` is ``None``)."""

    line: int
    module: str
    name: str | None

    def __str__(self) -> str:
        return f"line {self.line}: {self.module}" + ("" if self.name is None else f":{self.name}")


def imports_of(source: str) -> Iterator[Import]:
    """Every secure_serde import of a module, ``from pkg import submodule`` as a module."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield Import(node.lineno, alias.name, None)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if _is_module(submodule):
                    yield Import(node.lineno, submodule, None)
                else:
                    yield Import(node.lineno, node.module, alias.name)


def defining_module(item: Import) -> str:
    """The module an imported name comes from, looking through a package's lazy exports."""
    if item.name is not None and _is_package(item.module):
        source = package_info(item.module).sources.get(item.name)
        if source is not None:
            return source
    return item.module


def layering_violations(importer: str, source: str) -> list[str]:
    """Imports of ``importer`` that reach a higher layer, or a sibling."""
    own = layer_of(importer)
    if own is None:
        return []  # the facade: lazy names for users, imported by no layer
    found = []
    for item in imports_of(source):
        target = layer_of(defining_module(item))
        if target is None or target == own:
            continue
        if RANKS[target] >= RANKS[own]:
            found.append(f"{importer} ({own}) imports {item} ({target})")
    return found


def public_violations(importer: str, source: str) -> list[str]:
    """Imports of a cli module that are not public names of another module."""
    found = []
    own_package = importer.rsplit(".", 1)[0]
    for item in imports_of(source):
        parts = item.module.split(".")
        # A private module inside another subpackage: secure_serde.<pkg>._mod.
        if len(parts) >= 3 and parts[1] != "cli" and any(p.startswith("_") for p in parts[2:]):
            found.append(f"{importer} imports a private module: {item}")
            continue
        if item.name is None:
            continue
        if item.name.startswith("_"):
            found.append(f"{importer} imports a private name: {item}")
            continue
        if _is_package(item.module) and item.module != own_package:
            exported = package_info(item.module).exported
            if exported and item.name not in exported:
                found.append(f"{importer} imports a name not in __all__: {item}")
        elif parts[1] == "cli" and not _is_package(item.module):
            listed = module_all(item.module)
            if listed is not None and item.name not in listed:
                found.append(f"{importer} imports a name not in __all__: {item}")
    return found


def module_all(module: str) -> frozenset[str] | None:
    tree = ast.parse((ROOT.parent / module.replace(".", "/")).with_suffix(".py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    return None


SOURCES: Final = sorted(ROOT.rglob("*.py"))
CLI: Final = [p for p in SOURCES if module_name(p).startswith(f"{PACKAGE}.cli")]


@pytest.mark.parametrize("path", SOURCES, ids=module_name)
def test_no_module_imports_a_higher_layer(path: Path) -> None:
    assert layering_violations(module_name(path), path.read_text()) == []


@pytest.mark.parametrize("path", CLI, ids=module_name)
def test_cli_imports_only_public_names(path: Path) -> None:
    assert public_violations(module_name(path), path.read_text()) == []


def test_every_module_is_in_a_layer() -> None:
    for path in SOURCES:
        layer_of(module_name(path))  # raises for a module no layer names


@pytest.mark.parametrize(
    ("importer", "line"),
    [
        ("secure_serde.crypto._primitives", "from secure_serde.ciphers import EnvKeyCipher"),
        ("secure_serde.crypto._format", "from secure_serde.stores import Cell"),
        (
            "secure_serde.serde._serializer",
            "from secure_serde.savers.postgres import PostgresSaver",
        ),
        (
            "secure_serde.ciphers._env",
            "from secure_serde.serde._serializer import EncryptedSerializer",
        ),
        ("secure_serde.ciphers._env", "import secure_serde.cli"),
        ("secure_serde.stores._base", "from secure_serde.cli._audit import run"),
        ("secure_serde.stores._locate", "from secure_serde.savers._connect import connect"),
        ("secure_serde.savers._connect", "from secure_serde.config import serializer_from_env"),
        ("secure_serde.passes._plan", "from secure_serde import savers"),
        ("secure_serde.config", "from secure_serde.cli import main"),
        # Through a package's lazy export: judged by the defining module.
        ("secure_serde.stores._open", "from secure_serde import rewrap"),
    ],
)
def test_a_layering_violation_is_found(importer: str, line: str) -> None:
    assert layering_violations(importer, line) != []


@pytest.mark.parametrize(
    "line",
    [
        "from secure_serde.stores._open import POSTGRES_SCHEMES",
        "from secure_serde.passes._plan import Planner",
        "from secure_serde.ciphers import _kms_format",
        "from secure_serde.cli._rewrap import _positive",
        "from secure_serde.stores import _reason",
        "from secure_serde.savers import INDEX_METADATA_KEY",  # not in savers.__all__
        "from secure_serde.cli._inspect import EXIT_SHOWN",  # not in its __all__
        "import secure_serde.savers._connect",
    ],
)
def test_a_private_import_in_the_cli_is_found(line: str) -> None:
    assert public_violations("secure_serde.cli._audit", line) != []


def test_public_imports_in_the_cli_pass() -> None:
    source = "\n".join(
        [
            "from secure_serde import Migration",
            "from secure_serde.crypto import format_v1",
            "from secure_serde.stores import HistoryView",
            "from secure_serde.passes import Planner",
            "from secure_serde.cli._args import positive_int",
            "from secure_serde.savers.postgres import PostgresSaver",
        ]
    )
    assert public_violations("secure_serde.cli._audit", source) == []
