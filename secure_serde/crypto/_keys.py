"""Key material: how keys are written down, and how a key becomes an AEAD key and a key id.

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
key, so the same key gets the same key id in an env-key cipher, a keyring or a
rewrap tool, with nothing to configure.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from dataclasses import dataclass, field
from typing import Final

from secure_serde._errors import ConfigurationError
from secure_serde._scrub import scrubbed
from secure_serde.crypto._format import key_id_hex
from secure_serde.crypto._format_v2 import KeyCommitment
from secure_serde.crypto._primitives import (
    AES_KEY_SIZES,
    KEY_ID_SIZE,
    AesGcm,
    SecretHolder,
    hkdf_sha256,
    new_aes_gcm,
)

ENV_VAR: Final = "LANGGRAPH_AES_KEY"
ENCODED_PREFIX: Final = "base64:"
FULL_ENTROPY_SIZE: Final = 32
_INFO_AEAD: Final = b"secure_serde/v1/aes-256-gcm"
_INFO_KEY_ID: Final = b"secure_serde/v1/key-id"
# Raw keys of fewer characters, or fewer distinct ones, get a warning.
_WEAK_RAW_CHARS: Final = 12
_WEAK_RAW_DISTINCT: Final = 8

_log = logging.getLogger("secure_serde")
# Format v2's key commitment (see _format_v2): a third, independent derivation.
_INFO_COMMITMENT: Final = b"secure_serde/v2/commitment"

# Blind indexes of sealed metadata (0.3's, verified by secure_serde/stores/_v03_index.py): an
# HMAC key of its own, so an index never touches the data key.
_INFO_BLIND_INDEX: Final = b"secure_serde/v1/blind-index-hmac"


@scrubbed
def parse_key(value: str | bytes, *, source: str = "key") -> bytes:
    """Turn a configured key into its key bytes, checking type and length.

    ``source`` names where the value came from, for error messages; the
    value itself never appears in them, nor (see `scrubbed`) in the frame
    locals of their tracebacks. Whitespace around a ``base64:`` key (the
    newline of ``$(cat file)`` in some shells, or of a file read in full) is
    dropped: no raw key is that long, so nothing else could be meant. Raw
    keys are read byte for byte, as langgraph reads them. A raw key of
    little variety is accepted with a logged warning (never the key).
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
        _warn_if_weak(value, source)
        return raw
    if value.strip().startswith(ENCODED_PREFIX):
        return _decode(value.strip(), source)
    raise ConfigurationError(f"{source} {_raw_length_problem(value, raw)}")


def _decode(value: str, source: str) -> bytes:
    body = value[len(ENCODED_PREFIX) :]
    try:
        decoded: bytes | None = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        decoded = None
    if decoded is None:
        inside = " (it contains whitespace: remove it)" if "".join(body.split()) != body else ""
        raise ConfigurationError(
            f"{source} is not valid base64 after {ENCODED_PREFIX!r}{inside};"
            " `secure-serde keygen` prints a valid key"
        )
    if len(decoded) != FULL_ENTROPY_SIZE:
        raise ConfigurationError(
            f"{source} must encode {FULL_ENTROPY_SIZE} bytes after {ENCODED_PREFIX!r},"
            f" got {len(decoded)}"
        )
    return decoded


def _raw_length_problem(value: str, raw: bytes) -> str:
    """Why a raw key's length is wrong, counted the way that helps: never the key."""
    expected = (
        f"must be 16, 24 or 32 bytes of raw text, or {ENCODED_PREFIX!r} followed by the"
        " base64 of 32 random bytes (see `secure-serde keygen`)"
    )
    stripped = value.strip()
    if stripped != value and len(stripped.encode("utf-8")) in AES_KEY_SIZES:
        return (
            f"{expected}; got {len(raw)} bytes, of which {len(raw) - len(stripped.encode())}"
            " are surrounding whitespace (a trailing newline?). Raw keys are read byte for"
            " byte, as langgraph reads them: remove the whitespace"
        )
    if len(value) != len(raw):
        return (
            f"{expected}; got {len(value)} characters, which are {len(raw)} bytes in UTF-8"
            " (non-ASCII characters take 2 to 4 bytes each, and raw keys are counted in"
            " bytes, as langgraph counts them)"
        )
    return f"{expected}; got {len(raw)} bytes"


