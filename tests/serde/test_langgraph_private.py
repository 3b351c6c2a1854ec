"""Pins on every private langgraph name secure_serde uses (see secure_serde/serde/_langgraph.py).

If one of these fails after a langgraph upgrade, the allowlist or
_DeltaSnapshot handling needs revisiting before the upgrade ships. Also: no
module but _langgraph.py touches a private langgraph name (the savers are
wrapped through the public API), and each package whose private names or
schema we depend on is capped below its next major version.
"""

from __future__ import annotations

import ast
import logging
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, _with_msgpack_allowlist
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as StockAsyncPostgresSaver
from langgraph.checkpoint.postgres.base import BasePostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as StockAsyncSqliteSaver

import secure_serde
from secure_serde import EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.serde._langgraph import EXT_DELTA_SNAPSHOT, DeltaSnapshot


def test_delta_snapshot_names_are_unchanged() -> None:
    assert DeltaSnapshot is _DeltaSnapshot
    assert EXT_DELTA_SNAPSHOT == 7
    assert DeltaSnapshot._fields == ("value",)


def test_delta_snapshot_round_trips_through_our_serializer() -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=b"k" * 32))
    value = {"channel": DeltaSnapshot(value=[1, {"a": 2}])}
    out = serde.loads_typed(serde.dumps_typed(value))
    assert type(out["channel"]) is DeltaSnapshot
    assert out == value


def test_with_allowlist_reaches_through_our_serializer(caplog: pytest.LogCaptureFixture) -> None:
    """langgraph only recognises JsonPlus (and its own EncryptedSerializer) here."""
    serde = EncryptedSerializer(
        EnvKeyCipher(key=b"k" * 32), JsonPlusSerializer(allowed_msgpack_modules=None)
    )
    assert isinstance(serde, JsonPlusSerializer)
    saver = InMemorySaver(serde=serde)
    with caplog.at_level(logging.WARNING):
        clone = saver.with_allowlist([("tests.serde.test_langgraph_private", "Thing")])
    assert "does not support msgpack allowlist" not in caplog.text
    assert clone is not saver
    assert isinstance(clone.serde, EncryptedSerializer)
    assert clone.serde.cipher is serde.cipher
    inner = clone.serde.serde
    assert isinstance(inner, JsonPlusSerializer)
    assert ("tests.serde.test_langgraph_private", "Thing") in inner._allowed_msgpack_modules  # type: ignore[operator]


def test_langgraph_allowlist_dispatch_is_the_one_we_hook() -> None:
    class Opaque:
        def dumps_typed(self, obj: object) -> tuple[str, bytes]:
            return "x", b""

        def loads_typed(self, data: tuple[str, bytes]) -> object:
            return None

    opaque = Opaque()
    assert _with_msgpack_allowlist(opaque, [("m", "C")]) is opaque
    assert hasattr(BaseCheckpointSaver, "with_allowlist")


def jsonplus_type_checks(source: str) -> list[tuple[str, str]]:
    """(enclosing function, isinstance|issubclass) of every type check against JsonPlusSerializer.

    Parsed, not grepped: multi-line calls, tuples of types, aliases
    (``import ... as JP``) and ``module.JsonPlusSerializer`` all count.
    """
    tree = ast.parse(source)
    aliases = {"JsonPlusSerializer"} | {
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name == "JsonPlusSerializer" and alias.asname
    }

    def names_jsonplus(node: ast.expr) -> bool:
        if isinstance(node, ast.Tuple):
            return any(names_jsonplus(element) for element in node.elts)
        if isinstance(node, ast.Name):
            return node.id in aliases
        return isinstance(node, ast.Attribute) and node.attr == "JsonPlusSerializer"

    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, scope: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = f"{scope}.{node.name}" if scope else node.name
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and names_jsonplus(node.args[1])
        ):
            found.append((scope, node.func.id))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(tree, "")
    return found


def test_the_scan_finds_every_form_of_check() -> None:
    source = (
        "from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer as JP\n"
        "import langgraph.checkpoint.serde.jsonplus as jp\n"
        "def f(x):\n"
        "    return isinstance(\n        x,\n        (int, JP),\n    )\n"
        "class C:\n"
        "    def g(self, t):\n"
        "        return issubclass(t, jp.JsonPlusSerializer)\n"
    )
    assert jsonplus_type_checks(source) == [("f", "isinstance"), ("C.g", "issubclass")]


