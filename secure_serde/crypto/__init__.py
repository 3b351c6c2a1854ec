"""The crypto layer: primitives from libraries, the ciphertext formats, locations, keys.

Each format module (``_format`` for v1 and the version dispatch, ``_format_v2``,
``_format_v3``) is the only place that lays out and parses its bytes, and is
exported whole, as ``format_v1`` to ``format_v3``: a cipher speaks a format as a namespace.
"""

from __future__ import annotations

from secure_serde.crypto import _format as format_v1
from secure_serde.crypto import _format_v2 as format_v2
from secure_serde.crypto import _format_v3 as format_v3
from secure_serde.crypto._binding import Location
from secure_serde.crypto._format import key_name
from secure_serde.crypto._format_v2 import KeyCommitment
from secure_serde.crypto._keys import (
    ENV_VAR,
    Key,
    could_be_key,
    generate_encoded_key,
    parse_key,
    read_env_key,
    shown_label,
)
from secure_serde.crypto._primitives import (
    GCM_NONCE_SIZE,
    GCM_TAG_SIZE,
    LEGACY_MODE_NAMES,
    LEGACY_MODES,
    MODE_EAX,
    MODE_GCM,
    AesGcm,
    Buffer,
    InvalidTag,
    SecretHolder,
    hkdf_sha256,
    legacy_open,
    legacy_supported,
    new_aes_gcm,
)

__all__ = [
    "ENV_VAR",
    "GCM_NONCE_SIZE",
    "GCM_TAG_SIZE",
    "LEGACY_MODES",
    "LEGACY_MODE_NAMES",
    "MODE_EAX",
    "MODE_GCM",
    "AesGcm",
    "Buffer",
    "InvalidTag",
    "Key",
    "KeyCommitment",
    "Location",
    "SecretHolder",
    "could_be_key",
    "format_v1",
    "format_v2",
    "format_v3",
    "generate_encoded_key",
    "hkdf_sha256",
    "key_name",
    "legacy_open",
    "legacy_supported",
    "new_aes_gcm",
    "parse_key",
    "read_env_key",
    "shown_label",
]
