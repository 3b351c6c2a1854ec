"""secure_serde: authenticated, versioned encryption for LangGraph checkpoints.

Layers, top to bottom: the serializer (`EncryptedSerializer`), the ciphers
(`secure_serde.ciphers`), the byte format (``_format``) and the primitives
(``_primitives``: AES-GCM and HKDF from ``cryptography`` or pycryptodome).
"""

from secure_serde._errors import (
    ConfigurationError,
    DecryptionError,
    EncryptionError,
    ForbiddenGlobalError,
    KmsDecryptionError,
    KmsEncryptionError,
    KmsError,
    PickleNotAllowedError,
    PickleRefusedError,
    PlaintextRefusedError,
    RetiredKeyError,
    SecretPicklingError,
    SecureSerdeError,
    UnknownCipherError,
    UnknownKeyError,
    UnsafePickleError,
)
from secure_serde._keys import generate_encoded_key
from secure_serde._rewrap import RewrapProgress, RewrapReport, RowFailure, rewrap
from secure_serde._serializer import EncryptedSerializer
from secure_serde.pickling import PickleFallbackSerializer

__all__ = [
    "ConfigurationError",
    "DecryptionError",
    "EncryptedSerializer",
    "EncryptionError",
    "ForbiddenGlobalError",
    "KmsDecryptionError",
    "KmsEncryptionError",
    "KmsError",
    "PickleFallbackSerializer",
    "PickleNotAllowedError",
    "PickleRefusedError",
    "PlaintextRefusedError",
    "RetiredKeyError",
    "RewrapProgress",
    "RewrapReport",
    "RowFailure",
    "SecretPicklingError",
    "SecureSerdeError",
    "UnknownCipherError",
    "UnknownKeyError",
    "UnsafePickleError",
    "generate_encoded_key",
    "rewrap",
]

__version__ = "0.1.0"
