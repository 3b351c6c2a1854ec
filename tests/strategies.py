"""Hypothesis strategies of checkpoint-like values, and what JsonPlus makes of them.

Three things live here, for every round-trip property test to share:

* strategies: `checkpoint_values` (any single value a checkpoint may hold),
  `channel_values` (a dict shaped like a checkpoint's ``channel_values``) and
  their parts;
* `expected_after_jsonplus`: an executable model of what a plain
  ``JsonPlusSerializer`` round trip returns for a value;
* `assert_same`: recursive equality that also demands identical types, with
  NaN-aware floats and exact Decimals.

Extending (pandas and numpy values come later): pass extra strategies to
``checkpoint_values(extra_leaves=..., extra_containers=...)`` and register
how the new types compare and what JsonPlus turns them into with
`register_same_check` and `register_expectation`. Either function refuses a
type it has no rule for, so a new type cannot slip through with a weak check.

What plain ``JsonPlusSerializer`` (langgraph-checkpoint 4.3.2, default
options) does on a ``dumps_typed``/``loads_typed`` round trip, measured here
and encoded in `expected_after_jsonplus`:

Returned identical (type and value): None, bool, str without surrogates
(astral characters included), bytes, int within [-2**63, 2**64 - 1], float
(inf, -inf, NaN, -0.0), list, dict (str, int, bool, None and float keys, and
tuple keys, which stay tuples), naive datetime, date, time (ZoneInfo, named
and unnamed fixed-offset tzinfo and fold all kept), timedelta, UUID, Decimal
(exponent, sign, NaN and sNaN kept), set and frozenset of non-tuple
hashables, deque (without maxlen), Enum / IntEnum / str-Enum / Flag members,
dataclasses, pydantic v2 models with typed fields (their values following
these rules), langchain_core messages with JSON-like payloads, langgraph
``Send`` (TimeoutPolicy kept), ``Interrupt``, ``Command`` whose ``goto`` is not
a tuple, and ``_DeltaSnapshot`` (msgpack ext code 7), each with exact contents.

Changed:

* tuple -> list, at every depth (inside lists, dicts, dataclass fields,
  ``Send.arg``, ``Interrupt.value``, ``Command.update``/``resume``/``goto``,
  ``_DeltaSnapshot.value``...). Only dict *keys* stay tuples. So
  ``Command()``, whose default ``goto`` is ``()``, comes back with
  ``goto=[]`` and no longer compares equal.
* a set or frozenset whose elements, once rebuilt, are unhashable (any tuple
  element, which becomes a list) cannot be rebuilt: a warning is logged and a
  *list* of the rebuilt elements comes back, in the set's iteration order.
* a tz-aware datetime is stored through ``isoformat()``: it comes back with a
  fixed-offset ``datetime.timezone`` (``timezone.utc`` for offset 0). The
  instant, wall-clock time and UTC offset are kept; a ZoneInfo zone or a
  fixed offset's name is lost, and ``fold`` becomes 0 (naive ones too).
  Python 3.11's ``fromisoformat`` also reads a nonzero offset under one second
  (``+00:00:00.000001``) back as UTC, so the instant moves by that fraction.
* a bytearray comes back as bytes, except a top-level one (own type tag).
* lone surrogates in str values become ``"?"`` (``OPT_REPLACE_SURROGATES``).
* a pydantic v2 model is rebuilt as ``cls(**model_dump())``: fields typed
  ``tuple``/``set`` are re-coerced by validation and survive, but ``Any``
  fields (a message's ``additional_kwargs``, ``artifact``...) keep what
  ``model_dump`` made of their contents: dataclasses (so ``Interrupt`` and
  ``Command`` too) and models become dicts, namedtuples (``_DeltaSnapshot``
  included) become plain tuples and then lists.
* ``deque(maxlen=n)`` loses its maxlen.

Refused by ``dumps_typed`` (``ormsgpack.MsgpackEncodeError``, a TypeError,
unless ``pickle_fallback=True``, which then pickles the whole value): ints
outside [-2**63, 2**64 - 1] ("Integer exceeds 64-bit range"), dict keys with
lone surrogates, and dict keys that are not str, int, float, bool, None or
tuples of those (a frozenset key, for one).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import math
import re
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Command, Interrupt, Send, TimeoutPolicy
from pydantic import BaseModel

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "MSGPACK_ALLOWLIST",
    "Address",
    "Color",
    "Mode",
    "Perm",
    "Point",
    "Priority",
    "Profile",
    "Span",
    "TreeNode",
    "assert_same",
    "big_ints",
    "channel_values",
    "checkpoint_values",
    "commands",
    "count_instances",
    "datetimes",
    "delta_snapshots",
    "expected_after_jsonplus",
    "expected_nested",
    "hashables",
    "interrupts",
    "json_values",
    "messages",
    "register_expectation",
    "register_same_check",
    "scalars",
    "sends",
    "sets_of_hashables",
    "texts",
    "unencodable_values",
]

T = TypeVar("T")

# The integers msgpack can carry: int64 and uint64.
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1


# --- Types defined here, so that JsonPlus has to import them back by name --------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = 2
    BLUE = 3.5


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 10


class Mode(str, enum.Enum):  # noqa: UP042 - a str-mixin enum is one of the cases under test
    READ = "r"
    WRITE = "w"


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


@dataclasses.dataclass
class Point:
    x: int
    y: float


@dataclasses.dataclass(frozen=True)
class Span:
    start: dt.datetime
    end: dt.datetime | None
    labels: frozenset[str]


@dataclasses.dataclass
class TreeNode:
    """A dataclass nesting another dataclass and arbitrary values."""

    name: str
    at: Point
    payload: Any = None
    children: list[Any] = dataclasses.field(default_factory=list)


class Address(BaseModel):
    street: str
    city: str
    zip_code: int | None = None


class Profile(BaseModel):
    """A pydantic v2 model nesting another, with coercing and ``Any`` fields."""

    name: str
    age: int
    score: float
    address: Address
    tags: set[str]
    aliases: tuple[str, ...]
    color: Color
    uid: uuid.UUID
    balance: decimal.Decimal
    created: dt.datetime
    payload: Any = None


# Every class above that JsonPlus must import to rebuild a value. Passing it as
# ``allowed_msgpack_modules`` keeps the tests independent of LANGGRAPH_STRICT_MSGPACK
# (the langgraph and langchain types used here are on langgraph's built-in safe list).
MSGPACK_ALLOWLIST: tuple[type, ...] = (
    Color,
    Priority,
    Mode,
    Perm,
    Point,
    Span,
    TreeNode,
    Address,
    Profile,
)


# --- Leaves -----------------------------------------------------------------------------------

ZONE_NAMES = (
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "America/St_Johns",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
)

_OFFSET_LIMIT = dt.timedelta(hours=23, minutes=59, seconds=59)
_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,11}")


def texts(*, surrogates: bool = False, max_size: int = 20) -> st.SearchStrategy[str]:
    """Unicode text, with astral characters well represented.

    Lone surrogates only with ``surrogates=True`` (JsonPlus turns them into ``?``).
    """
    alphabets = [
        st.characters(codec="utf-8"),
        st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF, codec="utf-8"),
    ]
    if surrogates:
        alphabets.append(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))
    return st.text(alphabet=st.one_of(alphabets), max_size=max_size)


def identifiers() -> st.SearchStrategy[str]:
    return st.from_regex(_IDENT, fullmatch=True)


def ints64() -> st.SearchStrategy[int]:
    """Ints msgpack carries, with the boundaries drawn often."""
    return st.one_of(
        st.integers(),
        st.integers(min_value=INT_MIN, max_value=INT_MAX),
        st.sampled_from([INT_MIN, INT_MAX, 2**63 - 1, 2**63, -1, 0]),
    ).filter(lambda i: INT_MIN <= i <= INT_MAX)


def big_ints() -> st.SearchStrategy[int]:
    """Ints beyond msgpack's 64 bits, which JsonPlus refuses to encode."""
    return st.one_of(
        st.integers(min_value=INT_MAX + 1),
        st.integers(max_value=INT_MIN - 1),
        st.sampled_from([INT_MAX + 1, INT_MIN - 1, 10**40, -(10**40)]),
    )


