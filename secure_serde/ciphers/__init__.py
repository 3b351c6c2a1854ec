"""Ciphers: langgraph's ``CipherProtocol``, and secure_serde's `TagAuthenticatingCipher`.

0.3's names ``BoundCipher``, ``LocatingCipher`` and ``is_locating`` still
import from here until 0.5, each access with a `DeprecationWarning`: they are
`TagAuthenticatingCipher`, `SealingCipher` and `is_sealing`.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde.ciphers._env import EnvKeyCipher
    from secure_serde.ciphers._headers import StoredHeader, current_test, read_header
    from secure_serde.ciphers._keyring import Keyring
    from secure_serde.ciphers._keyring_file import KeyringEntry, KeyringFile
    from secure_serde.ciphers._kms import KmsCacheInfo, KmsEnvelopeCipher
    from secure_serde.ciphers._kms_format import cmk_id
    from secure_serde.ciphers._legacy import LEGACY_CIPHER_NAME, LegacyAesReader
    from secure_serde.ciphers._protocol import (
        SealingCipher,
        TagAuthenticatingCipher,
        is_sealing,
        tag_ciphers,
    )
    from secure_serde.ciphers._protocol import SealingCipher as LocatingCipher  # noqa: F401
    from secure_serde.ciphers._protocol import TagAuthenticatingCipher as BoundCipher  # noqa: F401
    from secure_serde.ciphers._protocol import is_sealing as is_locating  # noqa: F401
    from secure_serde.ciphers._rotation import KEYRING_FILE_VAR, KeyRotationCipher
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "EnvKeyCipher": "secure_serde.ciphers._env",
            "KEYRING_FILE_VAR": "secure_serde.ciphers._rotation",
            "KeyRotationCipher": "secure_serde.ciphers._rotation",
            "Keyring": "secure_serde.ciphers._keyring",
            "KeyringEntry": "secure_serde.ciphers._keyring_file",
            "KeyringFile": "secure_serde.ciphers._keyring_file",
            "KmsCacheInfo": "secure_serde.ciphers._kms",
            "KmsEnvelopeCipher": "secure_serde.ciphers._kms",
            "LEGACY_CIPHER_NAME": "secure_serde.ciphers._legacy",
            "LegacyAesReader": "secure_serde.ciphers._legacy",
            "SealingCipher": "secure_serde.ciphers._protocol",
            "StoredHeader": "secure_serde.ciphers._headers",
            "TagAuthenticatingCipher": "secure_serde.ciphers._protocol",
            "cmk_id": "secure_serde.ciphers._kms_format",
            "current_test": "secure_serde.ciphers._headers",
            "is_sealing": "secure_serde.ciphers._protocol",
            "read_header": "secure_serde.ciphers._headers",
            "tag_ciphers": "secure_serde.ciphers._protocol",
        },
        deprecated={
            "BoundCipher": ("TagAuthenticatingCipher", "0.5"),
            "LocatingCipher": ("SealingCipher", "0.5"),
            "is_locating": ("is_sealing", "0.5"),
        },
    )

__all__ = [
    "KEYRING_FILE_VAR",
    "LEGACY_CIPHER_NAME",
    "EnvKeyCipher",
    "KeyRotationCipher",
    "Keyring",
    "KeyringEntry",
    "KeyringFile",
    "KmsCacheInfo",
    "KmsEnvelopeCipher",
    "LegacyAesReader",
    "SealingCipher",
    "StoredHeader",
    "TagAuthenticatingCipher",
    "cmk_id",
    "current_test",
    "is_sealing",
    "read_header",
    "tag_ciphers",
]
