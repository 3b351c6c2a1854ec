"""secure_serde: authenticated, versioned encryption for LangGraph checkpoints.

Layers, top to bottom:

* tools and savers: the ``secure-serde`` CLI (``cli``), `rewrap` over the
  store layer (``stores``), and the sealed PostgreSQL savers (``savers``);
* serializers: `EncryptedSerializer`, `PickleFallbackSerializer` (``pickling``);
* ciphers (``ciphers``): env key, key rotation, AWS KMS envelope, legacy reader;
* byte formats: ``_format`` (v1) and ``ciphers/_kms_format``;
* primitives (``_primitives``): AES-GCM and HKDF from ``cryptography`` or
  pycryptodome, never hand-rolled.
"""

from secure_serde._errors import (
    BindingError,
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
    UnboundValueError,
    UnknownCipherError,
    UnknownKeyError,
    UnsafePickleError,
)
from secure_serde._keys import generate_encoded_key
from secure_serde._rewrap import RewrapProgress, RewrapReport, RowFailure, rewrap
from secure_serde._serializer import EncryptedSerializer
from secure_serde.pickling import PickleFallbackSerializer

__all__ = [
    "BindingError",
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
    "UnboundValueError",
    "UnknownCipherError",
    "UnknownKeyError",
    "UnsafePickleError",
    "generate_encoded_key",
    "rewrap",
]

__version__ = "0.1.0"