def floats() -> st.SearchStrategy[float]:
    return st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([math.inf, -math.inf, math.nan, -0.0, 0.0, 5e-324, 1.7976931348623157e308]),
    )


def decimals(*, finite: bool = False) -> st.SearchStrategy[decimal.Decimal]:
    base = st.decimals(allow_nan=not finite, allow_infinity=not finite)
    if finite:
        return base
    specials = [decimal.Decimal(s) for s in ("NaN", "-NaN", "sNaN", "Infinity", "-Infinity")]
    return st.one_of(
        base, st.sampled_from([*specials, decimal.Decimal("-0"), decimal.Decimal("1.10")])
    )


def zoneinfos() -> st.SearchStrategy[ZoneInfo]:
    return st.sampled_from([ZoneInfo(name) for name in ZONE_NAMES])


def fixed_offsets(*, named: bool, sub_second: bool = True) -> st.SearchStrategy[dt.timezone]:
    """``datetime.timezone`` instances: UTC, quarter hours, any second and, unless
    ``sub_second=False``, offsets with microseconds (that CPython 3.11's
    ``fromisoformat`` reads back as UTC when under one second)."""
    seconds = _OFFSET_LIMIT // dt.timedelta(seconds=1)
    offsets = st.one_of(
        st.integers(min_value=-24 * 4 + 1, max_value=24 * 4 - 1).map(
            lambda q: dt.timedelta(minutes=15 * q)
        ),
        st.integers(min_value=-seconds, max_value=seconds).map(lambda s: dt.timedelta(seconds=s)),
    )
    if sub_second:
        offsets = st.one_of(
            offsets,
            st.timedeltas(min_value=-_OFFSET_LIMIT, max_value=_OFFSET_LIMIT),
            st.integers(min_value=-999_999, max_value=999_999).map(
                lambda us: dt.timedelta(microseconds=us)
            ),
        )
    zones = st.one_of(st.just(dt.UTC), st.builds(dt.timezone, offsets))
    if named:
        name = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ+-0123456789", min_size=1, max_size=6)
        zones = st.one_of(zones, st.builds(dt.timezone, offsets, name))
    return zones


