"""What ``allowed=`` may never admit, whatever the developer asks for.

A pickle can call every admitted global with arguments of its choosing, so
admitting one that runs code, opens files or reaches arbitrary attributes
makes the allowlist plain pickle again. One object answers to several names
(``bz2._builtin_open`` is ``io.open``), so a name is also resolved and its
object judged by the module that defines it. A backstop against mistakes,
not a proof of safety.
"""

from __future__ import annotations

import importlib
import types
from typing import Final

from secure_serde._errors import ConfigurationError

# Of builtins, only plain data types may be named; every function and every
# other class there (type, open, eval, getattr, __import__, ...) is refused.
_SAFE_BUILTINS: Final = frozenset({
    "bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset", "int", "list",
    "range", "set", "slice", "str", "tuple",
})  # fmt: skip

# Top-level modules whose globals run code, import, introspect, or touch
# files, processes, the network or the interpreter. Matched against both the
# requested module and the defining module of the object it resolves to.
_DANGEROUS_MODULES: Final = frozenset({
    "_ctypes", "_functools", "_imp", "_io", "_operator", "_pickle", "_posixsubprocess",
    "_thread", "asyncio", "ast", "atexit", "bdb", "builtins", "cProfile", "code", "codecs",
    "codeop", "compileall", "concurrent", "copyreg", "ctypes", "dbm", "dis", "doctest",
    "fcntl", "fileinput", "ftplib", "functools", "gc", "glob", "http", "imp", "importlib",
    "inspect", "io", "logging", "marshal", "mmap", "multiprocessing", "nt", "operator", "os",
    "pathlib", "pdb", "pickle", "pkgutil", "platform", "posix", "profile", "pty", "py_compile",
    "pydoc", "runpy", "select", "shelve", "shutil", "signal", "site", "smtplib", "socket",
    "sqlite3", "subprocess", "sys", "tarfile", "tempfile", "threading", "timeit", "trace",
    "types", "unittest", "urllib", "webbrowser", "xmlrpc", "zipfile", "zipimport",
})  # fmt: skip

# Parts of numpy and pandas that read or write files, load pickles or
# evaluate expressions: the presets never need them, and their names are
# what a developer hunting for a "missing helper" might paste in.
_DANGEROUS_PREFIXES: Final = (
    "numpy.distutils", "numpy.f2py", "numpy.lib._npyio_impl", "numpy.lib.format",
    "numpy.lib.npyio", "numpy.testing", "pandas.core.computation", "pandas.io", "pandas.plotting",
)  # fmt: skip
_DANGEROUS_NAMES: Final = (
    ("numpy", "fromfile"), ("numpy", "load"), ("numpy", "loadtxt"), ("numpy", "memmap"),
    ("numpy", "save"), ("numpy", "savetxt"), ("numpy", "savez"), ("pandas", "eval"),
    ("pandas", "read_pickle"), ("pandas", "HDFStore"),
)  # fmt: skip


_IO_VERBS: Final = ("read_", "to_", "load", "save", "dump", "open")


def _dangerous_third_party() -> frozenset[int]:
    found = set()
    for module, name in _DANGEROUS_NAMES:
        try:
            found.add(id(getattr(importlib.import_module(module), name)))
        except (ImportError, AttributeError):
            continue
    return frozenset(found)


def _in_dangerous_package(module: str) -> bool:
    return module.partition(".")[0] in _DANGEROUS_MODULES or any(
        module == prefix or module.startswith(prefix + ".") for prefix in _DANGEROUS_PREFIXES
    )


def _refuse(module: str, name: str, why: str) -> ConfigurationError:
    return ConfigurationError(f"{module}.{name} is never admitted: {why}")


def refuse_dangerous(pair: tuple[str, str], target: object = None) -> None:  # noqa: C901 - one rule per dangerous kind of global, read top to bottom
    """Raise `ConfigurationError` if ``(module, name)``, or the class ``target``, is refused."""
    module, name = pair
    if target is None and "." in name:
        # Protocol 4 resolves dotted names attribute by attribute, which can
        # walk from a harmless module into any object it imports.
        raise _refuse(module, name, "dotted names reach attributes of other objects")
    if module.partition(".")[0] == "builtins":
        if name not in _SAFE_BUILTINS:
            raise _refuse(module, name, "only plain data types of builtins may be admitted")
        return
    if _in_dangerous_package(module):
        raise _refuse(module, name, "a pickle naming it can run arbitrary code")
    if target is None and name.startswith(_IO_VERBS):
        # pandas re-exports its readers with __module__ == "pandas", so the
        # defining-module test below cannot see where read_csv really lives.
        raise _refuse(module, name, "its name says it reads, writes or loads data")
    if target is None:
        try:
            target = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            # Not resolvable here, so not loadable here either; the names passed.
            return
    if isinstance(target, types.ModuleType):
        raise _refuse(module, name, "it is a module")
    if id(target) in _dangerous_third_party():
        raise _refuse(module, name, "it reads or writes files, loads pickles or evaluates code")
    defining = getattr(target, "__module__", None)
    if isinstance(defining, str) and _in_dangerous_package(defining):
        raise _refuse(module, name, f"it is {defining}.{getattr(target, '__qualname__', name)}")
