"""Hypothesis strategies of numpy and pandas values, and how to compare them exactly.

Extends tests/strategies.py: importing this module registers `assert_same`
rules for numpy arrays and scalars and for pandas frames, series, indexes and
scalars (via ``register_same_check``). It registers no JsonPlus expectation:
plain JsonPlus refuses or degrades these values, and the pickle fallback
returns them identical, so tests compare against the value itself
(``checkpoint_values(exact=True, extra_leaves=[pandas_values()])``).

What "identical" means here:

* arrays: same dtype (structured field names, byte order and datetime units
  included), shape, bytes, and writable; object arrays element by element;
* numpy scalars: same type, dtype and bytes (so NaN payloads and -0.0 too);
* frames, series and indexes: ``pandas.testing`` with every check on
  (dtypes, index and column types, names, freq, flags, exact values);
* pandas scalars: same value, time zone, unit, frequency and closedness.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst
from langchain_core.messages import ToolMessage

from tests import strategies as cs

__all__ = [
    "data_frames",
    "indexes",
    "numpy_arrays",
    "numpy_scalars",
    "numpy_values",
    "pandas_scalars",
    "pandas_values",
    "series",
    "tool_messages_with_artifacts",
]

_ZONES = ("UTC", "Europe/Paris", "America/St_Johns", "Asia/Kathmandu")
_UNITS = ("s", "ms", "us", "ns")
_NULLABLE = (
    "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
    "Float32", "Float64", "boolean",
)  # fmt: skip
_FREQS = ("D", "h", "min", "MS", "ME", "W-MON", "B", "QS", "YE")


# --- numpy ----------------------------------------------------------------------------------


def _native_times(dtype: np.dtype[Any]) -> bool:
    # numpy's own pickle turns a big-endian datetime64/timedelta64 array native-endian (values
    # kept); tests/pickling/test_fallback.py pins that quirk, the strategies avoid it.
    return dtype.kind not in "mM" or dtype.isnative


def _plain_dtypes() -> st.SearchStrategy[np.dtype[Any]]:
    units = st.sampled_from(("D", "h", "s", "ms", "us", "ns"))
    return st.one_of(
        npst.scalar_dtypes().filter(_native_times),
        npst.byte_string_dtypes(max_len=4),
        npst.unicode_string_dtypes(max_len=4),
        units.map(lambda u: np.dtype(f"M8[{u}]")),
        units.map(lambda u: np.dtype(f"m8[{u}]")),
    )


def _structured_dtypes() -> st.SearchStrategy[np.dtype[Any]]:
    return npst.array_dtypes(npst.scalar_dtypes(), min_size=1, max_size=3)


def _object_arrays() -> st.SearchStrategy[np.ndarray[Any, Any]]:
    contents = st.one_of(
        st.none(), cs.ints64(), cs.floats(), cs.texts(max_size=6), st.booleans(),
        numpy_scalars(),
    )  # fmt: skip

    def build(items: list[Any]) -> np.ndarray[Any, Any]:
        out = np.empty(len(items), dtype=object)
        for index, item in enumerate(items):
            out[index] = item
        return out

    return st.lists(contents, max_size=4).map(build)


def numpy_arrays() -> st.SearchStrategy[np.ndarray[Any, Any]]:
    """Arrays of every dtype kind: numeric, bytes, str, datetime, structured, object.

    Shapes of 0 to 3 dimensions; some arrays are Fortran-ordered or strided views.
    """
    shapes = npst.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
    plain = npst.arrays(st.one_of(_plain_dtypes(), _structured_dtypes()), shapes)
    layouts: list[Callable[[np.ndarray[Any, Any]], np.ndarray[Any, Any]]] = [
        lambda a: a,
        np.asfortranarray,
        lambda a: a[::2] if a.ndim else a,
    ]
    return st.one_of(
        st.tuples(plain, st.sampled_from(layouts)).map(lambda pair: pair[1](pair[0])),
        _object_arrays(),
    )


def numpy_scalars() -> st.SearchStrategy[Any]:
    """numpy scalars of every kind but ``str_`` (a str subclass msgpack writes as str)."""
    dtypes = st.one_of(
        npst.scalar_dtypes(),
        npst.byte_string_dtypes(min_len=1, max_len=4),
        _structured_dtypes(),
        st.sampled_from(("M8[s]", "M8[ns]", "m8[us]", "m8[D]")).map(np.dtype),
    )
    return dtypes.flatmap(lambda dtype: npst.arrays(dtype, ())).map(lambda a: a[()])


def numpy_values() -> st.SearchStrategy[Any]:
    return st.one_of(numpy_arrays(), numpy_scalars())


# --- pandas ---------------------------------------------------------------------------------


def _tz() -> st.SearchStrategy[Any]:
    offsets = st.integers(-14 * 60, 14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
    return st.one_of(st.none(), st.sampled_from(_ZONES), offsets)


def _timestamps(size: int) -> st.SearchStrategy[pd.DatetimeIndex]:
    return st.builds(
        lambda start, freq, tz, unit: pd.date_range(
            start, periods=size, freq=freq, tz=tz, unit=unit
        ),
        st.datetimes(dt.datetime(1990, 1, 1), dt.datetime(2060, 1, 1)).map(
            lambda d: d.replace(microsecond=0)
        ),
        st.sampled_from(_FREQS),
        _tz(),
        st.sampled_from(_UNITS),
    )


def _column(size: int) -> st.SearchStrategy[Any]:
    """One column of ``size`` rows, of any dtype a checkpointed frame commonly holds."""
    maybe = st.booleans()
    words = st.lists(cs.texts(max_size=5), min_size=size, max_size=size)
    ints = st.lists(cs.ints64().filter(lambda i: i < 2**63), min_size=size, max_size=size)
    return st.one_of(
        ints.map(lambda xs: np.array(xs, dtype=np.int64)),
        st.lists(cs.floats(), min_size=size, max_size=size).map(np.array),
        st.lists(st.booleans(), min_size=size, max_size=size).map(np.array),
        _timestamps(size),
        _timestamps(size).map(lambda idx: idx - idx[0] if size else pd.to_timedelta(idx.asi8)),
        st.builds(lambda xs, ordered: pd.Categorical(xs, ordered=ordered), words, st.booleans()),
        st.builds(
            lambda xs, dtype, nulls: pd.array(
                [None if n else x % 100 for x, n in zip(xs, nulls, strict=True)], dtype=dtype
            ),
            ints,
            st.sampled_from(_NULLABLE[:-1]),
            st.lists(maybe, min_size=size, max_size=size),
        ),
        st.lists(st.one_of(st.none(), st.booleans()), min_size=size, max_size=size).map(
            lambda xs: pd.array(xs, dtype="boolean")
        ),
        st.builds(
            lambda xs, nulls, dtype: pd.array(
                [None if n else x for x, n in zip(xs, nulls, strict=True)], dtype=dtype
            ),
            words,
            st.lists(maybe, min_size=size, max_size=size),
            st.sampled_from(("string", "str")),
        ),
        words.map(lambda xs: np.array(xs, dtype=object)),
        st.sampled_from(("D", "M", "Q")).map(
            lambda freq: pd.period_range("2024-01-01", periods=size, freq=freq)
        ),
        st.just(pd.interval_range(0, size) if size else pd.IntervalIndex.from_breaks([0])[:0]),
    )


def indexes(size: int | None = None) -> st.SearchStrategy[pd.Index]:
    """Every index kind: range, ints, strings, tz-aware datetimes, categorical, multi."""

    def build(n: int) -> st.SearchStrategy[pd.Index]:
        names = st.one_of(st.none(), cs.identifiers())
        unique_words = st.lists(cs.texts(max_size=5), min_size=n, max_size=n, unique=True)
        kinds = st.one_of(
            st.builds(lambda start, step: pd.RangeIndex(start, start + n * step, step),
                      st.integers(-5, 5), st.integers(1, 3)),
            unique_words.map(pd.Index),
            st.lists(cs.ints64().filter(lambda i: i < 2**63), min_size=n, max_size=n).map(
                lambda xs: pd.Index(np.array(xs, dtype=np.int64))
            ),
            _timestamps(n),
            unique_words.map(pd.CategoricalIndex),
            st.just(pd.MultiIndex.from_arrays([[f"k{i % 2}" for i in range(n)], list(range(n))])),
        )  # fmt: skip
        return st.builds(lambda idx, name: idx.rename(name) if idx.nlevels == 1 else idx,
                         kinds, names)  # fmt: skip

    if size is None:
        return st.integers(0, 4).flatmap(build)
    return build(size)


@st.composite
def data_frames(draw: st.DrawFn, max_rows: int = 4, max_columns: int = 4) -> pd.DataFrame:
    size = draw(st.integers(0, max_rows))
    names = draw(st.lists(cs.identifiers(), max_size=max_columns, unique=True))
    columns = {name: draw(_column(size)) for name in names}
    frame = pd.DataFrame(columns, index=draw(indexes(size)))
    if draw(st.booleans()):
        frame.attrs["source"] = draw(cs.texts(max_size=8))
    return frame


@st.composite
def series(draw: st.DrawFn, max_rows: int = 4) -> pd.Series:
    size = draw(st.integers(0, max_rows))
    name = draw(st.one_of(st.none(), cs.identifiers()))
    return pd.Series(draw(_column(size)), index=draw(indexes(size)), name=name)


def pandas_scalars() -> st.SearchStrategy[Any]:
    stamps = st.datetimes(dt.datetime(1700, 1, 1), dt.datetime(2200, 1, 1))
    return st.one_of(
        st.builds(lambda d, tz: pd.Timestamp(d, tz=tz), stamps, _tz()),
        st.builds(pd.Timedelta, st.timedeltas(dt.timedelta(days=-9999), dt.timedelta(days=9999))),
        st.just(pd.NaT),
        st.builds(lambda d, f: pd.Period(d, freq=f), stamps, st.sampled_from(("D", "M", "Y"))),
        st.builds(
            pd.Interval,
            st.integers(-9, 0),
            st.integers(1, 9),
            st.sampled_from(("left", "right", "both", "neither")),
        ),
    )


def pandas_values() -> st.SearchStrategy[Any]:
    return st.one_of(data_frames(), series(), indexes(), pandas_scalars(), numpy_values())


def tool_messages_with_artifacts(
    artifacts: st.SearchStrategy[Any],
) -> st.SearchStrategy[ToolMessage]:
    """A tool's message carrying a frame or array as its artifact (a pydantic ``Any`` field)."""
    return st.builds(
        ToolMessage,
        content=cs.texts(max_size=10),
        tool_call_id=cs.identifiers(),
        artifact=artifacts,
    )


