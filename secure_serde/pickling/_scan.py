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
* ``BUILD`` states that plant a dunder name, a key no string literal
  spells or a callable global (in the state dict, a slot-state dict, or a
  dict nested in a tuple state, which some admitted ``__setstate__``
  methods apply with ``setattr``), or that an admitted dict type built by
  a call, whose keys the scan cannot see. Otherwise a first
  BUILD can put ``{"__setstate__": numpy.ndarray}`` on an instance and a
  second BUILD calls it, or ``{"extend": f}`` and APPENDS calls ``f``. A
  dict that a BUILD applied may not be changed afterwards;
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

__all__ = ["GETATTR", "Admission", "is_dunder", "scan"]

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
_CALLS: Final = frozenset({"REDUCE", "NEWOBJ", "NEWOBJ_EX"})
_MUTATORS: Final = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS"})
_CALLABLE_KINDS: Final = frozenset({"global", "method"})
_DTYPES: Final = frozenset({("numpy", "dtype")})
_GETS: Final = frozenset({"BINGET", "LONG_BINGET"})
_PUTS: Final = frozenset({"BINPUT", "LONG_BINPUT"})


@dataclass(frozen=True)
class Admission:
    """What a pickle may name: globals, and attributes reachable through ``getattr``.

    ``globals`` holds ``(module, qualified name)`` pairs; ``methods`` holds
    ``(module, qualified name, attribute)`` triples; ``uncallable`` globals
    may appear only as arguments (``numpy.ndarray``: calling it allocates
    whatever shape the pickle asks for). ``data`` globals are admitted
    globals that are not callable (``pandas.NA``), which a BUILD state may
    hold. ``mappings`` are admitted dict types (``builtins.dict``), whose
    call results the scan cannot see into.
    """

    globals: frozenset[tuple[str, str]]
    methods: frozenset[tuple[str, str, str]] = frozenset()
    uncallable: frozenset[tuple[str, str]] = frozenset()
    data: frozenset[tuple[str, str]] = frozenset()
    mappings: frozenset[tuple[str, str]] = frozenset()


# Symbolic stack items. Anything that is not one of these tuples is plain data.
_MARK: Final[tuple[Any, ...]] = ("mark",)
_DATA: Final[tuple[Any, ...]] = ("data",)


