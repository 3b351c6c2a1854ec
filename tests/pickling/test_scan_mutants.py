"""The static scan on its own refuses every global it was not told to admit.

`find_class` refuses the same globals later, so a scan that admitted a
foreign global survived the whole suite (issue 9). These tests call
``_scan.scan`` alone, on pickles that name a foreign global in every shape the
scan tracks: first thing, after the call of an admitted class (``REDUCE``,
``NEWOBJ``, ``NEWOBJ_EX``), as an argument, as a dict value and behind the memo.
Each shape is also scanned with an admitted global in the same place, and
must pass: the refusal comes from the name, not from the shape.
"""

from __future__ import annotations

import collections
import datetime
import os
import pickle
import struct
from collections.abc import Callable

import pytest

from secure_serde import ForbiddenGlobalError, UnsafePickleError
from secure_serde.pickling._scan import Admission, scan

ADMITTED = Admission(
    frozenset({("collections", "OrderedDict"), ("datetime", "date"), ("datetime", "timedelta")})
)
# The name os.system pickles under on POSIX, its alias, and other names that run code;
# then near misses of admitted names (another module, an attribute of an admitted class).
FOREIGN = [
    ("posix", "system"),
    ("os", "system"),
    ("builtins", "eval"),
    ("subprocess", "Popen"),
    ("datetime", "datetime"),
    ("collection", "OrderedDict"),
    ("collections", "OrderedDict.fromkeys"),
    ("datetime", "date.__reduce_ex__"),
]
STAND_IN = ("datetime", "date")


def text(value: str) -> bytes:
    raw = value.encode()
    return pickle.SHORT_BINUNICODE + bytes([len(raw)]) + raw


def glob(module: str, name: str) -> bytes:
    return pickle.GLOBAL + f"{module}\n{name}\n".encode()


def stack_glob(module: str, name: str) -> bytes:
    return text(module) + text(name) + pickle.STACK_GLOBAL


def v2(body: bytes) -> bytes:
    return pickle.PROTO + b"\x02" + body + pickle.STOP


def v4(body: bytes) -> bytes:
    return pickle.PROTO + b"\x04" + body + pickle.STOP


ORDERED_DICT_CALLED = glob("collections", "OrderedDict") + pickle.EMPTY_TUPLE + pickle.REDUCE
ORDERED_DICT_NEWOBJ = stack_glob("collections", "OrderedDict") + pickle.EMPTY_TUPLE + pickle.NEWOBJ
TIMEDELTA_NEWOBJ_EX = (
    stack_glob("datetime", "timedelta") + pickle.EMPTY_TUPLE + pickle.EMPTY_DICT + pickle.NEWOBJ_EX
)

# Calls whatever is on top of the stack with one argument.
CALL_ID = text("id") + pickle.TUPLE1 + pickle.REDUCE

Shape = Callable[[str, str], bytes]

SHAPES: dict[str, Shape] = {
    "GLOBAL alone": lambda m, n: v2(glob(m, n)),
    "STACK_GLOBAL alone": lambda m, n: v4(stack_glob(m, n)),
    "GLOBAL called after REDUCE": lambda m, n: v2(
        ORDERED_DICT_CALLED + glob(m, n) + CALL_ID + pickle.TUPLE2
    ),
    "STACK_GLOBAL called after REDUCE": lambda m, n: v4(
        ORDERED_DICT_CALLED + stack_glob(m, n) + CALL_ID + pickle.TUPLE2
    ),
    "STACK_GLOBAL named after NEWOBJ": lambda m, n: v4(
        ORDERED_DICT_NEWOBJ + stack_glob(m, n) + pickle.TUPLE2
    ),
    "GLOBAL called after NEWOBJ": lambda m, n: v2(
        ORDERED_DICT_NEWOBJ + glob(m, n) + pickle.EMPTY_TUPLE + pickle.REDUCE + pickle.TUPLE2
    ),
    "STACK_GLOBAL after NEWOBJ_EX": lambda m, n: v4(
        TIMEDELTA_NEWOBJ_EX + stack_glob(m, n) + pickle.EMPTY_TUPLE + pickle.REDUCE + pickle.TUPLE2
    ),
    "argument of an admitted call": lambda m, n: v4(
        stack_glob("collections", "OrderedDict") + glob(m, n) + pickle.TUPLE1 + pickle.REDUCE
    ),
    "value set into an admitted instance": lambda m, n: v4(
        ORDERED_DICT_CALLED + text("k") + stack_glob(m, n) + pickle.SETITEM
    ),
    "memoized, then fetched and called": lambda m, n: v4(
        ORDERED_DICT_CALLED
        + pickle.MEMOIZE
        + stack_glob(m, n)
        + pickle.MEMOIZE
        + pickle.POP
        + pickle.BINGET
        + b"\x01"
        + pickle.EMPTY_TUPLE
        + pickle.REDUCE
        + pickle.TUPLE2
    ),
}


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_the_shape_passes_with_an_admitted_global(shape: Shape) -> None:
    scan(shape(*STAND_IN), ADMITTED)


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize(("module", "name"), FOREIGN, ids=[".".join(f) for f in FOREIGN])
def test_scan_alone_refuses_a_foreign_global(shape: Shape, module: str, name: str) -> None:
    with pytest.raises(ForbiddenGlobalError) as raised:
        scan(shape(module, name), ADMITTED)
    assert (raised.value.module, raised.value.name) == (module, name)


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_real_pickles_naming_os_system_after_an_admitted_value(protocol: int) -> None:
    """What ``pickle`` itself writes, GLOBAL up to protocol 3 and STACK_GLOBAL after."""
    admitted = [collections.OrderedDict(a=1), datetime.timedelta(days=2), datetime.date]
    scan(pickle.dumps(admitted, protocol=protocol), ADMITTED)
    with pytest.raises(ForbiddenGlobalError) as raised:
        scan(pickle.dumps([*admitted, os.system], protocol=protocol), ADMITTED)
    assert (raised.value.module, raised.value.name) == (os.system.__module__, "system")


