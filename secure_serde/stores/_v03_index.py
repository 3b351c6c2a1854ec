"""0.3's blind-index tokens, verified (nothing writes 0.3 rows any more).

A 0.3 token, stored as ``{name: "<key id hex>:<mac>"}`` under
`INDEX_METADATA_KEY`, is the first 16 bytes (unpadded base64url) of
``HMAC-SHA256(index key, "secure_serde/blind-index/v1" 0x00 ||
u32be(len(name)) || name || canonical JSON(value))``, where the index key is
a keyring key's ``blind_index_key`` (HKDF of its material,
``"secure_serde/v1/blind-index-hmac"``) or one given as ``index_key``. The
canonical JSON is sorted and compact, with integral floats written as
integers (both databases compare JSON numbers by value).
"""

from __future__ import annotations

import base64
import hmac
import json
import math
import struct
from collections.abc import Iterable, Mapping
from typing import Any, Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as crypto_hmac

from secure_serde._errors import BlindIndexError, ConfigurationError
from secure_serde.crypto import Key, SecretHolder

__all__ = ["V03IndexKeys"]

_DOMAIN: Final = b"secure_serde/blind-index/v1\x00"
_MAC_SIZE: Final = 16
_KEY_ID_HEX_SIZE: Final = 8
_B64_MAC_SIZE: Final = 22


def _normalise(value: Any) -> Any:
    # bool before int: True is an int in Python, not in JSON.
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError("cannot index a non-finite float")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise ConfigurationError("cannot index a mapping with non-str keys")
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    raise ConfigurationError(f"cannot index a metadata value of type {type(value).__name__}")


class V03IndexKeys(SecretHolder):
    """0.3's blind-index keys, by key id; they only verify tokens."""

    __slots__ = ("_by_id",)

    def __init__(self, keys: Iterable[Key]) -> None:
        self._by_id: dict[str, bytes] = {}
        for key in keys:
            if not key.blind_index_key:
                raise ConfigurationError(f"key {key.key_id_hex} carries no blind-index key")
            self._by_id.setdefault(key.key_id_hex, key.blind_index_key)

    @classmethod
    def resolve(cls, serde: Any, index_key: Any) -> V03IndexKeys | None:
        """``index_key`` (one key or several), else the keys of the serde's keyrings."""
        if index_key is not None:
            values = [index_key] if isinstance(index_key, (str, bytes)) else list(index_key)
            return cls(Key.derive(v, label=f"index_key[{i}]") for i, v in enumerate(values))
        from secure_serde.ciphers import Keyring

        keys: list[Key] = []
        for position, cipher in enumerate(getattr(serde, "decrypt_ciphers", None) or ()):
            keyring = getattr(cipher, "keyring", None)
            if not isinstance(keyring, Keyring):
                if position == 0:
                    return None
                continue
            keys.extend(k for k in keyring.readable() if k not in keys)
        return cls(keys) if keys else None

    def verify(self, name: str, value: Any, token: Any) -> None:
        if (
            not isinstance(token, str)
            or len(token) != _KEY_ID_HEX_SIZE + 1 + _B64_MAC_SIZE
            or token[_KEY_ID_HEX_SIZE] != ":"
        ):
            raise BlindIndexError(f"malformed blind index for metadata key {name!r}", key=name)
        secret = self._by_id.get(token[:_KEY_ID_HEX_SIZE])
        if secret is None:
            raise BlindIndexError(
                f"blind index for metadata key {name!r} is under an unknown or retired key"
                f" {token[:_KEY_ID_HEX_SIZE]!r}",
                key=name,
            )
        try:
            expected = token[: _KEY_ID_HEX_SIZE + 1] + _mac(secret, name, value)
        except ConfigurationError:
            expected = ""
        if not hmac.compare_digest(expected.encode("ascii"), token.encode("ascii")):
            raise BlindIndexError(
                f"blind index for metadata key {name!r} does not match its sealed value:"
                " it was moved from another row or rewritten",
                key=name,
            )

    def __repr__(self) -> str:
        return f"<V03 blind-index keys: {len(self._by_id)}>"


def _mac(secret: bytes, name: str, value: Any) -> str:
    encoded = name.encode("utf-8")
    mac = crypto_hmac.HMAC(secret, hashes.SHA256())
    mac.update(_DOMAIN + struct.pack(">I", len(encoded)) + encoded)
    mac.update(
        json.dumps(
            _normalise(value),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        ).encode("utf-8", "surrogatepass")
    )
    digest = mac.finalize()[:_MAC_SIZE]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
