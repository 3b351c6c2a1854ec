"""What each allowed type may pickle, and which globals its pickles need.

The global lists were found by running pickletools over a corpus of values,
which tests/pickling/test_fallback_presets.py re-derives, failing if either
side has a name the other lacks. They are pinned for pandas 3 and numpy 2: a
pickle naming another version's helper is refused with a
`ForbiddenGlobalError` that names it, for ``allowed=[("module", "name")]``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from secure_serde._errors import ConfigurationError
from secure_serde.pickling._refuse import refuse_dangerous

_NP_CORE: Final = "numpy._core.multiarray"
NUMPY_SCALAR_GLOBALS: Final = frozenset({("numpy", "dtype"), (_NP_CORE, "scalar")})
NUMPY_ARRAY_GLOBALS: Final = NUMPY_SCALAR_GLOBALS | {
    ("numpy", "ndarray"), (_NP_CORE, "_reconstruct"), ("numpy._core.numeric", "_frombuffer"),
}  # fmt: skip
# Passed to _reconstruct as the array class, never called by numpy's own pickles.
NUMPY_UNCALLABLE: Final = frozenset({("numpy", "ndarray")})
# numpy 1.x wrote the same helpers under numpy.core; numpy 2 still resolves them
# there, so a store written before an upgrade stays readable.
NUMPY_1_ALIASES: Final = frozenset({
    ("numpy.core.multiarray", "scalar"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),
})  # fmt: skip

_OFFSETS: Final = (
    "BHalfYearBegin", "BHalfYearEnd", "BQuarterBegin", "BQuarterEnd", "BYearBegin", "BYearEnd",
    "BusinessDay", "BusinessHour", "BusinessMonthBegin", "BusinessMonthEnd", "CustomBusinessDay",
    "CustomBusinessHour", "CustomBusinessMonthBegin", "CustomBusinessMonthEnd", "Day", "Easter",
    "FY5253", "FY5253Quarter", "HalfYearBegin", "HalfYearEnd", "Hour", "LastWeekOfMonth", "Micro",
    "Milli", "Minute", "MonthBegin", "MonthEnd", "Nano", "QuarterBegin", "QuarterEnd", "Second",
    "SemiMonthBegin", "SemiMonthEnd", "Week", "WeekOfMonth", "YearBegin", "YearEnd",
)  # fmt: skip
_PANDAS_TOP: Final = (
    "BooleanDtype", "Categorical", "CategoricalDtype", "CategoricalIndex", "DateOffset",
    "DatetimeIndex", "DatetimeTZDtype", "Float32Dtype", "Float64Dtype", "Index", "Int8Dtype",
    "Int16Dtype", "Int32Dtype", "Int64Dtype", "Interval", "IntervalDtype", "IntervalIndex",
    "MultiIndex", "NA", "Period", "PeriodDtype", "PeriodIndex", "RangeIndex", "SparseDtype",
    "StringDtype", "TimedeltaIndex", "UInt8Dtype", "UInt16Dtype", "UInt32Dtype", "UInt64Dtype",
)  # fmt: skip
_PANDAS_ARRAYS: Final = (
    "BooleanArray", "DatetimeArray", "FloatingArray", "IntegerArray", "IntervalArray",
    "PeriodArray", "SparseArray", "StringArray", "TimedeltaArray",
)  # fmt: skip

# Index, extension arrays and pandas scalars, with the time zones, offsets and
# numpy values they hold. Frames and Series add their block managers.
PANDAS_GLOBALS: Final = (
    NUMPY_ARRAY_GLOBALS
    | {("pandas", name) for name in _PANDAS_TOP}
    | {("pandas.arrays", name) for name in _PANDAS_ARRAYS}
    | {("pandas._libs.tslibs.offsets", name) for name in _OFFSETS}
    | {
        ("builtins", "getattr"), ("datetime", "time"), ("datetime", "timedelta"),
        ("datetime", "timezone"), ("dateutil.relativedelta", "relativedelta"),
        ("zoneinfo", "ZoneInfo"), ("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked"),
        ("pandas._libs.interval", "__pyx_unpickle_IntervalMixin"),
        ("pandas._libs.sparse", "IntIndex"), ("pandas._libs.tslibs.nattype", "_nat_unpickle"),
        ("pandas._libs.tslibs.timedeltas", "_timedelta_unpickle"),
        ("pandas._libs.tslibs.timestamps", "_unpickle_timestamp"),
        ("pandas.core.indexes.base", "_new_Index"),
        ("pandas.core.indexes.datetimes", "_new_DatetimeIndex"),
        ("pandas.core.indexes.interval", "_new_IntervalIndex"),
        ("pandas.core.indexes.timedeltas", "_new_TimedeltaIndex"),
    }
)  # fmt: skip
# ZoneInfo pickles as getattr(ZoneInfo, "_unpickle")(key, from_cache).
PANDAS_METHODS: Final = frozenset({("zoneinfo", "ZoneInfo", "_unpickle")})
_BLOCKS: Final = frozenset({("builtins", "slice"), ("pandas._libs.internals", "_unpickle_block")})
_MANAGERS: Final = "pandas.core.internals.managers"
FRAME_GLOBALS: Final = (
    PANDAS_GLOBALS | _BLOCKS | {("pandas", "DataFrame"), (_MANAGERS, "BlockManager")}
)
SERIES_GLOBALS: Final = PANDAS_GLOBALS | {
    ("builtins", "slice"), ("pandas", "Series"), (_MANAGERS, "SingleBlockManager"),
}  # fmt: skip


@dataclass(frozen=True)
class Rule:
    """Types that may be pickled, and the globals and getattr triples their pickles use.

    ``direct`` types are pickled even though JsonPlus encodes them, lossily
    (numpy arrays come back read-only, ``pd.Timestamp`` as a string).
    """

    types: frozenset[type]
    globals: frozenset[tuple[str, str]]
    methods: frozenset[tuple[str, str, str]] = frozenset()
    direct: bool = True
    uncallable: frozenset[tuple[str, str]] = frozenset()
    prepare: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Preset:
    """A named family of allowed types: `PANDAS` (which includes numpy) or `NUMPY`."""

    name: str

    def rules(self) -> tuple[Rule, ...]:
        return _numpy_rules() + (_pandas_rules() if self.name == "pandas" else ())


NUMPY: Final = Preset("numpy")
PANDAS: Final = Preset("pandas")


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigurationError(
            f"the {module} preset needs {module}: pip install 'secure-serde[pandas]'"
        ) from exc


def keep_byte_order(array: Any) -> Any:
    """A C-contiguous copy of a strided view, whose byte order numpy's pickle would lose.

    Unpickling gives a copy anyway (docs/pickle.md, Limits).
    """
    flags = array.flags
    if flags.c_contiguous or flags.f_contiguous:
        return array
    return array.copy(order="C")


@functools.cache
def _numpy_rules() -> tuple[Rule, ...]:
    np = _import("numpy")

    scalars: set[type] = set()
    pending: list[type] = [np.generic]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if cls.__module__ == "numpy":
            scalars.add(cls)
    dtypes = {getattr(np.dtypes, name) for name in np.dtypes.__all__}
    return (
        Rule(
            frozenset({np.ndarray}),
            NUMPY_ARRAY_GLOBALS | NUMPY_1_ALIASES,
            uncallable=NUMPY_UNCALLABLE,
            prepare=keep_byte_order,
        ),
        Rule(frozenset(scalars), NUMPY_SCALAR_GLOBALS | NUMPY_1_ALIASES),
        Rule(frozenset(dtypes), frozenset({("numpy", "dtype")})),
    )


@functools.cache
def _pandas_rules() -> tuple[Rule, ...]:
    pd = _import("pandas")

    others = {
        pd.Index, pd.RangeIndex, pd.DatetimeIndex, pd.TimedeltaIndex, pd.PeriodIndex,
        pd.IntervalIndex, pd.CategoricalIndex, pd.MultiIndex, pd.Categorical, pd.Timestamp,
        pd.Timedelta, pd.Period, pd.Interval, type(pd.NaT), type(pd.NA),
        *(getattr(pd.arrays, name) for name in _PANDAS_ARRAYS),
    }  # fmt: skip
    return tuple(
        Rule(frozenset(types), globals_ | NUMPY_1_ALIASES, PANDAS_METHODS, True, NUMPY_UNCALLABLE)
        for types, globals_ in (
            ({pd.DataFrame}, FRAME_GLOBALS),
            ({pd.Series}, SERIES_GLOBALS),
            (others, PANDAS_GLOBALS),
        )
    )


def _known_rule(cls: type) -> Rule | None:
    """The preset rule covering ``cls``, narrowed to ``cls``, if a preset knows it."""
    family = {"numpy": _numpy_rules, "pandas": _pandas_rules}.get(cls.__module__.split(".")[0])
    for rule in family() if family is not None else ():
        if cls in rule.types:
            return dataclasses.replace(rule, types=frozenset({cls}))
    return None


def rules_for(entry: object) -> tuple[Rule, ...]:
    """The rules one ``allowed=`` entry stands for: a preset, a type, or a (module, name) pair."""
    if isinstance(entry, Preset):
        return entry.rules()
    if isinstance(entry, type):
        known = _known_rule(entry)
        if known is not None:
            return (known,)
        own = (entry.__module__, entry.__qualname__)
        refuse_dangerous(own, entry)
        return (Rule(frozenset({entry}), frozenset({own}), direct=False),)
    if (
        isinstance(entry, tuple)
        and len(entry) == 2
        and all(isinstance(p, str) and p for p in entry)
    ):
        pair = (entry[0], entry[1])
        refuse_dangerous(pair)
        return (Rule(frozenset(), frozenset({pair}), direct=False),)
    raise ConfigurationError(
        f"allowed= takes types, presets (secure_serde.pickling.PANDAS, NUMPY) and"
        f" ('module', 'name') pairs, not {type(entry).__name__}"
    )
