"""Pickles are read only after a cipher authenticated them; allowlists reach through.

A marker-setting function, admitted as a global, stands in for the code a
planted pickle would run: the marker shows whether a pickle was executed,
so each refusal below is proven to happen before anything ran, and each
accepted read to have actually unpickled.
"""

from __future__ import annotations

import logging
import pickle
import re
from typing import Any

import ormsgpack
import pandas as pd
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    DecryptionError,
    EncryptedSerializer,
    Migration,
    PickleFallbackSerializer,
    PickleRefusedError,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import EXT_PICKLE, PANDAS, TAG
from secure_serde.serde import langgraph_internals as lg
from tests import strategies as cs
from tests import strategies_pandas  # noqa: F401  (registers exact frame comparison)

KEY = b"a" * 32
RAN: list[str] = []


def mark(label: str) -> str:
    """Stands in for whatever a planted pickle would run."""
    RAN.append(label)
    return label


class Marked:
    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return mark, ("ran",)


ALLOW_MARK = (__name__, "mark")
ALLOW_NESTED = (__name__, "nested_read")


def nested_read() -> str:
    """Runs while an authenticated row is rebuilt, and tries to read an unauthenticated one."""
    try:
        inner().loads_typed((TAG, marked_payload()))
    except PickleRefusedError:
        return "refused"
    return "read"


class NestedRead:
    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return nested_read, ()


@pytest.fixture(autouse=True)
def _clear_marker() -> None:
    RAN.clear()


def marked_payload() -> bytes:
    """A msgpack+pickle payload whose pickle calls `mark` (an admitted global here)."""
    return ormsgpack.packb({"x": ormsgpack.Ext(EXT_PICKLE, pickle.dumps(Marked(), protocol=5))})


def inner(**kwargs: Any) -> PickleFallbackSerializer:
    return PickleFallbackSerializer(
        JsonPlusSerializer(), allowed=[PANDAS, ALLOW_MARK, ALLOW_NESTED], **kwargs
    )


def test_the_marker_detects_an_unpickled_row() -> None:
    """Control: where reading is allowed, the planted pickle does run."""
    assert inner(allow_unauthenticated=True).loads_typed((TAG, marked_payload())) == {"x": "ran"}
    assert RAN == ["ran"]


def test_authenticated_rows_are_read() -> None:
    cipher = EnvKeyCipher(KEY)
    serde = EncryptedSerializer(cipher, inner())
    name, ciphertext = cipher.encrypt_with_tag(marked_payload(), TAG)
    assert serde.loads_typed((f"{TAG}+{name}", ciphertext)) == {"x": "ran"}
    assert RAN == ["ran"]


def test_the_vouching_does_not_reach_code_run_while_rebuilding() -> None:
    cipher = EnvKeyCipher(KEY)
    payload = ormsgpack.packb([ormsgpack.Ext(EXT_PICKLE, pickle.dumps(NestedRead(), protocol=5))])
    name, ciphertext = cipher.encrypt_with_tag(payload, TAG)
    serde = EncryptedSerializer(cipher, inner())
    assert serde.loads_typed((f"{TAG}+{name}", ciphertext)) == ["refused"]
    assert RAN == []


def test_standalone_reads_are_refused_before_anything_runs() -> None:
    with pytest.raises(PickleRefusedError, match="EncryptedSerializer"):
        inner().loads_typed((TAG, marked_payload()))
    assert RAN == []


def test_standalone_writes_work_and_say_they_need_authentication() -> None:
    serde = inner()
    tag, payload = serde.dumps_typed({"t": pd.DataFrame({"a": [1]})})
    assert tag == TAG
    with pytest.raises(PickleRefusedError):
        serde.loads_typed((tag, payload))


def test_unauthenticated_mode_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="secure_serde"):
        inner(allow_unauthenticated=True)
    assert "without authentication" in caplog.text


