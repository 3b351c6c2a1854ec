"""BUILD gadgets: state dicts that plant dunder names or callables on an admitted instance.

A first BUILD puts ``{"__setstate__": numpy.ndarray}`` into an admitted
instance's ``__dict__`` (directly, or through ``NDFrame.__setstate__``, which
sets every key it is given); a second BUILD then makes the unpickler call
``ndarray((2**47,))``. ``numpy.ndarray`` is admitted only as an argument, and
no REDUCE ever calls it, so the rule against calling call results did not
see it. Each pickle here is written opcode by opcode, and is refused by the
static scan on its own, by the restricted unpickler on its own, and through
the serializer.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from secure_serde import PickleFallbackSerializer, UnsafePickleError
from secure_serde.pickling import PANDAS, _unpickler
from secure_serde.pickling._scan import Admission, scan
from tests.pickling.test_fallback_hostile import (
    HERE,
    RAN,
    READERS,
    Target,
    call,
    framed,
    glob,
    text,
)

__all__ = ["Named", "dunder", "mark"]


class Named(str):
    """A str subclass: equal to, and hashing like, the name it spells."""


def dunder(name: str) -> Named:
    """An admitted helper that returns a key no literal in the pickle spells."""
    return Named(name)


def mark(*args: Any) -> str:
    RAN.append("gadget")
    return "gadget"


EXTRA: list[Any] = [
    (HERE, "Target"),
    (__name__, "dunder"),
    (__name__, "mark"),
    ("builtins", "dict"),
]


def admission() -> Admission:
    serde = PickleFallbackSerializer(allowed=[PANDAS, *EXTRA])
    return serde._policy.admission


# --- hand-written gadgets -------------------------------------------------------------------

NDARRAY = glob("numpy", "ndarray")


def huge_shape() -> bytes:
    """``(2**47,)`` as a one-tuple: LONG1 carries the eight-byte integer."""
    raw = (2**47).to_bytes(7, "little")
    return pickle.LONG1 + bytes([len(raw)]) + raw + pickle.TUPLE1


def state(*pairs: tuple[bytes, bytes]) -> bytes:
    return pickle.MARK + b"".join(key + value for key, value in pairs) + pickle.DICT


def target_instance() -> bytes:
    return glob(HERE, "Target") + pickle.EMPTY_TUPLE + pickle.NEWOBJ


def frame_instance() -> bytes:
    return glob("pandas", "DataFrame") + pickle.EMPTY_TUPLE + pickle.NEWOBJ


def build(instance: bytes, first_state: bytes, then: bytes = huge_shape() + pickle.BUILD) -> bytes:
    return framed(instance + first_state + pickle.BUILD + then)


GADGETS: dict[str, bytes] = {
    # The gadget, on a test class admitted by type.
    "dict-ndarray": build(target_instance(), state((text("__setstate__"), NDARRAY))),
    # The same through the PANDAS preset alone: NDFrame.__setstate__ sets every key.
    "dataframe-ndarray": build(
        frame_instance(),
        state((text("_typ"), text("dataframe")), (text("__setstate__"), NDARRAY)),
    ),
    # Slot state: BUILD calls setattr(instance, "__setstate__", ndarray).
    "slotstate-ndarray": build(
        target_instance(),
        pickle.NONE + state((text("__setstate__"), NDARRAY)) + pickle.TUPLE2,
    ),
    # A dunder name on its own is refused, whatever its value.
    "dunder-class": build(
        target_instance(),
        pickle.NONE + state((text("__class__"), glob(HERE, "Target"))) + pickle.TUPLE2,
        b"",
    ),
    # A callable under an ordinary name: APPENDS would look up "extend" on the instance.
    "callable-value": build(
        target_instance(),
        state((text("extend"), glob(__name__, "mark"))),
        pickle.MARK + text("x") + pickle.APPENDS,
    ),
    # A key that no literal spells: a str subclass equal to "__setstate__".
    "computed-key": build(
        target_instance(),
        state((call(glob(__name__, "dunder"), text("__setstate__")), glob(__name__, "mark"))),
        text("x") + pickle.BUILD,
    ),
    # A state dict no literal spells: dict([("__setstate__", ndarray)]), builtins.dict admitted.
    "dict-call": build(
        target_instance(),
        call(
            glob("builtins", "dict"),
            pickle.EMPTY_LIST
            + pickle.MARK
            + text("__setstate__")
            + NDARRAY
            + pickle.TUPLE2
            + pickle.APPENDS,
        ),
    ),
    # Dicts nested in a tuple state: NDArrayBacked.__setstate__ setattrs state[2]'s items.
    "nested-dict": build(
        target_instance(),
        pickle.MARK
        + pickle.NONE
        + pickle.NONE
        + state((text("__setstate__"), NDARRAY))
        + pickle.TUPLE,
        b"",
    ),
}


@pytest.mark.parametrize("name", sorted(GADGETS))
def test_the_static_scan_alone_refuses_the_gadget(name: str) -> None:
    with pytest.raises(UnsafePickleError, match=r"state (dict )?that sets|state that"):
        scan(GADGETS[name], admission())


@pytest.mark.parametrize("name", sorted(GADGETS))
def test_the_unpickler_alone_refuses_the_gadget(name: str) -> None:
    unpickler = _unpickler._RestrictedUnpickler(GADGETS[name], admission())
    with pytest.raises(UnsafePickleError, match="state"):
        unpickler.load()
    assert RAN == []


@READERS
@pytest.mark.parametrize("name", ["dict-ndarray", "slotstate-ndarray"])
def test_the_serializer_refuses_the_gadget_before_anything_runs(
    read: Callable[[bytes], Any], name: str
) -> None:
    with pytest.raises(UnsafePickleError, match="state") as raised:
        read(GADGETS[name])
    # On 0.1.0 the second BUILD ran ndarray((2**47,)), which failed with MemoryError.
    assert "MemoryError" not in str(raised.value)
    assert RAN == []


def test_the_same_ordinary_state_still_loads() -> None:
    """Control: an admitted instance with an ordinary state dict is rebuilt."""
    plain = framed(target_instance() + state((text("greeting"), text("bonjour"))) + pickle.BUILD)
    scan(plain, admission())
    loaded = _unpickler.load(plain, admission())
    assert isinstance(loaded, Target)
    assert loaded.greeting == "bonjour"
    assert Target.greeting == "hello"


def test_a_state_dict_cannot_be_changed_after_its_build() -> None:
    """The scan checks a state when BUILD consumes it; later SETITEMs into it are refused."""
    sealed = framed(
        target_instance()
        + pickle.EMPTY_DICT
        + pickle.MEMOIZE
        + pickle.BUILD
        + pickle.BINGET
        + b"\x00"
        + text("__setstate__")
        + NDARRAY
        + pickle.SETITEM
        + pickle.POP
    )
    with pytest.raises(UnsafePickleError, match="after"):
        scan(sealed, admission())


def test_real_pickles_with_states_still_pass() -> None:
    frame = pd.DataFrame(
        {
            "n": np.arange(3),
            "s": ["a", "b", "c"],
            "t": pd.date_range("2024", periods=3, tz="Europe/Paris"),
            "c": pd.Categorical(["x", "y", "x"]),
        }
    )
    frame.attrs = {"__source__": "kept: attrs are a nested value, not a state"}
    values: list[Any] = [
        frame,
        frame["s"],
        np.zeros((2, 3), dtype=">i2")[:, ::2],
        np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]),
        # A dtype's state holds its fields dict, keyed by field names: dunder names are data there.
        np.zeros(2, dtype=[("__0__", "?"), ("__class__", ">i4")]),
        np.void((False,), dtype=[("__0__", "?")]),
        np.array([1, "x", None], dtype=object),
        pd.period_range("2024-01", periods=3, freq="M"),
        pd.interval_range(0, 3),
        Target(),
    ]
    for value in values:
        pickled = pickle.dumps(value, protocol=_unpickler.PICKLE_PROTOCOL)
        scan(pickled, admission())
        loaded = _unpickler.load(pickled, admission())
        assert type(loaded) is type(value)
