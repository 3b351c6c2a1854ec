"""A static check of a pickle's opcodes, run before a single one of them executes.

`scan` walks the opcode stream with ``pickletools.genops`` and keeps a
symbolic stack: it knows which items are globals (and which ones), which are
string literals, and which are the results of calls. It refuses:

* any global outside the admitted set, ``STACK_GLOBAL`` whose names are not
  literals, and the extension registry (``EXT*``);
* nested reduce chains: a ``REDUCE``/``NEWOBJ`` whose callable is not an
  admitted global but the result of an earlier call. The one exception is
  ``builtins.getattr(<admitted class>, "<literal>")`` for the admitted
  (module, class, attribute) triples that pandas' own pickles use
  (``ZoneInfo._unpickle``); the unpickler enforces the same triples at run
  time;
* calls to globals admitted only as arguments (``numpy.ndarray``);
* ``BUILD``/``APPEND``/``SETITEM`` aimed at a global: that would set
  attributes on an admitted class, process-wide;
* persistent ids, out-of-band buffers, the protocol-0/1 ``INST``/``OBJ``
  calls and text-protocol arguments, none of which this library writes;
* truncated, malformed or trailing bytes and stack underflows.

The same check runs when a value is pickled, so a pickle that could not be
read back is never written.
"""

from __future__ import annotations

import pickletools
from dataclasses import dataclass
from typing import Any, Final, cast

from secure_serde._errors import ForbiddenGlobalError, UnsafePickleError

__all__ = ["GETATTR", "Admission", "scan"]

GETATTR: Final = ("builtins", "getattr")