def datetimes(*, exact: bool = False) -> st.SearchStrategy[dt.datetime]:
    """Naive and tz-aware datetimes.

    ``exact=True``: only those JsonPlus returns unchanged (naive, UTC or an
    unnamed fixed offset in whole seconds, fold 0).
    """
    # Keep a day away from datetime.min/max, so comparing across offsets cannot overflow.
    low, high = dt.datetime(2, 1, 1), dt.datetime(9998, 12, 31)
    naive = st.datetimes(low, high)
    offsets = fixed_offsets(named=not exact, sub_second=not exact)
    fixed = st.datetimes(low, high, timezones=offsets)
    if exact:
        return st.one_of(naive, fixed).map(lambda d: d.replace(fold=0))
    zoned = st.datetimes(
        min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=zoneinfos()
    )
    return st.one_of(naive, fixed, zoned)


def times() -> st.SearchStrategy[dt.time]:
    return st.times(timezones=st.one_of(st.none(), zoneinfos(), fixed_offsets(named=True)))


def enum_members() -> st.SearchStrategy[enum.Enum]:
    return st.one_of(
        st.sampled_from(Color),
        st.sampled_from(Priority),
        st.sampled_from(Mode),
        st.builds(lambda a, b: a | b, st.sampled_from(Perm), st.sampled_from(Perm)),
    )


def scalars(*, exact: bool = False) -> st.SearchStrategy[Any]:
    """Every non-container leaf value."""
    return st.one_of(
        st.none(),
        st.booleans(),
        ints64(),
        floats(),
        texts(surrogates=not exact),
        st.binary(max_size=24),
        datetimes(exact=exact),
        st.dates(),
        times(),
        st.timedeltas(),
        st.uuids(),
        decimals(),
        enum_members(),
    )


def hashables(*, exact: bool = False) -> st.SearchStrategy[Any]:
    """Set elements: hashable, NaN-free (NaN != NaN), optionally tuples and frozensets."""
    base = st.one_of(
        ints64(),
        texts(max_size=8),
        st.binary(max_size=8),
        st.floats(allow_nan=False),
        decimals(finite=True),
        st.uuids(),
        st.dates(),
        st.timedeltas(),
        enum_members(),
    )
    nested: list[st.SearchStrategy[Any]] = [st.frozensets(base, max_size=3)]
    if not exact:
        nested.append(st.lists(base, max_size=3).map(tuple))
    return st.one_of(base, *nested)


def sets_of_hashables(*, exact: bool = False) -> st.SearchStrategy[set[Any] | frozenset[Any]]:
    elements = hashables(exact=exact)
    return st.one_of(st.sets(elements, max_size=4), st.frozensets(elements, max_size=4))


