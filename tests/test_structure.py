"""The package's shape, read from the source: no import circles, no module too big to take over.

tests/test_layers.py pins which layer may import which; this pins two
things a layering cannot see:

* **No circle between modules**, even through an import inside a function:
  a deferred import still ties two modules together (each must be read to
  understand the other), and it is how circles used to hide here
  (``_format`` and ``_format_v2``, ``_saver`` and ``_tenant_saver``).
  Imports under ``TYPE_CHECKING`` do not count: they are annotations only.
* **No module above 600 lines**: one job per module, small enough to read
  in one sitting.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent / "secure_serde"
MAX_LINES: Final = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                skipped.update(id(inner) for inner in ast.walk(statement))
    return skipped


def _imported(name: str, source: str, known: Mapping[str, object], is_package: bool) -> set[str]:
    """The package modules ``source`` (the text of module ``name``) imports, at any depth."""
    tree = ast.parse(source)
    skipped = _type_checking_nodes(tree)
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # ``from pkg import submodule`` depends on the submodule, not on all of pkg.
            submodules = {f"{base}.{a.name}" for a in node.names} & known.keys()
            found.update(submodules)
            if len(submodules) < len(node.names) and base in known:
                found.add(base)
    found.discard(name)
    return found


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the package modules it imports; ``sources``: name -> (text, is_package)."""
    return {
        name: _imported(name, text, sources, is_package)
        for name, (text, is_package) in sources.items()
    }


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package_sources() -> dict[str, tuple[str, bool]]:
    return {
        name: (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for name, path in _modules().items()
    }


def test_no_import_circles() -> None:
    found = circles(import_graph(_package_sources()))
    assert found == [], f"modules that import each other (directly or round a loop): {found}"


def test_no_module_above_the_size_limit() -> None:
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in _modules().items()
    }
    too_big = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert too_big == {}, f"modules above {MAX_LINES} lines: split them by job: {too_big}"


def test_a_deferred_circle_is_found() -> None:
    sources = {
        "pkg": ("", True),
        "pkg.a": ("from pkg.b import thing\n", False),
        "pkg.b": ("def f():\n    from pkg import a\n    return a\n", False),
        "pkg.c": ("from pkg.a import thing\n", False),
    }
    assert circles(import_graph(sources)) == [["pkg.a", "pkg.b"]]


def test_a_relative_import_circle_is_found() -> None:
    sources = {
        "pkg": ("", True),
        "pkg.sub": ("from . import _x\n", True),
        "pkg.sub._x": ("from ._y import y\n", False),
        "pkg.sub._y": ("from .. import sub\n", False),
    }
    assert circles(import_graph(sources)) == [["pkg.sub", "pkg.sub._x", "pkg.sub._y"]]


def test_type_checking_imports_make_no_circle() -> None:
    sources = {
        "pkg": ("", True),
        "pkg.a": ("from pkg.b import thing\n", False),
        "pkg.b": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n", False),
    }
    assert circles(import_graph(sources)) == []


# Imports of another folder's private module (``secure_serde.<folder>._<module>``) from
# outside that folder: none. Each folder's ``__init__`` exports what the others use.
MAX_PRIVATE_CROSS_FOLDER: Final = 0


def private_cross_folder(sources: Mapping[str, tuple[str, bool]]) -> list[str]:
    """``importer -> imported`` for each import of a private module in another subpackage."""
    packages = {name for name, (_, is_package) in sources.items() if is_package}
    found = []
    for name, (text, is_package) in sorted(sources.items()):
        parts = name.split(".")
        folder = parts[1] if len(parts) > 2 or (is_package and len(parts) == 2) else ""
        for imported in sorted(_imported(name, text, sources, is_package)):
            target = imported.split(".")
            if (
                len(target) == 3
                and ".".join(target[:2]) in packages
                and target[2].startswith("_")
                and target[1] != folder
            ):
                found.append(f"{name} -> {imported}")
    return found


def test_private_imports_across_folders_only_go_down() -> None:
    found = private_cross_folder(_package_sources())
    assert len(found) <= MAX_PRIVATE_CROSS_FOLDER, "\n".join(found)