_STRINGS: Final = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"})
# Never written by this library: persistent ids, out-of-band buffers, the
# extension registry, protocol-0/1 calls and text-protocol arguments.
_REFUSED: Final = frozenset(
    {
        "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER", "EXT1", "EXT2", "EXT4",
        "OBJ", "INST", "INT", "LONG", "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE",
        "FLOAT", "GET", "PUT",
    }
)  # fmt: skip
_MARKED_BUILDS: Final = frozenset({"LIST", "DICT", "FROZENSET"})
_CALLS: Final = frozenset({"REDUCE", "NEWOBJ", "NEWOBJ_EX"})
_MUTATORS: Final = frozenset({"BUILD", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS"})
_GETS: Final = frozenset({"BINGET", "LONG_BINGET"})
_PUTS: Final = frozenset({"BINPUT", "LONG_BINPUT"})


@dataclass(frozen=True)
class Admission:
    """What a pickle may name: globals, and attributes reachable through ``getattr``.

    ``globals`` holds ``(module, qualified name)`` pairs; ``methods`` holds
    ``(module, qualified name, attribute)`` triples; ``uncallable`` globals
    may appear only as arguments (``numpy.ndarray``: calling it allocates
    whatever shape the pickle asks for).
    """

    globals: frozenset[tuple[str, str]]
    methods: frozenset[tuple[str, str, str]] = frozenset()
    uncallable: frozenset[tuple[str, str]] = frozenset()


# Symbolic stack items. Anything that is not one of these tuples is plain data.
_MARK: Final[tuple[Any, ...]] = ("mark",)
_DATA: Final[tuple[Any, ...]] = ("data",)
_CALLED: Final[tuple[Any, ...]] = ("called",)


def _forbidden(module: str, name: str) -> ForbiddenGlobalError:
    return ForbiddenGlobalError(
        f"refusing a pickle that names {module}.{name}, which is not admitted",
        module=module,
        name=name,
    )


def _malformed(reason: str) -> UnsafePickleError:
    return UnsafePickleError(f"refusing a malformed pickle: {reason}")


def _pop(stack: list[tuple[Any, ...]], count: int) -> list[tuple[Any, ...]]:
    if count > len(stack):
        raise _malformed("stack underflow")
    if count == 0:
        return []
    items = stack[-count:]
    del stack[-count:]
    if _MARK in items:
        raise _malformed("unexpected mark")
    return items


def _pop_mark(stack: list[tuple[Any, ...]], marks: list[int]) -> list[tuple[Any, ...]]:
    if not marks:
        raise _malformed("no mark on the stack")
    start = marks.pop()
    items = stack[start + 1 :]
    del stack[start:]
    return items


def _check_global(module: str, name: str, admission: Admission) -> tuple[Any, ...]:
    if (module, name) not in admission.globals:
        raise _forbidden(module, name)
    return ("global", module, name)


def _call(
    callable_: tuple[Any, ...], args: tuple[Any, ...], admission: Admission
) -> tuple[Any, ...]:
    """The symbolic result of calling ``callable_`` with ``args``."""
    if callable_[0] == "method":
        return _CALLED
    if callable_[0] != "global":
        raise UnsafePickleError(
            "refusing a pickle with a nested reduce chain: it calls something that is not"
            " an admitted global"
        )
    if callable_[1:] in admission.uncallable:
        raise UnsafePickleError(
            f"refusing a pickle that calls {callable_[1]}.{callable_[2]}, which is admitted"
            " only as an argument"
        )
    if callable_[1:] != GETATTR:
        return _CALLED
    # getattr(<global>, "<literal>"): only the admitted triples, which become callables.
    items: tuple[Any, ...] = args[1] if args[0] == "tuple" else ()
    if len(items) == 2 and items[0][0] == "global" and items[1][0] == "str":
        triple = (items[0][1], items[0][2], items[1][1])
        if triple in admission.methods:
            return ("method", *triple)
        raise _forbidden(triple[0], f"{triple[1]}.{triple[2]}")
    raise UnsafePickleError("refusing a pickle that calls getattr on something computed")


def scan(data: bytes, admission: Admission) -> None:
    """Raise `UnsafePickleError` (or `ForbiddenGlobalError`) unless ``data`` is safe to load."""
    stack: list[tuple[Any, ...]] = []
    marks: list[int] = []
    memo: dict[int, tuple[Any, ...]] = {}
    end = -1
    try:
        for opcode, arg, pos in pickletools.genops(data):
            name = opcode.name
            if name in _STRINGS:
                stack.append(("str", arg))
            elif name == "MEMOIZE":
                if not stack or stack[-1] is _MARK:
                    raise _malformed("nothing to memoize")
                memo[len(memo)] = stack[-1]
            elif name == "MARK":
                marks.append(len(stack))
                stack.append(_MARK)
            elif name in _GETS:
                if arg not in memo:
                    raise _malformed("memo key missing")
                stack.append(memo[cast(int, arg)])
            elif name in _PUTS:
                if not stack or stack[-1] is _MARK:
                    raise _malformed("nothing to memoize")
                memo[cast(int, arg)] = stack[-1]
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                stack.append(("tuple", tuple(_pop(stack, len(opcode.stack_before)))))
            elif name == "TUPLE":
                stack.append(("tuple", tuple(_pop_mark(stack, marks))))
            elif name in _REFUSED:
                raise UnsafePickleError(f"refusing a pickle that uses the {name} opcode")
            elif name == "STACK_GLOBAL":
                module, qualname = _pop(stack, 2)
                if module[0] != "str" or qualname[0] != "str":
                    raise UnsafePickleError("refusing a pickle whose global names are computed")
                stack.append(_check_global(module[1], qualname[1], admission))
            elif name == "GLOBAL":
                module_name, _, qualname_ = str(arg).partition(" ")
                stack.append(_check_global(module_name, qualname_, admission))
            elif name in _CALLS:
                popped = _pop(stack, len(opcode.stack_before))
                stack.append(_call(popped[0], popped[1], admission))
            elif name in _MUTATORS:
                if name in ("APPENDS", "SETITEMS", "ADDITEMS"):
                    _pop_mark(stack, marks)
                    target = _pop(stack, 1)[0]
                else:
                    target = _pop(stack, len(opcode.stack_before))[0]
                if target[0] in ("global", "method"):
                    raise UnsafePickleError(f"refusing a pickle that applies {name} to a global")
                stack.append(target)
            elif name == "POP_MARK":
                _pop_mark(stack, marks)
            elif name == "DUP":
                top = _pop(stack, 1)[0]
                stack += (top, top)
            elif name == "STOP":
                _pop(stack, 1)
                end = cast(int, pos) + 1
            elif name in _MARKED_BUILDS:
                _pop_mark(stack, marks)
                stack.append(_DATA)
            else:
                _pop(stack, len(opcode.stack_before))
                stack += [_DATA] * len(opcode.stack_after)
    except ValueError as exc:
        raise _malformed("truncated or not a pickle") from exc
    if end != len(data):
        raise _malformed("bytes after the STOP opcode")
    if stack or marks:
        raise _malformed("values left on the stack")
