"""KMS envelope format v1: the only place that lays out, and parses, its bytes.

A value written by `KmsEnvelopeCipher` (cipher name ``kms`` in the type tag) is::

    offset   size  field
    0        1     format version, 0x01
    1        4     CMK id: SHA-256("secure_serde/kms/v1/cmk-id" 0x00 key ARN)[:4]
    5        2     n, the wrapped data key's length, big-endian, 1..4096
    7        n     wrapped data key: the CiphertextBlob KMS GenerateDataKey returned
    7+n      12    nonce, from os.urandom
    19+n     m     AES-256-GCM ciphertext of the inner serializer's bytes, under the data key
    19+n+m   16    GCM tag

35 + n bytes are added to every blob: 131 B with moto's 96-byte wrapped
keys, 219 B with the 184-byte CiphertextBlob real AWS KMS returns for an
AES_256 data key. Each blob carries everything needed to read it, so rows
stay self-contained however long the data-key cache lives.

The CMK id is checked against the configured key ARNs before KMS is
called, so a blob wrapped under any other key is refused without a
request, whatever the caller's IAM would allow. Like the v1 header of
``_format``, it is authenticated, through the associated data, never
stored and rebuilt on every read::

    version(1) | CMK id(4) | len(cipher name)(1) | cipher name
    | len(EC)(2) | EC | inner type tag

where EC, the canonical encoding of the KMS encryption context, is::

    count(2) | for each entry, sorted by key bytes: len(key)(2) key | len(value)(2) value

(UTF-8, big-endian lengths, the layout the AWS Encryption SDK uses). The
same context is sent to KMS with every GenerateDataKey and Decrypt, so it
is enforced twice: by KMS when a data key is unwrapped, and by GCM on every
value, including values read with a cached data key. The wrapped data key
is not in the associated data: it only selects the GCM key, and any other
key fails the tag.
"""

from __future__ import annotations

# Format v2 (written since secure_serde 0.2) differs from v1 in three places:
#
#     offset   size  field
#     0        1     format version, 0x02
#     1..7+n         CMK id, length, wrapped data key: as in v1
#     7+n      12    nonce, from os.urandom
#     19+n     16    key commitment: HMAC-SHA256(HKDF-SHA256(data key,
#                    info="secure_serde/kms/v2/commitment"), bytes 0..19+n)[:16]
#     35+n     m     AES-256-GCM ciphertext, under the data key
#     35+n+m   16    GCM tag
#
# and its associated data is
#
#     version(1) | CMK id(4) | commitment(16) | len(cipher name)(1) | cipher name
#     | len(EC)(2) | EC | len(inner type tag)(2) | inner type tag | location
#
# with ``location`` the canonical location (secure_serde.crypto._binding; empty when
# unbound), as in the ``aesgcm`` format v2 (see secure_serde.crypto._format_v2 for
# what the commitment buys and its 2^64 collision bound). 51 + n bytes per
# blob. The location goes into the associated data only, never into the KMS
# encryption context: that is logged by CloudTrail, and would need one data
# key per row.
import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from secure_serde._errors import DecryptionError, UnknownKeyError
from secure_serde.crypto import GCM_NONCE_SIZE, GCM_TAG_SIZE, Buffer

VERSION: Final = 1
VERSION_V2: Final = 2
COMMITMENT_SIZE: Final = 16
CIPHER_NAME: Final = "kms"
CMK_ID_SIZE: Final = 4
MAX_WRAPPED_KEY: Final = 4096
# Each entry is length-prefixed with 2 bytes; KMS itself accepts far less.
MAX_ENCRYPTION_CONTEXT: Final = 8192

CMK_ID_AT: Final = 1
_LENGTH_AT: Final = CMK_ID_AT + CMK_ID_SIZE
WRAPPED_AT: Final = _LENGTH_AT + 2
FIXED_OVERHEAD: Final = WRAPPED_AT + GCM_NONCE_SIZE + GCM_TAG_SIZE
_VERSION_BYTE: Final = bytes([VERSION])
_CMK_ID_INFO: Final = b"secure_serde/kms/v1/cmk-id\x00"
_NAME_FIELD: Final = bytes([len(CIPHER_NAME)]) + CIPHER_NAME.encode("ascii")


@dataclass(frozen=True)
class KmsHeader:
    """The parsed, not yet authenticated, header of a KMS envelope blob."""

    version: int
    cmk_id: bytes
    wrapped_key: bytes
    nonce: bytes
    sealed_size: int

    @property
    def cmk_id_hex(self) -> str:
        return self.cmk_id.hex()


def cmk_id(key_arn: str) -> bytes:
    """The 4-byte id written for the CMK whose full key ARN is ``key_arn``."""
    return hashlib.sha256(_CMK_ID_INFO + key_arn.encode("utf-8")).digest()[:CMK_ID_SIZE]


