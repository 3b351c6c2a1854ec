"""The constants stores/_sealed.py and _items.py repeat from sealing (which stores must not
import), pinned."""

from __future__ import annotations

from secure_serde.sealing import _codec, _identity, _store_codec, _store_identity
from secure_serde.stores import _base, _items, _sealed


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


def test_names_pinned_equal_to_sealed_store() -> None:
    assert _items.SEALED_FIELD == _store_codec.SEALED_FIELD
    assert (_items.IDENTITY_PREFIX,) == _store_identity.RESERVED_NAMESPACE
    assert _items.IDENTITY_ITEM_KEY == _store_identity.IDENTITY_ITEM_KEY
