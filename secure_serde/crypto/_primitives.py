"""The bottom layer: AES-GCM, HKDF and the legacy AES reader, from libraries.

Nothing here is a home-made primitive. AES-GCM and HKDF come from
``cryptography`` (OpenSSL), a hard dependency. pycryptodome is used for one
thing only: reading the EAX (or GCM) rows langgraph's built-in cipher
wrote, which `legacy_open` does with pycryptodome's own AES, as langgraph
did. There is no second AES-GCM backend to keep wire-identical.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, Final, NoReturn, Protocol, TypeAlias

from cryptography.exceptions import InvalidTag as InvalidTag
from cryptography.hazmat.primitives import hashes as _hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as _AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF as _HKDF

from secure_serde._errors import ConfigurationError, DecryptionError, SecretPicklingError
from secure_serde._scrub import scrubbed

# JsonPlus hands ``bytearray`` values over as they are, and savers may
# return memoryviews: every layer accepts any of the three.
Buffer: TypeAlias = bytes | bytearray | memoryview

AES_KEY_SIZES: Final = frozenset({16, 24, 32})
GCM_NONCE_SIZE: Final = 12
GCM_TAG_SIZE: Final = 16
# Every format version's header names its key by the same 4-byte id, and
# associated data carries the cipher name in one length byte.
KEY_ID_SIZE: Final = 4
MAX_CIPHER_NAME: Final = 255

# pycryptodome's numeric mode constants, repeated so that configuration can
# be validated (and legacy rows recognised) without importing pycryptodome.
MODE_GCM: Final = 11
MODE_EAX: Final = 9
# Only these modes ever produced readable rows in langgraph's built-in
# cipher: it slices a 16-byte nonce and a 16-byte tag, and only EAX and GCM
# default to a 16-byte nonce (CCM, OCB and SIV rows failed on read there too).
LEGACY_MODES: Final = frozenset({MODE_EAX, MODE_GCM})
# For reprs and messages: people know the modes by name, not by number.
LEGACY_MODE_NAMES: Final = {MODE_EAX: "EAX", MODE_GCM: "GCM"}

_AUTH_FAILED: Final = "ciphertext failed authentication"

# pycryptodome is imported on first need (a legacy row): it costs tens of
# milliseconds of import time that most processes never use.
_PyAES: Any = None


def _have_pycryptodome() -> bool:
    global _PyAES
    if _PyAES is None:
        try:
            from Crypto.Cipher import AES
        except ImportError:  # pragma: no cover - exercised only where the extra is missing
            return False
        _PyAES = AES
    return True


class SecretHolder:
    """Base for objects that hold key material: never pickled, never printed.

    A copy would only duplicate immutable key state, so ``copy`` and
    ``deepcopy`` return the object itself instead of a second key copy.
    """

    __slots__ = ()

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise SecretPicklingError(f"{type(self).__name__} holds key material and cannot be pickled")

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self


class AesGcm(Protocol):
    """AES-GCM with a 96-bit nonce and a 128-bit tag appended to the ciphertext.

    ``seal(nonce, plaintext, aad)`` returns ciphertext and tag;
    ``open(nonce, sealed, aad)`` returns the plaintext or raises
    `DecryptionError`. ``seal`` is an attribute rather than a method so that
    the write path calls OpenSSL's bound function itself, with no wrapper.
    ``open_raw`` is the same for the read path: OpenSSL's bound decrypt,
    which raises `InvalidTag` and accepts any nonce length from 8 to 128
    bytes, for callers that have already sliced exactly 12 (the format v3
    reader, whose slices are fixed after one length check).
    """

    seal: Callable[[bytes, Buffer, bytes], bytes]
    open_raw: Callable[[bytes, Buffer, bytes], bytes]

    def open(self, nonce: bytes, sealed: Buffer, aad: bytes) -> bytes: ...


class _OpenSslAesGcm(SecretHolder):
    __slots__ = ("_aead", "open_raw", "seal")

    seal: Callable[[bytes, Buffer, bytes], bytes]
    open_raw: Callable[[bytes, Buffer, bytes], bytes]

    def __init__(self, key: bytes) -> None:
        self._aead = _AESGCM(key)
        self.seal = self._aead.encrypt
        self.open_raw = self._aead.decrypt

    def open(self, nonce: bytes, sealed: Buffer, aad: bytes) -> bytes:
        # OpenSSL accepts 8..128-byte nonces; v1 has exactly 12, so refuse the rest.
        if len(nonce) != GCM_NONCE_SIZE:
            raise DecryptionError(_AUTH_FAILED)
        try:
            return self._aead.decrypt(nonce, sealed, aad)
        except InvalidTag:
            raise DecryptionError(_AUTH_FAILED) from None


@scrubbed
def new_aes_gcm(key: bytes) -> AesGcm:
    """Return an AES-GCM primitive for ``key``."""
    if not isinstance(key, bytes) or len(key) not in AES_KEY_SIZES:
        raise ConfigurationError("AES keys must be bytes of length 16, 24 or 32")
    return _OpenSslAesGcm(key)


@scrubbed
def hkdf_sha256(ikm: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF-SHA256 with an all-zero salt."""
    return _HKDF(algorithm=_hashes.SHA256(), length=length, salt=None, info=info).derive(ikm)


def legacy_supported() -> bool:
    """True when pycryptodome, needed to read langgraph's built-in rows, is installed.

    Asks the import system without importing it: pycryptodome stays unloaded
    until a legacy row actually needs it.
    """
    try:
        return importlib.util.find_spec("Crypto") is not None
    except (ImportError, ValueError):
        # A parent that is not a package, or sys.modules["Crypto"] = None.
        return False


@scrubbed
def legacy_open(  # noqa: PLR0913 - the legacy format's fields, one argument each
    key: bytes, mode: int, nonce: bytes, tag: bytes, ciphertext: bytes, aad: bytes = b""
) -> bytes:
    """Decrypt one value the way langgraph's built-in ``PycryptodomeAesCipher`` wrote it.

    The built-in never passed associated data; ``aad`` exists so the
    Wycheproof vectors can exercise the same code path. `scrubbed`: a
    garbage row must not leave ``key`` in the traceback of its error.
    """
    if not _have_pycryptodome():
        raise DecryptionError("reading langgraph built-in rows needs pycryptodome")
    if mode not in LEGACY_MODES:
        raise ConfigurationError(f"AES mode {mode} never produced readable langgraph rows")
    try:
        aes = _PyAES.new(key, _PyAES.MODE_EAX if mode == MODE_EAX else _PyAES.MODE_GCM, nonce=nonce)
        aes.update(aad)
        return bytes(aes.decrypt_and_verify(ciphertext, tag))
    except ValueError:
        raise DecryptionError(_AUTH_FAILED) from None
