"""Property tests: EncryptedSerializer round trips exactly what plain JsonPlus round trips.

The values come from tests/strategies.py, which also documents (and models,
in ``expected_after_jsonplus``) what a plain JsonPlus round trip changes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import uuid
from collections import deque
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Command

from secure_serde import EncryptedSerializer, UnserializableValueError
from secure_serde.ciphers import EnvKeyCipher
from tests import strategies as cs

KEY = b"0" * 32
CIPHER_NAME = "aesgcm"
# Format v1: version (1) + key id (4) + nonce (12) + GCM tag (16).
# Formats v2 and v3: version, key id, nonce, key commitment, GCM tag (v3 writes the
# per-key commitment before the nonce).
OVERHEAD = 1 + 4 + 12 + 16 + 16
NONCE = slice(1 + 4 + 16, 1 + 4 + 16 + 12)

# Nested pydantic models and messages are slow to draw; that is expected here.
SLOW_OK = (HealthCheck.too_slow, HealthCheck.data_too_large)


def plain_serde(*, pickle_fallback: bool = False) -> JsonPlusSerializer:
    return JsonPlusSerializer(
        pickle_fallback=pickle_fallback, allowed_msgpack_modules=cs.MSGPACK_ALLOWLIST
    )


@functools.cache
def encrypted(*, pickle_fallback: bool = False) -> EncryptedSerializer:
    """The drop-in constructor over an explicitly configured JsonPlus."""
    return EncryptedSerializer.from_pycryptodome_aes(
        plain_serde(pickle_fallback=pickle_fallback), key=KEY
    )


@functools.cache
def encrypted_direct() -> EncryptedSerializer:
    """The same key through EnvKeyCipher and the plain constructor."""
    return EncryptedSerializer(EnvKeyCipher(key=KEY), serde=plain_serde())


PLAIN = plain_serde()


def plain_roundtrip(value: Any) -> Any:
    return PLAIN.loads_typed(PLAIN.dumps_typed(value))


def roundtrip(serde: Any, value: Any) -> Any:
    return serde.loads_typed(serde.dumps_typed(value))


# --- The model itself is checked against JsonPlus on fixed examples -------------------------


def test_model_of_jsonplus_changes() -> None:
    """Pin, on concrete values, each change documented in tests/strategies.py."""
    paris = dt.datetime(2024, 7, 1, 12, tzinfo=ZoneInfo("Europe/Paris"))
    tiny_offset = dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(microseconds=1)))
    profile = cs.Profile(
        name="n",
        age=2**64 - 1,
        score=float("-inf"),
        address=cs.Address(street="s", city="c"),
        tags={"a", "b"},
        aliases=("x", "y"),
        color=cs.Color.BLUE,
        uid=uuid.UUID(int=7),
        balance=decimal.Decimal("1.10"),
        created=dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
    )
    cases = [
        ((1, (2, 3)), [1, [2, 3]]),
        ({(1, ("a",)): (4,)}, {(1, ("a",)): [4]}),
        ({(1, 2)}, [[1, 2]]),
        (frozenset({frozenset({1})}), frozenset({frozenset({1})})),
        (paris, paris.replace(tzinfo=dt.timezone(dt.timedelta(hours=2)))),
        ([bytearray(b"x")], [b"x"]),
        (bytearray(b"x"), bytearray(b"x")),
        (["a\ud800b"], ["a?b"]),
        (Command(), Command(goto=[])),
        (deque([1], maxlen=3), deque([1])),
        (_DeltaSnapshot((1,)), _DeltaSnapshot([1])),
        ([tiny_offset], [tiny_offset.replace(tzinfo=dt.UTC)]),
        (
            ToolMessage("", tool_call_id="c", artifact=[_DeltaSnapshot(1), cs.Point(1, 2.0)]),
            ToolMessage("", tool_call_id="c", artifact=[[1], {"x": 1, "y": 2.0}]),
        ),
        (profile, profile),  # tuple and set fields are re-coerced by pydantic
    ]
    for value, after in cases:
        cs.assert_same(plain_roundtrip(value), after)
        cs.assert_same(cs.expected_after_jsonplus(value), after)
    # assert_same bites: a tuple is not a list, a zone not an offset, -0.0 not 0.0, order counts.
    with pytest.raises(AssertionError):
        cs.assert_same([1, 2], (1, 2))
    with pytest.raises(AssertionError):
        cs.assert_same(paris, paris.astimezone(dt.timezone(dt.timedelta(hours=2))))
    with pytest.raises(AssertionError):
        cs.assert_same(0.0, -0.0)
    with pytest.raises(AssertionError):
        cs.assert_same({"a": 1, "b": 2}, {"b": 2, "a": 1})


# --- Round trips ------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.checkpoint_values())
def test_roundtrip_matches_plain_jsonplus(value: Any) -> None:
    plain = plain_roundtrip(value)
    cs.assert_same(roundtrip(encrypted(), value), plain)
    cs.assert_same(plain, cs.expected_after_jsonplus(value))


@settings(max_examples=150, deadline=None, suppress_health_check=SLOW_OK)
@given(value=st.one_of(cs.scalars(), cs.sets_of_hashables()))
def test_scalar_and_set_roundtrip(value: Any) -> None:
    """Every leaf type on its own, drawn far more often than inside nested values."""
    plain = plain_roundtrip(value)
    cs.assert_same(roundtrip(encrypted(), value), plain)
    cs.assert_same(plain, cs.expected_after_jsonplus(value))


@settings(max_examples=100, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.checkpoint_values(exact=True))
def test_roundtrip_is_identity_where_jsonplus_is(value: Any) -> None:
    cs.assert_same(roundtrip(encrypted_direct(), value), value)
    cs.assert_same(plain_roundtrip(value), value)


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(channels=cs.channel_values())
def test_channel_values_roundtrip(channels: dict[str, Any]) -> None:
    plain = plain_roundtrip(channels)
    cs.assert_same(roundtrip(encrypted(), channels), plain)
    cs.assert_same(plain, cs.expected_after_jsonplus(channels))


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.checkpoint_values())
def test_default_inner_serializer_matches_default_jsonplus(value: Any) -> None:
    """``serde=None`` means a default JsonPlusSerializer(), whatever its allowlist mode."""
    default_plain = JsonPlusSerializer()
    ours = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    cs.assert_same(roundtrip(ours, value), roundtrip(default_plain, value))


@pytest.mark.parametrize("writer_is_drop_in", [True, False])
@settings(max_examples=60, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.checkpoint_values())
def test_both_constructors_read_each_other(writer_is_drop_in: bool, value: Any) -> None:
    writer, read_by = (
        (encrypted(), encrypted_direct())
        if writer_is_drop_in
        else (encrypted_direct(), encrypted())
    )
    tag, blob = writer.dumps_typed(value)
    plain_tag, plain_bytes = PLAIN.dumps_typed(value)
    assert read_by.cipher.decrypt_with_tag(CIPHER_NAME, blob, plain_tag) == bytes(plain_bytes)
    cs.assert_same(read_by.loads_typed((tag, blob)), plain_roundtrip(value))


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.checkpoint_values())
def test_two_encryptions_differ_and_both_decrypt(value: Any) -> None:
    serde = encrypted()
    first, second = serde.dumps_typed(value), serde.dumps_typed(value)
    assert first[0] == second[0]
    assert first[1] != second[1]
    assert first[1][NONCE] != second[1][NONCE], "nonce reused"
    # The per-key part (version, key id, commitment) is the same in both.
    assert first[1][: NONCE.start] == second[1][: NONCE.start]
    plain = plain_roundtrip(value)
    cs.assert_same(serde.loads_typed(first), plain)
    cs.assert_same(serde.loads_typed(second), plain)


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(channels=cs.channel_values(with_delta_snapshot=True))
def test_delta_snapshot_survives_in_channel_values(channels: dict[str, Any]) -> None:
    assert isinstance(channels["history"], _DeltaSnapshot)
    restored = roundtrip(encrypted(), channels)
    assert type(restored["history"]) is _DeltaSnapshot
    cs.assert_same(restored["history"], cs.expected_after_jsonplus(channels["history"]))
    for name, value in channels.items():
        if isinstance(value, _DeltaSnapshot):
            cs.assert_same(restored[name], plain_roundtrip(value))
    # Snapshots nested anywhere else survive too, as many as JsonPlus keeps.
    expected = cs.expected_after_jsonplus(channels)
    assert cs.count_instances(restored, _DeltaSnapshot) == cs.count_instances(
        expected, _DeltaSnapshot
    )
    assert cs.count_instances(restored, _DeltaSnapshot) >= 1


# --- The stored form --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.checkpoint_values())
def test_overhead_is_exactly_49_bytes(value: Any) -> None:
    serde = encrypted()
    _, blob = serde.dumps_typed(value)
    plain_tag, plain_bytes = PLAIN.dumps_typed(value)
    assert len(blob) == len(plain_bytes) + OVERHEAD
    assert blob[0] == 3
    assert blob[1:5] == bytes.fromhex(serde.cipher.key_id)  # type: ignore[attr-defined]
    # The encrypted bytes are exactly plain JsonPlus's bytes.
    assert serde.cipher.decrypt_with_tag(CIPHER_NAME, blob, plain_tag) == bytes(plain_bytes)


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.checkpoint_values())
def test_type_tag_is_plain_tag_plus_aesgcm(value: Any) -> None:
    tag, _ = encrypted().dumps_typed(value)
    plain_tag, _ = PLAIN.dumps_typed(value)
    assert tag == f"{plain_tag}+{CIPHER_NAME}"
    assert plain_tag in ("null", "bytes", "bytearray", "msgpack")


# --- What JsonPlus refuses --------------------------------------------------------------------


def _dump_error(serde: Any, value: Any) -> BaseException:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - compared with JsonPlus's below
        serde.dumps_typed(value)
    return caught.value


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.unencodable_values())
def test_unencodable_values_fail_as_in_jsonplus(value: Any) -> None:
    plain_error = _dump_error(PLAIN, value)
    error = _dump_error(encrypted(), value)
    if isinstance(plain_error, TypeError):
        # Ours is typed, and still the TypeError JsonPlus raises, with its message inside.
        assert isinstance(error, UnserializableValueError)
        assert isinstance(error, type(plain_error))
        assert str(plain_error) in str(error)
    else:
        assert type(error) is type(plain_error)
        assert str(error) == str(plain_error)
    with pytest.raises(ValueError, match="JsonPlus cannot encode"):
        cs.expected_after_jsonplus(value)


@settings(max_examples=30, deadline=None, suppress_health_check=SLOW_OK)
@given(
    value=st.one_of(
        cs.big_ints(),
        st.builds(
            lambda v, b: {"value": v, "big": [b]}, cs.checkpoint_values(max_leaves=4), cs.big_ints()
        ),
    )
)
def test_pickle_fallback_roundtrips_big_ints(value: Any) -> None:
    """With an explicit pickle_fallback=True inner serde, big ints round trip (as a pickle)."""
    plain = plain_serde(pickle_fallback=True)
    plain_tag, _ = plain.dumps_typed(value)
    tag, blob = encrypted(pickle_fallback=True).dumps_typed(value)
    assert plain_tag == "pickle"
    assert tag == f"pickle+{CIPHER_NAME}"
    restored = encrypted(pickle_fallback=True).loads_typed((tag, blob))
    cs.assert_same(restored, roundtrip(plain, value))
    cs.assert_same(restored, value)  # pickle is exact: tuples, zones and big ints all kept


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(value=cs.checkpoint_values())
def test_strict_inner_serde_and_its_allowlist(value: Any) -> None:
    """A strict-msgpack inner serde blocks the types defined in tests/strategies.py
    (returning their payloads) exactly as plain strict JsonPlus does, and the
    allowlist applied through ``with_msgpack_allowlist`` reaches it."""
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    ours = EncryptedSerializer.from_pycryptodome_aes(strict, key=KEY)
    cs.assert_same(roundtrip(ours, value), roundtrip(strict, value))
    allowed = ours.with_msgpack_allowlist(cs.MSGPACK_ALLOWLIST)
    assert isinstance(allowed, EncryptedSerializer)
    plain_allowed = strict.with_msgpack_allowlist(cs.MSGPACK_ALLOWLIST)
    restored = roundtrip(allowed, value)
    cs.assert_same(restored, roundtrip(plain_allowed, value))
    cs.assert_same(restored, plain_roundtrip(value))
