"""The constructor's own ``allow_legacy_pickle`` default refuses built-in pickle rows.

`EncryptedSerializer.from_pycryptodome_aes` passes the switch itself, so its
refusal test says nothing about ``EncryptedSerializer.__init__``'s default:
flipping that default to ``True`` survived the whole suite (issue 9). These
rows are written exactly as langgraph's built-in writes them, a ``pickle+aes``
row from ``JsonPlusSerializer(pickle_fallback=True)``, and read by a cipher
built directly, with no switch passed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import EncryptedSerializer, Migration, PickleRefusedError
from secure_serde.ciphers import EnvKeyCipher
from tests.planted import PlantedPickle

KEY = b"m" * 32


def _builtin_pickle_row(key: bytes | None) -> tuple[str, bytes]:
    """A row as langgraph's built-in writes a value msgpack cannot encode."""
    inner = JsonPlusSerializer(pickle_fallback=True)
    if key is None:
        builtin = BuiltinSerializer.from_pycryptodome_aes(serde=inner)
    else:
        builtin = BuiltinSerializer.from_pycryptodome_aes(serde=inner, key=key)
    row = builtin.dumps_typed(PlantedPickle())
    PlantedPickle.reset()
    return row


@pytest.fixture(autouse=True)
def _not_ran() -> Iterator[None]:
    PlantedPickle.reset()
    yield
    PlantedPickle.reset()


@pytest.mark.parametrize(
    "inner", [None, JsonPlusSerializer(pickle_fallback=True)], ids=["default-serde", "pickling"]
)
def test_constructor_default_refuses_builtin_pickle_rows(inner: Any) -> None:
    row = _builtin_pickle_row(KEY)
    assert row[0] == "pickle+aes"
    serializer = EncryptedSerializer(EnvKeyCipher(key=KEY), inner)
    with pytest.raises(PickleRefusedError):
        serializer.loads_typed(row)
    assert not PlantedPickle.ran


def test_constructor_default_refuses_them_under_the_environment_key(env_key: str) -> None:
    row = _builtin_pickle_row(None)
    serializer = EncryptedSerializer(EnvKeyCipher(), JsonPlusSerializer(pickle_fallback=True))
    with pytest.raises(PickleRefusedError):
        serializer.loads_typed(row)
    assert not PlantedPickle.ran


def test_the_same_row_runs_when_the_switch_is_on() -> None:
    """The row is a live pickle: only the default stands between it and the unpickler."""
    row = _builtin_pickle_row(KEY)
    opted_in = EncryptedSerializer(
        EnvKeyCipher(key=KEY),
        JsonPlusSerializer(pickle_fallback=True),
        migration=Migration(legacy_pickle=True),
    )
    opted_in.loads_typed(row)
    assert PlantedPickle.ran


def test_the_default_still_reads_builtin_rows_that_are_not_pickles() -> None:
    """The refusal is about pickle tags, not about legacy rows as such."""
    builtin = BuiltinSerializer.from_pycryptodome_aes(
        serde=JsonPlusSerializer(pickle_fallback=True), key=KEY
    )
    row = builtin.dumps_typed({"a": [1, 2]})
    assert row[0] == "msgpack+aes"
    assert EncryptedSerializer(EnvKeyCipher(key=KEY)).loads_typed(row) == {"a": [1, 2]}