def test_an_empty_admission_refuses_even_the_first_global() -> None:
    with pytest.raises(ForbiddenGlobalError):
        scan(pickle.dumps(collections.OrderedDict(), protocol=5), Admission(frozenset()))
    # Plain data names no global and passes any admission.
    scan(pickle.dumps({"a": [1, 2.5, b"x", None]}, protocol=5), Admission(frozenset()))


def test_a_frame_does_not_hide_a_foreign_global() -> None:
    def framed(module: str, name: str) -> bytes:
        body = ORDERED_DICT_CALLED + stack_glob(module, name) + pickle.TUPLE2 + pickle.STOP
        return pickle.PROTO + b"\x04" + pickle.FRAME + struct.pack("<Q", len(body)) + body

    scan(framed(*STAND_IN), ADMITTED)
    with pytest.raises(ForbiddenGlobalError):
        scan(framed("posix", "system"), ADMITTED)


# --- stack bookkeeping that the scan's rules rely on (more surviving mutants) ------------------

GETATTR_PAIR = (
    stack_glob("builtins", "getattr")
    + stack_glob("zoneinfo", "ZoneInfo")
    + text("_unpickle")
    + pickle.TUPLE2
    + pickle.REDUCE
)
WITH_METHODS = Admission(
    frozenset({("builtins", "getattr"), ("zoneinfo", "ZoneInfo"), ("collections", "OrderedDict")}),
    frozenset({("zoneinfo", "ZoneInfo", "_unpickle")}),
)

MALFORMED = {
    "MEMOIZE on an empty stack": v4(pickle.MEMOIZE + pickle.NONE),
    "MEMOIZE of a mark": v4(pickle.MARK + pickle.MEMOIZE + pickle.POP_MARK + pickle.NONE),
    "BINPUT on an empty stack": v4(pickle.BINPUT + b"\x00" + pickle.NONE),
    "BINPUT of a mark": v4(pickle.MARK + pickle.BINPUT + b"\x00" + pickle.POP_MARK + pickle.NONE),
    "a mark as REDUCE's argument": v4(
        stack_glob("collections", "OrderedDict") + pickle.MARK + pickle.REDUCE + pickle.POP_MARK
    ),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_stack_use_is_refused(data: bytes) -> None:
    with pytest.raises(UnsafePickleError, match="malformed"):
        scan(data, ADMITTED)


MUTATING_A_GLOBAL = {
    "BUILD on a DUP of a global": v4(
        stack_glob("collections", "OrderedDict") + pickle.DUP + pickle.EMPTY_DICT + pickle.BUILD
    ),
    "BUILD on a memoized global": v4(
        stack_glob("collections", "OrderedDict")
        + pickle.BINPUT
        + b"\x00"
        + pickle.POP
        + pickle.BINGET
        + b"\x00"
        + pickle.EMPTY_DICT
        + pickle.BUILD
    ),
    "BUILD on a getattr method": v4(GETATTR_PAIR + pickle.EMPTY_DICT + pickle.BUILD),
}


@pytest.mark.parametrize("data", MUTATING_A_GLOBAL.values(), ids=MUTATING_A_GLOBAL.keys())
def test_state_aimed_at_a_global_is_refused(data: bytes) -> None:
    with pytest.raises(UnsafePickleError, match="BUILD to a global"):
        scan(data, WITH_METHODS)


def test_calling_a_built_instance_is_a_nested_reduce_chain() -> None:
    built = ORDERED_DICT_CALLED + pickle.EMPTY_DICT + pickle.BUILD
    scan(v4(built), ADMITTED)
    with pytest.raises(UnsafePickleError, match="nested reduce chain"):
        scan(v4(built + pickle.EMPTY_TUPLE + pickle.REDUCE), ADMITTED)


VALID = {
    "a set (ADDITEMS)": pickle.dumps({1, 2, 3}, protocol=4),
    "shared references (BINPUT/BINGET)": pickle.dumps(
        [collections.OrderedDict(a=1)] * 3, protocol=2
    ),
    "POP_MARK": v4(pickle.MARK + pickle.NONE + pickle.NONE + pickle.POP_MARK + pickle.NONE),
}


@pytest.mark.parametrize("data", VALID.values(), ids=VALID.keys())
def test_valid_stack_use_passes(data: bytes) -> None:
    scan(data, ADMITTED)
