"""secure_serde: authenticated, versioned encryption for LangGraph checkpoints.

Layers, top to bottom: the serializer (`EncryptedSerializer`), the ciphers
(`secure_serde.ciphers`), the byte format (``_format``) and the primitives
(``_primitives``: AES-GCM and HKDF from ``cryptography`` or pycryptodome).
"""

from secure_serde._errors import (
    ConfigurationError,
    DecryptionError,
    EncryptionError,
    KmsDecryptionError,
    KmsEncryptionError,
    KmsError,
    PickleRefusedError,
    PlaintextRefusedError,
    RetiredKeyError,
    SecretPicklingError,
    SecureSerdeError,
    UnknownCipherError,
    UnknownKeyError,
)
from secure_serde._keys import generate_encoded_key
from secure_serde._rewrap import RewrapProgress, RewrapReport, RowFailure, rewrap
from secure_serde._serializer import EncryptedSerializer

__all__ = [
    "ConfigurationError",
    "DecryptionError",
    "EncryptedSerializer",
    "EncryptionError",
    "KmsDecryptionError",
    "KmsEncryptionError",
    "KmsError",
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
    "generate_encoded_key",
    "rewrap",
]

__version__ = "0.1.0"