# --- exact comparison -----------------------------------------------------------------------


def _wrap(path: str, check: Callable[[], None]) -> None:
    try:
        check()
    except AssertionError as exc:
        raise AssertionError(f"at {path}: {exc}") from None


def _same_array(actual: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], path: str) -> None:
    if actual.dtype != expected.dtype or actual.dtype.descr != expected.dtype.descr:
        raise AssertionError(f"at {path}: dtype {actual.dtype!r} != {expected.dtype!r}")
    if actual.shape != expected.shape:
        raise AssertionError(f"at {path}: shape {actual.shape} != {expected.shape}")
    if not actual.flags.writeable:
        raise AssertionError(f"at {path}: array came back read-only")
    if actual.dtype.hasobject:
        for index, (item_a, item_e) in enumerate(zip(actual.flat, expected.flat, strict=True)):
            cs.assert_same(item_a, item_e, f"{path}[{index}]")
    elif actual.tobytes() != expected.tobytes():
        raise AssertionError(f"at {path}: contents differ")


def _same_numpy_scalar(actual: np.generic, expected: np.generic, path: str) -> None:
    if actual.dtype != expected.dtype or actual.dtype.descr != expected.dtype.descr:
        raise AssertionError(f"at {path}: dtype {actual.dtype!r} != {expected.dtype!r}")
    if np.asarray(actual).tobytes() != np.asarray(expected).tobytes():
        raise AssertionError(f"at {path}: {actual!r} != {expected!r}")


