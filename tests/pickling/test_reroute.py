"""BUILD rerouting: the C unpickler sees every BUILD, through ``persistent_load``.

The run-time BUILD check depends on finding every BUILD opcode: the scan's
`Layout` (or `locate`'s, without a verdict) must name each one exactly where
the unpickler parses it. These tests hold the walker to ``pickletools``'
parse, check that no BUILD survives the rewrite, and that a BUILD left out of
a layout is what would have slipped through (so the rerouting is what refuses).
"""

from __future__ import annotations

import datetime
import pickle
import pickletools
from typing import Any

import numpy as np
import pandas as pd
import pytest

from secure_serde import ForbiddenGlobalError, UnsafePickleError
from secure_serde.pickling import _unpickler
from secure_serde.pickling._scan import Admission, Layout, locate, scan
from tests.pickling.test_fallback_build import GADGETS, admission
from tests.pickling.test_fallback_hostile import HERE, RAN, Target, framed, glob, text


def _values() -> list[Any]:
    frame = pd.DataFrame(
        {
            "n": np.arange(5),
            "f": np.linspace(0, 1, 5),
            "s": ["a", "b", "c", "d", "e"],
            "t": pd.date_range("2024", periods=5, tz="Europe/Paris"),
            "c": pd.Categorical(["x", "y", "x", "y", "x"]),
            "i": pd.array([1, None, 3, 4, 5], dtype="Int64"),
        }
    )
    big = pd.DataFrame({"s": [f"row {i}" for i in range(3000)], "n": np.arange(3000)})
    return [
        frame,
        big,  # several frames, and a large buffer outside any frame
        frame["s"],
        np.zeros((2, 3), dtype=">i2")[:, ::2],
        np.array([1, "x", None], dtype=object),
        pd.period_range("2024-01", periods=3, freq="M"),
        pd.interval_range(0, 3),
        Target(),
        pd.Timestamp("2024-01-01", tz="UTC"),
    ]


def _opcodes(data: bytes, name: str) -> list[int]:
    return [pos for op, _, pos in pickletools.genops(data) if op.name == name and pos is not None]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_scan_and_locate_find_every_build_and_frame_where_pickletools_does(value: Any) -> None:
    data = pickle.dumps(value, protocol=_unpickler.PICKLE_PROTOCOL)
    layout = scan(data, admission())
    assert layout == locate(data)
    builds = [start for start, end, new in layout.cuts if new]
    frames = [start for start, end, new in layout.cuts if not new]
    assert builds == _opcodes(data, "BUILD")
    assert frames == _opcodes(data, "FRAME")


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_the_rerouted_pickle_has_no_build_and_loads_the_same_value(value: Any) -> None:
    data = pickle.dumps(value, protocol=_unpickler.PICKLE_PROTOCOL)
    rerouted = scan(data, admission()).reroute(data)
    assert _opcodes(rerouted, "BUILD") == []
    assert len(_opcodes(rerouted, "BINPERSID")) == len(_opcodes(data, "BUILD"))
    assert _opcodes(rerouted, "FRAME") == [0]
    loaded = _unpickler.load(data, admission())
    _assert_same(loaded, pickle.loads(data))


def _assert_same(loaded: Any, expected: Any) -> None:
    assert type(loaded) is type(expected)
    if isinstance(expected, pd.DataFrame):
        pd.testing.assert_frame_equal(loaded, expected)
    elif isinstance(expected, pd.Series):
        pd.testing.assert_series_equal(loaded, expected)
    elif isinstance(expected, pd.Index):
        pd.testing.assert_index_equal(loaded, expected)
    elif isinstance(expected, np.ndarray):
        assert loaded.dtype == expected.dtype
        assert loaded.tolist() == expected.tolist()
    elif isinstance(expected, Target):
        assert vars(loaded) == vars(expected)
    else:
        assert loaded == expected


@pytest.mark.parametrize("name", sorted(GADGETS))
def test_every_gadget_runs_its_build_when_the_layout_leaves_it_out(name: str) -> None:
    """Control: the check is the rerouting. A layout with no cuts lets C's BUILD through."""
    gadget = GADGETS[name]
    unchecked = _unpickler._RestrictedUnpickler(gadget, admission(), Layout(()))
    refusal = ""
    try:
        unchecked.load()
    except Exception as exc:  # noqa: BLE001 - whatever the unchecked BUILD leads to
        refusal = str(exc)
    # Without the reroute, nothing refuses the state (the gadget runs or fails on its own).
    assert "BUILD state" not in refusal
    RAN.clear()
    with pytest.raises(UnsafePickleError, match="BUILD state"):
        _unpickler._RestrictedUnpickler(gadget, admission(), locate(gadget)).load()
    assert RAN == []


@pytest.mark.parametrize("opcode", [pickle.BINPERSID, pickle.PERSID + b"x\n"])
def test_the_pickles_own_persistent_ids_are_refused(opcode: bytes) -> None:
    persid = pickle.PROTO + b"\x05" + pickle.NONE + pickle.NONE + pickle.TUPLE2 + opcode
    data = persid + pickle.STOP
    if opcode == pickle.BINPERSID:
        with pytest.raises(UnsafePickleError, match="persistent"):
            locate(data)
    with pytest.raises(UnsafePickleError, match="persistent"):
        _unpickler._RestrictedUnpickler(data, admission()).load()
    with pytest.raises(UnsafePickleError, match="PERSID"):
        scan(data, admission())


def test_a_persistent_load_of_anything_but_a_pair_is_refused() -> None:
    unpickler = _unpickler._RestrictedUnpickler(b"", admission())
    for pid in ("x", (1, 2, 3), [Target(), {}]):
        with pytest.raises(UnsafePickleError, match="persistent"):
            unpickler.persistent_load(pid)


@pytest.mark.parametrize("cut", [1, 2, 5, 11, 12, 40])
def test_a_truncated_pickle_is_refused_without_a_verdict(cut: int) -> None:
    data = pickle.dumps(Target(), protocol=_unpickler.PICKLE_PROTOCOL)
    with pytest.raises(UnsafePickleError):
        _unpickler._RestrictedUnpickler(data[:cut], admission()).load()


def test_a_global_resolved_under_one_admission_is_refused_under_another() -> None:
    """The cache of resolved globals never widens an admission."""
    data = pickle.dumps(datetime.timedelta(days=1), protocol=_unpickler.PICKLE_PROTOCOL)
    broad = Admission(frozenset({("datetime", "timedelta")}))
    assert _unpickler.load(data, broad) == datetime.timedelta(days=1)
    narrow = Admission(frozenset({("datetime", "date")}))
    with pytest.raises(ForbiddenGlobalError):
        _unpickler._RestrictedUnpickler(data, narrow, Layout(())).load()


@pytest.mark.parametrize(
    "state",
    [
        pickle.MARK + text("greeting") + text("changed") + pickle.DICT,  # the class's __dict__
        pickle.NONE
        + pickle.MARK
        + text("greeting")
        + text("changed")
        + pickle.DICT
        + pickle.TUPLE2,  # slot state: setattr
    ],
    ids=["dict", "slotstate"],
)
def test_the_run_time_check_alone_refuses_build_on_a_global(state: bytes) -> None:
    """Without the scan, BUILD aimed at an admitted class itself is refused at run time."""
    data = framed(glob(HERE, "Target") + state + pickle.BUILD)
    with pytest.raises(UnsafePickleError, match="global"):
        _unpickler._RestrictedUnpickler(data, admission()).load()
    assert Target.greeting == "hello"
