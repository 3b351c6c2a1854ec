"""secure_serde: authenticated, versioned encryption for LangGraph checkpoints.

The layers, one job per folder, are docs/README.md's "Where the code lives";
tests/test_layers.py pins them.

Only the error classes are imported with the package; every other name below
is imported on first use (PEP 562), so that ``import secure_serde`` does not
load the rewrap engine, the stores or a database driver.
"""

from typing import TYPE_CHECKING

from secure_serde._errors import (
    BindingError,
    BlindIndexError,
    ConfigurationError,
    DecompressionBombError,
    DecompressionError,
    DecryptionError,
    EncryptionError,
    ForbiddenGlobalError,
    HistoryError,
    KmsDecryptionError,
    KmsEncryptionError,
    KmsError,
    MetadataDowngradeError,
    MetadataMovedError,
    PickleNotAllowedError,
    PickleRefusedError,
    PlaintextRefusedError,
    RetiredKeyError,
    SecretPicklingError,
    SecureSerdeError,
    ShreddedError,
    StoreIdentityError,
    StrictDecodeError,
    TenantRequiredError,
    UnboundValueError,
    UnknownCipherError,
    UnknownKeyError,
    UnknownTenantError,
    UnreadableRowError,
    UnsafePickleError,
    UnserializableValueError,
)

if TYPE_CHECKING:
    from secure_serde._version import __version__ as __version__
    from secure_serde.crypto import generate_encoded_key
    from secure_serde.passes import (
        PassProgress,
        PassReport,
        RewrapProgress,
        RewrapReport,
        RowFailure,
        rewrap,
    )
    from secure_serde.pickling import PickleFallbackSerializer
    from secure_serde.sealing import SealedSaver, SealedStore
    from secure_serde.sealing._tenants import TenantKeys
    from secure_serde.serde import CompressedSerializer, EncryptedSerializer, Migration
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "CompressedSerializer": "secure_serde.serde",
            "EncryptedSerializer": "secure_serde.serde",
            "Migration": "secure_serde.serde",
            "PickleFallbackSerializer": "secure_serde.pickling",
            "PassProgress": "secure_serde._report",
            "PassReport": "secure_serde._report",
            "RewrapProgress": "secure_serde._report",
            "RewrapReport": "secure_serde._report",
            "RowFailure": "secure_serde._rows",
            "SealedSaver": "secure_serde.sealing",
            "SealedStore": "secure_serde.sealing",
            "TenantKeys": "secure_serde.sealing._tenants",
            "__version__": "secure_serde._version",
            "generate_encoded_key": "secure_serde.crypto",
            "rewrap": "secure_serde.passes._rewrap",
        },
    )

__all__ = [
    "BindingError",
    "BlindIndexError",
    "CompressedSerializer",
    "ConfigurationError",
    "DecompressionBombError",
    "DecompressionError",
    "DecryptionError",
    "EncryptedSerializer",
    "EncryptionError",
    "ForbiddenGlobalError",
    "HistoryError",
    "KmsDecryptionError",
    "KmsEncryptionError",
    "KmsError",
    "MetadataDowngradeError",
    "MetadataMovedError",
    "Migration",
    "PassProgress",
    "PassReport",
    "PickleFallbackSerializer",
    "PickleNotAllowedError",
    "PickleRefusedError",
    "PlaintextRefusedError",
    "RetiredKeyError",
    "RewrapProgress",
    "RewrapReport",
    "RowFailure",
    "SealedSaver",
    "SealedStore",
    "SecretPicklingError",
    "SecureSerdeError",
    "ShreddedError",
    "StoreIdentityError",
    "StrictDecodeError",
    "TenantKeys",
    "TenantRequiredError",
    "UnboundValueError",
    "UnknownCipherError",
    "UnknownKeyError",
    "UnknownTenantError",
    "UnreadableRowError",
    "UnsafePickleError",
    "UnserializableValueError",
    "generate_encoded_key",
    "rewrap",
]
