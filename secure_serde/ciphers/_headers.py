"""What a stored value's header says, read without a key: for tools that sort values.

Nothing here is authenticated: a header names the key id and format
version its writer claims, which is what audit groups values by before (or
instead of) decrypting them. Whether a format *can* carry a binding to the
value's row is a property of its version alone (``aesgcm`` and ``kms``
format v2); whether one value *is* bound is decided only by decrypting it
at its location, since the location is bound into the associated data and
never stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from secure_serde import _format, _format_v2
from secure_serde._errors import DecryptionError
from secure_serde.ciphers import _kms_format

__all__ = ["StoredHeader", "read_header"]

# The ciphers whose format v2 binds a value to its row (format v1 never does).
_BINDING_FORMATS: Final = frozenset(
    {(_format.CIPHER_NAME, _format_v2.VERSION), (_kms_format.CIPHER_NAME, _kms_format.VERSION_V2)}
)


@dataclass(frozen=True)
class StoredHeader:
    """A header's claims: key id (hex) and format version, each ``None`` when unknown."""

    cipher: str
    key_id: str | None
    format_version: int | None

    @property
    def can_bind(self) -> bool:
        """Whether this format can carry a binding to the value's row (format v2)."""
        return (self.cipher, self.format_version) in _BINDING_FORMATS


def read_header(cipher_name: str, data: bytes) -> StoredHeader:
    """The header of a value stored under ``cipher_name``; nothing is authenticated here."""
    try:
        if cipher_name == _format.CIPHER_NAME:
            aes = _format.parse_header(data)
            return StoredHeader(cipher_name, aes.key_id_hex, aes.version)
        if cipher_name == _kms_format.CIPHER_NAME:
            kms = _kms_format.parse_header(data)
            return StoredHeader(cipher_name, kms.cmk_id_hex, kms.version)
    except DecryptionError:
        # Truncated, or a version this build does not know: say which.
        return StoredHeader(cipher_name, None, data[0] if data else None)
    return StoredHeader(cipher_name, None, None)
