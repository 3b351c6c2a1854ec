"""A static check of a pickle's opcodes, run before a single one of them executes.

`scan` walks the opcodes with its own table (about four times faster than
``pickletools.genops``) over a symbolic stack that knows globals, string
literals, dicts, lists and call results, and refuses what SECURITY.md lists:
whatever would let an admitted name reach further than itself. It runs on
write too, so nothing is written that could not be read back, and returns the
`Layout` the unpickler needs to hand every BUILD to its run-time check.
"""

from __future__ import annotations

import pickletools
from dataclasses import dataclass
from typing import Any, Final

from secure_serde._errors import ForbiddenGlobalError, UnsafePickleError

GETATTR: Final = ("builtins", "getattr")

_STRINGS: Final = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"})
# Never written by this library, so never read: less for a hostile pickle to work with.
_REFUSED: Final = frozenset({
    "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER", "EXT1", "EXT2", "EXT4", "OBJ", "INST",
    "INT", "LONG", "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "FLOAT", "GET", "PUT",
})  # fmt: skip
_CALLS: Final = frozenset({"REDUCE", "NEWOBJ", "NEWOBJ_EX"})
_MUTATORS: Final = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS"})
_CALLABLE_KINDS: Final = frozenset({"global", "method"})

# How each opcode's argument is laid out, from pickletools' own table:
# (name, fixed size, length prefix, items before, items after). A length
# prefix of 1, 4 or 8 is a little-endian byte count before the argument;
# -1 is one newline-terminated line, -2 two (GLOBAL, INST).
_Entry = tuple[str, int, int, int, int]
_LINE: Final = -1
_PAIR: Final = -2
# Arguments whose 4-byte length prefix is signed: a negative one is malformed.
_SIGNED4: Final = frozenset({"BINSTRING", "LONG4"})


def _table() -> tuple[_Entry | None, ...]:
    table: list[_Entry | None] = [None] * 256
    prefixes = {
        pickletools.UP_TO_NEWLINE: _LINE,
        pickletools.TAKEN_FROM_ARGUMENT1: 1,
        pickletools.TAKEN_FROM_ARGUMENT4: 4,
        pickletools.TAKEN_FROM_ARGUMENT4U: 4,
        pickletools.TAKEN_FROM_ARGUMENT8U: 8,
    }
    for op in pickletools.opcodes:
        n = 0 if op.arg is None else op.arg.n
        prefix = _PAIR if op.arg and op.arg.name == "stringnl_noescape_pair" else prefixes.get(n, 0)
        entry = (op.name, max(n, 0), prefix, len(op.stack_before), len(op.stack_after))
        table[ord(op.code)] = entry
    return tuple(table)


_TABLE: Final = _table()
_BUILD_CODE: Final = ord("b")
_SHORT_BINUNICODE_CODE: Final = 0x8C
_MEMOIZE_CODE: Final = 0x94
_FRAME_CODE: Final = 0x95
_FRAME_SIZE: Final = 9
# What a BUILD becomes for the C unpickler: TUPLE2 (instance, state), then
# BINPERSID, which hands the pair to the unpickler's persistent_load.
_REROUTED_BUILD: Final = b"\x86Q"


@dataclass(frozen=True)
class Layout:
    """``(start, end, replacement)`` cuts: each BUILD becomes ``TUPLE2 BINPERSID``.

    Each FRAME is dropped (its length would no longer match) and one frame
    around the whole result takes their place.
    """

    cuts: tuple[tuple[int, int, bytes], ...]

    def reroute(self, data: bytes) -> bytes:
        size = len(data) + sum(len(new) - (end - start) for start, end, new in self.cuts)
        view = memoryview(data)
        parts: list[bytes | memoryview] = [bytes((_FRAME_CODE,)) + size.to_bytes(8, "little")]
        last = 0
        for start, end, replacement in self.cuts:
            parts += (view[last:start], replacement)
            last = end
        parts.append(view[last:])
        return b"".join(parts)


def _cut(code: int, pos: int) -> tuple[int, int, bytes]:
    if code == _BUILD_CODE:
        return (pos, pos + 1, _REROUTED_BUILD)
    return (pos, pos + _FRAME_SIZE, b"")


def _arg_end(data: bytes, start: int, prefix: int, name: str) -> tuple[int, int]:
    """Where a variable-length argument starting at ``start`` begins and ends (``ValueError``)."""
    if prefix > 0:
        count = int.from_bytes(data[start : start + prefix], "little")
        if len(data) < start + prefix or (prefix == 4 and name in _SIGNED4 and count >= 2**31):
            raise ValueError("truncated or negative length")
        return start + prefix, start + prefix + count
    end = data.find(b"\n", start)
    if prefix == _PAIR and end >= 0:
        end = data.find(b"\n", end + 1)
    if end < 0:
        raise ValueError("no newline")
    return start, end + 1


