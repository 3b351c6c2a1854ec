"""The one read rule, as the serializer applies it: what each tag may be, and nothing runs.

Rows here are what an attacker with write access to the store can leave: a planted plaintext
``msgpack`` row, and a built-in ``bytes+aes`` row (an upload, a tool result: content the
attacker chose, encrypted by the application) relabelled ``msgpack+aes``, which needs no key
because langgraph's built-in format does not authenticate its type tag.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    ConfigurationError,
    EncryptedSerializer,
    Migration,
    PickleRefusedError,
    PlaintextRefusedError,
    StrictDecodeError,
    UnknownCipherError,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import NUMPY, PickleFallbackSerializer
from secure_serde.serde._readrule import Decode, ReadRule, seals
from tests.planted import PlantedPickle
from tests.planted_msgpack import CONSTRUCTOR_CASES, PlantedCall, os_system_value, planted_value

KEY = b"readrule-tests-key-0123456789abc"


@pytest.fixture(autouse=True)
def _reset() -> None:
    PlantedCall.reset()
    PlantedPickle.reset()


def relabelled_legacy_row(content: bytes) -> tuple[str, bytes]:
    """A built-in ``bytes+aes`` row holding ``content``, relabelled ``msgpack+aes`` (no key)."""
    tag, blob = BuiltinSerializer.from_pycryptodome_aes(key=KEY).dumps_typed(content)
    assert tag == "bytes+aes"
    return "msgpack+aes", blob


# ---------------------------------------------------------------------------------------------
# Code execution through msgpack on unauthenticated rows


@pytest.mark.parametrize("case", sorted(CONSTRUCTOR_CASES))
def test_planted_plaintext_msgpack_never_runs(case: str) -> None:
    code, arg = CONSTRUCTOR_CASES[case]
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY), migration=Migration(plaintext=True))
    with pytest.raises(StrictDecodeError):
        serde.loads_typed(("msgpack", planted_value(code, arg=arg)))
    assert not PlantedCall.ran


def test_planted_os_system_plaintext_row_never_runs(tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    JsonPlusSerializer().loads_typed(("msgpack", os_system_value(str(marker))))
    assert marker.exists()  # the payload is live
    marker.unlink()
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY), migration=Migration(plaintext=True))
    with pytest.raises(StrictDecodeError, match=r"os\.system"):
        serde.loads_typed(("msgpack", os_system_value(str(marker))))
    assert not marker.exists()


def test_plaintext_data_rows_still_read_under_the_switch() -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY), migration=Migration(plaintext=True))
    value = {"messages": [HumanMessage(content="hi", id="1")], "n": 2}
    assert serde.loads_typed(JsonPlusSerializer().dumps_typed(value)) == value


def test_relabelled_legacy_row_never_runs_in_the_drop_in() -> None:
    # Legacy reading is on by default in the drop-in: LANGGRAPH_AES_KEY's rows are read.
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    row = relabelled_legacy_row(planted_value())
    # The built-in itself runs it: the finding is real.
    BuiltinSerializer.from_pycryptodome_aes(key=KEY).loads_typed(row)
    assert PlantedCall.ran
    PlantedCall.reset()
    with pytest.raises(StrictDecodeError):
        serde.loads_typed(row)
    assert not PlantedCall.ran


def test_legacy_data_rows_still_read() -> None:
    builtin = BuiltinSerializer.from_pycryptodome_aes(key=KEY)
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    value = {"messages": [HumanMessage(content="hi", id="1")], "blob": b"x"}
    assert serde.loads_typed(builtin.dumps_typed(value)) == value


def test_legacy_pickle_stays_off_by_default_in_the_constructor() -> None:
    row = BuiltinSerializer.from_pycryptodome_aes(
        key=KEY, serde=JsonPlusSerializer(pickle_fallback=True)
    ).dumps_typed(PlantedPickle())
    assert row[0] == "pickle+aes"
    # The constructor's own default, not from_pycryptodome_aes's.
    plain_constructor = EncryptedSerializer(EnvKeyCipher(key=KEY))
    with pytest.raises(PickleRefusedError):
        plain_constructor.loads_typed(row)
    assert not PlantedPickle.ran
    assert plain_constructor.migration == Migration()
    opted_in = EncryptedSerializer(
        EnvKeyCipher(key=KEY),
        JsonPlusSerializer(pickle_fallback=True),
        migration=Migration(legacy_pickle=True),
    )
    opted_in.loads_typed(row)
    assert PlantedPickle.ran


def test_graph_allowlist_reaches_the_strict_decoder() -> None:
    from tests.serde.test_strict import Thing

    row = relabelled_legacy_row(JsonPlusSerializer().dumps_typed({"t": Thing("a", 1)})[1])
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with pytest.raises(StrictDecodeError, match="Thing"):
        serde.loads_typed(row)
    allowed = serde.with_msgpack_allowlist([Thing])
    assert isinstance(allowed, EncryptedSerializer)
    assert allowed is not serde
    assert allowed.loads_typed(row) == {"t": Thing("a", 1)}
    # The original keeps its own allowlist.
    with pytest.raises(StrictDecodeError):
        serde.loads_typed(row)


# ---------------------------------------------------------------------------------------------
# The rule itself


def _rule(**migration: bool) -> ReadRule:
    return ReadRule([EnvKeyCipher(key=KEY)], Migration(**migration))


@pytest.mark.parametrize(
    ("tag", "migration", "decode"),
    [
        ("msgpack+aesgcm", {}, Decode.INNER),
        ("msgpack+pickle+aesgcm", {}, Decode.VOUCHED),
        ("bytes+aes", {}, Decode.STRICT),
        ("msgpack+aes", {}, Decode.STRICT),
        ("pickle+aes", {"legacy_pickle": True}, Decode.UNAUTHENTICATED_PICKLE),
        ("msgpack", {"plaintext": True}, Decode.STRICT),
        ("json", {"plaintext": True}, Decode.STRICT),
    ],
)
def test_routes(tag: str, migration: dict[str, bool], decode: Decode) -> None:
    route = _rule(**migration).route(tag)
    assert route.decode is decode
    assert route.authenticated == (decode in (Decode.INNER, Decode.VOUCHED))


@pytest.mark.parametrize(
    ("tag", "migration", "error"),
    [
        ("msgpack", {}, PlaintextRefusedError),
        ("pickle", {"plaintext": True}, PickleRefusedError),
        ("pickle+aes", {}, PickleRefusedError),
        ("msgpack+pickle", {"plaintext": True}, UnknownCipherError),
        ("msgpack+rot13", {}, UnknownCipherError),
    ],
)
def test_refusals_are_typed(tag: str, migration: dict[str, bool], error: type[Exception]) -> None:
    rule = _rule(**migration)
    with pytest.raises(error):
        rule.route(tag)
    assert not rule.authenticates(tag)


def test_seals_asks_the_rule() -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY))
    assert seals(serde, serde.dumps_typed({"a": 1})[0])
    assert not seals(serde, "msgpack+aes")  # encrypted, but the tag is not authenticated
    assert not seals(serde, "msgpack")
    pickling = PickleFallbackSerializer(allowed=[NUMPY])
    assert not seals(pickling, "msgpack+pickle")
    assert seals(BuiltinSerializer.from_pycryptodome_aes(key=KEY), "msgpack+aes")


def test_migration_sets_what_is_read() -> None:
    cipher = EnvKeyCipher(key=KEY)
    both = Migration(plaintext=True, legacy_pickle=True)
    assert EncryptedSerializer(cipher, migration=both).migration == both
    drop_in = EncryptedSerializer.from_pycryptodome_aes(key=KEY, mode=None, migration=both)
    assert drop_in.migration == Migration(plaintext=True, legacy_pickle=True)
    assert "migration=plaintext+legacy_pickle" in repr(drop_in)
    with pytest.raises(ConfigurationError, match="Migration"):
        EncryptedSerializer(cipher, migration={"plaintext": True})  # type: ignore[arg-type]


def test_routes_cache_is_bounded_and_refusals_are_never_cached() -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY))
    for i in range(1000):
        with pytest.raises(UnknownCipherError):
            serde.loads_typed((f"msgpack+c{i}", b""))
    for i in range(1000):
        with pytest.raises(Exception):  # noqa: B017, PT011 - any refusal; only the cache matters
            serde.loads_typed((f"t{i}+aesgcm", b"short"))
    assert len(serde._routes) <= 256


def test_unpickling_whole_values_needs_both_the_switch_and_the_tag() -> None:
    # An authenticated v1 row that names pickle is vouched for; the strict path never unpickles.
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY), migration=Migration(plaintext=True))
    with pytest.raises(PickleRefusedError):
        serde.loads_typed(("pickle", pickle.dumps(PlantedPickle())))
    assert not PlantedPickle.ran