def _warn_if_weak(value: str, source: str) -> None:
    # Few characters (multi-byte ones fill 16 bytes quickly: four emoji do)
    # or few distinct ones (a repeated word or character) hold few bits,
    # whatever else is true of the key. Both bounds sit far below what a
    # random key of that length shows: a random 16-character alphanumeric
    # key has about 14 distinct characters, so the warning does not cry wolf.
    distinct = len(set(value))
    if len(value) < _WEAK_RAW_CHARS or distinct < _WEAK_RAW_DISTINCT:
        _log.warning(
            "%s is raw text of %d character(s), %d distinct: an attacker who reads the"
            " store can guess it offline. Generate a full-entropy key with"
            " `secure-serde keygen` and rotate to it",
            source,
            len(value),
            distinct,
        )


@scrubbed
def read_env_key(env_var: str = ENV_VAR) -> bytes:
    value = os.environ.get(env_var)
    if value is None:
        raise ConfigurationError(f"{env_var} environment variable is not set")
    return parse_key(value, source=env_var)


def could_be_key(value: object) -> bool:
    """True when ``value`` has a form `parse_key` would accept as a key.

    Messages about labels (keyring files, ``primary=``, ``retired=``) show
    an offending value only when this is false: a key pasted where a label
    belongs must not be printed.
    """
    if isinstance(value, bytes):
        return len(value) in AES_KEY_SIZES
    if not isinstance(value, str):
        return False
    return len(value.encode("utf-8", "surrogatepass")) in AES_KEY_SIZES or value.strip().startswith(
        ENCODED_PREFIX
    )


def shown_label(value: object) -> str:
    """``value`` for a message about a label: its ``repr``, unless it could be a key."""
    if could_be_key(value):
        return "(a value shaped like a key, not shown)"
    if not isinstance(value, str):
        return f"(a {type(value).__name__}, not shown)"
    return repr(value)


def generate_encoded_key() -> str:
    """A new full-entropy key in the ``base64:`` form."""
    return ENCODED_PREFIX + base64.b64encode(os.urandom(FULL_ENTROPY_SIZE)).decode("ascii")


@dataclass(frozen=True, eq=False, repr=False)
class Key(SecretHolder):
    """One configured key: its key id, an optional label, and its AEAD primitive.

    Built with `Key.derive`; the key bytes themselves are not kept, only
    the primitive made from the derived AES-256 key.
    """

    key_id: bytes
    label: str
    aead: AesGcm = field(compare=False)
    commitment: KeyCommitment = field(compare=False)
    # HKDF(key, "secure_serde/v1/blind-index-hmac"); empty for keys built by hand.
    blind_index_key: bytes = field(default=b"", compare=False)

    @classmethod
    @scrubbed
    def derive(cls, key: str | bytes, *, label: str = "") -> Key:
        material = parse_key(key, source=f"key {label!r}" if label else "key")
        return cls(
            key_id=hkdf_sha256(material, _INFO_KEY_ID, KEY_ID_SIZE),
            label=label,
            aead=new_aes_gcm(hkdf_sha256(material, _INFO_AEAD, 32)),
            commitment=KeyCommitment(hkdf_sha256(material, _INFO_COMMITMENT, 32)),
            blind_index_key=hkdf_sha256(material, _INFO_BLIND_INDEX, 32),
        )

    @property
    def key_id_hex(self) -> str:
        return key_id_hex(self.key_id)

    def __repr__(self) -> str:
        label = f" label={self.label!r}" if self.label else ""
        return f"<Key key_id={self.key_id_hex}{label}>"