def _same_frame(actual: pd.DataFrame, expected: pd.DataFrame, path: str) -> None:
    _wrap(path, lambda: pd.testing.assert_frame_equal(
        actual, expected, check_exact=True, check_freq=True, check_flags=True))  # fmt: skip
    cs.assert_same(actual.attrs, expected.attrs, f"{path}.attrs")


def _same_series(actual: pd.Series, expected: pd.Series, path: str) -> None:
    _wrap(path, lambda: pd.testing.assert_series_equal(
        actual, expected, check_exact=True, check_freq=True, check_flags=True))  # fmt: skip


def _same_index(actual: pd.Index, expected: pd.Index, path: str) -> None:
    _wrap(path, lambda: pd.testing.assert_index_equal(actual, expected, exact=True))
    freq_a, freq_e = getattr(actual, "freq", None), getattr(expected, "freq", None)
    if freq_a != freq_e:
        raise AssertionError(f"at {path}: freq {freq_a!r} != {freq_e!r}")


def _same_timestamp(actual: pd.Timestamp, expected: pd.Timestamp, path: str) -> None:
    def key(stamp: pd.Timestamp) -> tuple[Any, ...]:
        return int(stamp.asm8.view("i8")), stamp.unit, str(stamp.tz)

    if key(actual) != key(expected):
        raise AssertionError(f"at {path}: {actual!r} != {expected!r}")


def _same_by(*attributes: str) -> Callable[[Any, Any, str], None]:
    def check(actual: Any, expected: Any, path: str) -> None:
        got = tuple(getattr(actual, name) for name in attributes)
        want = tuple(getattr(expected, name) for name in attributes)
        if got != want:
            raise AssertionError(f"at {path}: {actual!r} != {expected!r}")

    return check


cs.register_same_check(np.ndarray, _same_array)
# np.generic is abstract, which type[T] refuses; the check matches scalars by isinstance.
cs.register_same_check(np.generic, _same_numpy_scalar)  # type: ignore[type-abstract]
cs.register_same_check(pd.DataFrame, _same_frame)
cs.register_same_check(pd.Series, _same_series)
cs.register_same_check(pd.Index, _same_index)
cs.register_same_check(pd.Timestamp, _same_timestamp)
cs.register_same_check(pd.Timedelta, _same_by("value", "unit"))
cs.register_same_check(type(pd.NaT), lambda actual, expected, path: None)  # a singleton
cs.register_same_check(pd.Period, _same_by("ordinal", "freqstr"))
cs.register_same_check(pd.Interval, _same_by("left", "right", "closed"))