def dict_keys() -> st.SearchStrategy[Any]:
    """Keys JsonPlus accepts (``OPT_NON_STR_KEYS``): str, int, and tuples of those."""
    simple = st.one_of(texts(max_size=10), ints64())
    return st.one_of(simple, st.lists(simple, max_size=3).map(tuple))


def json_values() -> st.SearchStrategy[Any]:
    """Plain JSON-like data, as found in message payloads and tool-call arguments."""
    leaves = st.one_of(st.none(), st.booleans(), ints64(), floats(), texts())
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(texts(max_size=8), children, max_size=3),
        ),
        max_leaves=6,
    )


# --- langchain_core messages ------------------------------------------------------------------


def _message_ids() -> st.SearchStrategy[str | None]:
    return st.one_of(st.none(), st.uuids().map(str), texts(max_size=12))


def _contents() -> st.SearchStrategy[Any]:
    block = st.fixed_dictionaries({"type": st.just("text"), "text": texts()})
    return st.one_of(texts(max_size=40), st.lists(block, max_size=2))


def messages(payloads: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[BaseMessage]:
    """Human, AI (with tool calls), tool and system messages, with ids and additional_kwargs.

    ``payloads`` feeds ``additional_kwargs`` and ``ToolMessage.artifact``
    (JSON-like values when omitted). Keys of ``additional_kwargs`` are at most
    8 characters, so never ``tool_calls`` or ``function_call``, which
    ``AIMessage`` would parse.
    """
    payloads = json_values() if payloads is None else payloads
    kwargs = st.dictionaries(texts(max_size=8), payloads, max_size=3)
    tool_call_ids = st.uuids().map(lambda u: f"call_{u.hex[:12]}")
    tool_call = st.fixed_dictionaries(
        {
            "name": identifiers(),
            "args": st.dictionaries(identifiers(), json_values(), max_size=3),
            "id": tool_call_ids,
        }
    )
    usage = st.builds(
        lambda i, o: {"input_tokens": i, "output_tokens": o, "total_tokens": i + o},
        st.integers(0, 10**6),
        st.integers(0, 10**6),
    )
    names = st.one_of(st.none(), identifiers())
    return st.one_of(
        st.builds(
            HumanMessage,
            content=_contents(),
            id=_message_ids(),
            name=names,
            additional_kwargs=kwargs,
        ),
        st.builds(SystemMessage, content=_contents(), id=_message_ids(), additional_kwargs=kwargs),
        st.builds(
            AIMessage,
            content=_contents(),
            id=_message_ids(),
            name=names,
            additional_kwargs=kwargs,
            tool_calls=st.lists(tool_call, max_size=3),
            usage_metadata=st.one_of(st.none(), usage),
            response_metadata=st.dictionaries(identifiers(), json_values(), max_size=2),
        ),
        st.builds(
            ToolMessage,
            content=_contents(),
            tool_call_id=tool_call_ids,
            id=_message_ids(),
            status=st.sampled_from(["success", "error"]),
            artifact=st.one_of(st.none(), payloads),
            additional_kwargs=kwargs,
        ),
    )


# --- langgraph types --------------------------------------------------------------------------


def _timeouts() -> st.SearchStrategy[Any]:
    seconds = st.floats(min_value=0.001, max_value=1e6)
    return st.one_of(
        st.none(),
        seconds,
        st.timedeltas(min_value=dt.timedelta(milliseconds=1), max_value=dt.timedelta(days=9)),
        st.builds(
            TimeoutPolicy,
            run_timeout=st.one_of(st.none(), seconds),
            idle_timeout=seconds,
            refresh_on=st.sampled_from(["auto", "heartbeat"]),
        ),
    )


def sends(args: st.SearchStrategy[Any]) -> st.SearchStrategy[Send]:
    return st.builds(Send, identifiers(), args, timeout=_timeouts())


def interrupts(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Interrupt]:
    schema = st.one_of(st.none(), st.dictionaries(identifiers(), json_values(), max_size=2))
    return st.builds(
        Interrupt,
        value=values,
        id=st.one_of(st.just("placeholder-id"), st.uuids().map(lambda u: u.hex)),
        response_schema=schema,
    )


def commands(
    values: st.SearchStrategy[Any], *, exact: bool = False
) -> st.SearchStrategy[Command[Any]]:
    """Commands with update, resume and goto. ``exact``: never a tuple ``goto``."""
    targets = st.one_of(identifiers(), sends(values))
    gotos = st.one_of(identifiers(), sends(values), st.lists(targets, max_size=3))
    if not exact:
        gotos = st.one_of(gotos, st.lists(targets, max_size=3).map(tuple))
    built = st.builds(
        Command,
        graph=st.one_of(st.none(), st.just(Command.PARENT)),
        update=st.one_of(st.none(), values, st.dictionaries(identifiers(), values, max_size=3)),
        resume=st.one_of(st.none(), values),
        goto=gotos,
    )
    if exact:
        return built
    return st.one_of(built, st.builds(Command, update=values))  # default goto=()


def delta_snapshots(values: st.SearchStrategy[Any]) -> st.SearchStrategy[_DeltaSnapshot]:
    return st.builds(_DeltaSnapshot, values)


# --- Dataclasses and pydantic models ----------------------------------------------------------


def points() -> st.SearchStrategy[Point]:
    return st.builds(Point, ints64(), floats())


def spans(*, exact: bool = False) -> st.SearchStrategy[Span]:
    stamps = datetimes(exact=exact)
    return st.builds(
        Span, stamps, st.one_of(st.none(), stamps), st.frozensets(texts(max_size=6), max_size=3)
    )


def tree_nodes(values: st.SearchStrategy[Any]) -> st.SearchStrategy[TreeNode]:
    return st.builds(
        TreeNode,
        name=texts(max_size=10),
        at=points(),
        payload=values,
        children=st.lists(values, max_size=3),
    )


def addresses() -> st.SearchStrategy[Address]:
    return st.builds(
        Address,
        street=texts(max_size=20),
        city=texts(max_size=12),
        zip_code=st.one_of(st.none(), ints64()),
    )


def profiles(
    payloads: st.SearchStrategy[Any], *, exact: bool = False
) -> st.SearchStrategy[Profile]:
    return st.builds(
        Profile,
        name=texts(max_size=12),
        age=ints64(),
        score=floats(),
        address=addresses(),
        tags=st.sets(texts(max_size=6), max_size=3),
        aliases=st.lists(texts(max_size=6), max_size=3).map(tuple),
        color=st.sampled_from(Color),
        uid=st.uuids(),
        balance=decimals(finite=True),
        created=datetimes(exact=exact),
        payload=payloads,
    )


# --- Putting it together ----------------------------------------------------------------------

Extend = Callable[[st.SearchStrategy[Any]], st.SearchStrategy[Any]]


def _leaves(exact: bool) -> st.SearchStrategy[Any]:
    return st.one_of(
        scalars(exact=exact),
        sets_of_hashables(exact=exact),
        points(),
        spans(exact=exact),
        addresses(),
        messages(),
    )


def _containers(children: st.SearchStrategy[Any], exact: bool) -> st.SearchStrategy[Any]:
    # Inside pydantic ``Any`` fields, model_dump flattens dataclasses, models and
    # namedtuples, so exact values put only JSON-like data there.
    payloads = json_values() if exact else children
    options = [
        st.lists(children, max_size=4),
        # Two dict branches: hypothesis draws dicts less often than lists.
        st.dictionaries(texts(max_size=10), children, max_size=4),
        st.dictionaries(dict_keys(), children, max_size=4),
        st.lists(children, max_size=3).map(deque),
        tree_nodes(children),
        profiles(payloads, exact=exact),
        messages(payloads),
        sends(children),
        commands(children, exact=exact),
        interrupts(children),
        delta_snapshots(children),
    ]
    if not exact:
        options += [
            st.lists(children, max_size=4).map(tuple),
            st.lists(st.binary(max_size=8), max_size=2).map(
                lambda items: [bytearray(b) for b in items]
            ),
        ]
    return st.one_of(options)


def checkpoint_values(
    *,
    exact: bool = False,
    max_leaves: int = 8,
    extra_leaves: Sequence[st.SearchStrategy[Any]] = (),
    extra_containers: Sequence[Extend] = (),
) -> st.SearchStrategy[Any]:
    """Any value a checkpoint channel (or a write) may hold, nested.

    ``exact=True``: only values that plain JsonPlus returns identical, type
    included, so a round trip must give back the value itself.
    ``extra_leaves`` adds leaf strategies; ``extra_containers`` adds functions
    from the strategy of child values to a strategy of values holding them.
    Register `assert_same` and `expected_after_jsonplus` rules for new types.
    """
    leaves = st.one_of(_leaves(exact), *extra_leaves)

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(_containers(children, exact), *(f(children) for f in extra_containers))

    tree = st.recursive(leaves, extend, max_leaves=max_leaves)
    # Top-level None, bytes and bytearray take their own JsonPlus type tags ("null",
    # "bytes", "bytearray"). Drawn one time in eight: st.one_of would weigh each of the
    # three like the whole tree.
    tagged = st.one_of(st.none(), st.binary(), st.binary().map(bytearray))
    return st.integers(0, 7).flatmap(lambda pick: tagged if pick == 0 else tree)


def channel_names() -> st.SearchStrategy[str]:
    return st.one_of(
        identifiers(),
        st.sampled_from(["__start__", "__root__", "branch:to:agent", "branch:to:tools"]),
    )


def channel_values(
    *,
    exact: bool = False,
    with_delta_snapshot: bool = False,
    max_leaves: int = 6,
    extra_leaves: Sequence[st.SearchStrategy[Any]] = (),
    extra_containers: Sequence[Extend] = (),
) -> st.SearchStrategy[dict[str, Any]]:
    """A dict shaped like a checkpoint's ``channel_values``.

    A ``messages`` channel, optional ``__start__`` input, branch markers,
    pending sends and a delta channel holding a ``_DeltaSnapshot`` (always,
    with ``with_delta_snapshot=True``), plus arbitrary channels.
    """
    values = checkpoint_values(
        exact=exact,
        max_leaves=max_leaves,
        extra_leaves=extra_leaves,
        extra_containers=extra_containers,
    )
    msgs = st.lists(messages(), max_size=4)
    snapshot = delta_snapshots(st.one_of(msgs, values))
    fixed: dict[str, st.SearchStrategy[Any]] = {"messages": msgs}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "__start__": st.dictionaries(identifiers(), values, max_size=3),
        "branch:to:agent": st.none(),
        "__pregel_tasks": st.lists(sends(values), max_size=2),
        "__interrupt__": st.lists(interrupts(values), max_size=2),
    }
    (fixed if with_delta_snapshot else optional)["history"] = snapshot
    return st.builds(
        lambda extra, known: {**extra, **known},
        st.dictionaries(channel_names(), values, max_size=4),
        st.fixed_dictionaries(fixed, optional=optional),
    )


