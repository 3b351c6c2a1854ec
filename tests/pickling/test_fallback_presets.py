"""The presets admit exactly the globals their types' pickles need, found from a corpus.

An independent recorder (a plain ``pickle.Unpickler`` whose ``find_class``
notes every global, and whose ``getattr`` notes every attribute) loads the
pickles of a representative corpus per type. The union must equal the
pinned list in ``secure_serde/pickling/_presets.py``: a name the corpus
needs but the list lacks would refuse real data; a name the list has but
no corpus value needs would admit more than necessary.
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import io
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from secure_serde import ForbiddenGlobalError, PickleFallbackSerializer, PickleNotAllowedError
from secure_serde.pickling import NUMPY, PANDAS, _presets
from secure_serde.pickling._unpickler import PICKLE_PROTOCOL
from tests import strategies as cs
from tests import strategies_pandas  # noqa: F401  (registers exact comparisons)


class _Recorder(pickle.Unpickler):
    def __init__(self, data: bytes, found: set[tuple[str, ...]]) -> None:
        super().__init__(io.BytesIO(data))
        self._found = found

    def find_class(self, module: str, name: str) -> Any:
        self._found.add((module, name))
        target = super().find_class(module, name)
        if (module, name) != ("builtins", "getattr"):
            return target

        def recording_getattr(obj: Any, attribute: str) -> Any:
            self._found.add((obj.__module__, obj.__qualname__, attribute))
            return getattr(obj, attribute)

        return recording_getattr


def needed(values: list[Any]) -> tuple[set[tuple[str, str]], set[tuple[str, str, str]]]:
    found: set[tuple[str, ...]] = set()
    for value in values:
        _Recorder(pickle.dumps(value, protocol=PICKLE_PROTOCOL), found).load()
    pairs = {(item[0], item[1]) for item in found if len(item) == 2}
    triples = {(item[0], item[1], item[2]) for item in found if len(item) == 3}
    return pairs, triples


# --- the corpus -----------------------------------------------------------------------------

N = 6
NULLABLE = ["Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"]
NULLABLE += ["Float32", "Float64", "boolean"]


def numpy_arrays() -> list[Any]:
    return [
        np.arange(6).reshape(2, 3),
        np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        np.arange(10)[::2],
        np.array([(1, 2.0, b"x")], dtype=[("a", "i4"), ("b", "f8"), ("c", "S3")]),
        np.array([1, "a", None, np.int64(1), np.float32(2)], dtype=object),
        np.array(["2024-01-01"], dtype="datetime64[ns]"),
        np.array([5], dtype="timedelta64[s]"),
        np.array(5),
        np.zeros((0, 3)),
        np.array(["ab", "c"]),
        np.array([1 + 2j]),
    ]


def numpy_scalars() -> list[Any]:
    return [
        np.int64(3), np.uint64(2**63), np.float32(1.5), np.float16(0.5), np.bool_(True),
        np.complex128(1j), np.datetime64("2024-01-01T00:00:00"), np.timedelta64(5, "s"),
        np.void(b"ab"), np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")])[0],
        np.longdouble(1.5), np.bytes_(b"x"),
    ]  # fmt: skip


def offsets() -> list[Any]:
    named = [getattr(pd.offsets, name)() for name in _presets._OFFSETS]
    return [*named, pd.DateOffset(months=1)]


def indexes() -> list[Any]:
    return [
        pd.Index(["a", "b"]),
        pd.Index([1, 2]),
        pd.Index(
            ["a", 1, pd.Timestamp("2024"), pd.Timedelta("1h"), pd.NaT, np.int8(1)], dtype=object
        ),
        pd.RangeIndex(2, 10, 3, name="r"),
        pd.date_range("2024", periods=3, tz="Europe/Paris"),
        pd.date_range("2024", periods=3, tz=dt.timezone(dt.timedelta(hours=5))),
        pd.timedelta_range("1D", periods=3),
        pd.period_range("2024", periods=3, freq="M"),
        pd.interval_range(0, 3),
        pd.MultiIndex.from_tuples([("a", 1), ("b", 2)], names=["k", "n"]),
        pd.CategoricalIndex(["a", "b", "a"]),
        *(pd.Index(pd.array([1, None], dtype=dtype)) for dtype in NULLABLE),
        *(pd.date_range("2024-01-01", periods=3, freq=offset) for offset in offsets()),
    ]


def arrays() -> list[Any]:
    return [
        pd.Categorical(["x", "y"], ordered=True),
        *(pd.array([1, None], dtype=dtype) for dtype in NULLABLE),
        pd.array(["a", None], dtype="string"),
        pd.array(["a", "b"], dtype="str"),
        pd.arrays.SparseArray([0, 0, 1]),
        pd.array(pd.date_range("2024", periods=2, tz="UTC")),
        pd.array(pd.timedelta_range("1D", periods=2)),
        pd.array(pd.period_range("2024", periods=2, freq="D")),
        pd.arrays.IntervalArray.from_breaks([0, 1, 2]),
    ]


def scalars() -> list[Any]:
    return [
        pd.Timestamp("2024-01-01", tz="Europe/Paris"),
        pd.Timestamp("2024-01-01", tz="UTC"),
        pd.Timedelta("1D"),
        pd.NaT,
        pd.NA,
        pd.Period("2024-01", freq="M"),
        pd.Interval(0, 1),
    ]


def frames() -> list[pd.DataFrame]:
    out = [pd.DataFrame({"x": pd.Series(array)}) for array in arrays()]
    out += [pd.DataFrame({"v": range(len(index))}, index=index) for index in indexes()]
    out.append(pd.DataFrame({"s": pd.Series(scalars(), dtype=object)}))
    out.append(pd.DataFrame({"n": pd.Series(numpy_scalars()[:3], dtype=object)}))
    out.append(pd.DataFrame({"t": pd.date_range("2024", periods=N, freq="h", tz="UTC")}))
    out.append(pd.DataFrame(np.zeros((3, 3))))
    return out


def series() -> list[pd.Series]:
    return [frame[column] for frame in frames() for column in frame.columns]


# --- exactly what each type needs -----------------------------------------------------------

CORPUS: dict[str, tuple[Callable[[], list[Any]], frozenset[tuple[str, str]]]] = {
    "numpy arrays": (numpy_arrays, _presets.NUMPY_ARRAY_GLOBALS),
    "numpy scalars": (numpy_scalars, _presets.NUMPY_SCALAR_GLOBALS),
    "pandas indexes, arrays, scalars": (
        lambda: indexes() + arrays() + scalars(),
        _presets.PANDAS_GLOBALS,
    ),
    "DataFrame": (frames, _presets.FRAME_GLOBALS),
    "Series": (series, _presets.SERIES_GLOBALS),
}


@pytest.mark.parametrize("kind", sorted(CORPUS))
def test_admitted_globals_are_exactly_what_the_corpus_needs(kind: str) -> None:
    corpus, pinned = CORPUS[kind]
    pairs, triples = needed(corpus())
    assert sorted(pairs - pinned) == []  # needed, not admitted: real data would be refused
    assert sorted(pinned - pairs) == []  # admitted, never needed: more than necessary
    if kind.startswith("numpy"):
        assert triples == set()
    else:
        assert triples == _presets.PANDAS_METHODS


def test_getattr_is_admitted_only_for_zoneinfo() -> None:
    assert {("zoneinfo", "ZoneInfo", "_unpickle")} == _presets.PANDAS_METHODS
    numpy_only = PickleFallbackSerializer(allowed=[NUMPY]).admitted_globals
    assert ("builtins", "getattr") not in numpy_only


@pytest.mark.parametrize(
    ("allowed", "values"),
    [
        (pd.DataFrame, frames),
        (pd.Series, series),
        (np.ndarray, numpy_arrays),
        (pd.Timestamp, lambda: scalars()[:2]),
    ],
)
def test_allowing_one_type_is_enough_for_its_values(
    allowed: type, values: Callable[[], list[Any]]
) -> None:
    serde = PickleFallbackSerializer(allowed=[allowed], allow_unauthenticated=True)
    for value in values():
        cs.assert_same(serde.loads_typed(serde.dumps_typed(value)), value)


def test_allowing_dataframe_does_not_admit_series() -> None:
    serde = PickleFallbackSerializer(allowed=[pd.DataFrame], allow_unauthenticated=True)
    assert ("pandas", "Series") not in serde.admitted_globals
    with pytest.raises(PickleNotAllowedError, match=r"pandas\.Series"):
        serde.dumps_typed(pd.Series([1]))
    planted = PickleFallbackSerializer(allowed=[pd.Series]).dumps_typed(pd.Series([1]))
    with pytest.raises(ForbiddenGlobalError, match=r"pandas\.Series"):
        serde.loads_typed(planted)


def test_numpy_preset_admits_no_pandas() -> None:
    admitted = PickleFallbackSerializer(allowed=[NUMPY]).admitted_globals
    assert {module.partition(".")[0] for module, _ in admitted} == {"numpy"}


def test_user_types_admit_themselves_only() -> None:
    serde = PickleFallbackSerializer(allowed=[decimal.Decimal])
    assert serde.admitted_globals == {("decimal", "Decimal")}


# --- every admitted name is what it claims to be --------------------------------------------

NEVER = {
    ("builtins", "eval"), ("builtins", "exec"), ("builtins", "compile"), ("builtins", "open"),
    ("builtins", "__import__"), ("builtins", "setattr"), ("builtins", "delattr"),
    ("builtins", "globals"), ("builtins", "vars"), ("os", "system"), ("posix", "system"),
    ("subprocess", "Popen"), ("importlib", "import_module"), ("pickle", "loads"),
    ("_pickle", "loads"), ("functools", "partial"), ("operator", "attrgetter"),
    ("operator", "methodcaller"), ("copyreg", "_reconstructor"), ("builtins", "object"),
}  # fmt: skip


def test_no_dangerous_global_is_admitted() -> None:
    admitted = PickleFallbackSerializer(allowed=[PANDAS, NUMPY]).admitted_globals
    assert admitted & NEVER == set()
    assert {module.partition(".")[0] for module, _ in admitted} <= {
        "numpy", "pandas", "builtins", "datetime", "zoneinfo", "dateutil",
    }  # fmt: skip
    assert {name for module, name in admitted if module == "builtins"} == {"getattr", "slice"}


@pytest.mark.filterwarnings("ignore:numpy.core:DeprecationWarning")
def test_every_admitted_global_resolves() -> None:
    for module, name in PickleFallbackSerializer(allowed=[PANDAS]).admitted_globals:
        target = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        assert callable(target) or module == "pandas", (module, name)


@pytest.mark.filterwarnings("ignore:numpy.core:DeprecationWarning")
def test_numpy_1_spellings_are_the_same_helpers() -> None:
    for module, name in _presets.NUMPY_1_ALIASES:
        current = module.replace("numpy.core", "numpy._core")
        assert getattr(importlib.import_module(module), name) is getattr(
            importlib.import_module(current), name
        )


@pytest.mark.filterwarnings("ignore:numpy.core:DeprecationWarning")
def test_pickles_written_by_numpy_1_are_read() -> None:
    """numpy 1.x named its helpers numpy.core.*; such stores stay readable after upgrading."""
    from secure_serde.pickling import _unpickler

    value = np.array([1, "a", None], dtype=object)
    old = pickle.dumps(value, protocol=3).replace(b"cnumpy._core.", b"cnumpy.core.")
    assert b"numpy.core.multiarray\n_reconstruct" in old
    admission = PickleFallbackSerializer(allowed=[NUMPY])._policy.admission
    cs.assert_same(_unpickler.load(old, admission), value)