def locate(data: bytes) -> Layout:
    """The `Layout` of ``data``, for an unpickler handed no scan verdict.

    Persistent ids are refused, since a rerouted BUILD is one.
    """
    table = _TABLE
    size = len(data)
    pos = 0
    cuts: list[tuple[int, int, bytes]] = []
    try:
        while pos < size:
            code = data[pos]
            if code == _SHORT_BINUNICODE_CODE and pos + 1 < size:
                pos += 2 + data[pos + 1]  # a short string: walked past, as below
                continue
            entry = table[code]
            if entry is None:
                raise ValueError("unknown opcode")
            name, fixed, prefix, _, _ = entry
            if prefix:
                _, end = _arg_end(data, pos + 1, prefix, name)
            else:
                end = pos + 1 + fixed
            if end > size:
                raise ValueError("truncated")
            if code in (_BUILD_CODE, _FRAME_CODE):
                cuts.append(_cut(code, pos))
            elif name in ("PERSID", "BINPERSID"):
                raise UnsafePickleError("refusing a pickle that uses persistent ids")
            elif name == "STOP":
                return Layout(tuple(cuts))
            pos = end
    except ValueError:
        pass
    raise _malformed("truncated or not a pickle")


@dataclass(frozen=True)
class Admission:
    """What a pickle may name: ``(module, qualname)`` globals and ``getattr`` triples.

    ``uncallable`` globals may only be arguments (calling ``numpy.ndarray``
    allocates any shape asked for); ``data`` ones are not callable
    (``pandas.NA``), so a BUILD state may hold them; ``mappings`` are dict
    types, whose call results the scan cannot see into.
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
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def bad_state(what: str) -> UnsafePickleError:
    return UnsafePickleError(f"refusing a pickle with a BUILD state that sets {what}")


def forbidden(module: str, name: str) -> ForbiddenGlobalError:
    return ForbiddenGlobalError(
        f"refusing a pickle that names {module}.{name}, which is not admitted",
        module=module,
        name=name,
    )


def _malformed(reason: str) -> UnsafePickleError:
    return UnsafePickleError(f"refusing a malformed pickle: {reason}")


def _pop(stack: list[tuple[Any, ...]], count: int) -> list[tuple[Any, ...]]:
    start = len(stack) - count
    if start < 0:
        raise _malformed("stack underflow")
    items = stack[start:]
    del stack[start:]
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
        raise forbidden(module, name)
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
        raise forbidden(triple[0], f"{triple[1]}.{triple[2]}")
    raise UnsafePickleError("refusing a pickle that calls getattr on something computed")


def _check_state(
    state: tuple[Any, ...], sealed: dict[int, list[Any]], admission: Admission, nested: bool = True
) -> None:
    """Refuse a BUILD state that plants a dunder name or a callable; seal the dicts it applies.

    BUILD applies the state and, through its tuples, a slot-state dict or
    the dict pandas' ``NDArrayBacked.__setstate__`` ``setattr``s; deeper
    values are data (``Int8Dtype`` caches a class in a nested dict).
    ``nested=False`` is for a numpy dtype, whose fields dict may hold ``__0__``.
    """
    pending = [state]
    while pending:
        item = pending.pop()
        if _is_callable(item, admission):
            raise bad_state(f"a callable ({item[1]}.{item[2]})")
        if item[0] == "called" and item[1:3] in admission.mappings:
            # dict(pairs) fills a dict the scan cannot see into.
            raise bad_state(f"a dict built by a call ({item[1]}.{item[2]})")
        if item[0] == "tuple":
            pending += item[1]
            continue
        if item[0] != "dict" or (item is not state and not nested):
            continue
        sealed[id(item[1])] = item[1]
        for key, value in item[1]:
            if key[0] == "str" and is_dunder(key[1]):
                raise bad_state("a dunder name")
            if key[0] == "called" or _is_callable(key, admission):
                raise bad_state("a name that no string literal spells")
            if _is_callable(value, admission):
                raise bad_state(f"a callable ({value[1]}.{value[2]})")


def _is_callable(item: tuple[Any, ...], admission: Admission) -> bool:
    return item[0] == "method" or (item[0] == "global" and item[1:] not in admission.data)


def _add_to(target: tuple[Any, ...], items: list[tuple[Any, ...]], sealed: dict[int, Any]) -> None:
    if target[0] not in ("dict", "list"):
        return
    if id(target[1]) in sealed:
        raise UnsafePickleError("refusing a pickle that changes a BUILD state after its BUILD")
    if target[0] == "dict":
        # An odd count makes zip raise ValueError: a malformed pickle.
        target[1].extend(zip(items[::2], items[1::2], strict=True))
    else:
        target[1].extend(items)


def scan(data: bytes, admission: Admission) -> Layout:  # noqa: C901 - one opcode dispatch over one stack model; split, the model would scatter
    """Raise `UnsafePickleError` (or `ForbiddenGlobalError`) unless ``data`` is safe to load."""
    stack: list[tuple[Any, ...]] = []
    marks: list[int] = []
    memo: dict[int, tuple[Any, ...]] = {}
    # Containers a BUILD consumed, by id (kept alive here so that no id is reused).
    sealed: dict[int, list[Any]] = {}
    cuts: list[tuple[int, int, bytes]] = []
    table = _TABLE
    size = len(data)
    pos = 0
    end = -1
    push = stack.append
    try:
        while end < 0:
            if pos >= size:
                raise ValueError("no STOP")
            code = data[pos]
            # The two opcodes of every short string (most of a text column's
            # pickle), inline: exactly what the general branches below do.
            if code == _SHORT_BINUNICODE_CODE and pos + 1 < size:
                stop = pos + 2 + data[pos + 1]
                if stop > size:
                    raise ValueError("truncated")
                item = ("str", str(data[pos + 2 : stop], "utf-8", "surrogatepass"))
                push(item)
                # Nearly always followed by MEMOIZE of that string: taken here too.
                if stop < size and data[stop] == _MEMOIZE_CODE:
                    memo[len(memo)] = item
                    stop += 1
                pos = stop
                continue
            if code == _MEMOIZE_CODE:
                if not stack or stack[-1] is _MARK:
                    raise _malformed("nothing to memoize")
                memo[len(memo)] = stack[-1]
                pos += 1
                continue
            entry = table[code]
            if entry is None:
                raise ValueError("unknown opcode")
            name, fixed, prefix, before, after = entry
            if prefix:
                start, stop = _arg_end(data, pos + 1, prefix, name)
            else:
                start, stop = pos + 1, pos + 1 + fixed
            if stop > size:
                raise ValueError("truncated")
            here, pos = pos, stop
            if name in _STRINGS:
                stack.append(("str", str(data[start:stop], "utf-8", "surrogatepass")))
            elif name == "MARK":
                marks.append(len(stack))
                stack.append(_MARK)
            elif name in ("BINGET", "LONG_BINGET"):
                index = int.from_bytes(data[start:stop], "little")
                if index not in memo:
                    raise _malformed("memo key missing")
                stack.append(memo[index])
            elif name in ("BINPUT", "LONG_BINPUT"):
                if not stack or stack[-1] is _MARK:
                    raise _malformed("nothing to memoize")
                memo[int.from_bytes(data[start:stop], "little")] = stack[-1]
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                stack.append(("tuple", tuple(_pop(stack, before))))
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
                module_name, qualname_, _ = str(data[start:stop], "utf-8").split("\n")
                stack.append(_check_global(module_name, qualname_, admission))
            elif name in _CALLS:
                popped = _pop(stack, before)
                stack.append(_call(popped[0], popped[1], admission))
            elif name in _MUTATORS:
                if name in ("APPENDS", "SETITEMS", "ADDITEMS"):
                    items = _pop_mark(stack, marks)
                    target = _pop(stack, 1)[0]
                else:
                    target, *items = _pop(stack, before)
                if target[0] in _CALLABLE_KINDS:
                    raise UnsafePickleError(f"refusing a pickle that applies {name} to a global")
                if name != "ADDITEMS":
                    _add_to(target, items, sealed)
                stack.append(target)
            elif name == "BUILD":
                target, state = _pop(stack, 2)
                if target[0] in _CALLABLE_KINDS:
                    raise UnsafePickleError("refusing a pickle that applies BUILD to a global")
                _check_state(state, sealed, admission, target[1:] != ("numpy", "dtype"))
                stack.append(target)
                cuts.append(_cut(code, here))
            elif name in ("EMPTY_DICT", "EMPTY_LIST"):
                stack.append(("dict" if name == "EMPTY_DICT" else "list", []))
            elif name == "DICT":
                items = _pop_mark(stack, marks)
                stack.append(("dict", []))
                _add_to(stack[-1], items, sealed)
            elif name == "LIST":
                stack.append(("list", _pop_mark(stack, marks)))
            elif name in ("POP_MARK", "FROZENSET"):
                _pop_mark(stack, marks)
                stack += [_DATA] * after
            elif name == "DUP":
                top = _pop(stack, 1)[0]
                stack += (top, top)
            elif name == "STOP":
                _pop(stack, 1)
                end = pos
            elif name == "FRAME":
                cuts.append(_cut(code, here))
            else:
                _pop(stack, before)
                stack += [_DATA] * after
    except ValueError as exc:
        raise _malformed("truncated or not a pickle") from exc
    if end != len(data):
        raise _malformed("bytes after the STOP opcode")
    if stack or marks:
        raise _malformed("values left on the stack")
    return Layout(tuple(cuts))
