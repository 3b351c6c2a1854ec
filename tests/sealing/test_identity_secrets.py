"""The store identity's index key never stays in a traceback frame's locals.

The identity record holds the store's blind-index key. Opening a record that is not one
secure_serde wrote (a wrong format, a short key) raises `StoreIdentityError` after the record
was decrypted: every frame the error passed through must have let go of it, as for every other
secret the package takes (tests/test_secrets_tracebacks.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple

from secure_serde import EncryptedSerializer, StoreIdentityError
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.crypto import Location
from secure_serde.sealing import _cell
from secure_serde.sealing._identity import (
    IDENTITY_KEY,
    IDENTITY_THREAD,
    identity_config,
    new_record,
    open_identity,
)
from tests.secrets_support import assert_no_secret_locals, secret_findings

SERDE = EncryptedSerializer(EnvKeyCipher(b"identity-secrets-key-0123456789a"))


def _found(record: dict[str, Any]) -> CheckpointTuple:
    type_tag, ciphertext = SERDE.dumps_typed_at(record, Location.identity(IDENTITY_THREAD))
    text = _cell.to_text(_cell.pack(_cell.IDENTITY, type_tag, ciphertext))
    return CheckpointTuple(identity_config(), {}, {IDENTITY_KEY: text})  # type: ignore[typeddict-item]


@pytest.mark.parametrize(
    "change",
    [{"format": 99}, {"store": b"short"}, {"extra": None, "format": "1"}],
    ids=["format", "store-id", "format-type"],
)
def test_a_refused_identity_leaves_no_index_key_in_any_frame(change: dict[str, Any]) -> None:
    record = new_record()
    index_key = record["index_keys"][0]["key"]
    record.update(change)
    found = _found(record)
    del record
    with pytest.raises(StoreIdentityError) as caught:
        open_identity(found, SERDE)
    assert_no_secret_locals(caught.value, index_key)


def test_the_check_can_fail_without_the_scrub() -> None:
    # The same refusal through the unwrapped function keeps the key in a frame: the check
    # above is able to see it.
    record = new_record()
    index_key = record["index_keys"][0]["key"]
    record["format"] = 99
    found = _found(record)
    with pytest.raises(StoreIdentityError) as caught:
        open_identity.__wrapped__(found, SERDE)  # type: ignore[attr-defined]
    assert secret_findings(caught.value, [index_key])
