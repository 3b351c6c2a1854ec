"""The run-time half of the pickle gate, and a scan branch, that surviving mutants showed untested.

`_RestrictedUnpickler.find_class` must name what it refused, like the scan
does; and ``getattr`` called on plain data (not a ``(class, "name")`` tuple)
is refused as an `UnsafePickleError`, never an ``IndexError`` escaping the scan.
"""

from __future__ import annotations

import pickle

import pytest

from secure_serde import ForbiddenGlobalError, UnsafePickleError
from secure_serde.pickling import _unpickler
from secure_serde.pickling._scan import GETATTR, Admission, scan

ZONEINFO = ("zoneinfo", "ZoneInfo")
WITH_GETATTR = Admission(
    frozenset({GETATTR, ZONEINFO}), frozenset({("zoneinfo", "ZoneInfo", "_unpickle")})
)


def _text(value: str) -> bytes:
    return pickle.SHORT_BINUNICODE + bytes([len(value)]) + value.encode()


def _getattr_called_with(args: bytes) -> bytes:
    head = pickle.PROTO + b"\x04" + _text("builtins") + _text("getattr") + pickle.STACK_GLOBAL
    return head + args + pickle.REDUCE + pickle.STOP


def test_find_class_names_the_refused_global() -> None:
    data = pickle.PROTO + b"\x02" + pickle.GLOBAL + b"posix\nsystem\n" + pickle.STOP
    unpickler = _unpickler._RestrictedUnpickler(data, Admission(frozenset({ZONEINFO})))
    with pytest.raises(ForbiddenGlobalError) as raised:
        unpickler.load()
    assert (raised.value.module, raised.value.name) == ("posix", "system")


@pytest.mark.parametrize(
    "args", [pickle.EMPTY_TUPLE, pickle.EMPTY_LIST, pickle.NONE], ids=["()", "[]", "None"]
)
def test_getattr_on_plain_data_is_refused_by_the_scan(args: bytes) -> None:
    with pytest.raises(UnsafePickleError, match="getattr"):
        scan(_getattr_called_with(args), WITH_GETATTR)


def test_getattr_on_the_admitted_pair_passes_the_scan() -> None:
    pair = _text("zoneinfo") + _text("ZoneInfo") + pickle.STACK_GLOBAL + _text("_unpickle")
    scan(_getattr_called_with(pair + pickle.TUPLE2), WITH_GETATTR)
