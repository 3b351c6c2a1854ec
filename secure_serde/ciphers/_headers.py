"""What a stored value's header says, read without a key: for tools that sort values.

Nothing here is authenticated: a header names the key id and format
version its writer claims, which is what audit groups values by before (or
instead of) decrypting them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from secure_serde._errors import DecryptionError
from secure_serde.ciphers import _kms_format
from secure_serde.ciphers._protocol import TagAuthenticatingCipher
from secure_serde.crypto import Buffer, format_v1

__all__ = ["StoredHeader", "current_test", "read_header"]

_PROBE_TAG: Final = "secure_serde/rewrap-probe"


@dataclass(frozen=True)
class StoredHeader:
    """A header's claims: key id (hex) and format version, each ``None`` when unknown."""

    cipher: str
    key_id: str | None
    format_version: int | None


def read_header(cipher_name: str, data: bytes) -> StoredHeader:
    """The header of a value stored under ``cipher_name``; nothing is authenticated here."""
    try:
        if cipher_name == format_v1.CIPHER_NAME:
            aes = format_v1.parse_header(data)
            return StoredHeader(cipher_name, aes.key_id_hex, aes.version)
        if cipher_name == _kms_format.CIPHER_NAME:
            kms = _kms_format.parse_header(data)
            return StoredHeader(cipher_name, kms.cmk_id_hex, kms.version)
    except DecryptionError:
        # Truncated, or a version this build does not know: say which.
        return StoredHeader(cipher_name, None, data[0] if data else None)
    return StoredHeader(cipher_name, None, None)


def current_test(
    cipher: TagAuthenticatingCipher,
) -> tuple[Callable[[str, Buffer], bool], str, bytes | None]:
    """Whether a stored value is under ``cipher``'s primary key, told from its header.

    Returns the test ``(cipher name, ciphertext) -> bool``, the cipher name
    the primary writes, and the probe ciphertext the test learnt the
    primary's header from (``None`` when it uses the cipher's own
    ``is_current``). A cipher of another format without ``is_current`` has
    every value reported not current, which is safe but not idempotent.
    """
    hook = getattr(cipher, "is_current", None)
    if callable(hook) and len(cipher.cipher_names) == 1:
        # No probe: for KMS a probe would cost a GenerateDataKey call and
        # the IAM permission for it, even in a dry run or an audit.
        (name,) = cipher.cipher_names
        return hook, name, None
    name, probe = cipher.encrypt_with_tag(b"", _PROBE_TAG)
    if callable(hook):
        return hook, name, None
    if name == format_v1.CIPHER_NAME and len(probe) >= format_v1.HEADER_SIZE:
        header = bytes(probe[: format_v1.HEADER_SIZE])

        def same_header(cipher_name: str, data: Buffer) -> bool:
            return cipher_name == name and bytes(data[: format_v1.HEADER_SIZE]) == header

        return same_header, name, bytes(probe)
    return (lambda cipher_name, data: False), name, None