def test_the_only_jsonplus_isinstance_checks_are_the_allowlist_dispatch() -> None:
    """Registering our wrappers as virtual JsonPlusSerializers is safe only while the checks
    that see them are `_with_msgpack_allowlist`'s two, which then call
    ``with_msgpack_allowlist``; a new one could call JsonPlus-only attributes on our
    wrappers. Parses every installed langgraph and langchain module that names
    JsonPlusSerializer, and fails loudly when one adds a check."""
    import langgraph.checkpoint.base

    site = Path(langgraph.checkpoint.base.__file__).parents[3]
    found = sorted(
        (str(path.relative_to(site)), *check)
        for top in site.iterdir()
        if top.is_dir() and top.name.startswith(("langgraph", "langchain"))
        for path in top.rglob("*.py")
        if "JsonPlusSerializer" in (text := path.read_text(errors="replace"))
        for check in jsonplus_type_checks(text)
    )
    dispatch = ("langgraph/checkpoint/base/__init__.py", "_with_msgpack_allowlist", "isinstance")
    assert found == [dispatch, dispatch]


# --- secure_serde touches private langgraph names only through _langgraph.py -----------------

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(secure_serde.__file__).parent
# The stock classes whose private names count as langgraph's.
STOCK_CLASSES: tuple[type, ...] = (
    BaseCheckpointSaver,
    InMemorySaver,
    BasePostgresSaver,
    StockPostgresSaver,
    StockAsyncPostgresSaver,
    StockSqliteSaver,
    StockAsyncSqliteSaver,
    JsonPlusSerializer,
)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


STOCK_PRIVATE: frozenset[str] = frozenset(
    name for cls in STOCK_CLASSES for name in dir(cls) if _private(name)
) | frozenset(  # instance attributes the stock classes set, not visible on the class
    {"_has_task_path", "_unpack_ext_hook", "_allowed_msgpack_modules"}
)


def private_touches(path: Path) -> list[str]:
    """Every private langgraph name ``path`` imports, overrides, reads or names."""
    tree = ast.parse(path.read_text())
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in STOCK_PRIVATE:
            found.append(f"{path.name}:{node.lineno} overrides {node.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("langgraph"):
            module_private = any(_private(part) for part in (node.module or "").split("."))
            names = [a.name for a in node.names if _private(a.name)]
            if module_private or names:
                found.append(f"{path.name}:{node.lineno} imports {node.module} {names}")
        elif isinstance(node, ast.Attribute) and node.attr in STOCK_PRIVATE:
            found.append(f"{path.name}:{node.lineno} reads .{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in STOCK_PRIVATE:
            # getattr(saver, "_name"), row["_kind"]
            found.append(f"{path.name}:{node.lineno} names {node.value!r}")
    return found


def test_no_private_langgraph_name_outside_the_one_module() -> None:
    touches = [
        touch
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_langgraph.py"
        for touch in private_touches(path)
    ]
    assert touches == []


def test_the_scan_sees_a_private_touch(tmp_path: Path) -> None:
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        "from langgraph.checkpoint.serde.jsonplus import _msgpack_default\n"
        "from langgraph.checkpoint.serde import _msgpack\n"
        "class S:\n"
        "    def _dump_blobs(self): ...\n"
        "def f(saver):\n"
        "    with saver._cursor() as cur:\n"
        "        return saver._has_task_path, getattr(saver, '_cursor')\n"
    )
    assert len(private_touches(leaky)) == 6
    assert private_touches(PACKAGE / "serde" / "_langgraph.py") != []  # the one module does


# --- each package we depend on below its public API is capped at its next major version -------

# langgraph-checkpoint: the private names of _langgraph.py. The saver packages: their schema,
# which secure_serde.stores reads and rewrites, and their SQL, which V03Reader copies.
CAPPED = ("langgraph-checkpoint", "langgraph-checkpoint-postgres", "langgraph-checkpoint-sqlite")


def test_capped_packages_are_capped_below_their_next_major() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        requirements += extra
    for package in CAPPED:
        major = int(metadata.version(package).split(".")[0])
        specs = [r for r in requirements if r.split(">")[0].split("<")[0].strip() == package]
        assert specs, package
        for spec in specs:
            assert f",<{major + 1}" in spec, spec