def test_plaintext_pickle_rows_are_refused_even_with_allow_plaintext() -> None:
    serde = EncryptedSerializer(EnvKeyCipher(KEY), inner(), migration=Migration(plaintext=True))
    with pytest.raises(DecryptionError):
        serde.loads_typed((TAG, marked_payload()))
    assert RAN == []


def test_relabelled_rows_fail_authentication() -> None:
    """Bytes stored as a ``bytes`` value, relabelled as a pickle row, do not authenticate."""
    serde = EncryptedSerializer(EnvKeyCipher(KEY), inner())
    tag, ciphertext = serde.dumps_typed(marked_payload())
    assert tag == "bytes+aesgcm"
    with pytest.raises(DecryptionError):
        serde.loads_typed((f"{TAG}+aesgcm", ciphertext))
    assert RAN == []


def test_plain_jsonplus_refuses_our_rows_instead_of_reading_none() -> None:
    tag, payload = inner().dumps_typed({"t": pd.DataFrame({"a": [1]})})
    with pytest.raises(NotImplementedError, match=re.escape(TAG)):
        JsonPlusSerializer().loads_typed((tag, payload))


def test_whole_value_pickle_rows_are_refused() -> None:
    serde = inner(allow_unauthenticated=True)
    with pytest.raises(PickleRefusedError, match="whole-value"):
        serde.loads_typed(("pickle", pickle.dumps(Marked())))
    assert RAN == []


def test_planted_pickle_in_a_plain_msgpack_row_is_never_unpickled() -> None:
    """Only msgpack+pickle rows reach the unpickler; JsonPlus ignores an unknown ext code."""
    serde = inner(allow_unauthenticated=True)
    assert serde.loads_typed(("msgpack", marked_payload())) == {"x": None}
    assert RAN == []


# --- msgpack allowlists ---------------------------------------------------------------------


def test_with_msgpack_allowlist_merges_into_the_inner_serializer() -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    serde = PickleFallbackSerializer(strict, allowed=[PANDAS])
    clone = serde.with_msgpack_allowlist([cs.TreeNode, cs.Point])
    assert clone is not serde
    assert isinstance(clone, PickleFallbackSerializer)
    assert clone.admitted_globals == serde.admitted_globals
    assert lg.msgpack_allowlist(clone.serde) == {
        ("tests.strategies", "TreeNode"),
        ("tests.strategies", "Point"),
    }
    assert lg.msgpack_allowlist(serde.serde) is None  # the original is untouched
    assert clone.with_msgpack_allowlist([cs.Point]) is clone
    # The clone rebuilds what the strict original returns as a dict.
    node = cs.TreeNode(name="n", at=cs.Point(1, 2.0), payload=pd.DataFrame({"a": [1]}))
    vouched = EncryptedSerializer(EnvKeyCipher(KEY), clone)
    cs.assert_same(vouched.loads_typed(vouched.dumps_typed(node)), node)
    original = EncryptedSerializer(EnvKeyCipher(KEY), serde)
    assert type(original.loads_typed(original.dumps_typed(node))) is dict


def test_saver_with_allowlist_reaches_through_both_layers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    for serde in (
        EncryptedSerializer(EnvKeyCipher(KEY), PickleFallbackSerializer(strict, allowed=[PANDAS])),
        PickleFallbackSerializer(strict, allowed=[PANDAS], allow_unauthenticated=True),
    ):
        assert isinstance(serde, JsonPlusSerializer)  # what langgraph's dispatch checks
        saver = InMemorySaver(serde=serde)
        with caplog.at_level(logging.WARNING):
            clone = saver.with_allowlist([("tests.strategies", "Point")])
        assert "does not support msgpack allowlist" not in caplog.text
        assert clone is not saver
        fallback = (
            clone.serde.serde if isinstance(clone.serde, EncryptedSerializer) else clone.serde
        )
        assert isinstance(fallback, PickleFallbackSerializer)
        assert lg.msgpack_allowlist(fallback.serde) == {("tests.strategies", "Point")}