def unencodable_values() -> st.SearchStrategy[Any]:
    """Values plain JsonPlus refuses to encode (without pickle fallback)."""
    values = checkpoint_values(max_leaves=4)
    big = big_ints()
    return st.one_of(
        big,
        st.builds(lambda v, b: [v, b], values, big),
        st.builds(lambda v, b: {"ok": v, "big": b}, values, big),
        st.builds(lambda b: Send("node", {"n": b}), big),
        st.builds(lambda b: _DeltaSnapshot([b]), big),
        st.builds(lambda b: Point(b, 0.0), big),
        # Dict keys JsonPlus cannot encode: a lone surrogate, a frozenset.
        st.builds(lambda v: {"\ud800": v}, values),
        st.builds(lambda v: {frozenset({1}): v}, values),
    )


def count_instances(value: Any, cls: type) -> int:
    """How many instances of ``cls`` a value holds, itself included, through containers."""
    return sum(1 for item in _walk(value) if isinstance(item, cls))


def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(key)
            yield from _walk(item)
    elif isinstance(value, (list, tuple, deque, set, frozenset)):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name))
    elif isinstance(value, Send):
        yield from _walk(value.arg)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _walk(getattr(value, field.name))


# --- The model of JsonPlus --------------------------------------------------------------------

_EXPECTATIONS: list[tuple[type, Callable[[Any], Any]]] = []
_SAME_CHECKS: list[tuple[type, Callable[[Any, Any, str], None]]] = []


