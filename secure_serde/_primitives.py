"""The bottom layer: AES-GCM, HKDF and the legacy AES reader, from libraries.

Nothing here is a home-made primitive. Two interchangeable AES-GCM
backends exist because ``cryptography`` (OpenSSL) costs a few microseconds
per call while pycryptodome's ``AES.new`` alone costs about 140 µs; the
pycryptodome backend exists for platforms without ``cryptography`` wheels
and is wire-identical, which the tests check in both directions.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, Final, Literal, NoReturn, Protocol, TypeAlias

from secure_serde._errors import ConfigurationError, DecryptionError, SecretPicklingError
from secure_serde._scrub import scrubbed

# JsonPlus hands ``bytearray`` values over as they are, and savers may
# return memoryviews: every layer accepts any of the three.
Buffer: TypeAlias = bytes | bytearray | memoryview

__all__ = [
    "AES_KEY_SIZES",
    "GCM_NONCE_SIZE",
    "GCM_TAG_SIZE",
    "LEGACY_MODES",
    "LEGACY_MODE_NAMES",
    "MODE_EAX",
    "MODE_GCM",
    "AesGcm",
    "Backend",
    "Buffer",
    "SecretHolder",
    "available_backends",
    "hkdf_sha256",
    "legacy_open",
    "legacy_supported",
    "new_aes_gcm",
]

Backend = Literal["auto", "cryptography", "pycryptodome"]

AES_KEY_SIZES: Final = frozenset({16, 24, 32})
GCM_NONCE_SIZE: Final = 12
GCM_TAG_SIZE: Final = 16

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

try:
    from cryptography.exceptions import InvalidTag as _InvalidTag
    from cryptography.hazmat.primitives import hashes as _hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM as _AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF as _HKDF

    _HAVE_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    _HAVE_CRYPTOGRAPHY = False

# pycryptodome is imported on first need (its backend, or a legacy row):
# it costs tens of milliseconds of import time that most processes never use.
_PyAES: Any = None
_PySHA256: Any = None
_PyHKDF: Any = None
_HAVE_PYCRYPTODOME: bool | None = None  # None: not looked for yet


def _have_pycryptodome() -> bool:
    global _HAVE_PYCRYPTODOME, _PyAES, _PySHA256, _PyHKDF
    if _HAVE_PYCRYPTODOME is None:
        try:
            from Crypto.Cipher import AES
            from Crypto.Hash import SHA256
            from Crypto.Protocol.KDF import HKDF
        except ImportError:  # pragma: no cover - exercised only where the extra is missing
            _HAVE_PYCRYPTODOME = False
        else:
            _PyAES, _PySHA256, _PyHKDF = AES, SHA256, HKDF
            _HAVE_PYCRYPTODOME = True
    return _HAVE_PYCRYPTODOME


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


def available_backends() -> tuple[str, ...]:
    """Names of the AES-GCM backends importable here, fastest first."""
    names = []
    if _HAVE_CRYPTOGRAPHY:
        names.append("cryptography")
    if _have_pycryptodome():
        names.append("pycryptodome")
    return tuple(names)


def _resolve(backend: Backend) -> str:
    if backend == "auto" and _HAVE_CRYPTOGRAPHY:
        return "cryptography"  # without importing pycryptodome
    have = available_backends()
    if backend == "auto":
        if not have:
            raise ConfigurationError(
                "no AES backend installed: pip install cryptography (or pycryptodome)"
            )
        return have[0]
    if backend not in ("cryptography", "pycryptodome"):
        raise ConfigurationError(f"unknown backend {backend!r}")
    if backend not in have:
        raise ConfigurationError(f"backend {backend!r} is not installed")
    return backend


class AesGcm(Protocol):
    """AES-GCM with a 96-bit nonce and a 128-bit tag appended to the ciphertext.

    ``seal(nonce, plaintext, aad)`` returns ciphertext and tag;
    ``open(nonce, sealed, aad)`` returns the plaintext or raises
    `DecryptionError`. ``seal`` is an attribute rather than a method so the
    OpenSSL backend can expose the C function itself on the write path.
    """

    backend: str
    seal: Callable[[bytes, Buffer, bytes], bytes]

    def open(self, nonce: bytes, sealed: Buffer, aad: bytes) -> bytes: ...


class _OpenSslAesGcm(SecretHolder):
    __slots__ = ("_aead", "backend", "seal")

    backend: str
    seal: Callable[[bytes, Buffer, bytes], bytes]

    def __init__(self, key: bytes) -> None:
        self.backend = "cryptography"
        self._aead = _AESGCM(key)
        self.seal = self._aead.encrypt

    def open(self, nonce: bytes, sealed: Buffer, aad: bytes) -> bytes:
        # OpenSSL accepts 8..128-byte nonces; v1 has exactly 12, so refuse the rest.
        if len(nonce) != GCM_NONCE_SIZE:
            raise DecryptionError(_AUTH_FAILED)
        try:
            return self._aead.decrypt(nonce, sealed, aad)
        except _InvalidTag:
            raise DecryptionError(_AUTH_FAILED) from None


class _PycryptodomeAesGcm(SecretHolder):
    __slots__ = ("_key", "backend", "seal")

    backend: str
    seal: Callable[[bytes, Buffer, bytes], bytes]

    def __init__(self, key: bytes) -> None:
        self.backend = "pycryptodome"
        self._key = key
        self.seal = self._seal

    def _seal(self, nonce: bytes, plaintext: Buffer, aad: bytes) -> bytes:
        if len(nonce) != GCM_NONCE_SIZE:
            raise ValueError("GCM nonces are 12 bytes")
        cipher = _PyAES.new(self._key, _PyAES.MODE_GCM, nonce=nonce, mac_len=GCM_TAG_SIZE)
        cipher.update(aad)
        ciphertext, tag = cipher.encrypt_and_digest(plaintext)
        return bytes(ciphertext) + bytes(tag)

    def open(self, nonce: bytes, sealed: Buffer, aad: bytes) -> bytes:
        view = memoryview(sealed)
        if len(nonce) != GCM_NONCE_SIZE or len(view) < GCM_TAG_SIZE:
            raise DecryptionError(_AUTH_FAILED)
        cipher = _PyAES.new(self._key, _PyAES.MODE_GCM, nonce=nonce, mac_len=GCM_TAG_SIZE)
        cipher.update(aad)
        try:
            return bytes(cipher.decrypt_and_verify(view[:-GCM_TAG_SIZE], view[-GCM_TAG_SIZE:]))
        except ValueError:
            raise DecryptionError(_AUTH_FAILED) from None


@scrubbed
def new_aes_gcm(key: bytes, backend: Backend = "auto") -> AesGcm:
    """Return an AES-GCM primitive for ``key`` on the chosen backend."""
    if not isinstance(key, bytes) or len(key) not in AES_KEY_SIZES:
        raise ConfigurationError("AES keys must be bytes of length 16, 24 or 32")
    if _resolve(backend) == "cryptography":
        return _OpenSslAesGcm(key)
    return _PycryptodomeAesGcm(key)


@scrubbed
def hkdf_sha256(ikm: bytes, info: bytes, length: int, backend: Backend = "auto") -> bytes:
    """RFC 5869 HKDF-SHA256 with an all-zero salt."""
    if _resolve(backend) == "cryptography":
        return _HKDF(algorithm=_hashes.SHA256(), length=length, salt=None, info=info).derive(ikm)
    derived = _PyHKDF(ikm, length, None, _PySHA256, context=info)
    if not isinstance(derived, bytes):  # one key requested, so a tuple means a pycryptodome change
        raise ConfigurationError("unexpected HKDF result from pycryptodome")
    return derived


def legacy_supported() -> bool:
    """True when pycryptodome, needed to read langgraph's built-in rows, is installed.

    Asks the import system without importing it: pycryptodome stays unloaded
    until a legacy row (or its backend) actually needs it.
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
        if mode == MODE_EAX:
            eax = _PyAES.new(key, _PyAES.MODE_EAX, nonce=nonce)
            eax.update(aad)
            return bytes(eax.decrypt_and_verify(ciphertext, tag))
        gcm = _PyAES.new(key, _PyAES.MODE_GCM, nonce=nonce)
        gcm.update(aad)
        return bytes(gcm.decrypt_and_verify(ciphertext, tag))
    except ValueError:
        raise DecryptionError(_AUTH_FAILED) from None
