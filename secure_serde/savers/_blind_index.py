"""Keyed blind indexes: equality filters on sealed metadata values.

A sealed metadata value cannot be matched by SQL. For the keys a saver
marks as indexed, it also stores, in plaintext, a *token* per key::

    metadata["__secure_serde_index__"] = {"user_id": "<key id hex>:<mac>"}

where ``mac`` is the first 16 bytes (unpadded base64url) of

    HMAC-SHA256(index key, "secure_serde/blind-index/v1" || 0x00
                           || u32be(len(name)) || name || canonical(value))

The index key is HKDF(key material, "secure_serde/v1/blind-index-hmac"),
derived beside (never from, never equal to) the AES key of each keyring
key, or from an explicit ``index_key`` (KMS ciphers have no local key).
The name is part of the MAC so equal values under two keys do not link.
A filter ``{"user_id": "u1"}`` becomes one token per readable index key
(the row was written under one of them), matched as an OR; rewrap
recomputes tokens under the primary key.

What a token leaks: which rows share a value for that key (across threads
too), how many distinct values there are, and so their frequencies. Not
the value itself, short of guessing it with the key. Equality is over the
whole canonical value: ``1`` and ``1.0`` match (as JSON numbers do in both
databases), ``True`` and ``1`` do not, and a dict matches only an equal
dict (not JSONB containment of a part).

Nothing here touches a database; secure_serde/savers/_index_sql.py turns a
`FilterPlan` into SQL.
"""

from __future__ import annotations

import base64
import hmac
import json
import math
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as crypto_hmac

from secure_serde._errors import BlindIndexError, ConfigurationError
from secure_serde._keys import Key
from secure_serde._primitives import SecretHolder
from secure_serde.stores import INDEX_METADATA_KEY

__all__ = [
    "INDEX_METADATA_KEY",
    "BlindIndexKeys",
    "FilterPlan",
    "canonical_value",
    "check_index_name",
]

_DOMAIN: Final = b"secure_serde/blind-index/v1\x00"
# 128 bits: equality needs no more than collision resistance over the values
# a deployment ever indexes, and halves what each row stores.
MAC_SIZE: Final = 16
_KEY_ID_HEX_SIZE: Final = 8
_B64_MAC_SIZE: Final = 22  # unpadded base64 of 16 bytes
# Names go into SQLite JSON paths unquoted (the stock filter's own rule, minus
# the dot, which would mean nesting there).
_NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_-]+$")


def check_index_name(name: str) -> None:
    """Refuse a key name that cannot be indexed (it must be safe in a JSON path)."""
    if not isinstance(name, str) or not _NAME_PATTERN.match(name):
        raise ConfigurationError(
            f"indexed metadata key {name!r} must be letters, digits, '_' or '-'"
        )


def _normalise(value: Any) -> Any:
    # bool before int: True is an int in Python, not in JSON.
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError("cannot index a non-finite float")
        # Both databases compare JSON numbers by value: 1.0 = 1.
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigurationError("cannot index a mapping with non-str keys")
            out[k] = _normalise(v)
        return out
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    raise ConfigurationError(f"cannot index a metadata value of type {type(value).__name__}")