def register_expectation(cls: type[T], expect: Callable[[T], Any]) -> None:
    """Teach `expected_after_jsonplus` what a JsonPlus round trip makes of ``cls``.

    ``expect`` gets a value nested at any depth (not at the top level, where
    only None, bytes and bytearray are special) and returns its round-trip
    result; it can call `expected_nested` on the parts. Rules
    registered later win, and all registered rules win over the built-in ones.
    """
    _EXPECTATIONS.insert(0, (cls, expect))


def register_same_check(cls: type[T], check: Callable[[T, T, str], None]) -> None:
    """Teach `assert_same` to compare two values of ``cls``.

    ``check(actual, expected, path)`` is called once both have exactly the
    same type, and raises AssertionError (naming ``path``) on a difference.
    """
    _SAME_CHECKS.insert(0, (cls, check))


def _has_surrogates(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


_SURROGATES = re.compile("[\ud800-\udfff]")


def expected_after_jsonplus(value: Any) -> Any:
    """What plain ``JsonPlusSerializer().loads_typed(dumps_typed(value))`` returns.

    Raises ``ValueError`` for a value JsonPlus refuses to encode.
    """
    if value is None or type(value) in (bytes, bytearray):
        return value  # own type tags: "null", "bytes", "bytearray"
    return expected_nested(value)


def expected_nested(value: Any) -> Any:
    """`expected_after_jsonplus` for a value below the top level (a nested bytearray
    becomes bytes there)."""
    for cls, expect in _EXPECTATIONS:
        if isinstance(value, cls):
            return expect(value)
    if value is None or isinstance(value, (bool, float, bytes)):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, enum.Enum):  # before int and str: IntEnum, str-Enum
        return value
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise ValueError("JsonPlus cannot encode ints beyond 64 bits")
        return value
    if isinstance(value, str):
        return _SURROGATES.sub("?", value)
    if isinstance(value, dt.datetime):
        # JsonPlus stores datetime.isoformat() and calls datetime.fromisoformat() (the
        # one method on langgraph's safe list); the stdlib pair is the model.
        return dt.datetime.fromisoformat(value.isoformat())
    if isinstance(value, (dt.date, dt.time, dt.timedelta, uuid.UUID, decimal.Decimal)):
        return value
    if isinstance(value, _DeltaSnapshot):  # before tuple: it is a NamedTuple
        return _DeltaSnapshot(expected_nested(value.value))
    if isinstance(value, (list, tuple)):
        return [expected_nested(item) for item in value]
    if isinstance(value, deque):
        return deque(expected_nested(item) for item in value)
    if isinstance(value, dict):
        return {_expect_key(key): expected_nested(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        items = [expected_nested(item) for item in value]
        try:
            return type(value)(items)
        except TypeError:  # unhashable once rebuilt: JsonPlus gives up and returns the list
            return items
    if isinstance(value, BaseModel):
        return type(value)(**expected_nested(value.model_dump()))
    if isinstance(value, Send):
        return Send(value.node, expected_nested(value.arg), timeout=expected_nested(value.timeout))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return type(value)(**{f.name: expected_nested(getattr(value, f.name)) for f in fields})
    raise TypeError(
        f"no JsonPlus expectation for {type(value).__qualname__}; use register_expectation"
    )


def _expect_key(key: Any) -> Any:
    if isinstance(key, str) and _has_surrogates(key):
        raise ValueError("JsonPlus cannot encode dict keys with surrogates")
    if isinstance(key, tuple):
        return tuple(_expect_key(item) for item in key)
    if key is None or isinstance(key, (str, int, float)):
        return expected_nested(key)
    raise ValueError(f"JsonPlus cannot encode {type(key).__qualname__} dict keys")


# --- Strict comparison ------------------------------------------------------------------------


def _fail(path: str, message: str) -> None:
    raise AssertionError(f"at {path}: {message}")


def assert_same(actual: Any, expected: Any, path: str = "$") -> None:
    """Assert equal values of identical types, recursively.

    Checks type identity at every level: dict keys (in order) and values,
    list / tuple / deque / set elements, dataclass and pydantic fields
    (messages included), ``Send``, ``_DeltaSnapshot`` and other namedtuples.
    Floats compare NaN-aware and sign-of-zero aware; Decimals by
    ``as_tuple()``; datetimes and times by wall clock, fold and tzinfo (type,
    offset, name or zone key), not only by instant.
    """
    if type(actual) is not type(expected):
        _fail(
            path,
            f"type {type(actual).__qualname__} != {type(expected).__qualname__}"
            f" ({actual!r:.200} vs {expected!r:.200})",
        )
    for cls, check in _SAME_CHECKS:
        if isinstance(actual, cls):
            check(actual, expected, path)
            return
    if isinstance(actual, float):
        _same_float(actual, expected, path)
    elif isinstance(actual, decimal.Decimal):
        if actual.as_tuple() != expected.as_tuple():
            _fail(path, f"{actual!r} != {expected!r}")
    elif isinstance(actual, (dt.datetime, dt.time)):
        _same_clock(actual, expected, path)
    elif isinstance(actual, _DeltaSnapshot) or hasattr(type(actual), "_fields"):
        for name in type(actual)._fields:
            assert_same(getattr(actual, name), getattr(expected, name), f"{path}.{name}")
    elif isinstance(actual, dict):
        _same_dict(actual, expected, path)
    elif isinstance(actual, (list, tuple, deque)):
        _same_sequence(actual, expected, path)
    elif isinstance(actual, (set, frozenset)):
        _same_set(actual, expected, path)
    elif isinstance(actual, BaseModel):
        for name in type(actual).model_fields:
            assert_same(getattr(actual, name), getattr(expected, name), f"{path}.{name}")
        assert_same(actual.__pydantic_extra__, expected.__pydantic_extra__, f"{path}.<extra>")
    elif isinstance(actual, Send):
        assert_same(actual.node, expected.node, f"{path}.node")
        assert_same(actual.arg, expected.arg, f"{path}.arg")
        assert_same(actual.timeout, expected.timeout, f"{path}.timeout")
    elif dataclasses.is_dataclass(actual):
        for field in dataclasses.fields(actual):
            name = field.name
            assert_same(getattr(actual, name), getattr(expected, name), f"{path}.{name}")
    elif isinstance(actual, (ZoneInfo, dt.timezone)):
        _same_tzinfo(actual, expected, path)
    elif isinstance(actual, _EQ_COMPARED):
        if actual != expected:
            _fail(path, f"{actual!r:.200} != {expected!r:.200}")
    else:
        raise TypeError(
            f"at {path}: no comparison for {type(actual).__qualname__}; use register_same_check"
        )


_EQ_COMPARED = (
    type(None),
    bool,
    int,
    str,
    bytes,
    bytearray,
    dt.date,
    dt.timedelta,
    uuid.UUID,
    enum.Enum,
)


def _same_float(actual: float, expected: float, path: str) -> None:
    if math.isnan(actual) and math.isnan(expected):
        return
    if actual != expected or math.copysign(1.0, actual) != math.copysign(1.0, expected):
        _fail(path, f"{actual!r} != {expected!r}")


def _same_clock(actual: dt.datetime | dt.time, expected: dt.datetime | dt.time, path: str) -> None:
    if actual.replace(tzinfo=None) != expected.replace(tzinfo=None):
        _fail(path, f"wall clock {actual!r} != {expected!r}")
    if actual.fold != expected.fold:
        _fail(path, f"fold {actual.fold} != {expected.fold} ({actual!r})")
    assert_same(actual.tzinfo, expected.tzinfo, f"{path}.tzinfo")


def _same_tzinfo(actual: dt.tzinfo, expected: dt.tzinfo, path: str) -> None:
    # assert_same has checked that both have exactly the same type.
    if isinstance(actual, ZoneInfo) and isinstance(expected, ZoneInfo):
        same = actual.key == expected.key
    else:
        same = actual == expected and actual.tzname(None) == expected.tzname(None)
    if not same:
        _fail(path, f"{actual!r} != {expected!r}")


def _same_dict(actual: dict[Any, Any], expected: dict[Any, Any], path: str) -> None:
    if len(actual) != len(expected):
        _fail(path, f"{len(actual)} keys != {len(expected)} keys")
    for index, (key_a, key_e) in enumerate(zip(actual, expected, strict=True)):
        assert_same(key_a, key_e, f"{path}.<key {index}>")
        assert_same(actual[key_a], expected[key_e], f"{path}[{key_a!r:.40}]")


def _same_sequence(actual: Sequence[Any], expected: Sequence[Any], path: str) -> None:
    if len(actual) != len(expected):
        _fail(path, f"length {len(actual)} != {len(expected)}")
    if (
        isinstance(actual, deque)
        and isinstance(expected, deque)
        and actual.maxlen != expected.maxlen
    ):
        _fail(path, f"maxlen {actual.maxlen} != {expected.maxlen}")
    for index, (item_a, item_e) in enumerate(zip(actual, expected, strict=True)):
        assert_same(item_a, item_e, f"{path}[{index}]")


def _same_set(
    actual: set[Any] | frozenset[Any], expected: set[Any] | frozenset[Any], path: str
) -> None:
    if len(actual) != len(expected):
        _fail(path, f"size {len(actual)} != {len(expected)}")
    by_value = {item: item for item in actual}
    for item in expected:
        if item not in by_value:
            _fail(path, f"{item!r:.100} missing")
        assert_same(by_value[item], item, f"{path}{{{item!r:.40}}}")
