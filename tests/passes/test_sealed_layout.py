"""The constants stores/_sealed.py repeats from sealing (stores must not import it), pinned."""

from __future__ import annotations

from secure_serde.sealing import _codec, _identity
from secure_serde.stores import _base, _sealed


def test_record_key_is_the_sealers() -> None:
    assert _sealed.SEALED_RECORD_KEY == _codec.RECORD_KEY


def test_identity_constants_are_the_sealers() -> None:
    assert _sealed.IDENTITY_KEY == _identity.IDENTITY_KEY
    assert _sealed.IDENTITY_CHECKPOINT_ID == _identity.IDENTITY_CHECKPOINT_ID
    assert _base.SEALED_STORE_THREAD == _identity.IDENTITY_THREAD


def test_identity_ref_names_the_identity_row() -> None:
    ref = _sealed.identity_ref()
    assert ref.table == _sealed.RECORDS
    assert ref.key_values == (_identity.IDENTITY_THREAD, "", _identity.IDENTITY_CHECKPOINT_ID)
    assert _sealed.entry_key(_identity.IDENTITY_THREAD) == _identity.IDENTITY_KEY
    assert _sealed.entry_key("any other thread") == _codec.RECORD_KEY
