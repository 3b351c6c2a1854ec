"""`AesGcmCipher`'s refusals, pinned for the mutants mutmut left alive (docs/mutation.md).

A cipher name it does not read is `UnknownCipherError` carrying that name,
whether or not a legacy reader is configured: with one, only ``aes`` rows go
to it (and, at a location, are refused as unbound); every other name is
unknown, never "unbound".
"""

from __future__ import annotations

import pytest

from secure_serde import UnboundValueError, UnknownCipherError
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.crypto import Location

KEY = b"aesgcm-mutants-key-0123456789abc"
AT = Location.blob("t", "", "c", "1").encode()


@pytest.mark.parametrize("legacy", [True, False], ids=["with-legacy", "without-legacy"])
def test_an_unknown_cipher_name_is_unknown_and_named(legacy: bool) -> None:
    cipher = EnvKeyCipher(key=KEY) if legacy else EnvKeyCipher(key=KEY, legacy_mode=None)
    with pytest.raises(UnknownCipherError) as untagged:
        cipher.decrypt_with_tag("rot13", b"x" * 40, "msgpack")
    with pytest.raises(UnknownCipherError) as located:
        cipher.decrypt_at("rot13", b"x" * 40, "msgpack", AT)
    for raised in (untagged, located):
        assert raised.value.cipher_name == "rot13"
        assert str(raised.value) == "EnvKeyCipher cannot decrypt cipher 'rot13'"


def test_a_legacy_row_at_a_location_is_unbound_only_with_a_legacy_reader() -> None:
    with pytest.raises(UnboundValueError):
        EnvKeyCipher(key=KEY).decrypt_at("aes", b"x" * 40, "msgpack", AT)
    with pytest.raises(UnknownCipherError):
        EnvKeyCipher(key=KEY, legacy_mode=None).decrypt_at("aes", b"x" * 40, "msgpack", AT)
