"""Ciphers: each satisfies langgraph's ``CipherProtocol`` and secure_serde's `BoundCipher`."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde.ciphers._env import EnvKeyCipher
    from secure_serde.ciphers._headers import StoredHeader, read_header
    from secure_serde.ciphers._keyring import Keyring
    from secure_serde.ciphers._kms import KmsCacheInfo, KmsEnvelopeCipher
    from secure_serde.ciphers._legacy import LEGACY_CIPHER_NAME, LegacyAesReader
    from secure_serde.ciphers._protocol import BoundCipher, LocatingCipher, is_locating
    from secure_serde.ciphers._rotation import (
        KEYRING_FILE_VAR,
        KeyRotationCipher,
        check_keyring_fields,
        keyring_json,
    )
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "BoundCipher": "secure_serde.ciphers._protocol",
            "EnvKeyCipher": "secure_serde.ciphers._env",
            "KEYRING_FILE_VAR": "secure_serde.ciphers._rotation",
            "KeyRotationCipher": "secure_serde.ciphers._rotation",
            "check_keyring_fields": "secure_serde.ciphers._rotation",
            "keyring_json": "secure_serde.ciphers._rotation",
            "Keyring": "secure_serde.ciphers._keyring",
            "KmsCacheInfo": "secure_serde.ciphers._kms",
            "KmsEnvelopeCipher": "secure_serde.ciphers._kms",
            "LEGACY_CIPHER_NAME": "secure_serde.ciphers._legacy",
            "LegacyAesReader": "secure_serde.ciphers._legacy",
            "LocatingCipher": "secure_serde.ciphers._protocol",
            "StoredHeader": "secure_serde.ciphers._headers",
            "is_locating": "secure_serde.ciphers._protocol",
            "read_header": "secure_serde.ciphers._headers",
        },
    )

__all__ = [
    "KEYRING_FILE_VAR",
    "LEGACY_CIPHER_NAME",
    "BoundCipher",
    "EnvKeyCipher",
    "KeyRotationCipher",
    "Keyring",
    "KmsCacheInfo",
    "KmsEnvelopeCipher",
    "LegacyAesReader",
    "LocatingCipher",
    "StoredHeader",
    "check_keyring_fields",
    "is_locating",
    "keyring_json",
    "read_header",
]