def test_a_private_import_across_folders_is_found() -> None:
    sources = {
        "pkg": ("", True),
        "pkg.a": ("", True),
        "pkg.a._x": ("", False),
        "pkg.a._y": ("from pkg.a._x import thing\n", False),  # inside its own folder: fine
        "pkg.b": ("", True),
        "pkg.b._z": ("from pkg.a._x import thing\nfrom pkg.a import public\n", False),
        "pkg._top": ("from pkg.a._x import thing\n", False),
    }
    assert private_cross_folder(sources) == ["pkg._top -> pkg.a._x", "pkg.b._z -> pkg.a._x"]


# --- The tests mirror the package (issue 24) ------------------------------------------------

TESTS: Final = Path(__file__).resolve().parent


def test_each_package_folder_has_its_test_folder() -> None:
    """``secure_serde/<folder>/`` is tested in ``tests/<folder>/``, a package like the others."""
    folders = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
    assert len(folders) > 5
    assert [f for f in folders if not (TESTS / f / "__init__.py").is_file()] == []


# A test imports a folder's private module only when the test is about that module: from
# tests/<folder>/ for its own folder, from tests/fuzz/ (harness targets) and from
# tests/test_layout_vectors*.py (byte layouts of several folders). What is left: the test files
# below, each the test of that module (tests/passes/test_sealed_layout.py pins the constants
# stores repeats from sealing; the others test one private CLI, saver or pickling function).
MAX_TEST_FILES_WITH_PRIVATE_IMPORTS: Final = 6


def private_imports_in_tests(
    tests: Mapping[str, str], sources: Mapping[str, tuple[str, bool]]
) -> list[str]:
    """``test file -> module`` for each private module of another folder a test file imports.

    ``tests``: path under tests/ (``a/test_x.py``) -> text; ``sources``: the package, as for
    `import_graph`.
    """
    packages = {name for name, (_, is_package) in sources.items() if is_package}
    found = []
    for path, text in sorted(tests.items()):
        parts = path.split("/")
        own = parts[0] if len(parts) > 1 else ""
        if own == "fuzz" or (not own and path.startswith("test_layout_vectors")):
            continue
        name = "tests." + path.removesuffix(".py").replace("/", ".")
        for imported in sorted(_imported(name, text, sources, path.endswith("__init__.py"))):
            target = imported.split(".")
            if (
                len(target) == 3
                and ".".join(target[:2]) in packages
                and target[2].startswith("_")
                and target[1] != own
            ):
                found.append(f"{path} -> {imported}")
    return found


def test_tests_import_private_modules_only_of_their_subject() -> None:
    tests = {
        path.relative_to(TESTS).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(TESTS.rglob("*.py"))
    }
    found = private_imports_in_tests(tests, _package_sources())
    files = {line.partition(" -> ")[0] for line in found}
    assert len(files) <= MAX_TEST_FILES_WITH_PRIVATE_IMPORTS, "\n".join(found)


def test_a_private_import_in_a_test_of_another_folder_is_found() -> None:
    sources = {
        "pkg": ("", True),
        "pkg.a": ("", True),
        "pkg.a._x": ("", False),
        "pkg.b": ("", True),
    }
    tests = {
        "a/test_own.py": "from pkg.a._x import thing\n",  # its own folder: fine
        "b/test_other.py": "def f():\n    from pkg.a import _x\n    return _x\n",
        "b/test_public.py": "from pkg.a import public\n",
        "fuzz/target.py": "import pkg.a._x\n",  # a harness target: fine
        "test_layout_vectors_a.py": "from pkg.a._x import thing\n",  # a layout vector: fine
        "test_top.py": "import pkg.a._x\n",
    }
    assert private_imports_in_tests(tests, sources) == [
        "b/test_other.py -> pkg.a._x",
        "test_top.py -> pkg.a._x",
    ]


def test_mutation_config_names_files_that_exist() -> None:
    # mutmut skips a path that matches nothing without a word, so a module renamed since the
    # config was written (as `_v1cipher` was) silently stopped being mutated.
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["mutmut"]
    args = config["pytest_add_cli_args"]
    deselected = [args[i + 1] for i, arg in enumerate(args) if arg == "--deselect"]
    named = [*config["only_mutate"], *config["pytest_add_cli_args_test_selection"], *deselected]
    missing = [p for p in named if not (ROOT.parent / p.split("::")[0]).exists()]
    assert missing == [], f"[tool.mutmut] names paths that do not exist: {missing}"
