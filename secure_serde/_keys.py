"""Key material: how keys are written down, and how a key becomes an AEAD key and an id.

Two written forms are accepted wherever a key is configured (the
``LANGGRAPH_AES_KEY`` variable, ``key=`` as text, keyring files):

* **raw text** of exactly 16, 24 or 32 UTF-8 bytes, read exactly as langgraph
  reads ``LANGGRAPH_AES_KEY``, so existing deployments keep their key. Its
  strength is only that of the characters typed;
* **``base64:`` followed by the standard base64 of 32 random bytes** (51
  characters), the full-entropy form ``secure-serde keygen`` prints. A raw
  value is never 51 bytes long, so the two forms cannot be confused.

Every key, whatever its form or length, is put through HKDF-SHA256 twice:
once for the AES-256-GCM key (so a 16-byte legacy key still encrypts with
AES-256, and never with the very bytes its legacy EAX rows used), and once
for the 4-byte key id written in each header. The id depends only on the
key, so the same key gets the same id in an env-key cipher, a keyring or a
rewrap tool, with nothing to configure.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from typing import Final

from secure_serde._errors import ConfigurationError
from secure_serde._format import KEY_ID_SIZE, key_id_hex
from secure_serde._format_v2 import KeyCommitment
from secure_serde._primitives import (
    AES_KEY_SIZES,
    AesGcm,
    Backend,
    SecretHolder,
    hkdf_sha256,
    new_aes_gcm,
)

__all__ = [
    "ENCODED_PREFIX",
    "ENV_VAR",
    "Key",
    "generate_encoded_key",
    "parse_key",
    "read_env_key",
]

ENV_VAR: Final = "LANGGRAPH_AES_KEY"
ENCODED_PREFIX: Final = "base64:"
FULL_ENTROPY_SIZE: Final = 32
_INFO_AEAD: Final = b"secure_serde/v1/aes-256-gcm"
_INFO_KEY_ID: Final = b"secure_serde/v1/key-id"
# Format v2's key commitment (see _format_v2): a third, independent derivation.
_INFO_COMMITMENT: Final = b"secure_serde/v2/commitment"


def parse_key(value: str | bytes, *, source: str = "key") -> bytes:
    """Turn a configured key into its key bytes, checking type and length.

    ``source`` names where the value came from, for error messages; the
    value itself never appears in them.
    """
    if isinstance(value, bytes):
        if len(value) not in AES_KEY_SIZES:
            raise ConfigurationError(f"{source} must be 16, 24 or 32 bytes, got {len(value)}")
        return value
    if not isinstance(value, str):
        raise ConfigurationError(f"{source} must be str or bytes, not {type(value).__name__}")
    try:
        raw: bytes | None = value.encode("utf-8")
    except UnicodeEncodeError:
        # os.environ turns undecodable bytes into surrogates; the codec error
        # would quote them and hold the whole key, so raise outside the handler.
        raw = None
    if raw is None:
        raise ConfigurationError(f"{source} is not valid UTF-8 text")
    if len(raw) in AES_KEY_SIZES:
        return raw
    if value.startswith(ENCODED_PREFIX):
        try:
            decoded: bytes | None = base64.b64decode(value[len(ENCODED_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            decoded = None
        if decoded is None:
            raise ConfigurationError(f"{source} is not valid base64 after {ENCODED_PREFIX!r}")
        if len(decoded) != FULL_ENTROPY_SIZE:
            raise ConfigurationError(
                f"{source} must encode {FULL_ENTROPY_SIZE} bytes after {ENCODED_PREFIX!r},"
                f" got {len(decoded)}"
            )
        return decoded
    raise ConfigurationError(
        f"{source} must be 16, 24 or 32 characters of raw text, or {ENCODED_PREFIX!r}"
        " followed by the base64 of 32 random bytes (see `secure-serde keygen`);"
        f" got {len(raw)} bytes"
    )


def read_env_key(env_var: str = ENV_VAR) -> bytes:
    value = os.environ.get(env_var)
    if value is None:
        raise ConfigurationError(f"{env_var} environment variable is not set")
    return parse_key(value, source=env_var)


def generate_encoded_key() -> str:
    """A new full-entropy key in the ``base64:`` form."""
    return ENCODED_PREFIX + base64.b64encode(os.urandom(FULL_ENTROPY_SIZE)).decode("ascii")


@dataclass(frozen=True, eq=False, repr=False)
class Key(SecretHolder):
    """One configured key: its id, an optional label, and its AEAD primitive.

    Built with `Key.derive`; the key bytes themselves are not kept, only
    the primitive made from the derived AES-256 key.
    """

    key_id: bytes
    label: str
    aead: AesGcm = field(compare=False)
    commitment: KeyCommitment = field(compare=False)

    @classmethod
    def derive(cls, key: str | bytes, *, label: str = "", backend: Backend = "auto") -> Key:
        material = parse_key(key, source=f"key {label!r}" if label else "key")
        return cls(
            key_id=hkdf_sha256(material, _INFO_KEY_ID, KEY_ID_SIZE, backend),
            label=label,
            aead=new_aes_gcm(hkdf_sha256(material, _INFO_AEAD, 32, backend), backend),
            commitment=KeyCommitment(hkdf_sha256(material, _INFO_COMMITMENT, 32, backend)),
        )

    @property
    def key_id_hex(self) -> str:
        return key_id_hex(self.key_id)

    def __repr__(self) -> str:
        label = f" label={self.label!r}" if self.label else ""
        return f"<Key id={self.key_id_hex}{label} backend={self.aead.backend}>"