def is_dunder(name: str) -> bool:
    """Whether ``name`` is a special name (``__setstate__``, ``__class__``, ``__dict__``...)."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _bad_state(what: str) -> UnsafePickleError:
    return UnsafePickleError(f"refusing a pickle with a BUILD state that sets {what}")


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
        return ("called", *callable_[1:])
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
        return ("called", *callable_[1:])
    # getattr(<global>, "<literal>"): only the admitted triples, which become callables.
    items: tuple[Any, ...] = args[1] if args[0] == "tuple" else ()
    if len(items) == 2 and items[0][0] == "global" and items[1][0] == "str":
        triple = (items[0][1], items[0][2], items[1][1])
        if triple in admission.methods:
            return ("method", *triple)
        raise _forbidden(triple[0], f"{triple[1]}.{triple[2]}")
    raise UnsafePickleError("refusing a pickle that calls getattr on something computed")


def _check_state(
    state: tuple[Any, ...],
    sealed: dict[int, list[Any]],
    admission: Admission,
    nested: bool = True,
) -> None:
    """Refuse a BUILD state that plants a dunder name or a callable; seal the dicts it applies.

    BUILD applies the state itself and what it holds through tuples: a
    slot-state dict, and the dict that some admitted ``__setstate__``
    methods ``setattr`` from a tuple state (pandas' ``NDArrayBacked``). In
    those dicts every key must be a string literal and not a dunder name,
    and no value may be a callable global; no item of those tuples may be
    one either. Deeper values are data (``Int8Dtype`` caches a class in a
    nested dict). Call results stay opaque: they were checked when they
    were called. With ``nested=False`` (a numpy dtype, whose C
    ``__setstate__`` reads a fields dict keyed by field names, ``__0__``
    included), only the state itself may not be a dict with such keys.
    """
    pending = [state]
    while pending:
        item = pending.pop()
        if _is_callable(item, admission):
            raise _bad_state(f"a callable ({item[1]}.{item[2]})")
        if item[0] == "called" and item[1:3] in admission.mappings:
            # dict(pairs) fills a dict the scan cannot see into.
            raise _bad_state(f"a dict built by a call ({item[1]}.{item[2]})")
        if item[0] == "tuple":
            pending += item[1]
            continue
        if item[0] != "dict" or (item is not state and not nested):
            continue
        sealed[id(item[1])] = item[1]
        for key, value in item[1]:
            if key[0] == "str" and is_dunder(key[1]):
                raise _bad_state("a dunder name")
            if key[0] == "called" or _is_callable(key, admission):
                raise _bad_state("a name that no string literal spells")
            if _is_callable(value, admission):
                raise _bad_state(f"a callable ({value[1]}.{value[2]})")


def _is_callable(item: tuple[Any, ...], admission: Admission) -> bool:
    return item[0] == "method" or (item[0] == "global" and item[1:] not in admission.data)


def _add_to(target: tuple[Any, ...], items: list[tuple[Any, ...]], sealed: dict[int, Any]) -> None:
    """Record what SETITEM(S)/APPEND(S) add to a tracked dict or list."""
    if target[0] in _CALLABLE_KINDS:
        raise UnsafePickleError("refusing a pickle that changes a global")
    if target[0] not in ("dict", "list"):
        return
    if id(target[1]) in sealed:
        raise UnsafePickleError("refusing a pickle that changes a BUILD state after its BUILD")
    if target[0] == "dict":
        if len(items) % 2:
            raise _malformed("odd number of dict items")
        target[1].extend(zip(items[::2], items[1::2], strict=True))
    else:
        target[1].extend(items)


def scan(data: bytes, admission: Admission) -> None:  # noqa: C901 - one opcode dispatch over one stack model; split, the model would scatter
    """Raise `UnsafePickleError` (or `ForbiddenGlobalError`) unless ``data`` is safe to load."""
    stack: list[tuple[Any, ...]] = []
    marks: list[int] = []
    memo: dict[int, tuple[Any, ...]] = {}
    # Containers a BUILD consumed, by id (kept alive here so that no id is reused).
    sealed: dict[int, list[Any]] = {}
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
                    items = _pop_mark(stack, marks)
                    target = _pop(stack, 1)[0]
                else:
                    target, *items = _pop(stack, len(opcode.stack_before))
                if target[0] in _CALLABLE_KINDS:
                    raise UnsafePickleError(f"refusing a pickle that applies {name} to a global")
                if name != "ADDITEMS":
                    _add_to(target, items, sealed)
                stack.append(target)
            elif name == "BUILD":
                target, state = _pop(stack, 2)
                if target[0] in _CALLABLE_KINDS:
                    raise UnsafePickleError("refusing a pickle that applies BUILD to a global")
                _check_state(state, sealed, admission, target[1:] not in _DTYPES)
                stack.append(target)
            elif name == "EMPTY_DICT":
                stack.append(("dict", []))
            elif name == "EMPTY_LIST":
                stack.append(("list", []))
            elif name == "DICT":
                items = _pop_mark(stack, marks)
                stack.append(("dict", []))
                _add_to(stack[-1], items, sealed)
            elif name == "LIST":
                stack.append(("list", _pop_mark(stack, marks)))
            elif name == "POP_MARK":
                _pop_mark(stack, marks)
            elif name == "DUP":
                top = _pop(stack, 1)[0]
                stack += (top, top)
            elif name == "STOP":
                _pop(stack, 1)
                end = cast(int, pos) + 1
            elif name == "FROZENSET":
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
