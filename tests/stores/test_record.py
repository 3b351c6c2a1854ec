"""`canonical`, the record encoding every seal covers, against a plain reference encoder.

`canonical` (secure_serde/stores/_v03_rows.py, 0.3's record encoding, read by `V03Reader`)
against the layout written out below as simply as possible, in another way: they must agree on
every JSON-like value, and the frozen record-seal vectors pin both to the bytes.
"""

from __future__ import annotations

import enum
import struct
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from secure_serde.stores import canonical


def _reference(value: Any) -> bytes:
    if value is None:
        return b"N"
    if value is True:
        return b"T"
    if value is False:
        return b"F"
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
        return b"S" + struct.pack(">I", len(raw)) + raw
    if isinstance(value, (int, float)):
        number = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
        text = ("0" if number.is_zero() else str(number.normalize())).encode("ascii")
        return b"D" + struct.pack(">I", len(text)) + text
    if isinstance(value, (list, tuple)):
        return b"L" + struct.pack(">I", len(value)) + b"".join(_reference(v) for v in value)
    out = b"O" + struct.pack(">I", len(value))
    for key in sorted(value, key=lambda k: str(k).encode("utf-8", "surrogatepass")):
        out += _reference(str(key)) + _reference(value[key])
    return out


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(codec="utf-8") | st.characters(categories=["Cs"]))
    # Long strings too.
    | st.text(min_size=65, max_size=80)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text() | st.integers() | st.booleans(), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_canonical_agrees_with_the_reference(value: Any) -> None:
    assert canonical(value) == _reference(value)


class _Colour(str, enum.Enum):  # noqa: UP042 - its str() is not its value; StrEnum hides that
    RED = "red"


def test_edge_cases_agree_with_the_reference() -> None:
    cases: list[Any] = [
        {"\ud800": 1, "\ue000": 2, "\uffff": 3, "\U0001f600": 4, "a": 5},
        {"x": _Colour.RED, _Colour.RED: [_Colour.RED]},
        [1, 1.0, -0.0, 0, 1e300, 10**300, 100, 2.5],
        {1: "int key", "1": "str key"},
    ]
    for case in cases:
        assert canonical(case) == _reference(case)
    # Cached encodings do not leak between equal-but-different values.
    assert canonical([1, True, 1.0]) == b"L\x00\x00\x00\x03D\x00\x00\x00\x011TD\x00\x00\x00\x011"
