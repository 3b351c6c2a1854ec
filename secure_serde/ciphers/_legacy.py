"""Reader for rows written by langgraph's built-in ``from_pycryptodome_aes`` cipher.

Those rows carry cipher name ``aes`` and this layout, with no header,
version, key id or associated data::

    nonce (16) | tag (16) | ciphertext

Nothing binds their type tag, so they are decoded strictly unless
``Migration.legacy_pickle`` (secure_serde/serde/_readrule.py); they are only ever read.
"""

from __future__ import annotations

import logging
import threading
from typing import Final, NoReturn

from secure_serde._errors import ConfigurationError, DecryptionError
from secure_serde._scrub import scrubbed
from secure_serde.crypto import (
    LEGACY_MODE_NAMES,
    LEGACY_MODES,
    Buffer,
    SecretHolder,
    legacy_open,
    legacy_supported,
)

__all__ = ["LEGACY_CIPHER_NAME", "MISSING_PYCRYPTODOME", "LegacyAesReader"]

logger = logging.getLogger("secure_serde")

LEGACY_CIPHER_NAME: Final = "aes"
_NONCE_SIZE: Final = 16
_TAG_SIZE: Final = 16
MISSING_PYCRYPTODOME: Final = (
    "pycryptodome is not installed, so rows that langgraph's built-in encryption wrote"
    " (cipher 'aes') cannot be read: pip install 'secure-serde[pycryptodome]'. A store"
    " with no such rows needs nothing (EnvKeyCipher(legacy_mode=None) does not read them at all)."
)


# Said once per process, when the first legacy row is met: a store without
# such rows, which most are, never logs it (issue 22). Held from then on: the
# first caller to take it, and only that one, logs.
_MISSING_SAID: Final = threading.Lock()
_MISSING_ROW: Final = (
    f"this row was written by langgraph's built-in encryption (cipher {LEGACY_CIPHER_NAME!r}),"
    " and reading it needs pycryptodome: pip install 'secure-serde[pycryptodome]'"
)


def _missing_pycryptodome() -> NoReturn:
    if _MISSING_SAID.acquire(blocking=False):
        logger.warning(MISSING_PYCRYPTODOME)
    raise DecryptionError(_MISSING_ROW)


class LegacyAesReader(SecretHolder):
    """Decrypts langgraph built-in rows under one key and AES mode."""

    __slots__ = ("_key", "_mode", "_supported")

    @scrubbed
    def __init__(self, key: bytes, mode: int) -> None:
        if mode not in LEGACY_MODES:
            raise ConfigurationError(
                f"mode={mode!r}: langgraph's built-in cipher only ever wrote readable rows"
                " with AES.MODE_EAX (the default) or AES.MODE_GCM"
            )
        # Asked now, said only when a legacy row is met (`open`): warning at every
        # construction made every run log it, whether or not the store held such a row.
        self._supported = legacy_supported()
        self._key = key
        self._mode = mode

    @property
    def mode(self) -> int:
        return self._mode

    @property
    def mode_name(self) -> str:
        """``"EAX"`` or ``"GCM"``, as pycryptodome names it."""
        return LEGACY_MODE_NAMES[self._mode]

    def open(self, blob: Buffer) -> bytes:
        if not self._supported:
            _missing_pycryptodome()
        view = memoryview(blob)
        if len(view) < _NONCE_SIZE + _TAG_SIZE:
            raise DecryptionError("ciphertext is truncated")
        return legacy_open(
            self._key,
            self._mode,
            bytes(view[:_NONCE_SIZE]),
            bytes(view[_NONCE_SIZE : _NONCE_SIZE + _TAG_SIZE]),
            bytes(view[_NONCE_SIZE + _TAG_SIZE :]),
        )

    def __repr__(self) -> str:
        return f"<LegacyAesReader mode={self.mode_name}>"