def canonical_value(value: Any) -> bytes:
    """The bytes a value is indexed by: sorted, compact JSON of its normalised form."""
    return json.dumps(
        _normalise(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        # A lone surrogate (langgraph copies config strings as they are) still
        # encodes, the same way every time.
    ).encode("utf-8", "surrogatepass")


@dataclass(frozen=True, eq=False, repr=False)
class _IndexKey(SecretHolder):
    key_id_hex: str
    secret: bytes = field(compare=False)

    def token(self, name: str, value: Any) -> str:
        encoded = name.encode("utf-8")
        mac = crypto_hmac.HMAC(self.secret, hashes.SHA256())
        mac.update(_DOMAIN + struct.pack(">I", len(encoded)) + encoded)
        mac.update(canonical_value(value))
        digest = mac.finalize()[:MAC_SIZE]
        return f"{self.key_id_hex}:{base64.urlsafe_b64encode(digest).rstrip(b'=').decode('ascii')}"

    def __repr__(self) -> str:
        return f"<IndexKey key_id={self.key_id_hex}>"


def _index_key(key: Key) -> _IndexKey:
    if not key.blind_index_key:
        raise ConfigurationError(f"key {key.key_id_hex} carries no blind-index key")
    return _IndexKey(key.key_id_hex, key.blind_index_key)


class BlindIndexKeys(SecretHolder):
    """The index keys of a saver: the primary writes tokens, every one of them matches."""

    __slots__ = ("_by_id", "_primary")

    def __init__(self, keys: Sequence[Key]) -> None:
        if not keys:
            raise ConfigurationError("blind indexes need at least one key")
        index_keys = [_index_key(k) for k in keys]
        self._primary = index_keys[0]
        self._by_id = {k.key_id_hex: k for k in index_keys}

    @classmethod
    def from_keys(cls, index_key: str | bytes | Iterable[str | bytes]) -> BlindIndexKeys:
        """Keys given explicitly (``index_key=``): one key, or several with the writer first."""
        values = [index_key] if isinstance(index_key, (str, bytes)) else list(index_key)
        return cls([Key.derive(v, label=f"index_key[{i}]") for i, v in enumerate(values)])

    @classmethod
    def from_serde(cls, serde: Any) -> BlindIndexKeys | None:
        """The keys of the serde's keyrings (encrypting cipher's primary first), if it has any.

        ``None`` when the encrypting cipher holds no local key (KMS): indexes
        then need ``index_key=``.
        """
        # Imported here: the keyring module is only needed once a saver indexes.
        from secure_serde.ciphers._keyring import Keyring

        ciphers = getattr(serde, "decrypt_ciphers", None)
        if not ciphers:
            return None
        keys: list[Key] = []
        for position, cipher in enumerate(ciphers):
            keyring = getattr(cipher, "keyring", None)
            if not isinstance(keyring, Keyring):
                if position == 0:
                    return None
                continue
            keys.extend(k for k in keyring.readable() if k not in keys)
        return cls(keys)

    @property
    def primary_id(self) -> str:
        return self._primary.key_id_hex

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every index key id, the writer first."""
        return tuple(self._by_id)

    def token(self, name: str, value: Any) -> str:
        """The token the writer stores for ``name = value``."""
        return self._primary.token(name, value)

    def tokens(self, name: str, value: Any) -> dict[str, str]:
        """Key id to the token a row written under that key holds for ``name = value``."""
        return {key_id: key.token(name, value) for key_id, key in self._by_id.items()}

    def verify(self, name: str, value: Any, token: Any) -> None:
        """Check a stored token against the (authenticated) value it claims to index.

        Raises:
            BlindIndexError: the token is malformed, names no readable
                index key, or indexes another value.
        """
        if (
            not isinstance(token, str)
            or len(token) != _KEY_ID_HEX_SIZE + 1 + _B64_MAC_SIZE
            or token[_KEY_ID_HEX_SIZE] != ":"
        ):
            raise BlindIndexError(f"malformed blind index for metadata key {name!r}", key=name)
        key = self._by_id.get(token[:_KEY_ID_HEX_SIZE])
        if key is None:
            raise BlindIndexError(
                f"blind index for metadata key {name!r} is under an unknown or retired key"
                f" {token[:_KEY_ID_HEX_SIZE]!r}",
                key=name,
            )
        try:
            expected = key.token(name, value)
        except ConfigurationError:
            expected = ""
        if not hmac.compare_digest(expected.encode("ascii"), token.encode("ascii")):
            raise BlindIndexError(
                f"blind index for metadata key {name!r} does not match its sealed value:"
                " it was moved from another row or rewritten",
                key=name,
            )

    def __repr__(self) -> str:
        return f"<BlindIndexKeys primary={self.primary_id} keys={len(self._by_id)}>"


@dataclass(frozen=True)
class FilterPlan:
    """A ``list`` filter split for SQL.

    ``plain`` goes to the stock saver's own predicate unchanged (plaintext
    and structural keys). ``alternatives`` holds, for each index key, the
    ``{name: token}`` a matching row written under that key stores under
    `INDEX_METADATA_KEY`; a row matches when it holds any one of them whole.
    Empty when the filter names no indexed key. ``nullable``: indexed names
    filtered on ``None``, which the stock SQLite filter (``IS NULL``) also
    matches on rows without the key; PostgreSQL containment does not, so
    only the SQLite translation reads it.
    """

    plain: dict[str, Any]
    alternatives: tuple[dict[str, str], ...] = ()
    nullable: frozenset[str] = frozenset()