def encode_encryption_context(context: Mapping[str, str]) -> bytes:
    """The canonical bytes of a KMS encryption context (see the module docstring)."""
    entries = sorted((k.encode("utf-8"), v.encode("utf-8")) for k, v in context.items())
    if len(entries) > 0xFFFF:
        raise ValueError("an encryption context has at most 65535 entries")
    parts = [struct.pack(">H", len(entries))]
    for key, value in entries:
        if len(key) > 0xFFFF or len(value) > 0xFFFF:
            raise ValueError("encryption context entries are at most 65535 bytes")
        parts += [struct.pack(">H", len(key)), key, struct.pack(">H", len(value)), value]
    encoded = b"".join(parts)
    if len(encoded) > MAX_ENCRYPTION_CONTEXT:
        raise ValueError(f"the encryption context encodes to more than {MAX_ENCRYPTION_CONTEXT} B")
    return encoded


def encode_header(cmk: bytes, wrapped_key: bytes, version: int = VERSION) -> bytes:
    """Everything before the nonce: version, CMK id, length and wrapped data key."""
    if len(cmk) != CMK_ID_SIZE:
        raise ValueError("CMK ids are 4 bytes")
    if not 0 < len(wrapped_key) <= MAX_WRAPPED_KEY:
        raise ValueError(f"wrapped data keys are 1 to {MAX_WRAPPED_KEY} bytes")
    if version not in (VERSION, VERSION_V2):
        raise ValueError("KMS envelope versions are 1 and 2")
    return bytes([version]) + cmk + struct.pack(">H", len(wrapped_key)) + wrapped_key


def aad_suffix_v2(encryption_context: bytes, type_tag: bytes) -> bytes:
    """The v2 associated data between the commitment and the location (cacheable per tag)."""
    if len(type_tag) > 0xFFFF:
        raise DecryptionError("type tag is too long")
    ec = struct.pack(">H", len(encryption_context)) + encryption_context
    return _NAME_FIELD + ec + struct.pack(">H", len(type_tag)) + type_tag


def build_aad(cmk: bytes, encryption_context: bytes, context: bytes) -> bytes:
    """Associated data binding version, CMK id, cipher name, encryption context and type tag."""
    ec = struct.pack(">H", len(encryption_context)) + encryption_context
    return _VERSION_BYTE + cmk + _NAME_FIELD + ec + context


def split(blob: Buffer) -> tuple[bytes, bytes, Buffer]:
    """Split a v1 blob into (header as `encode_header` makes it, nonce, ciphertext-and-tag)."""
    header, nonce, commitment, sealed = split_any(blob)
    if commitment:
        raise DecryptionError(f"unsupported KMS envelope format version {blob[0]}")
    return header, nonce, sealed


def split_any(blob: Buffer) -> tuple[bytes, bytes, bytes, Buffer]:
    """Split a v1 or v2 blob into (header, nonce, commitment (``b""`` for v1), the rest)."""
    size = len(blob)
    if size < FIXED_OVERHEAD + 1:
        raise DecryptionError("ciphertext is truncated")
    if blob[0] not in (VERSION, VERSION_V2):
        raise DecryptionError(f"unsupported KMS envelope format version {blob[0]}")
    commitment_size = COMMITMENT_SIZE if blob[0] == VERSION_V2 else 0
    wrapped_size = (blob[_LENGTH_AT] << 8) | blob[_LENGTH_AT + 1]
    if not 0 < wrapped_size <= MAX_WRAPPED_KEY:
        raise DecryptionError("malformed KMS envelope header")
    nonce_at = WRAPPED_AT + wrapped_size
    if size < nonce_at + GCM_NONCE_SIZE + commitment_size + GCM_TAG_SIZE:
        raise DecryptionError("ciphertext is truncated")
    commitment_at = nonce_at + GCM_NONCE_SIZE
    sealed_at = commitment_at + commitment_size
    return (
        bytes(blob[:nonce_at]),
        bytes(blob[nonce_at:commitment_at]),
        bytes(blob[commitment_at:sealed_at]),
        blob[sealed_at:],
    )


def parse_header(blob: Buffer) -> KmsHeader:
    """Parse a v1 or v2 header for inspection; says nothing about authenticity."""
    header, nonce, _, sealed = split_any(blob)
    return KmsHeader(
        version=header[0],
        cmk_id=header[CMK_ID_AT:_LENGTH_AT],
        wrapped_key=header[WRAPPED_AT:],
        nonce=nonce,
        sealed_size=len(sealed),
    )


def unknown_cmk(cmk: bytes) -> UnknownKeyError:
    hex_id = cmk.hex()
    return UnknownKeyError(
        f"the blob's data key is wrapped under the KMS key with key id {hex_id} (its CMK id),"
        " which is not one of the configured KMS keys",
        key_id=hex_id,
    )
