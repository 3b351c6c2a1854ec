"""Format v1 boundaries that a surviving mutant showed untested (docs/mutation.md)."""

from __future__ import annotations

import pytest

from secure_serde.crypto import _format
from secure_serde.crypto._primitives import MAX_CIPHER_NAME


def test_a_cipher_name_of_the_maximum_length_is_bound() -> None:
    name = b"n" * MAX_CIPHER_NAME
    aad = _format.build_aad(b"header", name, b"msgpack")
    assert aad == b"header" + bytes([MAX_CIPHER_NAME]) + name + b"msgpack"
    with pytest.raises(ValueError, match="255"):
        _format.build_aad(b"header", name + b"n", b"msgpack")
